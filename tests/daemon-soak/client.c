// SPDX-License-Identifier: MIT
/*
 * One client process of the soak: an engine-like loop through libkvmm,
 * as one uid, that checks every byte it reads.
 *
 * Contents are named by hash and their bytes follow from it: word w of
 * page p of the block named h holds pat(h, p, w) in its low 56 bits, and
 * in its top byte the tag (1 + uid index) of the uid that wrote it.  So a
 * reader of a cached block checks the low 56 bits of every word (the
 * cache is lossless) and the tag (under --cache-scope uid only its own
 * uid can have written it), and a fresh page (an extend's, a RECOMPUTE
 * block's) holds only zeros or words with its own uid's tag: another
 * uid's bytes there are a page that changed hands unscrubbed.
 *
 * The errors a call may return are those the documentation gives for
 * what the soak does to it (allowed() in client-check.c, and Documentation/
 * performance.md, "The mixed-workload soak"); -ECONNRESET (kvmmd
 * restarted, or the admin killed the session) makes the client connect
 * again.  Any other error, or a wrong byte, is soak_fail().
 *
 * The client is three files (client.h): this one connects, creates the
 * region and runs the loop that picks an op; client-ops.c holds the ops;
 * client-check.c the contents, the checks and the allowed errors.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/client.h"
#include "tests/daemon-soak/soak.h"
#include "tests/lib/wait.h"

struct soak_shared *soak;

static void family_tokens(uint32_t fam, uint32_t *tok)
{
	for (uint32_t b = 0; b < SOAK_MAX_BLOCKS; b++) {
		uint32_t src = b < 1 + fam % 3 ? fam % 4 : fam;

		for (uint32_t t = 0; t < SOAK_TPB; t++)
			tok[b * SOAK_TPB + t] = (uint32_t)mix64(
				((uint64_t)src << 32) | (b * SOAK_TPB + t));
	}
}

void disconnect(struct client *cl)
{
	if (cl->c)
		kvmm_disconnect(cl->c);
	cl->c = NULL;
	cl->r = NULL;
	memset(cl->seq, 0, sizeof(cl->seq));
}

/* Connect and create the region; waits out a kvmmd restart. */
void connect_region(struct client *cl)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = SOAK_LAYERS,
				       .kv_heads = 1,
				       .head_dim = 32,
				       .dtype_bytes = 2,
				       .max_seqs = SOAK_MAX_SEQS,
				       .max_tokens =
					       SOAK_MAX_BLOCKS * SOAK_TPB };
	static uint32_t tok[SOAK_MAX_BLOCKS * SOAK_TPB];
	char name[32];
	int err;

	snprintf(name, sizeof(name), "soak-%u", cl->slot);
	co.socket_path = soak->sock;
	co.name = name;
	/* sometimes no map-ahead, sometimes more than the default */
	co.map_ahead_set = 1;
	co.map_ahead_blocks = soak_below(&cl->rng, 3);
	if (!cl->child) /* a new session: no revocation yet */
		atomic_store(&soak->revokes[cl->slot], 0);
	unsigned long long end = t_now_ms() + 30000;

	for (;;) {
		if (atomic_load(&soak->stop))
			_exit(0);
		err = kvmm_connect(&co, &cl->c);
		if (!err) {
			err = kvmm_region_create(cl->c, &ro, &cl->r);
			if (!err)
				break;
			kvmm_disconnect(cl->c);
			cl->c = NULL;
		}
		/* kvmmd restarting (no socket, refused, reset), or the
		 * admin killed us between connect and region */
		if (err != -ENOENT && err != -ECONNREFUSED &&
		    err != -ECONNRESET && err != -EAGAIN)
			soak_fail("uid %u (slot %u): connect: %d (%s)",
				  (unsigned)cl->uid, cl->slot, err,
				  kvmm_strerror(err));
		if (t_now_ms() > end) /* of the clock: a connect may be slow */
			soak_fail("slot %u: no kvmmd for 30 s", cl->slot);
		usleep(10000);
	}
	if (kvmm_region_tokens_per_block(cl->r) != SOAK_TPB)
		soak_fail("tokens per block %u",
			  kvmm_region_tokens_per_block(cl->r));
	for (uint32_t q = 0; q < SOAK_MAX_SEQS; q++) {
		for (uint32_t p = 0; p < SOAK_PPB; p++) {
			cl->base[q][p] =
				p % 2 ? kvmm_seq_v_ptr(cl->r, q, p / 2) :
					kvmm_seq_k_ptr(cl->r, q, p / 2);
			if (!cl->base[q][p])
				soak_fail("slot %u: no address for seq %u",
					  cl->slot, q);
		}
	}
	if (kvmm_region_hash_seed(cl->r, "soak", &cl->seed))
		soak_fail("hash seed");
	for (uint32_t f = 0; f < SOAK_FAMILIES; f++) {
		family_tokens(f, tok);
		if (kvmm_hash_chain(cl->seed, 0, tok,
				    SOAK_MAX_BLOCKS * SOAK_TPB, SOAK_TPB,
				    cl->hash[f],
				    SOAK_MAX_BLOCKS) != SOAK_MAX_BLOCKS)
			soak_fail("hash chain");
	}
}

void soak_client(unsigned int slot, uint64_t seed)
{
	static struct client cl;
	uid_t uid = SOAK_UID0 + slot % SOAK_UIDS;

	cl.slot = slot;
	cl.uid = uid;
	cl.tag = 1 + slot % SOAK_UIDS;
	cl.rng = seed | 1;
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		soak_fail("slot %u: cannot become uid %u: %s", slot,
			  (unsigned)uid, strerror(errno));
	connect_region(&cl);
	while (!atomic_load(&soak->stop)) {
		uint32_t k = soak_below(&cl.rng, 100);
		int ret;

		soak_count(SC_OPS, 1);
		if (k < 35) {
			ret = op_prefix(&cl);
		} else if (k < 50) {
			ret = op_extend(&cl);
		} else if (k < 58) {
			ret = op_truncate(&cl);
		} else if (k < 70) {
			struct soak_seq *s = pick_open(&cl);

			ret = s ? op_close(&cl, s) : 0;
		} else if (k < 80) {
			ret = op_pin(&cl);
		} else if (k < 82) {
			ret = op_fork(&cl);
		} else if (k < 97) {
			ret = op_step(&cl);
		} else {
			/* a clean goodbye, and back */
			disconnect(&cl);
			connect_region(&cl);
			ret = 0;
		}
		if (ret == LOST) {
			note("lost the session");
			soak_count(SC_RECONNECTS, 1);
			disconnect(&cl);
			connect_region(&cl);
		}
	}
	disconnect(&cl);
	_exit(0);
}
