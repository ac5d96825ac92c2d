/* SPDX-License-Identifier: MIT */
/*
 * KV cache in a kvmm region: the same vAttention layout as private memory,
 * but the ranges are reserved by libkvmm and backed by pages of kvmmd's
 * pool, mapped on demand as sequences grow.
 *
 * The engine brackets every forward pass with step_begin/step_end, which
 * map to kvmm_step_begin/kvmm_step_end: the daemon's revocations (pages it
 * takes back under pressure) are applied only there, never while the model
 * reads K/V.  Between steps the revocation fd is polled too, so a client
 * that is between turns still answers promptly.
 *
 * The region's salt is derived from the weights, so two processes running
 * the same model can share blocks and two different models never can.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinylm.h"

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, struct tlm_kv **out, char *err,
		       size_t errlen);

#if __has_include(<kvmm/kvmm.h>)
#include <kvmm/kvmm.h>

struct kv_kvmm {
	struct tlm_kv kv;
	struct kvmm_conn *conn;
	struct kvmm_region *region;
	int poll_fd;
};

static struct kv_kvmm *to_kvmm(struct tlm_kv *kv)
{
	return (struct kv_kvmm *)kv;
}

/* Apply revocations the daemon posted while we were not in a step. */
static int answer_revocations(struct kv_kvmm *k)
{
	struct pollfd pfd = { .fd = k->poll_fd, .events = POLLIN };

	if (k->poll_fd < 0 || poll(&pfd, 1, 0) <= 0)
		return 0;
	int ret = kvmm_process_revocations(k->conn);
	return ret < 0 ? ret : 0;
}

static int kvmm_kv_seq_open(struct tlm_kv *kv, const int *tokens, int ntokens,
			    struct tlm_restore *r)
{
	struct kv_kvmm *k = to_kvmm(kv);
	uint32_t seq;
	int ret;

	if (ntokens > kv->max_tokens)
		return -E2BIG;
	ret = answer_revocations(k);
	if (ret)
		return ret;
	ret = kvmm_seq_open(k->region, &seq);
	if (ret)
		return ret;
	if ((int)seq >= kv->max_seqs) {
		kvmm_seq_close(k->region, seq);
		return -ERANGE;
	}
	*r = (struct tlm_restore){ .slot = (int)seq };
	return 0;
}

static int kvmm_kv_seq_close(struct tlm_kv *kv, int slot, const int *tokens,
			     int ntokens)
{
	return kvmm_seq_close(to_kvmm(kv)->region, (uint32_t)slot);
}

static int kvmm_kv_extend(struct tlm_kv *kv, int slot, int ntokens)
{
	struct kv_kvmm *k = to_kvmm(kv);
	int64_t len;

	if (slot < 0 || slot >= kv->max_seqs || ntokens < 0 ||
	    ntokens > kv->max_tokens)
		return -EINVAL;
	len = kvmm_seq_len(k->region, (uint32_t)slot);
	if (len < 0)
		return (int)len;
	if (ntokens <= len)
		return 0;
	return kvmm_seq_extend(k->region, (uint32_t)slot, (uint32_t)ntokens);
}

static float *kvmm_kv_k(struct tlm_kv *kv, int layer, int slot)
{
	return (float *)(uintptr_t)kvmm_seq_k_ptr(
		to_kvmm(kv)->region, (uint32_t)slot, (uint32_t)layer);
}

static float *kvmm_kv_v(struct tlm_kv *kv, int layer, int slot)
{
	return (float *)(uintptr_t)kvmm_seq_v_ptr(
		to_kvmm(kv)->region, (uint32_t)slot, (uint32_t)layer);
}

static int kvmm_kv_step_begin(struct tlm_kv *kv)
{
	return kvmm_step_begin(to_kvmm(kv)->conn);
}

static int kvmm_kv_step_end(struct tlm_kv *kv)
{
	return kvmm_step_end(to_kvmm(kv)->conn);
}

static void kvmm_kv_destroy(struct tlm_kv *kv)
{
	struct kv_kvmm *k = to_kvmm(kv);

	if (k->region)
		kvmm_region_destroy(k->region);
	if (k->conn)
		kvmm_disconnect(k->conn);
	free(k);
}

static const struct tlm_kv_ops kvmm_kv_ops = {
	.name = "kvmm",
	.seq_open = kvmm_kv_seq_open,
	.seq_close = kvmm_kv_seq_close,
	.extend = kvmm_kv_extend,
	.k = kvmm_kv_k,
	.v = kvmm_kv_v,
	.step_begin = kvmm_kv_step_begin,
	.step_end = kvmm_kv_step_end,
	.destroy = kvmm_kv_destroy,
};

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, struct tlm_kv **out, char *err,
		       size_t errlen)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro) };
	struct kv_kvmm *k;
	int ret;

	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->kv = (struct tlm_kv){
		.ops = &kvmm_kv_ops,
		.layers = m->cfg.n_layers,
		.kv_heads = m->cfg.n_kv_heads,
		.head_dim = m->head_dim,
		.kv_dim = m->kv_dim,
		.max_seqs = max_seqs,
		.max_tokens = max_tokens,
	};
	co.socket_path = socket_path;
	co.name = "tinylm";
	ret = kvmm_connect(&co, &k->conn);
	if (ret) {
		snprintf(err, errlen, "connecting to kvmmd at %s: %s",
			 socket_path ? socket_path :
				       "$KVMM_SOCKET or /run/kvmm/kvmm.sock",
			 kvmm_strerror(ret));
		goto err_free;
	}
	ro.layers = m->cfg.n_layers;
	ro.kv_heads = m->cfg.n_kv_heads;
	ro.head_dim = m->head_dim;
	ro.dtype_bytes = sizeof(float);
	ro.max_seqs = max_seqs;
	ro.max_tokens = max_tokens;
	ro.salt = tlm_checksum(m->data, m->data_floats);
	ret = kvmm_region_create(k->conn, &ro, &k->region);
	if (ret) {
		snprintf(err, errlen, "creating the kvmm region: %s",
			 kvmm_strerror(ret));
		goto err_disconnect;
	}
	k->poll_fd = kvmm_poll_fd(k->conn);
	*out = &k->kv;
	return 0;
err_disconnect:
	kvmm_disconnect(k->conn);
err_free:
	free(k);
	return ret;
}

#else /* no kvmm client library in this tree */

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, struct tlm_kv **out, char *err,
		       size_t errlen)
{
	snprintf(err, errlen,
		 "--kv kvmm: this build has no kvmm client library");
	return -ENOTSUP;
}

#endif
