// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: the parent's side of two block sizes on one kvmmd
 * (phase 5, --cache-block-pages naming both, Documentation/tiers.md
 * "Several block sizes"; its per-size drops are in admin.c), and the
 * last reader of every phase.
 *
 *   - fz_size_caps(): each size's TIER_STATS, no tier above its capacity
 *     (the sum's check cannot see one size over while the other is
 *     under);
 *   - fz_check_sizes(): once the daemon is idle, each size's TIER_STATS
 *     adds up to the all-sizes one wherever the sum is a sum, and each
 *     size's ADMIN_TENANTS to the all-sizes table and to the size's
 *     cached blocks, each tenant's admitted less dropped blocks to what
 *     it holds, the tenants' dropped to the size's tiers' drops;
 *   - fz_sizes_end(): after phase 5, both sizes' blocks checked, moved
 *     to NVMe and back, dropped by the parent; after its restart (phase
 *     6) each partition's blocks recovered (but for those a drop mark
 *     covers) and read back;
 *   - fz_read_all(): a reader process that opens every chain of every
 *     size (or every block of them alone, after a restart) and checks
 *     each block it is handed.
 */
#include <unistd.h>

#include "tests/daemon-fuzz/fuzz.h"
#include "tests/lib/daemon.h"

void fz_size_stats(const char *sock, int sz, struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_conn *c;

	t_ok(kc_connect_admin(sock, &c));
	t_ok(kvmm_tier_stats_size(c, fz_ppb(sz), ts, sizeof(*ts)));
	kvmm_disconnect(c);
	t_assert_eq(ts->block_pages, fz_ppb(sz));
}

void fz_size_caps(const struct fz_phase *ph)
{
	struct kvmm_tier_stats_reply ts;

	for (int sz = 0; sz < ph->nr_sizes; sz++) {
		fz_size_stats(ph->sock, sz, &ts);
		for (int t = 0; t < 3; t++)
			if (ts.tiers[t].used_blocks >
			    ts.tiers[t].capacity_blocks)
				t_fail("seed %llu phase %d: blocks of %u pages: tier %s holds %llu blocks, capacity %llu",
				       (unsigned long long)ph->seed, ph->num,
				       fz_ppb(sz), fz_tier_names[t],
				       (unsigned long long)ts.tiers[t]
					       .used_blocks,
				       (unsigned long long)ts.tiers[t]
					       .capacity_blocks);
	}
}

/* ADMIN_TENANTS of one size (block_pages) or every size summed (0). */
static void fz_tenants(const char *sock, uint32_t block_pages,
		       struct kvmm_tenants_reply *rep)
{
	struct kvmm_admin_tenants_req q = { .size = sizeof(q),
					    .block_pages = block_pages };
	struct kvmm_conn *c;
	size_t len = 0;

	memset(rep, 0, KVMM_MSG_MAX);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, block_pages ? &q : NULL,
			block_pages ? sizeof(q) : 0, rep, KVMM_MSG_MAX, &len));
	kvmm_disconnect(c);
	t_assert_eq(rep->entry_size, sizeof(rep->tenants[0]));
}

static const struct kvmm_tenant_info *
fz_tenant_of(const struct kvmm_tenants_reply *rep, uint32_t id)
{
	for (uint32_t i = 0; i < rep->nr; i++)
		if (rep->tenants[i].id == id)
			return &rep->tenants[i];
	return NULL;
}

/*
 * The fields where TIER_STATS of every size is the sizes' sum
 * (kc_tier_stats_add()); an error (the set-up's, the NVMe tier's open or
 * writes) is the first size's that has one, restore_max_ns the largest,
 * so not here.
 */
#define FZ_SUMMED(X)                \
	X(publishes)                \
	X(duplicates)               \
	X(not_cached)               \
	X(prefix_opens)             \
	X(prefix_blocks_asked)      \
	X(prefix_blocks_hit)        \
	X(misses)                   \
	X(busy_misses)              \
	X(migrations_failed)        \
	X(migrations_in_flight)     \
	X(pressure_reclaims)        \
	X(restores_waited)          \
	X(prefix_opens_pending)     \
	X(restores_cancelled)       \
	X(prefix_holes)             \
	X(plan_recomputes_host)     \
	X(plan_recomputes_nvme)     \
	X(held_copies)              \
	X(early_opens)              \
	X(early_reloads)            \
	X(early_reload_failures)    \
	X(quota_reclaims)           \
	X(lower_free_refused)       \
	X(checksum_failures)        \
	X(nvme_read_error_drops)    \
	X(recovered_blocks)         \
	X(nvme_admission_rejects)   \
	X(nvme_invalidate_jobs)     \
	X(nvme_invalidated_blocks)  \
	X(nvme_invalidate_failures) \
	X(nvme_write_returns)       \
	X(nvme_write_outs)          \
	X(blocks_unshared)

#define FZ_TIER_SUMMED(X)  \
	X(capacity_blocks) \
	X(used_blocks)     \
	X(hits)            \
	X(demotions_in)    \
	X(promotions_out)  \
	X(drops)           \
	X(bytes_in)        \
	X(bytes_out)       \
	X(restore_ns)      \
	X(promotions_by_publish)

/* The first field where sum is not a[0] + a[1] (NULL: none); its tier
 * in *tier (-1: not a tier's), the three figures in v[]. */
static const char *fz_sum_differs(const struct kvmm_tier_stats_reply *sum,
				  const struct kvmm_tier_stats_reply *a,
				  int *tier, uint64_t v[3])
{
	*tier = -1;
#define FZ_CMP(f)                                            \
	if (sum->f != a[0].f + a[1].f) {                     \
		v[0] = sum->f, v[1] = a[0].f, v[2] = a[1].f; \
		return #f;                                   \
	}
	FZ_SUMMED(FZ_CMP)
#undef FZ_CMP
	for (int t = 0; t < 3; t++) {
		*tier = t;
#define FZ_CMP(f)                                                   \
	if (sum->tiers[t].f != a[0].tiers[t].f + a[1].tiers[t].f) { \
		v[0] = sum->tiers[t].f, v[1] = a[0].tiers[t].f,     \
		v[2] = a[1].tiers[t].f;                             \
		return #f;                                          \
	}
		FZ_TIER_SUMMED(FZ_CMP)
#undef FZ_CMP
	}
	return NULL;
}

/*
 * Each size's TIER_STATS against the sum: asked between two asks of the
 * sum that agree (nothing moved meanwhile), the sizes must add up to it;
 * each size within its capacities.  Each size's ADMIN_TENANTS: every
 * tenant's cached, admitted and dropped blocks and limit moves add up
 * over the sizes to the all-sizes table, and a size's tenants' cached
 * blocks are the blocks its tiers hold.  ts[] gets each size's stats.
 */
void fz_check_sizes(const struct fz_phase *ph,
		    struct kvmm_tier_stats_reply ts[FZ_SIZES])
{
	struct kvmm_tier_stats_reply sum, again;
	struct kvmm_tenants_reply *all = malloc(KVMM_MSG_MAX), *one[FZ_SIZES];
	const char *field = NULL;
	uint64_t v[3] = { 0 };
	int tier = -1, i;

	for (i = 0; i < 100; i++) {
		cc_settled_stats(ph->sock, &sum);
		for (int sz = 0; sz < FZ_SIZES; sz++)
			fz_size_stats(ph->sock, sz, &ts[sz]);
		cc_settled_stats(ph->sock, &again);
		if (memcmp(&sum, &again, sizeof(sum)))
			continue; /* something moved: ask again */
		field = fz_sum_differs(&sum, ts, &tier, v);
		if (!field)
			break;
	}
	if (field)
		t_fail("seed %llu phase %d: TIER_STATS of every size: %s%s%s%s %llu, the sizes' %llu + %llu",
		       (unsigned long long)ph->seed, ph->num,
		       tier >= 0 ? "tier " : "",
		       tier >= 0 ? fz_tier_names[tier] : "",
		       tier >= 0 ? " " : "", field, (unsigned long long)v[0],
		       (unsigned long long)v[1], (unsigned long long)v[2]);
	if (i == 100)
		t_fail("seed %llu phase %d: TIER_STATS never the same twice in a row when idle",
		       (unsigned long long)ph->seed, ph->num);
	if (sum.nr_sizes != FZ_SIZES || sum.sizes[0] != fz_ppb(0) ||
	    sum.sizes[1] != fz_ppb(1))
		t_fail("seed %llu phase %d: TIER_STATS lists %u sizes (%u, %u), expected %u and %u",
		       (unsigned long long)ph->seed, ph->num, sum.nr_sizes,
		       sum.sizes[0], sum.sizes[1], fz_ppb(0), fz_ppb(1));
	for (int sz = 0; sz < FZ_SIZES; sz++)
		for (int t = 0; t < 3; t++)
			if (ts[sz].tiers[t].used_blocks >
			    ts[sz].tiers[t].capacity_blocks)
				t_fail("seed %llu phase %d: blocks of %u pages: tier %s holds %llu, capacity %llu",
				       (unsigned long long)ph->seed, ph->num,
				       fz_ppb(sz), fz_tier_names[t],
				       (unsigned long long)ts[sz]
					       .tiers[t]
					       .used_blocks,
				       (unsigned long long)ts[sz]
					       .tiers[t]
					       .capacity_blocks);

	t_assert(all);
	fz_tenants(ph->sock, 0, all);
	for (int sz = 0; sz < FZ_SIZES; sz++) {
		uint64_t cached[3] = { 0 }, dropped = 0, drops = 0;

		one[sz] = malloc(KVMM_MSG_MAX);
		t_assert(one[sz]);
		fz_tenants(ph->sock, fz_ppb(sz), one[sz]);
		for (uint32_t k = 0; k < one[sz]->nr; k++) {
			const struct kvmm_tenant_info *e = &one[sz]->tenants[k];
			uint64_t held = e->cached_blocks[0] +
					e->cached_blocks[1] +
					e->cached_blocks[2];

			for (int t = 0; t < 3; t++)
				cached[t] += e->cached_blocks[t];
			dropped += e->dropped_blocks;
			/* what came in less what was dropped is what is
			 * there (tests/cache-tenant-drops.c), where no block
			 * came back from the last run's file uncounted */
			if (!ts[sz].recovered_blocks &&
			    e->admitted_blocks - e->dropped_blocks != held)
				t_fail("seed %llu phase %d: blocks of %u pages: tenant %u admitted %llu, dropped %llu, holds %llu",
				       (unsigned long long)ph->seed, ph->num,
				       fz_ppb(sz), e->id,
				       (unsigned long long)e->admitted_blocks,
				       (unsigned long long)e->dropped_blocks,
				       (unsigned long long)held);
		}
		/* every block a tier dropped is its tenant's drop, and the
		 * parent's drops are among them */
		for (int t = 0; t < 3; t++) {
			drops += ts[sz].tiers[t].drops;
			if (ts[sz].tiers[t].drops <
			    ph->cnt->size_drops[sz].part_dropped[t])
				t_fail("seed %llu phase %d: blocks of %u pages: tier %s dropped %llu, the parent's drops alone %llu",
				       (unsigned long long)ph->seed, ph->num,
				       fz_ppb(sz), fz_tier_names[t],
				       (unsigned long long)ts[sz].tiers[t].drops,
				       (unsigned long long)ph->cnt
					       ->size_drops[sz]
					       .part_dropped[t]);
		}
		if (!ts[sz].recovered_blocks && dropped != drops)
			t_fail("seed %llu phase %d: blocks of %u pages: the tenants dropped %llu, the tiers %llu",
			       (unsigned long long)ph->seed, ph->num,
			       fz_ppb(sz), (unsigned long long)dropped,
			       (unsigned long long)drops);
		for (int t = 0; t < 3; t++)
			if (cached[t] != ts[sz].tiers[t].used_blocks)
				t_fail("seed %llu phase %d: blocks of %u pages: the tenants hold %llu in tier %s, TIER_STATS says %llu",
				       (unsigned long long)ph->seed, ph->num,
				       fz_ppb(sz),
				       (unsigned long long)cached[t],
				       fz_tier_names[t],
				       (unsigned long long)ts[sz]
					       .tiers[t]
					       .used_blocks);
	}
	for (uint32_t k = 0; k < all->nr; k++) {
		const struct kvmm_tenant_info *s = &all->tenants[k];
		const struct kvmm_tenant_info *a = fz_tenant_of(one[0], s->id);
		const struct kvmm_tenant_info *b = fz_tenant_of(one[1], s->id);
		bool ok = a && b;

		for (int t = 0; ok && t < 3; t++)
			ok = s->cached_blocks[t] ==
			     a->cached_blocks[t] + b->cached_blocks[t];
		ok = ok &&
		     s->admitted_blocks ==
			     a->admitted_blocks + b->admitted_blocks &&
		     s->dropped_blocks ==
			     a->dropped_blocks + b->dropped_blocks &&
		     s->limit_moves == a->limit_moves + b->limit_moves;
		if (!ok)
			t_fail("seed %llu phase %d: tenant %u: its two sizes' cached, admitted, dropped blocks and limit moves do not add up to the sums (%s)",
			       (unsigned long long)ph->seed, ph->num, s->id,
			       a && b ? "see kvmmctl tenants" :
					"missing in a size's table");
	}
	printf("  sizes:");
	for (int sz = 0; sz < FZ_SIZES; sz++) {
		const struct kvmm_tier_stats_reply *t = &ts[sz];

		printf("%s %u pages: gpu %llu/%llu host %llu/%llu nvme %llu/%llu, nvme in %llu out %llu drops %llu",
		       sz ? ";" : "", fz_ppb(sz),
		       (unsigned long long)t->tiers[0].used_blocks,
		       (unsigned long long)t->tiers[0].capacity_blocks,
		       (unsigned long long)t->tiers[1].used_blocks,
		       (unsigned long long)t->tiers[1].capacity_blocks,
		       (unsigned long long)t->tiers[2].used_blocks,
		       (unsigned long long)t->tiers[2].capacity_blocks,
		       (unsigned long long)t->tiers[2].demotions_in,
		       (unsigned long long)t->tiers[2].promotions_out,
		       (unsigned long long)t->tiers[2].drops);
	}
	printf("; the sums add up\n");
	for (int sz = 0; sz < FZ_SIZES; sz++)
		free(one[sz]);
	free(all);
}

/*
 * The blocks kvmmd's restart scan left out of partition part because an
 * operator's drop mark covers them (its log's "recovered N of M slots
 * (D damaged headers; K dropped by an operator's drop mark, left out)"
 * line of that partition), or 0 when the log has no such line.
 */
static uint64_t fz_marked_out(const struct td_daemon *d, int part)
{
	static char log[1 << 20];
	char key[64];
	const char *p, *q;

	if (td_read_log(d, log, sizeof(log)) < 0)
		return 0;
	snprintf(key, sizeof(key), "(partition %d of %d): recovered", part,
		 FZ_SIZES);
	p = strstr(log, key);
	q = p ? strstr(p, "headers; ") : NULL;
	return q ? strtoull(q + strlen("headers; "), NULL, 10) : 0;
}

/* Whether block b of chain k is its own (chains 4-11 share their first
 * blocks with chain k % 4: fz_hash()), so each block is counted once. */
static bool fz_own_block(int k, uint32_t b)
{
	return k < 4 || b >= (uint32_t)(k / 4) * 2;
}

/*
 * Where every block of every chain of each size is, each hash asked alone
 * (kvmm_prefix_query(), which touches no policy nor count: cache_query.c)
 * by a process of its own, as the reader; a block not cached is
 * FZ_NOWHERE.
 */
void fz_where(const struct fz_phase *ph,
	      uint8_t where[FZ_SIZES][FZ_CHAINS][FZ_CHAIN_BLOCKS])
{
	const size_t len = FZ_SIZES * FZ_CHAINS * FZ_CHAIN_BLOCKS;
	int fd[2];
	pid_t p;

	memset(where, FZ_NOWHERE, len);
	t_ok(pipe(fd));
	fflush(NULL);
	p = fork();
	t_assert(p >= 0);
	if (!p) {
		struct fz_client c = { .ph = ph, .num = -1 };

		c.conn = cc_connect_lib(ph->sock, "fuzz-where");
		for (int sz = 0; sz < ph->nr_sizes; sz++) {
			struct kvmm_region_opts ro = fz_region_opts(sz);

			fz_ok(&c, kvmm_region_create(c.conn, &ro, &c.r[sz]));
			for (int k = 0; k < FZ_CHAINS; k++)
				for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++) {
					uint64_t h = fz_hash(sz, k, b);
					uint8_t t = FZ_NOWHERE;
					int q = kvmm_prefix_query(c.r[sz], &h,
								  1, &t, 0);

					if (q < 0)
						fz_fail(&c,
							"prefix query of hash %016llx: %d",
							(unsigned long long)h,
							q);
					where[sz][k][b] = q ? t : FZ_NOWHERE;
				}
		}
		kvmm_disconnect(c.conn);
		t_assert_eq(write(fd[1], where, len), (ssize_t)len);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], where, len), (ssize_t)len);
	close(fd[0]);
	close(fd[1]);
}

static const char *fz_where_name(uint8_t t)
{
	return t == FZ_NOWHERE ? "nowhere" : kvmm_query_tier_string(t);
}

/*
 * Before a stop that saves (--nvme-save-on-stop): where each size's
 * blocks are, kept for the restart's check (fz_stop_lost()), and the
 * count of those found against TIER_STATS' (cached[]): a block the
 * tiers count that no lookup finds (or the other way round) is said.
 */
static void fz_stop_where(struct fz_phase *ph, const uint64_t cached[FZ_SIZES])
{
	fz_where(ph, ph->stop_where);
	ph->stop_where_set = true;
	for (int sz = 0; sz < ph->nr_sizes; sz++) {
		uint64_t n[4] = { 0 }, all = 0;

		for (int k = 0; k < FZ_CHAINS; k++)
			for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++) {
				uint8_t t = ph->stop_where[sz][k][b];

				if (fz_own_block(k, b) && t != FZ_NOWHERE) {
					n[t < 4 ? t : 3]++;
					all++;
				}
			}
		printf("  blocks of %u pages before the stop, asked one by one: gpu %llu host %llu nvme %llu moving %llu%s\n",
		       fz_ppb(sz), (unsigned long long)n[0],
		       (unsigned long long)n[1], (unsigned long long)n[2],
		       (unsigned long long)n[3],
		       all == cached[sz] ? "" :
					   " (NOT what TIER_STATS counts)");
	}
}

/* The blocks of size sz cached before the last stop (fz_stop_where()). */
static uint64_t fz_stop_cached(const struct fz_phase *ph, int sz)
{
	uint64_t n = 0;

	for (int k = 0; k < FZ_CHAINS; k++)
		for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++)
			n += fz_own_block(k, b) &&
			     ph->stop_where[sz][k][b] != FZ_NOWHERE;
	return n;
}

void fz_restart_where(struct fz_phase *ph)
{
	if (ph->stop_where_set)
		fz_where(ph, ph->restart_where);
}

/*
 * After a restart on the file a saving stop left (ph->stop_where): how
 * many blocks of size sz cached before the stop are not now.  With say,
 * when some are, each is named with the tier it was in, and so is each
 * one back that was not cached then (a stale copy: it hides a loss from
 * the count); a save without room for all drops some, so the caller
 * says them only when that is a failure.
 */
static uint64_t
fz_stop_lost(const struct fz_phase *ph,
	     const uint8_t now[FZ_SIZES][FZ_CHAINS][FZ_CHAIN_BLOCKS], int sz,
	     bool say)
{
	uint64_t lost = 0, stale = 0;

	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < FZ_CHAINS; k++)
			for (uint32_t b = 0; b < FZ_CHAIN_BLOCKS; b++) {
				uint8_t was = ph->stop_where[sz][k][b];
				uint8_t is = now[sz][k][b];

				if (!fz_own_block(k, b) ||
				    (was == FZ_NOWHERE) == (is == FZ_NOWHERE))
					continue;
				if (!pass) {
					lost += is == FZ_NOWHERE;
					stale += is != FZ_NOWHERE;
				} else if (lost && say) {
					fprintf(stderr,
						"seed %llu phase %d: blocks of %u pages: chain %d block %u hash %016llx: %s before the stop, %s after the restart\n",
						(unsigned long long)ph->seed,
						ph->num, fz_ppb(sz), k, b,
						(unsigned long long)fz_hash(
							sz, k, b),
						fz_where_name(was),
						fz_where_name(is));
				}
			}
	if (lost && say)
		fprintf(stderr,
			"seed %llu phase %d: blocks of %u pages: %llu cached before the stop not recovered, %llu recovered not cached then (stale copies)\n",
			(unsigned long long)ph->seed, ph->num, fz_ppb(sz),
			(unsigned long long)lost, (unsigned long long)stale);
	return lost;
}

/*
 * After a phase of two sizes: the per-size sums (fz_check_sizes()); with
 * clients, both sizes' blocks checked, moved to NVMe and read back from
 * it, and the parent's drops of each size dropped some; after a restart,
 * each size recovered at least what the phase before left it
 * (su->min_recovered_size: the blocks the parent's drops kept on NVMe
 * too, whose headers are written again above the drop's mark, tiers.md
 * "Drop marks"; until 7 December they were left out, and this allowed
 * for as many as the drops kept), and the reader found every recovered
 * block.  left[]: what a restart must recover of each size (its NVMe
 * blocks, or with --nvme-save-on-stop every cached block, as far as its
 * partition holds them).  The scan's count of headers it left out under
 * a drop mark is printed: stale copies of dropped or evicted blocks.
 */
void fz_sizes_end(struct fz_phase *ph, const struct fz_setup *su,
		  const struct td_daemon *d, const uint64_t found[FZ_SIZES],
		  uint64_t left[FZ_SIZES])
{
	struct kvmm_tier_stats_reply ts[FZ_SIZES];
	const struct fz_counts *n = ph->cnt;

	fz_check_sizes(ph, ts);
	if (su->save_ms) {
		uint64_t cached[FZ_SIZES];

		for (int sz = 0; sz < FZ_SIZES; sz++)
			cached[sz] = ts[sz].tiers[0].used_blocks +
				     ts[sz].tiers[1].used_blocks +
				     ts[sz].tiers[2].used_blocks;
		fz_stop_where(ph, cached);
	}
	for (int sz = 0; sz < FZ_SIZES; sz++) {
		const struct fz_drop_counts *dr = &n->size_drops[sz];
		const struct kvmm_tier_info *nv = &ts[sz].tiers[2];
		uint64_t cached = ts[sz].tiers[0].used_blocks +
				  ts[sz].tiers[1].used_blocks + nv->used_blocks;
		uint64_t marked = 0, lost = 0;
		uint32_t pages = fz_ppb(sz);

		/* the policy keeps one NVMe slot spare (cache_setup.c:
		 * "NVMe 39 of 40 slots"), so a save fills one less */
		uint64_t room = nv->capacity_blocks > 1 ?
					nv->capacity_blocks - 1 :
					nv->capacity_blocks;

		left[sz] = su->save_ms && cached < room ? cached :
			   su->save_ms			? room :
							  nv->used_blocks;
		if (su->min_recovered_size[sz] > 0)
			marked = fz_marked_out(d, sz);
		printf("  blocks of %u pages: %llu checked; the parent's drops %llu: dropped %llu/%llu/%llu, kept %llu/%llu/%llu; recovered %llu (%llu left out by a drop mark), found %llu; a restart finds at least %llu\n",
		       pages, (unsigned long long)n->checked_size[sz],
		       (unsigned long long)dr->drops,
		       (unsigned long long)dr->dropped[0],
		       (unsigned long long)dr->dropped[1],
		       (unsigned long long)dr->dropped[2],
		       (unsigned long long)dr->kept[0],
		       (unsigned long long)dr->kept[1],
		       (unsigned long long)dr->kept[2],
		       (unsigned long long)ts[sz].recovered_blocks,
		       (unsigned long long)marked,
		       (unsigned long long)found[sz],
		       (unsigned long long)left[sz]);
		if (su->ms &&
		    (!n->checked_size[sz] || !nv->demotions_in ||
		     !nv->promotions_out ||
		     (su->drop_churn &&
		      !(dr->dropped[0] + dr->dropped[1] + dr->dropped[2]))))
			t_fail("seed %llu phase %d: blocks of %u pages: %llu checked, %llu moved to NVMe, %llu read back, %llu dropped by the parent: each must be more than 0",
			       (unsigned long long)ph->seed, ph->num, pages,
			       (unsigned long long)n->checked_size[sz],
			       (unsigned long long)nv->demotions_in,
			       (unsigned long long)nv->promotions_out,
			       (unsigned long long)(dr->dropped[0] +
						    dr->dropped[1] +
						    dr->dropped[2]));
		if (su->min_recovered_size[sz] >= 0 && ph->stop_where_set)
			lost = fz_stop_lost(ph, ph->restart_where, sz, false);
		/* the save had room for all (left[] is what was cached):
		 * each block cached then is back, whatever stale copies
		 * came back with them and made the count */
		if ((int64_t)ts[sz].recovered_blocks <
			    su->min_recovered_size[sz] ||
		    (lost && fz_stop_cached(ph, sz) <=
				     (uint64_t)su->min_recovered_size[sz])) {
			if (ph->stop_log)
				fprintf(stderr,
					"the last phase's kvmmd's log:\n%s",
					ph->stop_log);
			td_dump_log(d);
			/* after the logs: next to the failure's line */
			if (lost)
				(void)fz_stop_lost(ph, ph->restart_where, sz,
						   true);
			t_fail("seed %llu phase %d: blocks of %u pages: %llu recovered from NVMe (%llu left out by a drop mark), %lld were there or saved at the stop; %llu cached then not back (listed above)",
			       (unsigned long long)ph->seed, ph->num, pages,
			       (unsigned long long)ts[sz].recovered_blocks,
			       (unsigned long long)marked,
			       (long long)su->min_recovered_size[sz],
			       (unsigned long long)lost);
		}
		if (su->read_alone && found[sz] < ts[sz].recovered_blocks)
			t_fail("seed %llu phase %d: blocks of %u pages: %llu recovered from NVMe, the reader found %llu",
			       (unsigned long long)ph->seed, ph->num, pages,
			       (unsigned long long)ts[sz].recovered_blocks,
			       (unsigned long long)found[sz]);
	}
}

/* A chain whole, as a prefix open without actions finds it: the blocks
 * found, each checked. */
static uint32_t fz_read_chain(struct fz_client *c, struct fz_seq *s)
{
	struct kvmm_region *r = c->r[s->sz];
	uint64_t h[FZ_CHAIN_BLOCKS];
	uint32_t nr;

	fz_chain(s->sz, s->chain, h);
	fz_ok(c, kvmm_seq_open_prefix(r, h, FZ_CHAIN_BLOCKS, &s->id, &nr));
	s->len = nr * CC_TPB;
	for (uint32_t b = 0; b < nr; b++)
		fz_check(c, s, b, FZ_FROM_PREFIX);
	fz_ok(c, kvmm_seq_close(r, s->id));
	return nr;
}

/*
 * Each block of a chain that no chain before it has (chains 4-11 share
 * their first 2 or 4 blocks with chain k % 4: fz_hash()), opened by
 * itself, a prefix of one hash: a restart recovers blocks whatever
 * their parents, so one behind a block that is gone is found too.  Its
 * bytes are chain block b's, read as the sequence's block 0.
 */
static uint32_t fz_read_alone(struct fz_client *c, struct fz_seq *s)
{
	struct kvmm_region *r = c->r[s->sz];
	uint64_t h[FZ_CHAIN_BLOCKS];
	uint32_t nr, n = 0;

	fz_chain(s->sz, s->chain, h);
	for (uint32_t b = s->chain < 4 ? 0 : (uint32_t)(s->chain / 4) * 2;
	     b < FZ_CHAIN_BLOCKS; b++) {
		fz_ok(c, kvmm_seq_open_prefix(r, &h[b], 1, &s->id, &nr));
		s->len = nr * CC_TPB;
		if (nr)
			fz_check_as(c, s, b, 0, FZ_FROM_PREFIX);
		n += nr;
		fz_ok(c, kvmm_seq_close(r, s->id));
	}
	return n;
}

uint64_t fz_read_all(const struct fz_phase *ph, bool alone,
		     uint64_t found[FZ_SIZES])
{
	uint64_t n[FZ_SIZES] = { 0 };
	int fd[2];
	pid_t p;

	t_ok(pipe(fd));
	fflush(NULL);
	p = fork();
	t_assert(p >= 0);
	if (!p) {
		struct fz_client c = { .ph = ph, .num = -1 };
		struct fz_seq s = { 0 };

		c.conn = cc_connect_lib(ph->sock, "fuzz-reader");
		for (s.sz = 0; s.sz < ph->nr_sizes; s.sz++) {
			struct kvmm_region_opts ro = fz_region_opts(s.sz);

			fz_ok(&c, kvmm_region_create(c.conn, &ro, &c.r[s.sz]));
			for (s.chain = 0; s.chain < FZ_CHAINS; s.chain++)
				n[s.sz] += alone ? fz_read_alone(&c, &s) :
						   fz_read_chain(&c, &s);
		}
		kvmm_disconnect(c.conn);
		t_assert_eq(write(fd[1], n, sizeof(n)), sizeof(n));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], n, sizeof(n)), sizeof(n));
	close(fd[0]);
	close(fd[1]);
	if (found)
		memcpy(found, n, sizeof(n));
	return n[0] + n[1];
}
