// SPDX-License-Identifier: MIT
/*
 * Command validation and dispatch.
 *
 * Every socket message is checked in this order: header size and length,
 * ABI version (-EPROTONOSUPPORT), flags/status zero, no fds (no command
 * takes any: -EINVAL and they are closed), HELLO first (-ENOTCONN), then
 * the command struct (kw_copy_struct: size rules of uapi.h), reserved
 * fields zero, ids (-ENOENT for none, -EPERM for another session's),
 * ranges (-EINVAL).  Unknown commands get -ENOTTY, reserved ones
 * -EOPNOTSUPP, admin commands from non-admins -EPERM.  Nothing a client
 * sends can stop the daemon; a reply that cannot be sent cuts the
 * session off.
 *
 * This file has the validation order, the dispatch and the commands
 * that change state (regions, sequences, extends, steps, revocations);
 * the read-only status commands and the admin commands are in
 * proto_admin.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/cache_plan.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/proto_priv.h"
#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"

static int do_hello(struct req *rq)
{
	struct kd_session *s = rq->s;
	struct kd_daemon *d = s->d;
	struct kvmm_hello h;
	struct kvmm_hello_reply rep = { 0 };
	int fds[4], err;

	if (s->hello_done)
		return -EALREADY;
	err = COPY_IN(rq, h);
	if (err)
		return err;
	if (h.abi_major != KVMM_ABI_MAJOR)
		return -EPROTONOSUPPORT;
	if (h.flags & ~KVMM_HELLO_F_ADMIN ||
	    !kw_all_zero(h.reserved, sizeof(h.reserved)))
		return -EINVAL;
	memcpy(s->name, h.name, sizeof(s->name));
	s->name[sizeof(s->name) - 1] = '\0';
	s->admin_only = h.flags & KVMM_HELLO_F_ADMIN;
	/* what it is sent follows the older of the two (the daemon's is
	 * a test's older one under KVMMD_TEST_ABI_MINOR: abi_play.h) */
	s->client_minor = h.abi_minor < kd_abi_minor() ? h.abi_minor :
							 kd_abi_minor();
	rep.size = sizeof(rep);
	if (!s->admin_only) {
		err = kd_ring_create(s, &h, &rep.ring, fds);
		if (err)
			return err;
		rep.nr_fds = 4;
	}
	s->hello_done = true;
	rep.abi_major = KVMM_ABI_MAJOR;
	rep.abi_minor = KVMM_ABI_MINOR;
	rep.session_id = s->id;
	rep.backend = d->backend->kind;
	rep.page_size = d->page_size;
	rep.pages_total = d->capacity;
	rep.quota_pages = s->quota ? s->quota->limit_pages : 0;
	rep.revoke_timeout_ms = d->cfg.revoke_timeout_ms;
	rep.abi_minor = kd_abi_minor();
	/* what the daemon played had (zero there: a reserved word then) */
	if (rep.abi_minor >= KD_ABI_1_13)
		memcpy(rep.gpu_uuid, d->backend->gpu_uuid,
		       sizeof(rep.gpu_uuid));
	if (rep.abi_minor < KD_ABI_NOTIFY)
		rep.ring.notify = 0;
	reply(rq, 0, &rep, sizeof(rep), fds, rep.nr_fds);
	return 1;
}

static int get_region_ref(struct req *rq, struct kvmm_region_ref *ref,
			  struct kd_region **r)
{
	int err = COPY_IN(rq, *ref);

	if (err)
		return err;
	if (ref->flags || !kw_all_zero(ref->reserved, sizeof(ref->reserved)))
		return -EINVAL;
	return kd_region_lookup(rq->s, ref->region_id, r);
}

static int do_region_create(struct req *rq)
{
	struct kvmm_region_create rc;
	struct kvmm_region_create_reply rep;
	int err = COPY_IN(rq, rc);

	if (err)
		return err;
	/* A session without rings (HELLO_F_ADMIN, which any uid may ask
	 * for) could not be sent revocations: it may not own pages. */
	if (rq->s->admin_only)
		return -EOPNOTSUPP;
	err = kd_region_create(rq->s, &rc, &rep);
	if (err)
		return err;
	reply(rq, 0, &rep, sizeof(rep), NULL, 0);
	return 1;
}

static int do_region_destroy(struct req *rq)
{
	struct kvmm_region_ref ref;
	struct kd_region *r;
	int err = get_region_ref(rq, &ref, &r);

	if (err)
		return err;
	/* a PREFIX_OPEN whose reply is to be collected still opens one of
	 * its sequences, or an extend's reply is to be collected (libkvmm
	 * never destroys a region in use) */
	if (kd_cache_region_opening(rq->s, r->id) || kd_region_seqs_busy(r))
		return -EBUSY;
	kd_cache_seq_cut(r, UINT32_MAX, 0); /* early opens' reloads */
	kd_revoke_unmapped(rq->s, r->id, UINT32_MAX, 0, 0);
	kd_region_destroy(r, true);
	return 0;
}

static int do_seq_open(struct req *rq)
{
	struct kvmm_region_ref ref;
	struct kvmm_seq_open_reply rep = { .size = sizeof(rep) };
	struct kd_region *r;
	int err = get_region_ref(rq, &ref, &r);

	if (err)
		return err;
	err = kd_seq_open(r, &rep.seq_id);
	if (err)
		return err;
	rep.seq_gen = KD_ABI_BEFORE(rq->s, KD_ABI_SEQ_GEN) ?
			      0 :
			      r->seqs[rep.seq_id].gen;
	reply(rq, 0, &rep, sizeof(rep), NULL, 0);
	return 1;
}

static int do_seq_close(struct req *rq)
{
	struct kvmm_region_ref ref;
	struct kd_region *r;
	struct kd_seq *q;
	int err = get_region_ref(rq, &ref, &r);

	if (err)
		return err;
	err = kd_seq_lookup_client(r, ref.seq_id, &q);
	if (err)
		return err;
	kd_cache_seq_cut(r, ref.seq_id, 0); /* an early open's reloads */
	kd_revoke_unmapped(rq->s, r->id, ref.seq_id, q->gen, 0);
	kd_seq_close(r, ref.seq_id, true);
	return 0;
}

/* flags_ok: the flags the command takes (SEQ_TRUNCATE none) */
/* cookie: where a SEQ_TRUNCATE's reserved[0] goes, the request for blocks
 * ahead it answers (ABI 1.20, from a client of 1.20 or later); NULL: the
 * reserved words must be 0. */
static int get_extend(struct req *rq, struct kvmm_seq_extend *ex,
		      uint32_t flags_ok, uint64_t *cookie, struct kd_region **r,
		      struct kd_seq **q)
{
	int err = COPY_IN(rq, *ex);

	if (err)
		return err;
	if (cookie && !KD_ABI_BEFORE(rq->s, KD_ABI_GIVE_ACK)) {
		*cookie = ex->reserved[0];
		ex->reserved[0] = 0;
	}
	if ((ex->flags & ~flags_ok) ||
	    !kw_all_zero(ex->reserved, sizeof(ex->reserved)))
		return -EINVAL;
	err = kd_region_lookup(rq->s, ex->region_id, r);
	if (err)
		return err;
	/* a parked KVMM_SEQ_EXTEND_COLLECT extend run again: the sequence
	 * is extending for this very command */
	if (flags_ok && kd_cache_park_rerun(rq->s, NULL))
		err = kd_seq_lookup(*r, ex->seq_id, q);
	else
		err = kd_seq_lookup_client(*r, ex->seq_id, q);
	if (err)
		return err;
	if (ex->new_len > (*r)->max_tokens)
		return -EINVAL;
	return 0;
}

int kd_extend_send(struct req *rq, const struct kvmm_seq_extend_reply *rep)
{
	struct kd_daemon *d = rq->s->d;
	uint32_t nr_ids = rep->nr_blocks * rep->pages_per_block, nfds = 0;
	int *fds = calloc(rep->nr_fds + 1, sizeof(*fds));

	if (!fds)
		return -ENOMEM;
	for (uint32_t k = 0; k < nr_ids && nfds < rep->nr_fds; k++)
		if (!(rep->page_ids[k] & KVMM_PAGE_HELD))
			fds[nfds++] = vmm_pool_page_fd(d->pool,
						       rep->page_ids[k],
						       kd_cache_owner(rq->s));
	reply(rq, 0, rep, rep->size, fds, nfds);
	free(fds);
	return 1;
}

/* A KVMM_SEQ_EXTEND_COLLECT extend parks (first time: say so). */
static int extend_park_collect(struct req *rq, struct kd_region *r,
			       const struct kvmm_seq_extend *ex, bool rerun)
{
	struct kvmm_seq_extend_reply rep = { .size = sizeof(rep) };
	int err = kd_cache_park_collect(rq->s, rq->h, rq->p, rq->len, r,
					ex->seq_id);

	if (err)
		return err;
	if (!rerun) {
		rep.pages_per_block = r->pages_per_block;
		rep.len = r->seqs[ex->seq_id].len;
		rep.flags = KVMM_EXTEND_REPLY_PENDING;
		reply(rq, 0, &rep, sizeof(rep), NULL, 0);
	}
	return 1;
}

/*
 * SEQ_EXTEND up to its reply: 0 with the reply in *out (*out_len bytes,
 * the caller's to free), 1 when it parked (nothing more to say now), or
 * -errno.  rerun: a parked KVMM_SEQ_EXTEND_COLLECT extend run again.
 */
static int seq_extend_fill(struct req *rq, bool rerun,
			   struct kvmm_seq_extend_reply **out, size_t *out_len)
{
	struct kvmm_seq_extend ex;
	struct kvmm_seq_extend_reply *rep;
	struct kd_region *r;
	struct kd_seq *q;
	uint32_t need, to, first, nr_pages, nfds = 0;
	bool *was;
	int err;
	size_t rep_len;

	err = get_extend(rq, &ex, KVMM_SEQ_EXTEND_COLLECT, NULL, &r, &q);
	if (err)
		return err;
	need = kd_region_blocks_for(r, ex.new_len);
	to = ex.want_blocks > need ? ex.want_blocks : need;
	if (to > r->max_blocks)
		to = r->max_blocks;
	for (first = 0; first < to && kd_seq_block(q, first); first++)
		;
	/* in 64 bits: blocks of 2048 pages times 2^21 blocks wrapped to 0
	 * in 32 and passed the cap */
	if ((uint64_t)(to - first) * r->pages_per_block > KVMM_EXTEND_MAX_PAGES)
		return -E2BIG;
	nr_pages = (to - first) * r->pages_per_block;
	rep_len = sizeof(*rep) + nr_pages * sizeof(uint32_t);
	rep = calloc(1, rep_len);
	was = calloc(to - first + 1, sizeof(*was));
	if (!rep || !was) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t b = first; b < to; b++)
		was[b - first] = kd_seq_block(q, b) != NULL;
	/* another process's blocks ahead only for blocks below the length:
	 * one that wants blocks ahead too (the map-ahead thread's, or the
	 * first ask of libkvmm's extend) asks again without them */
	err = kd_seq_fill(r, ex.seq_id, first, to, to <= need);
	if (err == -EINPROGRESS) {
		/* the pages come back when demotion copies end: run again
		 * and answered from the loop (cache_park.c), which serves
		 * other sessions meanwhile; with KVMM_SEQ_EXTEND_COLLECT the
		 * session's socket too */
		if (ex.flags & KVMM_SEQ_EXTEND_COLLECT)
			err = extend_park_collect(rq, r, &ex, rerun);
		else
			err = kd_cache_park(rq->s, rq->h, rq->p, rq->len) ?: 1;
		goto out;
	}
	if (err)
		goto out;
	/* Lengths only grow here: the ring and the socket may deliver a
	 * client's extends out of order. */
	if (ex.new_len > q->len)
		q->len = ex.new_len;
	/*
	 * Blocks where a revocation took them, within the length asked
	 * for: the client knows of it.  An extend for blocks ahead alone
	 * (libkvmm's map-ahead thread's, whose new_len names none) backs
	 * them again without the engine knowing, which still has to be told
	 * -ESTALE for them (it was -EINVAL: tests/daemon-fuzz phase 4).
	 */
	if (q->revoked_gen == q->gen && need > q->revoked_from)
		q->revoked_gen = 0;
	rep->size = rep_len;
	rep->first_block = first;
	rep->nr_blocks = to - first;
	rep->pages_per_block = r->pages_per_block;
	rep->len = q->len;
	for (uint32_t b = first, k = 0; b < to; b++) {
		struct kd_block *blk = q->blocks[b];

		for (uint32_t i = 0; i < blk->nr_pages; i++, k++) {
			rep->page_ids[k] = blk->pages[i];
			if (was[b - first])
				rep->page_ids[k] |= KVMM_PAGE_HELD;
			else
				nfds++;
		}
	}
	rep->nr_fds = nfds;
	*out = rep;
	*out_len = rep_len;
	rep = NULL;
out:
	free(was);
	free(rep);
	return err;
}

static int do_seq_extend(struct req *rq)
{
	bool rerun = kd_cache_park_rerun(rq->s, NULL);
	struct kvmm_seq_extend_reply *rep = NULL;
	size_t len = 0;
	int err = seq_extend_fill(rq, rerun, &rep, &len);

	if (rerun) {
		/* parked again (1), or its outcome waits for SEQ_COLLECT,
		 * which sends it (the cache takes rep) */
		if (err != 1)
			kd_cache_park_done(rq->s, err, rep, len);
		return 1;
	}
	if (!err)
		err = kd_extend_send(rq, rep);
	free(rep);
	return err;
}

/* SEQ_COLLECT (ABI 1.17): the reply of a parked KVMM_SEQ_EXTEND_COLLECT
 * extend once it has one; -EAGAIN before, -ENOENT for none. */
static int do_seq_collect(struct req *rq)
{
	struct kvmm_seq_extend_reply *rep = NULL;
	struct kvmm_region_ref ref;
	struct kd_region *r;
	size_t len = 0;
	int err = get_region_ref(rq, &ref, &r), status;

	if (err)
		return err;
	if (ref.seq_id >= r->max_seqs)
		return -EINVAL;
	err = kd_cache_park_collect_take(rq->s, KVMM_CMD_SEQ_EXTEND, r,
					 ref.seq_id, &status, (void **)&rep,
					 &len);
	if (err)
		return err;
	err = status ?: kd_extend_send(rq, rep);
	free(rep);
	return err;
}

static int do_seq_truncate(struct req *rq)
{
	struct kvmm_seq_extend ex;
	struct kd_region *r;
	struct kd_seq *q;
	uint64_t cookie = 0;
	int err = get_extend(rq, &ex, 0, &cookie, &r, &q);

	if (err)
		return err;
	if (ex.want_blocks)
		return -EINVAL;
	kd_revoke_unmapped(rq->s, r->id, ex.seq_id, q->gen,
			   kd_region_blocks_for(r, ex.new_len));
	kd_cache_seq_cut(r, ex.seq_id, kd_region_blocks_for(r, ex.new_len));
	kd_cache_lend_truncated(rq->s, r, ex.seq_id,
				kd_region_blocks_for(r, ex.new_len), cookie);
	kd_seq_drop_blocks(r, ex.seq_id, kd_region_blocks_for(r, ex.new_len),
			   true);
	/*
	 * Longer than the sequence: a revocation shortened it after the
	 * client last looked (libkvmm refuses a truncate past the length it
	 * knows before sending one), and the length stays where it cut.  The
	 * blocks past new_len go all the same: libkvmm has unmapped them,
	 * and the map-ahead thread's extend (which names no length) may have
	 * backed them again since the revocation; kept, the next extend past
	 * them was sent only the blocks above (-ENODATA, tests/daemon-revoke-
	 * map-ahead-truncate.c).
	 */
	if (ex.new_len < q->len)
		q->len = ex.new_len;
	return 0;
}

static int do_step(struct req *rq, bool begin)
{
	struct kvmm_region_ref ref;
	int err = COPY_IN(rq, ref);

	if (err)
		return err;
	if (ref.flags || !kw_all_zero(ref.reserved, sizeof(ref.reserved)))
		return -EINVAL;
	rq->s->in_step = begin;
	return 0;
}

static int do_revoke_ack(struct req *rq)
{
	struct kvmm_revoke_ack a;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (a.pad || a.reserved[1])
		return -EINVAL;
	/* ABI 1.20: the answer to a request for blocks ahead says in
	 * reserved[0] how many it gave */
	if (kd_cache_lend_acked(rq->s, a.cookie, a.reserved[0]))
		return 0;
	if (a.reserved[0])
		return -EINVAL;
	return kd_revoke_ack(rq->s, a.cookie);
}

static int dispatch(struct req *rq)
{
	struct kd_session *s = rq->s;
	uint16_t cmd = rq->h->cmd;

	if (!s->hello_done && cmd != KVMM_CMD_HELLO)
		return -ENOTCONN;
	if (cmd >= KVMM_CMD_ADMIN_STATUS && cmd <= 0x9f && !s->admin)
		return -EPERM;
	/* BYE says everything is unmapped only as the session's last word:
	 * one from a forked child of the client speaks for a process that
	 * goes on using the session */
	if (cmd != KVMM_CMD_BYE)
		s->said_bye = false;
	/* what came after the daemon a test plays (abi_play.h) */
	if (kd_abi_cmd_unknown(cmd))
		return -ENOTTY;
	if (kd_abi_flags_check(cmd, rq->p, rq->len))
		return -EINVAL;
	switch (cmd) {
	case KVMM_CMD_HELLO:
		return do_hello(rq);
	case KVMM_CMD_BYE:
		if (rq->len)
			return -EINVAL;
		s->said_bye = true;
		return 0;
	case KVMM_CMD_NOP:
		return rq->len ? -EINVAL : 0;
	case KVMM_CMD_REGION_CREATE:
		return do_region_create(rq);
	case KVMM_CMD_REGION_DESTROY:
		return do_region_destroy(rq);
	case KVMM_CMD_SEQ_OPEN:
		return do_seq_open(rq);
	case KVMM_CMD_SEQ_EXTEND:
		return do_seq_extend(rq);
	case KVMM_CMD_SEQ_TRUNCATE:
		return do_seq_truncate(rq);
	case KVMM_CMD_SEQ_WAIT_READY:
		return kd_cache_seq_wait_ready(s, rq->h, rq->p, rq->len) ?: 1;
	case KVMM_CMD_SEQ_CLOSE:
		return do_seq_close(rq);
	case KVMM_CMD_SEQ_UNSHARE:
		return kd_cmd_seq_unshare(rq);
	case KVMM_CMD_STEP_BEGIN:
		return do_step(rq, true);
	case KVMM_CMD_STEP_END:
		return do_step(rq, false);
	case KVMM_CMD_REVOKE_ACK:
		return do_revoke_ack(rq);
	case KVMM_CMD_STATS:
		return kd_cmd_stats(rq);
	case KVMM_CMD_BLOCK_PUBLISH:
		/* a block an early open still loads is not the client's to
		 * publish yet: -EBUSY, once the request is known good */
		return kd_cache_publish_check(s, rq->p, rq->len)	  ?:
			       kd_cache_publish_busy(s, rq->p, rq->len)	  ?:
			       kd_cache_publish(s, rq->h, rq->p, rq->len) ?:
									    1;
	case KVMM_CMD_PREFIX_OPEN:
		return kd_cache_prefix_open(s, rq->h, rq->p, rq->len) ?: 1;
	case KVMM_CMD_PREFIX_COLLECT:
		return kd_cache_prefix_collect(s, rq->h, rq->p, rq->len) ?: 1;
	case KVMM_CMD_SEQ_COLLECT:
		return do_seq_collect(rq);
	case KVMM_CMD_PREFIX_QUERY:
		return kd_cache_prefix_query(s, rq->h, rq->p, rq->len) ?: 1;
	case KVMM_CMD_TIER_STATS:
		return kd_cmd_tier_stats(rq);
	case KVMM_CMD_BLOCK_PIN:
		return kd_pin_cmd(s, rq->h, rq->p, rq->len);
	case KVMM_CMD_BLOCK_UNPIN:
		return kd_unpin_cmd(s, rq->p, rq->len);
	case KVMM_CMD_BLOCK_PIN_MANY:
		return kd_pin_many_cmd(s, rq->h, rq->p, rq->len);
	case KVMM_CMD_RESTORE_PLAN:
		return -EOPNOTSUPP;
	case KVMM_CMD_ADMIN_STATUS:
		return kd_cmd_admin_status(rq);
	case KVMM_CMD_ADMIN_SESSIONS:
		return kd_cmd_admin_sessions(rq);
	case KVMM_CMD_ADMIN_KILL_SESSION:
		return kd_cmd_admin_kill(rq);
	case KVMM_CMD_ADMIN_SET_QUOTA:
		return kd_cmd_admin_quota(rq);
	case KVMM_CMD_ADMIN_SET_LOG_LEVEL:
		return kd_cmd_admin_log_level(rq);
	case KVMM_CMD_ADMIN_REVOKE:
		return kd_cmd_admin_revoke(rq);
	case KVMM_CMD_ADMIN_TENANTS:
		return kd_cmd_admin_tenants(rq);
	case KVMM_CMD_ADMIN_SET_TENANT_LIMIT:
		return kd_cmd_admin_tenant_limit(rq);
	case KVMM_CMD_ADMIN_CACHE_DROP:
		return kd_cache_drop(s, rq->h, rq->p, rq->len) ?: 1;
	default:
		return -ENOTTY;
	}
}

void kd_proto_socket(struct kd_session *s, void *buf, size_t len, int *fds,
		     unsigned int nfds)
{
	struct kvmm_msg_hdr h = { 0 };
	struct req rq = { .s = s, .h = &h };
	int ret;

	if (len >= sizeof(h))
		memcpy(&h, buf, sizeof(h));
	if (len < sizeof(h) || h.size != len)
		ret = -EINVAL;
	else if (h.version != KVMM_ABI_MAJOR)
		ret = -EPROTONOSUPPORT;
	else if (h.flags || h.status)
		ret = -EINVAL;
	else if (nfds)
		ret = -EINVAL; /* no command takes fds */
	else {
		rq.p = (char *)buf + sizeof(h);
		rq.len = len - sizeof(h);
		ret = dispatch(&rq);
	}
	if (ret != 1)
		kd_session_reply(s, &h, ret, NULL, 0, NULL, 0);
}

void kd_proto_ring(struct kd_session *s, const struct kvmm_sqe *sqe,
		   struct kvmm_cqe *cqe)
{
	struct kd_region *r;
	struct kd_seq *q;
	int res = 0;

	s->said_bye = false; /* as in dispatch() */
	if (sqe->flags || sqe->pad ||
	    !kw_all_zero(sqe->reserved, sizeof(sqe->reserved))) {
		cqe->res = -EINVAL;
		return;
	}
	switch (sqe->cmd) {
	case KVMM_CMD_NOP:
		break;
	case KVMM_CMD_SEQ_EXTEND:
		/* an extend of the sequence that waits to be collected (ABI
		 * 1.17) leaves the blocks it had as they are: the length may
		 * move within them */
		res = kd_region_lookup(s, sqe->region_id, &r);
		if (!res)
			res = kd_seq_lookup(r, sqe->seq_id, &q);
		if (!res && q->opening)
			res = -EBUSY;
		if (res)
			break;
		if (sqe->arg0 > r->max_tokens) {
			res = -EINVAL;
			break;
		}
		/* The ring never allocates: pages need the socket's fds.
		 * Blocks below the current length always have pages
		 * (revocation shortens the length), so only newer ones are
		 * checked.  A block a revocation took that an extend for
		 * blocks ahead alone backed again (the map-ahead thread's)
		 * holds fresh pages the client may not have mapped yet, its
		 * old ones still where the engine writes: -ENODATA as for
		 * one with no pages, until an extend whose length reaches
		 * it says the client knows (seq_extend_fill()).  Answered
		 * 0, the length grew over the old pages and a publish
		 * cached the fresh ones (tests/daemon-fuzz phase 4). */
		for (uint32_t b = kd_region_blocks_for(r, q->len);
		     b < kd_region_blocks_for(r, sqe->arg0); b++) {
			if (!kd_seq_block(q, b) || kd_seq_revoked(q, b)) {
				res = -ENODATA;
				break;
			}
		}
		if (!res && sqe->arg0 > q->len)
			q->len = sqe->arg0;
		cqe->value = q->len;
		break;
	case KVMM_CMD_STEP_BEGIN:
		s->in_step = true;
		break;
	case KVMM_CMD_STEP_END:
		s->in_step = false;
		break;
	case KVMM_CMD_REVOKE_ACK:
		/* ABI 1.20: or the answer to a request for blocks ahead,
		 * arg1 the blocks it gave */
		if (!kd_cache_lend_acked(s, sqe->arg0, sqe->arg1))
			res = kd_revoke_ack(s, sqe->arg0);
		break;
	default:
		res = -ENOTTY;
		break;
	}
	cqe->res = res;
}
