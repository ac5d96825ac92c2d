// SPDX-License-Identifier: MIT
/*
 * tests/daemon-crash-fuzz's starts of kvmmd: the block sizes it names
 * and, in a run of several sizes, how each restart after a crash names
 * them (Documentation/tiers.md, "The NVMe partitions", "Shares by
 * weight"):
 *   - as before (3 of 8 restarts);
 *   - the same sizes and weights in another order (one of 8): each size
 *     must take the partition that holds its blocks, so kvmmd is first
 *     started as before, its per-size recovered counts read, SIGKILLed,
 *     and started in the new order, which must recover exactly as many
 *     in each size;
 *   - other weights (one of 8; not the same cut: 4:2,2:2 is 4:1,2:1):
 *     every partition is formatted, so after a start as before (what
 *     there was to lose) the new weights must recover 0 in every size.
 *     With three sizes half of these keep partition 0's weight and the
 *     weights' sum and swap the other two, where partition 0 keeps its
 *     bytes and only the weights in its superblock say the cut changed.
 * The other three of 8 start straight after the crash, checked against
 * a start as before on a copy of the file: restart_change.c.
 * At every start the log says whether the sizes were put in the file's
 * partition order (`each size takes its partition`): exactly when the
 * list's order is not that one.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"
#include "tests/lib/nvme_layout.h"

#define CF_NVME_SLOTS 16 /* one size: as many slots of 4 pages */
#define CF_MIN_SLOTS 4 /* several: a partition's slots at least */
#define CF_WEIGHT_MAX 3

static const char cf_order_line[] = "each size takes its partition";
static const char cf_shares_line[] =
	"it was cut for other shares of the block sizes";

/* The index in z of the size of pages, or z->n. */
static uint32_t size_index_of(const struct cf_sizes *z, uint32_t pages)
{
	uint32_t s = 0;

	while (s < z->n && z->pages[s] != pages)
		s++;
	return s;
}

void cf_sizes_init(struct cf_sizes *z, struct cf_shared *sh, enum cf_run run,
		   uint64_t *rs)
{
	static const uint32_t all[3] = { 2, 4, 6 };
	uint64_t need = 0, wsum_worst;

	memset(z, 0, sizeof(*z));
	z->run = run;
	if (run == CF_RUN_ONE) {
		z->n = 1;
		z->pages[0] = 4;
		z->nvme_bytes = NT_CAPACITY(CF_NVME_SLOTS, 4 * CC_PAGE);
		z->host_bytes = 2 << 20; /* 6 slots */
	} else {
		uint32_t skip = (uint32_t)(cf_rand(rs) % 3);

		z->n = cf_rand(rs) % 3 == 0 ? 3 : 2;
		for (uint32_t k = 0, s = 0; k < 3; k++)
			if (z->n == 3 || k != skip)
				z->pages[s++] = all[k];
		for (uint32_t s = 0; s < z->n; s++)
			z->weight[s] =
				1 + (uint32_t)(cf_rand(rs) % CF_WEIGHT_MAX);
		/* the file and host memory fixed for the run, so that only
		 * the weights change a cut: each size's partition holds
		 * CF_MIN_SLOTS and its host share one block even at weight 1
		 * beside the others at CF_WEIGHT_MAX */
		wsum_worst = 1 + CF_WEIGHT_MAX * (z->n - 1);
		/* a changed run may name all three */
		if (run == CF_RUN_CHANGED)
			wsum_worst = 1 + CF_WEIGHT_MAX * 2;
		for (uint32_t k = 0; k < 3; k++) {
			uint64_t b = (uint64_t)all[k] * CC_PAGE;
			uint64_t part = CF_MIN_SLOTS * (b + 4096) + 2 * 4096;

			if (run != CF_RUN_CHANGED &&
			    size_index_of(z, all[k]) == z->n)
				continue;
			if (part * wsum_worst > need)
				need = part * wsum_worst;
		}
		z->nvme_bytes = (need + (1 << 20) - 1) >> 20 << 20;
		z->nvme_base = z->nvme_bytes;
		z->host_bytes = 4 << 20;
	}
	for (uint32_t s = 0; s < z->n; s++) {
		z->order[s] = s;
		z->part[s] = s;
	}
	/* a random first order: the file's partitions */
	for (uint32_t s = z->n; s > 1; s--) {
		uint32_t k = (uint32_t)(cf_rand(rs) % s), t = z->order[s - 1];

		z->order[s - 1] = z->order[k];
		z->order[k] = t;
	}
	memcpy(z->part, z->order, sizeof(z->part));
	sh->nsizes = z->n;
	for (uint32_t s = 0; s < z->n; s++)
		sh->layers[s] = z->pages[s] / 2;
}

const char *cf_sizes_arg(const struct cf_sizes *z, char *buf, size_t len)
{
	size_t at = 0;

	if (z->n == 1) {
		snprintf(buf, len, "%u", z->pages[0]);
		return buf;
	}
	for (uint32_t k = 0; k < z->n && at < len; k++)
		at += (size_t)snprintf(buf + at, len - at, "%s%u:%u",
				       k ? "," : "", z->pages[z->order[k]],
				       z->weight[z->order[k]]);
	return buf;
}

void cf_start_daemon(struct td_daemon *d, const struct cf_shared *sh,
		     const struct cf_sizes *z, const char *nvme, uint64_t seed,
		     uint32_t round, bool failing)
{
	cf_start_daemon_state(d, sh, z, nvme, seed, round, failing, sh->state);
}

void cf_state_remove(const char *state)
{
	static const char *const beside[] = { "", ".tmp", ".lock",
					      ".nvme-drops",
					      ".nvme-drops.tmp" };
	char path[300];

	for (size_t k = 0; k < sizeof(beside) / sizeof(beside[0]); k++) {
		snprintf(path, sizeof(path), "%s%s", state, beside[k]);
		unlink(path);
	}
}

void cf_start_daemon_state(struct td_daemon *d, const struct cf_shared *sh,
			   const struct cf_sizes *z, const char *nvme,
			   uint64_t seed, uint32_t round, bool failing,
			   const char *state)
{
	char sizes[64], nvme_size[32], host[32];
	/* --policy-state: a drop answered while the NVMe tier is out is
	 * kept in FILE.nvme-drops across the restarts (late.c) */
	const char *argv[] = {
		"--cache-block-pages", cf_sizes_arg(z, sizes, sizeof(sizes)),
		"--cache-gpu-blocks", "3", "--host-mem", host, "--nvme-path",
		nvme, "--nvme-size", nvme_size, "--nvme-save-on-stop", "0",
		"--cache-scope", seed & 1 ? "uid" : "shared", "--policy-state",
		state,
		/* the clients' uids reach the socket */
		sh->uids ? "--socket-mode" : NULL, "0666", NULL
	};

	snprintf(nvme_size, sizeof(nvme_size), "%llu",
		 (unsigned long long)z->nvme_bytes);
	snprintf(host, sizeof(host), "%llu", (unsigned long long)z->host_bytes);
	if (failing && (round & 1))
		setenv("KVMMD_TEST_MIGRATE_FAIL", "nvme-invalidate:1+", 1);
	td_start_ok(d, argv);
	unsetenv("KVMMD_TEST_MIGRATE_FAIL");
	/* mkdtemp made it 0700 */
	if (sh->uids)
		t_ok(chmod(d->dir, 0711));
	/* the file's partition order kept, said when the list's is another */
	if (z->n > 1)
		td_log_has(d, cf_order_line,
			   memcmp(z->order, z->part,
				  z->n * sizeof(z->order[0])));
}

uint64_t cf_recovered(const char *sock, const struct cf_sizes *z, uint32_t s)
{
	struct kvmm_tier_stats_reply ts;
	struct kvmm_conn *c;

	if (z->n == 1)
		return cd_recovered(sock);
	cc_settled_stats(sock, &ts);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kvmm_tier_stats_size(c, z->pages[s], &ts, sizeof(ts)));
	kvmm_disconnect(c);
	t_assert_eq(ts.block_pages, z->pages[s]);
	return ts.recovered_blocks;
}

void cf_kill_daemon(struct td_daemon *d)
{
	int st;

	t_ok(kill(d->pid, SIGKILL));
	t_assert_eq(waitpid(d->pid, &st, 0), d->pid);
	/* one that ended by itself meanwhile (a sanitizer's report, an
	 * abort in its recovery) is no start to count on */
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
		td_dump_log(d);
		t_fail("kvmmd ended by itself (status %#x) before the kill",
		       st);
	}
	d->pid = 0; /* reaped: td_stop() only removes its directory */
	td_stop(d);
}

/* Whether weights a and b cut the file alike (one a multiple of the
 * other). */
static bool same_cut(const uint32_t *a, const uint32_t *b, uint32_t n)
{
	uint32_t sa = 0, sb = 0;

	for (uint32_t s = 0; s < n; s++) {
		sa += a[s];
		sb += b[s];
	}
	for (uint32_t s = 0; s < n; s++)
		if (a[s] * sb != b[s] * sa)
			return false;
	return true;
}

/* Other weights: with three sizes, half the time partition 0's kept and
 * the other two swapped (when they differ), else drawn anew. */
static void reweigh(struct cf_sizes *z, uint64_t *rs)
{
	uint32_t w[CF_SIZES_MAX];
	uint32_t a = z->part[1], b = z->n == 3 ? z->part[2] : a;

	memcpy(w, z->weight, sizeof(w));
	if (z->n == 3 && z->weight[a] != z->weight[b] && cf_rand(rs) & 1) {
		w[a] = z->weight[b];
		w[b] = z->weight[a];
	} else {
		do {
			for (uint32_t s = 0; s < z->n; s++)
				w[s] = 1 +
				       (uint32_t)(cf_rand(rs) % CF_WEIGHT_MAX);
		} while (same_cut(w, z->weight, z->n));
	}
	memcpy(z->weight, w, sizeof(w));
}

void cf_reorder(struct cf_sizes *z, uint64_t *rs)
{
	uint32_t was[CF_SIZES_MAX];

	memcpy(was, z->order, sizeof(was));
	do {
		for (uint32_t s = z->n; s > 1; s--) {
			uint32_t k = (uint32_t)(cf_rand(rs) % s);
			uint32_t t = z->order[s - 1];

			z->order[s - 1] = z->order[k];
			z->order[k] = t;
		}
	} while (!memcmp(was, z->order, z->n * sizeof(was[0])));
}

/*
 * The restart's kind, drawn (0-7): the multi run's as the comment on
 * top says.  A changed run: as before (2 of 8), other weights after a
 * start as before (4, 2 of 8; a list of one size: a size added), a size
 * removed, added or replaced and kept (8, 3 of 8), another --nvme-size
 * (7, 1 of 8).  A late run: a late start (9, 6 of 8), as before (1 of
 * 8), a size removed, added or replaced then the list as before (6, 1 of
 * 8: what a drop answered while the tier was out and still pending in
 * --policy-state's FILE.nvme-drops does then, late.c).  One size: a late
 * start in one of 4 restarts.
 */
enum { CF_KIND_SAME = 0, CF_KIND_KEPT = 8, CF_KIND_LATE = 9 };

static uint32_t restart_kind(const struct cf_sizes *z, uint64_t *rs)
{
	uint32_t k;

	if (z->late && z->late->last)
		return CF_KIND_SAME;
	switch (z->run) {
	case CF_RUN_ONE:
		return cf_rand(rs) % 4 == 0 ? CF_KIND_LATE : CF_KIND_SAME;
	case CF_RUN_MULTI:
		return (uint32_t)(cf_rand(rs) % 8);
	case CF_RUN_LATE:
		k = (uint32_t)(cf_rand(rs) % 8);
		return k < 6 ? CF_KIND_LATE : k == 6 ? CF_KIND_SAME : 6;
	case CF_RUN_CHANGED:
		k = (uint32_t)(cf_rand(rs) % 8);
		if (k < 2)
			return CF_KIND_SAME;
		if (k < 4 && z->n > 1)
			return 4;
		return k == 7 ? 7 : CF_KIND_KEPT;
	}
	return CF_KIND_SAME;
}

void cf_restart(struct td_daemon *d, struct cf_shared *sh, struct cf_sizes *z,
		const char *nvme, uint64_t seed, uint32_t round, uint64_t *rs,
		struct cf_restart *rc, uint32_t *lost)
{
	uint32_t kind = restart_kind(z, rs);
	uint64_t before[CF_SIZES_MAX] = { 0 }, sum = 0;
	char was[64], now[64];

	*lost = 0;
	if (kind < 3) {
		z->same++;
		cf_start_daemon(d, sh, z, nvme, seed, round, true);
	} else if (kind == 5) {
		cf_restart_order_first(d, sh, z, nvme, seed, round, rs, lost);
	} else if (kind == 6) {
		cf_restart_sizes_changed(d, sh, z, nvme, seed, round, rs, lost);
	} else if (kind == 7) {
		cf_restart_nvme_resized(d, sh, z, nvme, seed, round, lost);
	} else if (kind == CF_KIND_KEPT) {
		cf_restart_sizes_kept(d, sh, z, nvme, seed, round, rs, lost);
	} else if (kind == CF_KIND_LATE) {
		cf_restart_late(d, sh, z, nvme, seed, round, rs, lost);
	}
	if (kind != 3 && kind != 4) {
		for (uint32_t s = 0; s < z->n; s++)
			rc->recovered[s] = cf_recovered(d->sock, z, s);
		/* a late round's sizes that never joined: what they had */
		if (z->late && kind != CF_KIND_LATE)
			cf_late_expect(z->late, z, rc->recovered, round);
		return;
	}
	/* what a start as before recovers: the other start's measure */
	cf_start_daemon(d, sh, z, nvme, seed, round, false);
	for (uint32_t s = 0; s < z->n; s++) {
		before[s] = cf_recovered(d->sock, z, s);
		sum += before[s];
	}
	if (z->late)
		cf_late_expect(z->late, z, before, round);
	cf_kill_daemon(d);
	cf_sizes_arg(z, was, sizeof(was));
	if (kind == 3)
		cf_reorder(z, rs);
	else
		reweigh(z, rs);
	cf_start_daemon(d, sh, z, nvme, seed, round, true);
	cf_sizes_arg(z, now, sizeof(now));
	for (uint32_t s = 0; s < z->n; s++) {
		rc->recovered[s] = cf_recovered(d->sock, z, s);
		cf_expect_recovered(d, z, s, kind == 3 ? before[s] : 0, round,
				    was, before[s]);
	}
	if (kind == 3) {
		z->swaps++;
		z->swapped_back += sum;
	} else {
		/* partition 0 says why it is formatted anew */
		td_log_has(d, cf_shares_line, true);
		z->reweights++;
		z->ran_reweighed += z->run == CF_RUN_CHANGED;
		z->reweight_lost += sum;
		*lost = (1u << z->n) - 1;
	}
	printf("round %u, the restart: --cache-block-pages %s after %s (%llu recovered there): %s\n",
	       round - 1, now, was, (unsigned long long)sum,
	       kind == 3 ? "each size's recovered again" :
			   "every partition formatted");
}

void cf_expect_recovered(const struct td_daemon *d, const struct cf_sizes *z,
			 uint32_t s, uint64_t want, uint32_t round,
			 const char *was, uint64_t had)
{
	uint64_t got = cf_recovered(d->sock, z, s);
	char now[64];

	if (got == want)
		return;
	td_dump_log(d);
	t_fail("round %u: --cache-block-pages %s --nvme-size %llu after %s: size %u recovered %llu blocks, where %s recovered %llu (expected %llu)",
	       round, cf_sizes_arg(z, now, sizeof(now)),
	       (unsigned long long)z->nvme_bytes, was, z->pages[s],
	       (unsigned long long)got, was, (unsigned long long)had,
	       (unsigned long long)want);
}
