// SPDX-License-Identifier: MIT
/*
 * Several client processes, each with two threads growing two sequences
 * apiece, concurrently, against one real kvmmd.  Every process writes its
 * own pattern through the K and V pointers of every layer as its
 * sequences grow, inside step_begin/step_end, and checks everything
 * afterwards.  When all are full, the parent collects every process's page
 * ids and checks that no page appears in two sessions; then the processes
 * check their data once more, disconnect, and the daemon returns to idle.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NPROC 3
#define NTHREAD 2
#define SEQS_PER_THREAD 2
#define NSEQ (NTHREAD * SEQS_PER_THREAD)
#define L 2
#define H 2
#define D 64
#define DT 2
#define TOKB (H * D * DT)
#define MAXTOK 2048
#define NBLK (MAXTOK * TOKB / 65536)
#define PPB (2 * L)

static struct kvmm_conn *conn;
static struct kvmm_region *region;
static uint32_t seqs[NSEQ];
static int proc_id;

static uint8_t pat(uint32_t s, uint32_t l, int kv, uint64_t tok)
{
	return (uint8_t)(proc_id * 97 + s * 31 + l * 7 + kv * 3 + tok * 5 + 1);
}

/* One byte per token per (layer, K|V), at a token-dependent offset. */
static uint8_t *at(uint32_t s, uint32_t l, int kv, uint64_t tok)
{
	uint64_t base = kv ? kvmm_seq_v_ptr(region, s, l) :
			     kvmm_seq_k_ptr(region, s, l);

	return (uint8_t *)(base + tok * TOKB + tok % TOKB);
}

static int check_seq(uint32_t s, uint32_t len)
{
	for (uint32_t l = 0; l < L; l++)
		for (int kv = 0; kv < 2; kv++)
			for (uint64_t t = 0; t < len; t++)
				if (*at(s, l, kv, t) != pat(s, l, kv, t))
					return -1;
	return 0;
}

static void *grow(void *arg)
{
	int th = (int)(intptr_t)arg;
	uint32_t len[SEQS_PER_THREAD] = { 0 };
	unsigned int seed = proc_id * 100 + th;

	for (int round = 0;; round++) {
		bool more = false;

		for (int k = 0; k < SEQS_PER_THREAD; k++) {
			uint32_t s = seqs[th * SEQS_PER_THREAD + k];
			uint32_t add = 1 + rand_r(&seed) % 97, n;

			if (len[k] >= MAXTOK)
				continue;
			n = len[k] + add > MAXTOK ? MAXTOK : len[k] + add;
			if (kvmm_seq_extend(region, s, n))
				return (void *)1;
			for (uint32_t l = 0; l < L; l++)
				for (int kv = 0; kv < 2; kv++)
					for (uint64_t t = len[k]; t < n; t++)
						*at(s, l, kv, t) =
							pat(s, l, kv, t);
			len[k] = n;
			more = true;
		}
		if (!more)
			break;
		if (round % 8 == 0) {
			for (int k = 0; k < SEQS_PER_THREAD; k++)
				if (check_seq(seqs[th * SEQS_PER_THREAD + k],
					      len[k]))
					return (void *)2;
		}
	}
	return NULL;
}

static int child(int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "multi" };
	struct kvmm_region_opts ro = { .size = sizeof(ro) };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	pthread_t th[NTHREAD];
	uint32_t ids[NSEQ * NBLK * PPB];
	char go;
	int n = 0;

	if (kvmm_connect(&co, &conn))
		return 10;
	ro.layers = L;
	ro.kv_heads = H;
	ro.head_dim = D;
	ro.dtype_bytes = DT;
	ro.max_seqs = 16;
	ro.max_tokens = MAXTOK;
	if (kvmm_region_create(conn, &ro, &region))
		return 11;
	for (int i = 0; i < NSEQ; i++)
		if (kvmm_seq_open(region, &seqs[i]))
			return 12;
	if (kvmm_step_begin(conn))
		return 13;
	for (int i = 0; i < NTHREAD; i++)
		pthread_create(&th[i], NULL, grow, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREAD; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		if (ret)
			return 14 + (int)(intptr_t)ret;
	}
	if (kvmm_step_end(conn))
		return 17;
	for (int i = 0; i < NSEQ; i++)
		for (uint32_t b = 0; b < NBLK; b++) {
			if (kvmm_seq_block_pages(region, seqs[i], b, ids + n,
						 PPB) != PPB)
				return 18;
			n += PPB;
		}
	if (write(wr, ids, sizeof(ids)) != sizeof(ids))
		return 19;
	if (read(rd, &go, 1) != 1)
		return 20;
	for (int i = 0; i < NSEQ; i++)
		if (check_seq(seqs[i], MAXTOK))
			return 21;
	if (kvmm_get_stats(conn, &ks))
		return 22;
	/* Every page was imported once: NSEQ * NBLK blocks of PPB pages. */
	if (ks.pages_imported != NSEQ * NBLK * PPB)
		return 23;
	for (int i = 0; i < NSEQ; i += 2)
		if (kvmm_seq_close(region, seqs[i]))
			return 24;
	kvmm_disconnect(conn);
	return 0;
}

int main(void)
{
	struct td_daemon d;
	struct kvmm_status_reply st;
	static uint32_t ids[NPROC][NSEQ * NBLK * PPB];
	int up[NPROC][2], down[NPROC][2];
	pid_t pid[NPROC];
	uint8_t *owner;
	int err;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	for (int p = 0; p < NPROC; p++) {
		t_ok(pipe(up[p]));
		t_ok(pipe(down[p]));
		pid[p] = fork();
		t_assert(pid[p] >= 0);
		if (pid[p] == 0) {
			proc_id = p + 1;
			_exit(child(up[p][1], down[p][0]));
		}
	}
	for (int p = 0; p < NPROC; p++) {
		size_t got = 0;

		while (got < sizeof(ids[p])) {
			ssize_t n = read(up[p][0], (char *)ids[p] + got,
					 sizeof(ids[p]) - got);
			if (n <= 0) {
				int s;

				waitpid(pid[p], &s, 0);
				td_dump_log(&d);
				t_fail("child %d died early: status %d", p,
				       WEXITSTATUS(s));
			}
			got += n;
		}
	}
	t_ok(td_status(&d, &st));
	t_assert_eq(st.sessions, NPROC + 1);
	t_assert_eq(st.sequences, NPROC * NSEQ);
	t_assert_eq(st.pages_allocated, NPROC * NSEQ * NBLK * PPB);
	/* No page belongs to two processes (or twice to one). */
	owner = calloc(st.pages_total, 1);
	for (int p = 0; p < NPROC; p++)
		for (size_t i = 0; i < NSEQ * NBLK * PPB; i++) {
			t_assert(ids[p][i] < st.pages_total);
			if (owner[ids[p][i]])
				t_fail("page %u in process %d and %d",
				       ids[p][i], owner[ids[p][i]] - 1, p);
			owner[ids[p][i]] = p + 1;
		}
	free(owner);
	for (int p = 0; p < NPROC; p++) {
		int s;

		t_assert_eq(write(down[p][1], "g", 1), 1);
		waitpid(pid[p], &s, 0);
		if (!WIFEXITED(s) || WEXITSTATUS(s)) {
			td_dump_log(&d);
			t_fail("child %d: status %d", p, WEXITSTATUS(s));
		}
	}
	err = td_wait_idle(&d, 3000, &st);
	if (err) {
		td_dump_log(&d);
		t_fail("not idle: allocated %llu mapped %llu sessions %llu",
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)st.pages_mapped,
		       (unsigned long long)st.sessions);
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
