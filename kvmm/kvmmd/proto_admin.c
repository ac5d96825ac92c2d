// SPDX-License-Identifier: MIT
/*
 * The commands that read kvmmd's state for a client or an operator
 * (STATS, TIER_STATS, ADMIN_STATUS, ADMIN_SESSIONS, ADMIN_TENANTS) and
 * the admin commands that act on sessions and tenants (ADMIN_KILL,
 * ADMIN_QUOTA, ADMIN_TENANT_LIMIT, ADMIN_LOG_LEVEL, ADMIN_REVOKE).
 * proto.c's dispatch() checks the header, the version and that admin
 * commands come from admins before it calls them; each checks its own
 * struct and ids.  kd_status() also fills the metrics endpoint's
 * snapshot (metrics_snapshot.c).
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

int kd_cmd_stats(struct req *rq)
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

	/* the cap shown is the limit's now (a prlimit from outside) */
	kd_nofile_check(d);
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
	st->lend_requests = d->ctr.lend_requests;
	st->lend_blocks = d->ctr.lend_blocks;
	st->lend_extends = d->ctr.lend_extends;
	st->lend_failures = d->ctr.lend_failures;
	st->lend_wait_ms = d->cfg.lend_wait_ms;
	st->max_sessions = d->cfg.max_sessions;
	st->max_sessions_per_uid = d->cfg.max_sessions_per_uid;
	st->prefix_queries = d->ctr.prefix_queries;
	st->prefix_query_hashes = d->ctr.prefix_query_hashes;
	st->prefix_query_gpu = d->ctr.prefix_query_found[KVMM_QUERY_GPU];
	st->prefix_query_host = d->ctr.prefix_query_found[KVMM_QUERY_HOST];
	st->prefix_query_nvme = d->ctr.prefix_query_found[KVMM_QUERY_NVME];
	st->prefix_query_moving = d->ctr.prefix_query_found[KVMM_QUERY_MOVING];
	st->pin_many_calls = d->ctr.pin_many_calls;
	st->pin_many_hashes = d->ctr.pin_many_hashes;
	st->pin_many_pinned = d->ctr.pin_many_pinned;
	st->tier_stats_calls = d->ctr.tier_stats_calls;
	st->quarantine_per_uid = d->cfg.quarantine_per_uid;
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

int kd_cmd_admin_status(struct req *rq)
{
	struct kvmm_status_reply st;

	if (rq->len)
		return -EINVAL;
	kd_status(rq->s->d, &st);
	/* sizeof(st), but what the daemon a test plays sent
	 * (KVMMD_TEST_ABI_MINOR), and a client of 1.21 or before gets the
	 * reply of before, exactly (abi_play.c's table) */
	st.size = (uint32_t)kd_abi_reply_size(KD_ABI_ADMIN_STATUS,
					      rq->s->client_minor);
	reply(rq, 0, &st, st.size, NULL, 0);
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

int kd_cmd_admin_sessions(struct req *rq)
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
		/* the pin fields were reserved before 1.2 (abi_play.h) */
		if (!KD_ABI_BEFORE(rq->s, KD_ABI_SESSION_PINS))
			kd_pin_session_info(s, i);
	}
	/* then the quarantined processes, so an operator sees who keeps
	 * pages (and fds) after their sessions (since 1.13, as the regions
	 * after the entries) */
	for (struct kd_zombie *z = d->zombies;
	     z && !KD_ABI_BEFORE(rq->s, KD_ABI_1_13); z = z->next) {
		total++;
		if (n < max)
			kd_zombie_info(z, &rep->sessions[n++]);
	}
	len = sizeof(*rep) + n * sizeof(rep->sessions[0]);
	if (!KD_ABI_BEFORE(rq->s, KD_ABI_1_13))
		sessions_regions(d, n, (char *)rep, room, &len);
	rep->size = len;
	rep->nr = n;
	/* pad before 1.12 */
	rep->total = KD_ABI_BEFORE(rq->s, KD_ABI_SESSIONS_TOTAL) ? 0 : total;
	rep->entry_size = sizeof(rep->sessions[0]);
	reply(rq, 0, rep, len, NULL, 0);
	free(rep);
	return 1;
}

/*
 * The optional request of a command that may name one cached block size
 * (TIER_STATS since ABI 1.21, ADMIN_TENANTS since 1.22: the two requests
 * have one layout, read here as TIER_STATS'): *block_pages 0 without a
 * body (every size), -EINVAL for a body from a client before `since`
 * (its command had none) or with flags or reserved words set.
 */
_Static_assert(sizeof(struct kvmm_admin_tenants_req) ==
			       sizeof(struct kvmm_tier_stats_req) &&
		       offsetof(struct kvmm_admin_tenants_req, block_pages) ==
			       offsetof(struct kvmm_tier_stats_req,
					block_pages) &&
		       offsetof(struct kvmm_admin_tenants_req, reserved) ==
			       offsetof(struct kvmm_tier_stats_req, reserved),
	       "ADMIN_TENANTS' request has TIER_STATS' layout");

static int size_req_in(struct req *rq, uint32_t since, uint32_t *block_pages)
{
	struct kvmm_tier_stats_req q = { 0 };
	int err;

	*block_pages = 0;
	if (!rq->len)
		return 0;
	if (KD_ABI_BEFORE(rq->s, since))
		return -EINVAL;
	err = COPY_IN(rq, q);
	if (err)
		return err;
	if (q.flags || q.pad || !kw_all_zero(q.reserved, sizeof(q.reserved)))
		return -EINVAL;
	*block_pages = q.block_pages;
	return 0;
}

int kd_cmd_admin_tenants(struct req *rq)
{
	struct kvmm_tenants_reply *rep;
	uint32_t block_pages;
	size_t len;
	int err;

	/* a body since ABI 1.22: to a client of before, what 1.21 said */
	err = size_req_in(rq, KD_ABI_SIZE_WORDS, &block_pages);
	if (err)
		return err;
	err = kd_tenants_reply(rq->s->d, block_pages, &rep, &len);
	if (err)
		return err;
	kd_abi_tenants(rep, &len, rq->s->client_minor);
	reply(rq, 0, rep, len, NULL, 0);
	free(rep);
	return 1;
}

int kd_cmd_admin_kill(struct req *rq)
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

int kd_cmd_admin_quota(struct req *rq)
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

int kd_cmd_admin_tenant_limit(struct req *rq)
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

int kd_cmd_admin_log_level(struct req *rq)
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

int kd_cmd_admin_revoke(struct req *rq)
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
int kd_cmd_tier_stats(struct req *rq)
{
	struct kvmm_tier_stats_reply st;
	uint32_t block_pages;
	int err;

	/* a body since ABI 1.21: to a client of before, what 1.20 said */
	err = size_req_in(rq, KD_ABI_TIER_STATS_BODY, &block_pages);
	if (err)
		return err;
	err = kd_cache_tier_stats_of(rq->s->d, block_pages, &st);
	if (err)
		return err;
	/* a client of 1.20 or before gets the reply of before, exactly;
	 * one of 1.22 or before that of 1.22 (no restamp counts), one of
	 * 1.23 that of 1.23 (no cold counts), one of 1.24 that of 1.24
	 * (no weights); the daemon a test plays what it sent (abi_play.c's
	 * table) */
	kd_abi_tier_stats(&st, rq->s->client_minor);
	reply(rq, 0, &st, st.size, NULL, 0);
	rq->s->d->ctr.tier_stats_calls++; /* ADMIN_STATUS, ABI 1.20 */
	return 1;
}
