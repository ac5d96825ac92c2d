// SPDX-License-Identifier: MIT
/*
 * tests/daemon-crash-fuzz's restarts that change the list of sizes or
 * the file straight after the crash (Documentation/tiers.md, "The NVMe
 * partitions" and its table):
 *   - the same sizes and weights in another order: each size takes the
 *     partition that holds its blocks, so each must recover exactly what
 *     a start as before recovers;
 *   - a size removed (three to two: another number of sizes, every
 *     partition formatted; two to one: the whole file formatted, since a
 *     one-size tier never reads a partitioned file's slots), a size
 *     added (every partition formatted) or, of two, one replaced by the
 *     third of 2, 4 and 6 pages at its weight (its partition formatted,
 *     the other's blocks kept exactly), then the list as before, which
 *     finds the same: 0 where the file was formatted, exactly as many of
 *     a replace's kept size;
 *   - another --nvme-size (1 MiB more, or the run's again after that):
 *     partition 0 formatted with a new layout id, so every partition.
 * Where a block comes back, the fuzzer cannot know from its own records
 * how many reached the disk before the kill; a start as before says it
 * (on the file itself, whose bytes are saved after the kill and put
 * back after that start's, so that the start checked is the file's
 * first since the crash; with the drops kvmmd kept for the file while
 * its NVMe tier was out, cf_copy_recovered()).  The restart check then
 * opens every hash byte for byte.
 */
#include <fcntl.h>
#include <unistd.h>

#include "tests/cache-drop-common.h"
#include "tests/daemon-crash-fuzz/crash.h"

static const char cf_split_line[] =
	"it was cut in partitions for several block sizes";
static const char cf_cut_line[] =
	"it was not cut for this list of block sizes and --nvme-size";
static const char cf_payload_line[] = "its blocks have ";
static const char cf_pending_line[] =
	"NVMe drops answered while the tier was out in a run before";

/* The file's bytes into to: SIGKILL leaves every write the kernel took
 * in the page cache, which a read sees. */
static void copy_file(const char *from, const char *to)
{
	static char buf[1 << 20];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		t_fail("%s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		t_fail("%s: %s", to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		t_assert_eq(write(out, buf, (size_t)n), n);
	t_assert_eq(n, 0);
	close(in);
	close(out);
}

/*
 * The start as before runs on nvme itself, not on a copy's path: the
 * drops kvmmd keeps in the run's FILE.nvme-drops (answered while the
 * tier was out, late.c) name the --nvme-path, and a start on another
 * path would not apply them, where the start checked will.  It gets a
 * copy of those drops in a --policy-state of its own (the run's state
 * plus ".copy", so the run's pending drops stay as they are), and the
 * file's bytes, saved first to nvme.copy, are put back after its kill.
 */
uint64_t cf_copy_recovered(const struct cf_shared *sh, const struct cf_sizes *z,
			   const char *nvme, uint64_t seed, uint32_t round,
			   uint64_t *before)
{
	char saved[300], state[300], drops[310], drops_copy[320];
	struct td_daemon d;
	uint64_t sum = 0;

	snprintf(saved, sizeof(saved), "%s.copy", nvme);
	copy_file(nvme, saved);
	snprintf(state, sizeof(state), "%s.copy", sh->state);
	snprintf(drops, sizeof(drops), "%s.nvme-drops", sh->state);
	snprintf(drops_copy, sizeof(drops_copy), "%s.nvme-drops", state);
	cf_state_remove(state);
	if (!access(drops, F_OK))
		copy_file(drops, drops_copy);
	cf_start_daemon_state(&d, sh, z, nvme, seed, round, false, state);
	for (uint32_t s = 0; s < z->n; s++) {
		before[s] = cf_recovered(d.sock, z, s);
		sum += before[s];
	}
	cf_kill_daemon(&d);
	/* what the start wrote (marks, a format) undone */
	t_ok(rename(saved, nvme));
	cf_state_remove(state);
	/* a late round before that left a size unjoined: what it had */
	if (z->late)
		cf_late_expect(z->late, z, before, round);
	return sum;
}

void cf_restart_order_first(struct td_daemon *d, const struct cf_shared *sh,
			    struct cf_sizes *z, const char *nvme, uint64_t seed,
			    uint32_t round, uint64_t *rs, uint32_t *lost)
{
	uint64_t before[CF_SIZES_MAX], sum;
	char was[64], now[64];

	sum = cf_copy_recovered(sh, z, nvme, seed, round, before);
	cf_sizes_arg(z, was, sizeof(was));
	cf_reorder(z, rs);
	cf_start_daemon(d, sh, z, nvme, seed, round, true);
	for (uint32_t s = 0; s < z->n; s++)
		cf_expect_recovered(d, z, s, before[s], round, was, before[s]);
	*lost = 0;
	z->swaps_first++;
	z->swapped_first_back += sum;
	printf("round %u, the restart: --cache-block-pages %s straight after the crash of %s (%llu recovered from a copy of the file): each size's recovered again\n",
	       round - 1, cf_sizes_arg(z, now, sizeof(now)), was,
	       (unsigned long long)sum);
}

enum cf_change { CF_REMOVE, CF_ADD, CF_REPLACE };

/* The index in z of the size of pages, or z->n. */
static uint32_t size_index(const struct cf_sizes *z, uint32_t pages)
{
	uint32_t s = 0;

	while (s < z->n && z->pages[s] != pages)
		s++;
	return s;
}

/*
 * z's list in the file's partition order, changed: the size victim
 * removed or replaced by spare (at its weight), or spare added last (at
 * weight w).  The order is the file's, so no size moves: a replace's
 * kept size is on its partition already.
 */
static void changed_list(const struct cf_sizes *z, struct cf_sizes *t,
			 enum cf_change how, uint32_t victim, uint32_t spare,
			 uint32_t w)
{
	memset(t, 0, sizeof(*t));
	t->nvme_base = z->nvme_base;
	t->nvme_bytes = z->nvme_bytes;
	t->host_bytes = z->host_bytes;
	for (uint32_t k = 0; k < z->n; k++) {
		uint32_t s = z->part[k];

		if (s == victim && how == CF_REMOVE)
			continue;
		t->pages[t->n] = s == victim && how == CF_REPLACE ? spare :
								    z->pages[s];
		t->weight[t->n++] = z->weight[s];
	}
	if (how == CF_ADD) {
		t->pages[t->n] = spare;
		t->weight[t->n++] = w;
	}
	for (uint32_t k = 0; k < t->n; k++)
		t->order[k] = t->part[k] = k;
}

/* A change drawn for z: how, the size changed (victim) and the one of
 * 2, 4 and 6 pages added or put in its place (spare), at weight *w. */
static enum cf_change draw_change(const struct cf_sizes *z, uint64_t *rs,
				  uint32_t *victim, uint32_t *spare,
				  uint32_t *w)
{
	enum cf_change how;

	/* drawn in the order the multi run always drew them */
	*w = 1 + (uint32_t)(cf_rand(rs) % 3);
	how = z->n == 3 ? CF_REMOVE :
	      z->n == 1 ? CF_ADD :
			  (enum cf_change)(cf_rand(rs) % 3);
	*victim = z->part[cf_rand(rs) % z->n];
	/* the one of 2, 4 and 6 pages a two-size list does not name; of
	 * one size, either other */
	*spare = z->n == 1 ? 2 + 2 * (uint32_t)(cf_rand(rs) % 3) : 2;
	while (z->n < 3 && size_index(z, *spare) < z->n)
		*spare = *spare % 6 + 2;
	return how;
}

/*
 * The first start on the changed list t (z's, changed as how says),
 * straight after the crash: each size recovers 0, but for a replace's
 * kept size exactly what the copy's start as before recovered
 * (before[], of z's indexes); the log says why.  The kept count
 * returned.
 */
static uint64_t start_changed(struct td_daemon *d, const struct cf_shared *sh,
			      const struct cf_sizes *z,
			      const struct cf_sizes *t, enum cf_change how,
			      const char *nvme, uint64_t seed, uint32_t round,
			      const uint64_t *before, const char *was)
{
	uint64_t kept = 0;

	cf_start_daemon(d, sh, t, nvme, seed, round, true);
	for (uint32_t k = 0; k < t->n; k++) {
		uint32_t s = size_index(z, t->pages[k]);
		bool keeps = how == CF_REPLACE && s < z->n;

		cf_expect_recovered(d, t, k, keeps ? before[s] : 0, round, was,
				    s < z->n ? before[s] : 0);
		kept += keeps ? before[s] : 0;
	}
	/* why: a one-size tier on a partitioned file; partition 0 not cut
	 * for this count of sizes (or a one-size file); the replaced
	 * size's payload */
	td_log_has(d,
		   how == CF_REPLACE ? cf_payload_line :
		   t->n == 1	     ? cf_split_line :
				       cf_cut_line,
		   true);
	return kept;
}

/*
 * Whether the start d read drops a late round answered while the tier
 * was out (FILE.nvme-drops): a line of a size the list no longer names
 * is skipped (its partition is formatted anew), the others applied as
 * at any start, which the counts of start_changed() hold to.
 */
static bool read_pending(const struct td_daemon *d)
{
	static char log[1 << 20];

	if (td_read_log(d, log, sizeof(log)) < 0)
		t_fail("kvmmd's log: %s", strerror(errno));
	return strstr(log, cf_pending_line);
}

void cf_restart_sizes_changed(struct td_daemon *d, const struct cf_shared *sh,
			      struct cf_sizes *z, const char *nvme,
			      uint64_t seed, uint32_t round, uint64_t *rs,
			      uint32_t *lost)
{
	static const char *const what[] = { "removed", "added", "replaced" };
	uint64_t before[CF_SIZES_MAX], sum, kept;
	uint32_t spare, victim, w;
	enum cf_change how = draw_change(z, rs, &victim, &spare, &w);
	char was[64], mid[64];
	struct cf_sizes t;

	sum = cf_copy_recovered(sh, z, nvme, seed, round, before);
	cf_sizes_arg(z, was, sizeof(was));
	changed_list(z, &t, how, victim, spare, w);
	kept = start_changed(d, sh, z, &t, how, nvme, seed, round, before, was);
	cf_sizes_arg(&t, mid, sizeof(mid));
	z->change_pending += read_pending(d);
	cf_kill_daemon(d);
	/* the list as before: formatted again but for a replace's kept
	 * size, whose partition the order logic finds; a file formatted
	 * for another count of sizes is cut in the order named */
	if (how != CF_REPLACE)
		memcpy(z->part, z->order, sizeof(z->part));
	cf_start_daemon(d, sh, z, nvme, seed, round, true);
	for (uint32_t s = 0; s < z->n; s++)
		cf_expect_recovered(
			d, z, s,
			how == CF_REPLACE && s != victim ? before[s] : 0, round,
			mid, 0);
	td_log_has(d, how == CF_REPLACE ? cf_payload_line : cf_cut_line, true);
	*lost = how == CF_REPLACE ? 1u << victim : (1u << z->n) - 1;
	z->removes += how == CF_REMOVE;
	z->adds += how == CF_ADD;
	z->replaces += how == CF_REPLACE;
	z->change_lost += sum - kept;
	z->replace_kept += kept;
	printf("round %u, the restart: --cache-block-pages %s straight after the crash of %s (%s %u pages; %llu recovered from a copy of the file, %llu kept), then %s again: %s\n",
	       round - 1, mid, was, what[how],
	       how == CF_ADD ? spare : z->pages[victim],
	       (unsigned long long)sum, (unsigned long long)kept, was,
	       how == CF_REPLACE ? "the other size's recovered again" :
				   "every partition formatted");
}

/*
 * sh's records and the drops' held hashes moved from z's indexes to
 * t's: a size both name keeps its records (its hashes' publishes, which
 * the drops before cover); a size t adds starts with none, since its
 * partition is formatted (a size named again after a remove too).
 */
static void adopt_list(struct cf_shared *sh, struct cf_sizes *z,
		       const struct cf_sizes *t)
{
	static struct cf_hash_rec h[CF_HASHES_MAX];
	/* zeroed for cppcheck (uninitvar): each from[k] read is set first */
	uint32_t from[CF_SIZES_MAX] = { 0 };

	memset(h, 0, sizeof(h));
	for (uint32_t k = 0; k < t->n; k++) {
		from[k] = size_index(z, t->pages[k]);
		if (from[k] < z->n)
			memcpy(&h[k * CF_HASHES], &sh->h[from[k] * CF_HASHES],
			       CF_HASHES * sizeof(h[0]));
	}
	memcpy(sh->h, h, sizeof(h));
	for (uint32_t j = 0; j < sh->ndrops; j++) {
		struct cf_drop *dr = &sh->drops[j];
		uint64_t held[sizeof(dr->held) / sizeof(dr->held[0])] = { 0 };

		for (uint32_t k = 0; k < t->n; k++) {
			if (from[k] == z->n)
				continue;
			for (uint32_t x = 0; x < CF_HASHES; x++) {
				uint32_t i = k * CF_HASHES + x;

				if (cf_drop_held(dr, from[k] * CF_HASHES + x))
					held[i / 64] |= 1ULL << (i % 64);
			}
		}
		memcpy(dr->held, held, sizeof(held));
	}
	sh->nsizes = t->n;
	for (uint32_t k = 0; k < t->n; k++)
		sh->layers[k] = t->pages[k] / 2;
	z->n = t->n;
	memcpy(z->pages, t->pages, sizeof(z->pages));
	memcpy(z->weight, t->weight, sizeof(z->weight));
	memcpy(z->order, t->order, sizeof(z->order));
	memcpy(z->part, t->part, sizeof(z->part));
}

void cf_restart_sizes_kept(struct td_daemon *d, struct cf_shared *sh,
			   struct cf_sizes *z, const char *nvme, uint64_t seed,
			   uint32_t round, uint64_t *rs, uint32_t *lost)
{
	static const char *const what[] = { "removed", "added", "replaced" };
	uint64_t before[CF_SIZES_MAX], sum, kept;
	uint32_t spare, victim, w, victim_pages;
	enum cf_change how = draw_change(z, rs, &victim, &spare, &w);
	char was[64], now[64];
	struct cf_sizes t;

	sum = cf_copy_recovered(sh, z, nvme, seed, round, before);
	cf_sizes_arg(z, was, sizeof(was));
	victim_pages = z->pages[victim];
	changed_list(z, &t, how, victim, spare, w);
	kept = start_changed(d, sh, z, &t, how, nvme, seed, round, before, was);
	/* t's sizes that were formatted: all but a replace's kept one */
	*lost = 0;
	for (uint32_t k = 0; k < t.n; k++)
		if (how != CF_REPLACE || t.pages[k] == spare)
			*lost |= 1u << k;
	adopt_list(sh, z, &t);
	z->removes += how == CF_REMOVE;
	z->adds += how == CF_ADD;
	z->replaces += how == CF_REPLACE;
	z->ran_removed += how == CF_REMOVE;
	z->ran_added += how == CF_ADD;
	z->ran_replaced += how == CF_REPLACE;
	z->change_lost += sum - kept;
	z->replace_kept += kept;
	printf("round %u, the restart: --cache-block-pages %s straight after the crash of %s (%s %u pages; %llu recovered from a copy of the file, %llu kept): the rounds go on with it\n",
	       round - 1, cf_sizes_arg(z, now, sizeof(now)), was, what[how],
	       how == CF_ADD ? spare : victim_pages, (unsigned long long)sum,
	       (unsigned long long)kept);
}

void cf_restart_nvme_resized(struct td_daemon *d, const struct cf_shared *sh,
			     struct cf_sizes *z, const char *nvme,
			     uint64_t seed, uint32_t round, uint32_t *lost)
{
	uint64_t before[CF_SIZES_MAX], sum, was_bytes = z->nvme_bytes;
	char list[64];

	sum = cf_copy_recovered(sh, z, nvme, seed, round, before);
	/* grown by 1 MiB, or back to the run's: shrunk */
	z->nvme_bytes = z->nvme_bytes == z->nvme_base ?
				z->nvme_base + (1 << 20) :
				z->nvme_base;
	cf_sizes_arg(z, list, sizeof(list));
	cf_start_daemon(d, sh, z, nvme, seed, round, true);
	z->resizes++;
	if (z->n == 1) {
		/* a changed run's list of one size: a one-size tier keeps
		 * the blocks that still fit ("Restart recovery"): all when
		 * grown, at most as many when shrunk */
		uint64_t got = cf_recovered(d->sock, z, 0);

		if (z->nvme_bytes > was_bytes)
			cf_expect_recovered(d, z, 0, before[0], round, list,
					    before[0]);
		else if (got > before[0])
			t_fail("round %u: --nvme-size %llu after %llu, one size: %llu recovered, more than the %llu before",
			       round, (unsigned long long)z->nvme_bytes,
			       (unsigned long long)was_bytes,
			       (unsigned long long)got,
			       (unsigned long long)before[0]);
		*lost = 0;
		z->resize_lost += sum - got;
		printf("round %u, the restart: --nvme-size %llu straight after the crash of %llu, one size (%llu recovered from a copy of the file): %llu kept\n",
		       round - 1, (unsigned long long)z->nvme_bytes,
		       (unsigned long long)was_bytes, (unsigned long long)sum,
		       (unsigned long long)got);
		return;
	}
	for (uint32_t s = 0; s < z->n; s++)
		cf_expect_recovered(d, z, s, 0, round, list, before[s]);
	td_log_has(d, cf_cut_line, true);
	*lost = (1u << z->n) - 1;
	z->resize_lost += sum;
	printf("round %u, the restart: --nvme-size %llu straight after the crash of %llu (%llu recovered from a copy of the file): every partition formatted\n",
	       round - 1, (unsigned long long)z->nvme_bytes,
	       (unsigned long long)was_bytes, (unsigned long long)sum);
}
