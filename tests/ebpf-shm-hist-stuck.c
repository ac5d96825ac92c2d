// SPDX-License-Identifier: MIT
/*
 * A histogram row a writer stopped inside of (it bumped seq_begin and
 * one add, then died) is never whole again: the daemon side keeps its
 * last whole copy, says so once, and after TEL_SHM_ROW_STUCK_NS
 * (0.5 s) without a whole copy nor a write tries such a row once a poll
 * instead of 64 times.  200 rows, all
 * stuck, cost a poll about what 200 whole rows do (median of 101 polls
 * each, measured in the same run); before, every poll retried each of
 * them 64 times (about 15 times the whole rows' poll on the 2-core VM).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ebpf-common.h"
#include "vmm/vmm.h"

#define NROWS 200
#define NPOLLS 101

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median time of NPOLLS polls, ns. */
static uint64_t poll_median(struct tel *t)
{
	uint64_t ns[NPOLLS];

	for (int i = 0; i < NPOLLS; i++) {
		uint64_t t0 = kvmm_tel_now_ns();

		t_ok(tel_poll(t));
		ns[i] = kvmm_tel_now_ns() - t0;
	}
	qsort(ns, NPOLLS, sizeof(ns[0]), u64_cmp);
	return ns[NPOLLS / 2];
}

static struct kvmm_hist_key key_of(int i)
{
	return (struct kvmm_hist_key){ .kind = KVMM_TEL_ATTENTION,
				       .tier = (uint8_t)(i % 4),
				       .dst_tier = (uint8_t)(i / 4 % 4),
				       .segments = (uint32_t)(i / 16) };
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true };
	size_t len = kvmm_tel_shm_size(64);
	struct kvmm_tel_shm_hist *h;
	struct kvmm_tel_shm *s;
	uint64_t whole, stuck;
	char log[1 << 14];
	int rows = 0, saved = dup(STDERR_FILENO), said;
	FILE *f = tmpfile();
	struct tel *t;
	ssize_t n;

	t_assert(f && saved >= 0);
	s = aligned_alloc(64, len);
	t_assert(s);
	t_ok(tel_open(&o, &t));
	t_ok(tel_shm_add(t, 7, 0, s, len));
	for (int i = 0; i < NROWS; i++) {
		struct kvmm_hist_key k = key_of(i);

		kvmm_tel_shm_hist_add(s, &k, 1000, 10);
	}
	t_assert_eq(s->counters.hist_dropped, 0);
	for (int i = 0; i < 5; i++)
		t_ok(tel_poll(t));
	whole = poll_median(t);

	/* each row's writer dies inside it: begin bumped, one add done */
	h = kvmm_tel_shm_hists(s);
	for (uint32_t i = 0; i < s->nr_hist; i++) {
		if (!h[i].key)
			continue;
		h[i].seq_begin++;
		h[i].hist.count++;
		rows++;
	}
	t_assert_eq(rows, NROWS);
	t_assert(dup2(fileno(f), STDERR_FILENO) == STDERR_FILENO);
	for (int i = 0; i < 5; i++) {
		t_ok(tel_poll(t));
		ebpf_sleep_ms(200);
	}
	stuck = poll_median(t);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	n = pread(fileno(f), log, sizeof(log) - 1, 0);
	log[n > 0 ? n : 0] = 0;
	fputs(log, stdout);

	/* the last whole copy of every row stands */
	for (int i = 0; i < NROWS; i++) {
		struct kvmm_hist_key k = key_of(i);
		struct kvmm_hist row;

		t_ok(tel_hist_lookup(t, &k, &row));
		t_assert_eq(row.count, 1);
	}
	said = t_count(log, "not read whole nor written");
	printf("poll with %d whole rows %.1f us, with them all stuck %.1f us; "
	       "%d warnings\n",
	       NROWS, whole / 1e3, stuck / 1e3, said);
	t_assert_eq(said, 1);
	t_assert(stuck < 3 * whole);
	tel_close(t);
	free(s);
	return 0;
}
