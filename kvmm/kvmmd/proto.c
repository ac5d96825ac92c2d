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
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/cache_plan.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/policy/cost_model.h"
#include "kvmm/policy/policy.h"

struct req {
	struct kd_session *s;
	const struct kvmm_msg_hdr *h;
	const void *p;
	size_t len;
};

#define COPY_IN(rq, var) \
	kw_copy_struct(&(var), sizeof(var), sizeof(var), (rq)->p, (rq)->len)

static int reply(struct req *rq, int status, const void *body, size_t len,
		 const int *fds, unsigned int nfds)
{
	return kd_session_reply(rq->s, rq->h, status, body, len, fds, nfds);
}

/*
 * Test knobs: KVMMD_TEST_ABI_1_15=1 in kvmmd's environment makes its
 * HELLO replies say ABI 1.15 and name no notify word, so a test sees
 * libkvmm fall back to what it did with a daemon before 1.16 (waiting for
 * restores holding the socket); KVMMD_TEST_ABI_1_16=1 makes them say 1.16
 * (the notify word stays), so libkvmm falls back to what it did with a
 * daemon before 1.17 (an extend parked for pool pages holds the socket).
 * Never set them in production; they are logged as a warning.  The
 * minor HELLO says.
 */
static uint16_t test_abi_minor(void)
{
	static int minor = -1;

	if (minor < 0) {
		const char *v15 = getenv("KVMMD_TEST_ABI_1_15");
		const char *v16 = getenv("KVMMD_TEST_ABI_1_16");

		minor = KVMM_ABI_MINOR;
		if (v15 && !strcmp(v15, "1"))
			minor = 15;
		else if (v16 && !strcmp(v16, "1"))
			minor = 16;
		if (minor != KVMM_ABI_MINOR)
			vmm_log(VMM_LOG_WARN,
				"KVMMD_TEST_ABI_1_%d=1: HELLO says ABI 1.%d%s (tests only)",
				minor, minor,
				minor < 16 ? ", no notify word" : "");
	}
	return (uint16_t)minor;
}

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
	s->client_minor = h.abi_minor;
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
	memcpy(rep.gpu_uuid, d->backend->gpu_uuid, sizeof(rep.gpu_uuid));
	rep.abi_minor = test_abi_minor();
	if (rep.abi_minor < 16)
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
	rep.seq_gen = r->seqs[rep.seq_id].gen;
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

static uint32_t blocks_for(struct kd_region *r, uint32_t len)
{
	return (len + r->tokens_per_block - 1) / r->tokens_per_block;
}

/* flags_ok: the flags the command takes (SEQ_TRUNCATE none) */
static int get_extend(struct req *rq, struct kvmm_seq_extend *ex,
		      uint32_t flags_ok, struct kd_region **r,
		      struct kd_seq **q)
{
	int err = COPY_IN(rq, *ex);

	if (err)
		return err;
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

/* An extend's reply (rep): each page id without KVMM_PAGE_HELD goes
 * with the pool's fd of the page.  1 (replied) or -ENOMEM. */
static int extend_send(struct req *rq, const struct kvmm_seq_extend_reply *rep)
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

	err = get_extend(rq, &ex, KVMM_SEQ_EXTEND_COLLECT, &r, &q);
	if (err)
		return err;
	need = blocks_for(r, ex.new_len);
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
	err = kd_seq_fill(r, ex.seq_id, first, to);
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
		err = extend_send(rq, rep);
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
	err = status ?: extend_send(rq, rep);
	free(rep);
	return err;
}

static int do_seq_truncate(struct req *rq)
{
	struct kvmm_seq_extend ex;
	struct kd_region *r;
	struct kd_seq *q;
	int err = get_extend(rq, &ex, 0, &r, &q);

	if (err)
		return err;
	if (ex.want_blocks)
		return -EINVAL;
	kd_revoke_unmapped(rq->s, r->id, ex.seq_id, q->gen,
			   blocks_for(r, ex.new_len));
	/*
	 * Longer than the sequence: a revocation shortened it after the
	 * client last looked (libkvmm refuses a truncate past the length it
	 * knows before sending one, and has unmapped the blocks already).
	 * Nothing of the sequence lies past its length: nothing to do
	 * (get_extend() refused one past max_tokens).
	 */
	if (ex.new_len > q->len)
		return 0;
	kd_cache_seq_cut(r, ex.seq_id, blocks_for(r, ex.new_len));
	kd_seq_drop_blocks(r, ex.seq_id, blocks_for(r, ex.new_len), true);
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
	if (a.pad || !kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	return kd_revoke_ack(rq->s, a.cookie);
}

static int do_stats(struct req *rq)
{
	struct kd_session *s = rq->s;
	struct kvmm_stats_reply st = { .size = sizeof(st) };

	if (rq->len)
		return -EINVAL;
	st.session_id = s->id;
	st.pages_held = s->pages_held;
	st.pages_owned = s->pages_owned;
	st.regions = s->nr_regions;
	st.sequences = s->nr_sequences;
	st.cmds_socket = s->cmds_socket;
	st.cmds_ring = s->cmds_ring;
	st.revocations_posted = s->revocations_posted;
	st.revocations_acked = s->revocations_acked;
	reply(rq, 0, &st, sizeof(st), NULL, 0);
	return 1;
}

int kd_status(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	struct vmm_pool_stats ps;
	uint64_t regions = 0, seqs = 0;

	/* counters only: a scrape or status costs the same on any pool */
	vmm_pool_get_stats(d->pool, &ps);
	for (struct kd_session *s = d->sessions; s; s = s->next) {
		regions += s->nr_regions;
		seqs += s->nr_sequences;
	}
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	st->backend = d->backend->kind;
	snprintf(st->device, sizeof(st->device), "%.63s",
		 d->backend->device_name);
	st->page_size = d->page_size;
	st->pages_total = d->capacity;
	st->pages_created = ps.created;
	st->pages_free = d->capacity - ps.allocated;
	st->pages_allocated = ps.allocated;
	st->pages_mapped = ps.mapped;
	st->pages_revoking = ps.revoking;
	st->pages_quarantined = d->pages_quarantined;
	st->pages_scrubbed = ps.scrubbed;
	st->page_scrub_failures = ps.scrub_failures;
	st->pages_renewed = ps.renewed;
	st->page_renew_failures = ps.renew_failures;
	st->page_ro_fds = ps.ro_fds;
	st->page_ro_fd_cap = ps.ro_fd_cap;
	st->page_ro_fd_opens = ps.ro_fd_opens;
	st->page_ro_fd_drops = ps.ro_fd_drops;
	st->page_ro_fd_unkept_opens = ps.ro_fd_unkept_opens;
	st->sessions = d->nr_sessions;
	st->regions = regions;
	st->sequences = seqs;
	st->sessions_total = d->ctr.sessions_total;
	st->sessions_cut_off = d->ctr.sessions_cut_off;
	st->sessions_refused_uid_limit =
		d->ctr.sessions_refused[KD_REFUSED_UID_LIMIT];
	st->sessions_refused_admin_reserved =
		d->ctr.sessions_refused[KD_REFUSED_ADMIN_RESERVED];
	st->sessions_refused_full = d->ctr.sessions_refused[KD_REFUSED_FULL];
	st->sessions_refused_no_memory =
		d->ctr.sessions_refused[KD_REFUSED_NO_MEMORY];
	st->sessions_hello_timeouts = d->ctr.sessions_hello_timeout;
	st->sessions_refused_quarantine =
		d->ctr.sessions_refused[KD_REFUSED_QUARANTINE];
	st->cmds_socket = d->ctr.cmds_socket;
	st->cmds_ring = d->ctr.cmds_ring;
	st->revocations_posted = d->ctr.revocations_posted;
	st->revocations_acked = d->ctr.revocations_acked;
	st->revocations_timed_out = d->ctr.revocations_timed_out;
	st->revocations_cancelled = d->ctr.revocations_cancelled;
	st->cache_drop_blocks = d->ctr.cache_drop_blocks;
	st->uptime_ms = (kd_now_ns() - d->start_ns) / 1000000;
	st->pid = getpid();
	st->revoke_timeout_ms = d->cfg.revoke_timeout_ms;
	snprintf(st->cache_policy, sizeof(st->cache_policy), "%s",
		 pol_kind_string((enum pol_kind)d->cfg.cache_policy));
	snprintf(st->restore_mode, sizeof(st->restore_mode), "%s",
		 kd_restore_mode_string(d->cfg.restore_mode));
	snprintf(st->cache_scope, sizeof(st->cache_scope), "%s",
		 kd_scope_string(d->scope.mode));
	if (d->cost) {
		st->cost_host_bw = (uint64_t)d->cost->bandwidth[POL_TIER_HOST];
		st->cost_host_bw_profile =
			(uint64_t)d->cost->base_bandwidth[POL_TIER_HOST];
		st->cost_nvme_bw = (uint64_t)d->cost->bandwidth[POL_TIER_NVME];
		st->cost_nvme_bw_profile =
			(uint64_t)d->cost->base_bandwidth[POL_TIER_NVME];
		st->cost_transfers = d->tel_feed.transfers;
	}
	kd_telemetry_status(d, st);
	kd_cache_park_stats(d, st);
	kd_cache_learned_stats(d, st);
	kd_pin_status(d, st);
	return 0;
}

static int do_admin_status(struct req *rq)
{
	struct kvmm_status_reply st;

	if (rq->len)
		return -EINVAL;
	kd_status(rq->s->d, &st);
	reply(rq, 0, &st, sizeof(st), NULL, 0);
	return 1;
}

/*
 * s's regions in the order they were made, into out[] (room for
 * s->nr_regions): its list is newest first (region.c adds at the head),
 * which kvmmctl sessions showed as it came.
 */
static uint32_t regions_oldest_first(struct kd_session *s,
				     struct kd_region **out)
{
	uint32_t n = 0;

	for (struct kd_region *r = s->regions; r && n < s->nr_regions;
	     r = r->next)
		n++;
	for (struct kd_region *r = s->regions, **at = out + n; at > out;
	     r = r->next)
		*--at = r;
	return n;
}

/*
 * After the n session entries at buf + *len (room bytes in all): the
 * regions of those sessions, oldest first, with their open sequences,
 * while they fit, so an operator sees the ids ADMIN_REVOKE takes
 * (kvmmctl sessions; the counts alone did not say them).  Grows *len.
 */
static void sessions_regions(struct kd_daemon *d, uint32_t n, char *buf,
			     size_t room, size_t *len)
{
	struct kvmm_sessions_regions *h = (void *)(buf + *len);
	size_t at = *len + sizeof(*h);
	struct kd_session *s = d->sessions;
	struct kd_region **regions;
	uint32_t most = 0;

	if (room - *len < sizeof(*h))
		return;
	for (uint32_t i = 0; i < n && s; i++, s = s->next)
		if (s->nr_regions > most)
			most = s->nr_regions;
	regions = malloc((most + 1) * sizeof(*regions));
	if (!regions)
		return; /* the reply ends with the sessions, as an older one */
	h->entry_size = sizeof(struct kvmm_region_info);
	s = d->sessions;
	for (uint32_t i = 0; i < n && s; i++, s = s->next) {
		uint32_t nr = regions_oldest_first(s, regions);

		for (uint32_t k = 0; k < nr; k++) {
			struct kd_region *r = regions[k];
			uint32_t listed = r->nr_open < KVMM_REGION_INFO_SEQS ?
						  r->nr_open :
						  KVMM_REGION_INFO_SEQS;
			size_t size =
				KVMM_REGION_INFO_STRIDE(h->entry_size, listed);
			struct kvmm_region_info *e = (void *)(buf + at);
			uint32_t *ids = (uint32_t *)(e + 1);

			h->total++;
			if (h->total != h->nr + 1 || room - at < size)
				continue; /* counted, not listed */
			e->session_id = s->id;
			e->region_id = r->id;
			e->max_seqs = r->max_seqs;
			e->max_blocks = r->max_blocks;
			e->nr_open = r->nr_open;
			for (uint32_t q = 0;
			     e->nr_listed < listed && q < r->max_seqs; q++)
				if (r->seqs[q].open)
					ids[e->nr_listed++] = q;
			at += KVMM_REGION_INFO_STRIDE(h->entry_size,
						      e->nr_listed);
			h->nr++;
		}
	}
	free(regions);
	*len = at;
}

static int do_admin_sessions(struct req *rq)
{
	struct kd_daemon *d = rq->s->d;
	size_t room = KVMM_MSG_MAX - sizeof(struct kvmm_msg_hdr);
	size_t max = (room - sizeof(struct kvmm_sessions_reply)) /
		     sizeof(struct kvmm_session_info);
	struct kvmm_sessions_reply *rep;
	size_t len;
	uint32_t n = 0, total = 0;

	if (rq->len)
		return -EINVAL;
	rep = calloc(1, room);
	if (!rep)
		return -ENOMEM;
	for (struct kd_session *s = d->sessions; s; s = s->next) {
		struct kvmm_session_info *i;

		/* the reply holds about 580; the rest are counted, so the
		 * caller knows the list was cut (it used to be silent) */
		total++;
		if (n == max)
			continue;
		i = &rep->sessions[n++];

		i->size = sizeof(*i);
		i->session_id = s->id;
		i->pid = s->pid;
		i->uid = s->uid;
		i->gid = s->gid;
		i->flags = (s->admin_only ? KVMM_SESSION_F_ADMIN : 0) |
			   (s->in_step ? KVMM_SESSION_F_IN_STEP : 0) |
			   (s->revokes ? KVMM_SESSION_F_REVOKING : 0);
		memcpy(i->name, s->name, sizeof(i->name));
		i->pages_held = s->pages_held;
		i->pages_owned = s->pages_owned;
		i->regions = s->nr_regions;
		i->sequences = s->nr_sequences;
		i->quota_pages = s->quota ? s->quota->limit_pages : 0;
		kd_pin_session_info(s, i);
	}
	/* then the quarantined processes, so an operator sees who keeps
	 * pages (and fds) after their sessions */
	for (struct kd_zombie *z = d->zombies; z; z = z->next) {
		total++;
		if (n < max)
			kd_zombie_info(z, &rep->sessions[n++]);
	}
	len = sizeof(*rep) + n * sizeof(rep->sessions[0]);
	sessions_regions(d, n, (char *)rep, room, &len);
	rep->size = len;
	rep->nr = n;
	rep->total = total;
	rep->entry_size = sizeof(rep->sessions[0]);
	reply(rq, 0, rep, len, NULL, 0);
	free(rep);
	return 1;
}

static int do_admin_tenants(struct req *rq)
{
	struct kvmm_tenants_reply *rep;
	size_t len;
	int err;

	if (rq->len)
		return -EINVAL;
	err = kd_tenants_reply(rq->s->d, &rep, &len);
	if (err)
		return err;
	reply(rq, 0, rep, len, NULL, 0);
	free(rep);
	return 1;
}

static int do_admin_kill(struct req *rq)
{
	struct kvmm_admin_session a;
	struct kd_session *t;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (!kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	t = kd_session_by_id(rq->s->d, a.session_id);
	if (!t)
		return -ENOENT;
	if (t == rq->s)
		return -EINVAL;
	kd_session_end(t, true, "killed by admin");
	return 0;
}

static int do_admin_quota(struct req *rq)
{
	struct kd_daemon *d = rq->s->d;
	struct kvmm_admin_quota a;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (!kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	return kd_quota_set(d, a.uid,
			    (a.bytes + d->page_size - 1) / d->page_size);
}

static int do_admin_tenant_limit(struct req *rq)
{
	struct kvmm_admin_tenant_limit a;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (!kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	err = kd_tenant_set_limit(rq->s->d, a.id, a.limit_blocks);
	if (!err)
		vmm_log(VMM_LOG_INFO,
			"tenant %u: limit gpu %llu, host %llu, nvme %llu blocks (0: none), set by uid %u",
			a.id, (unsigned long long)a.limit_blocks[0],
			(unsigned long long)a.limit_blocks[1],
			(unsigned long long)a.limit_blocks[2],
			(unsigned)rq->s->uid);
	return err;
}

static int do_admin_log_level(struct req *rq)
{
	struct kvmm_admin_log_level a;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (a.level > VMM_LOG_DEBUG ||
	    !kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	rq->s->d->cfg.log_level = a.level;
	vmm_log_set_level(a.level);
	return 0;
}

static int do_admin_revoke(struct req *rq)
{
	struct kvmm_admin_revoke a;
	struct kd_session *t;
	struct kd_region *r;
	uint32_t from = 0;
	int err = COPY_IN(rq, a);

	if (err)
		return err;
	if (a.pad || !kw_all_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	t = kd_session_by_id(rq->s->d, a.session_id);
	if (!t)
		return -ENOENT;
	err = kd_region_lookup(t, a.region_id, &r);
	if (err)
		return err;
	err = kd_revoke_seq(t, r, a.seq_id, a.first_block, &from);
	if (!err || err == -EAGAIN) /* an early open's reloads of them */
		kd_cache_seq_cut(r, a.seq_id, from);
	return err;
}

/* Returns 1 when it replied itself, else the status to reply with. */
static int do_tier_stats(struct req *rq)
{
	struct kvmm_tier_stats_reply st;
	int err;

	if (rq->len)
		return -EINVAL;
	err = kd_cache_tier_stats(rq->s->d, &st);
	if (err)
		return err;
	reply(rq, 0, &st, sizeof(st), NULL, 0);
	return 1;
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
	case KVMM_CMD_STEP_BEGIN:
		return do_step(rq, true);
	case KVMM_CMD_STEP_END:
		return do_step(rq, false);
	case KVMM_CMD_REVOKE_ACK:
		return do_revoke_ack(rq);
	case KVMM_CMD_STATS:
		return do_stats(rq);
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
	case KVMM_CMD_TIER_STATS:
		return do_tier_stats(rq);
	case KVMM_CMD_BLOCK_PIN:
		return kd_pin_cmd(s, rq->h, rq->p, rq->len);
	case KVMM_CMD_BLOCK_UNPIN:
		return kd_unpin_cmd(s, rq->p, rq->len);
	case KVMM_CMD_RESTORE_PLAN:
		return -EOPNOTSUPP;
	case KVMM_CMD_ADMIN_STATUS:
		return do_admin_status(rq);
	case KVMM_CMD_ADMIN_SESSIONS:
		return do_admin_sessions(rq);
	case KVMM_CMD_ADMIN_KILL_SESSION:
		return do_admin_kill(rq);
	case KVMM_CMD_ADMIN_SET_QUOTA:
		return do_admin_quota(rq);
	case KVMM_CMD_ADMIN_SET_LOG_LEVEL:
		return do_admin_log_level(rq);
	case KVMM_CMD_ADMIN_REVOKE:
		return do_admin_revoke(rq);
	case KVMM_CMD_ADMIN_TENANTS:
		return do_admin_tenants(rq);
	case KVMM_CMD_ADMIN_SET_TENANT_LIMIT:
		return do_admin_tenant_limit(rq);
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
		 * checked. */
		for (uint32_t b = blocks_for(r, q->len);
		     b < blocks_for(r, sqe->arg0); b++) {
			if (!kd_seq_block(q, b)) {
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
		res = kd_revoke_ack(s, sqe->arg0);
		break;
	default:
		res = -ENOTTY;
		break;
	}
	cqe->res = res;
}
