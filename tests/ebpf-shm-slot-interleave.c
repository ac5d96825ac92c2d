// SPDX-License-Identifier: MIT
/*
 * The block slot protocol of the shm telemetry (ebpf/telemetry_shm.h)
 * loses no increment and gives none to another block, in every order of
 * its shared accesses: the real writer (kvmm_tel_shm_block_access()) and
 * the real take (kvmm_tel_shm_block_take()) run in threads that stop
 * before each shared access (the header's KVMM_TEL_SHM_STEP() hook), and
 * a scheduler runs every interleaving of them up to a few preemptions
 * (a switch away from a thread that could go on; switches at a thread's
 * end are free), each from a fresh region.  The daemon thread reads the
 * slot's key, then its word, credits the growth to the key as kvmmd does,
 * and takes the slot back whenever the count is all merged (kvmmd waits
 * for idle polls; the writers cannot tell).  At the end each key's
 * credited count plus what its slots hold must be exactly its accesses.
 *
 * Before, a writer that checked its key, then lost the slot to a take
 * (count FROZEN -> 0) and a new claimer, counted in the slot anyway: one
 * access of K1 lost (no claimer) or credited to K2 (a claimer).
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static void step_hook(void);
#define KVMM_TEL_SHM_STEP() step_hook()

#include "tests/ebpf-common.h"

#define MAX_ACTORS 4
#define MAX_STEPS 512
#define NSLOTS 64

/* ---- a scheduler of threads that stop at each step ---- */

struct actor {
	pthread_t th;
	sem_t go;
	bool done; /* its run's actor returned */
	void (*fn)(int arg); /* set while the thread waits on go */
	int arg;
};

static struct actor actors[MAX_ACTORS];
static int nactors;
static sem_t back;
static __thread int self = -1;

/* The hook: hand back to the scheduler, wait for the next turn. */
static void step_hook(void)
{
	if (self < 0)
		return; /* the set-up, unscheduled */
	sem_post(&back);
	sem_wait(&actors[self].go);
}

/* A thread runs an actor each run it is started in, until quit. */
static bool quit;

static void *actor_main(void *p)
{
	struct actor *a = p;

	self = (int)(a - actors);
	for (;;) {
		sem_wait(&a->go);
		if (quit)
			return NULL;
		a->fn(a->arg);
		a->done = true;
		sem_post(&back);
	}
}

static void actors_start(void)
{
	t_ok(sem_init(&back, 0, 0));
	for (int i = 0; i < MAX_ACTORS; i++) {
		t_ok(sem_init(&actors[i].go, 0, 0));
		t_ok(pthread_create(&actors[i].th, NULL, actor_main,
				    &actors[i]));
	}
}

static void actors_stop(void)
{
	quit = true;
	for (int i = 0; i < MAX_ACTORS; i++) {
		sem_post(&actors[i].go);
		t_ok(pthread_join(actors[i].th, NULL));
		sem_destroy(&actors[i].go);
	}
}

/* One run's choices: at step k, the rank[k]-th of order[k] (the thread
 * that ran last first, if it can go on, then the others by index). */
struct trace {
	int n;
	int rank[MAX_STEPS];
	int nalt[MAX_STEPS];
	int order[MAX_STEPS][MAX_ACTORS];
	int preempts[MAX_STEPS]; /* before step k */
	bool prev_on[MAX_STEPS]; /* order[k][0] is the thread that ran */
};

/* Run the actors, following prefix (plen choices), then no preemption. */
static void run_schedule(struct trace *tr, const int *prefix, int plen)
{
	int k, prev = -1, preempts = 0;

	for (int i = 0; i < nactors; i++)
		actors[i].done = false;
	for (k = 0;; k++) {
		int n = 0, r, a;

		t_assert(k < MAX_STEPS);
		tr->prev_on[k] = prev >= 0 && !actors[prev].done;
		if (tr->prev_on[k])
			tr->order[k][n++] = prev;
		for (int i = 0; i < nactors; i++)
			if (!actors[i].done && i != prev)
				tr->order[k][n++] = i;
		if (!n)
			break;
		r = k < plen ? prefix[k] : 0;
		t_assert(r < n); /* the runs replay alike */
		a = tr->order[k][r];
		tr->rank[k] = r;
		tr->nalt[k] = n;
		tr->preempts[k] = preempts;
		if (tr->prev_on[k] && a != prev)
			preempts++;
		sem_post(&actors[a].go);
		sem_wait(&back);
		prev = a;
	}
	tr->n = k;
}

/* The next schedule after tr with at most max_preempts: its length, or
 * -1 when every one was run. */
static int next_schedule(const struct trace *tr, int *prefix, int max_preempts)
{
	for (int k = tr->n - 1; k >= 0; k--) {
		for (int r = tr->rank[k] + 1; r < tr->nalt[k]; r++) {
			int p = tr->preempts[k] + (tr->prev_on[k] ? 1 : 0);

			if (p > max_preempts)
				continue;
			for (int i = 0; i < k; i++)
				prefix[i] = tr->rank[i];
			prefix[k] = r;
			return k + 1;
		}
	}
	return -1;
}

/* ---- the model: a region, writers, a daemon ---- */

static struct kvmm_tel_shm *shm;
static size_t shm_len;
static uint64_t keys[3]; /* K1, K2 (same home slot), 0 = none */
static uint32_t home;
static uint64_t credited[2], accessed[2];
static int dropped;
/* the daemon's view of the home slot */
static uint64_t view_key;
static uint32_t view_seen;
static int takes;

static int key_index(uint64_t h)
{
	return h == keys[0] ? 0 : h == keys[1] ? 1 : -1;
}

static uint32_t home_of(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (NSLOTS - 1);
}

/* A client's access of keys[which]: kvmm_tel_access() of one record. */
static void writer(int which)
{
	struct kvmm_access_rec r = { keys[which], 1, KVMM_TEL_TIER_GPU, 0 };

	KVMM_TEL_ADD(&shm->counters.events[KVMM_TEL_ACCESS], 1);
	if (kvmm_tel_shm_block_access(shm, &r, kvmm_tel_now_ns()))
		dropped++;
	else
		accessed[which]++;
}

/* kvmmd's polls of the home slot (shm_read(), ebpf/telemetry_shm_source.c),
 * each taking it back if it can. */
static void daemon_polls(int rounds)
{
	struct kvmm_tel_shm_block *b = &kvmm_tel_shm_blocks(shm)[home];

	for (int i = 0; i < rounds; i++) {
		uint64_t h, w;
		int k;

		KVMM_TEL_SHM_STEP();
		h = __atomic_load_n(&b->hash, __ATOMIC_ACQUIRE);
		if (h != view_key) {
			view_key = h;
			view_seen = 0;
		}
		if (!h)
			continue;
		KVMM_TEL_SHM_STEP();
		w = __atomic_load_n(&b->stats.count, __ATOMIC_ACQUIRE);
		t_assert(!(w & KVMM_TEL_SHM_FROZEN));
		k = key_index(h);
		t_assert(k >= 0);
		credited[k] +=
			(uint32_t)(kvmm_tel_shm_word_count(w) - view_seen);
		view_seen = kvmm_tel_shm_word_count(w);
		if (kvmm_tel_shm_block_take(b, w)) {
			view_key = 0;
			view_seen = 0;
			takes++;
		}
	}
}

struct scenario {
	const char *name;
	uint32_t k1_before; /* K1's accesses before (its slot claimed) */
	int rounds; /* the daemon's polls */
	int writers[MAX_ACTORS - 1]; /* key index + 1, 0 ends (if short) */
	int max_preempts;
};

/* A fresh region; K1 accessed k1_before times, all merged already. */
static void setup(const struct scenario *sc)
{
	t_ok(kvmm_tel_shm_init(shm, shm_len));
	shm->enabled = 1;
	credited[0] = credited[1] = accessed[0] = accessed[1] = 0;
	dropped = takes = 0;
	view_key = 0;
	view_seen = 0;
	for (uint32_t i = 0; i < sc->k1_before; i++)
		writer(0);
	if (sc->k1_before) {
		view_key = keys[0];
		view_seen = sc->k1_before;
		credited[0] = sc->k1_before;
	}
	nactors = 0;
	actors[nactors].fn = daemon_polls;
	actors[nactors++].arg = sc->rounds;
	for (int i = 0; i < MAX_ACTORS - 1 && sc->writers[i]; i++) {
		actors[nactors].fn = writer;
		actors[nactors++].arg = sc->writers[i] - 1;
	}
}

/* Every key's credited count plus what its slots still hold: exactly
 * its accesses.  0, or 1 with what is wrong printed. */
static int check(const struct scenario *sc, const struct trace *tr)
{
	struct kvmm_tel_shm_block *b = kvmm_tel_shm_blocks(shm);
	uint64_t total[2] = { credited[0], credited[1] };
	int bad = dropped != 0;

	for (uint32_t i = 0; i < NSLOTS; i++) {
		uint64_t h = b[i].hash, w = b[i].stats.count;
		uint32_t c = kvmm_tel_shm_word_count(w);
		int k = key_index(h);

		if (w & KVMM_TEL_SHM_FROZEN)
			bad = 1;
		if (!h) {
			bad |= c != 0; /* counted in no one's slot */
			continue;
		}
		if (k < 0) {
			bad = 1;
			continue;
		}
		total[k] += i == home && h == view_key ? c - view_seen : c;
	}
	if (total[0] != accessed[0] || total[1] != accessed[1])
		bad = 1;
	if (!bad)
		return 0;
	printf("%s: K1 accessed %llu counted %llu, K2 accessed %llu counted "
	       "%llu, %d dropped, %d takes; schedule",
	       sc->name, (unsigned long long)accessed[0],
	       (unsigned long long)total[0], (unsigned long long)accessed[1],
	       (unsigned long long)total[1], dropped, takes);
	for (int k = 0; k < tr->n; k++)
		printf(" %d", tr->order[k][tr->rank[k]]);
	printf(" (0: daemon)\n");
	return 1;
}

int main(void)
{
	static const struct scenario scs[] = {
		{ "K1 | take", 3, 1, { 1 }, 4 },
		{ "K1 | take | K2 claims", 3, 1, { 1, 2 }, 3 },
		{ "K1 | two takes | K2 claims", 3, 2, { 1, 2 }, 2 },
		{ "K1 | K1 | take", 3, 1, { 1, 1 }, 2 },
		{ "free slot: K1 claims | K2 claims | two takes",
		  0,
		  2,
		  { 1, 2 },
		  2 },
		{ "free slot: K1 | K1 | K2 | two takes", 0, 2, { 1, 1, 2 }, 1 },
		{ "K1 | K1 | K2 | two takes", 3, 2, { 1, 1, 2 }, 1 },
	};
	static struct trace tr;
	int prefix[MAX_STEPS], plen, failed = 0;
	uint64_t runs_all = 0;

	shm_len = kvmm_tel_shm_size(NSLOTS);
	shm = aligned_alloc(64, shm_len);
	t_assert(shm);
	actors_start();
	keys[0] = 0x1111000000000001ull;
	home = home_of(keys[0]);
	for (uint64_t k = 2; !keys[1]; k++)
		if (home_of(k) == home && k != keys[0])
			keys[1] = k;

	for (size_t s = 0; s < sizeof(scs) / sizeof(scs[0]); s++) {
		const struct scenario *sc = &scs[s];
		uint64_t runs = 0, fails = 0, took = 0;

		plen = 0;
		do {
			setup(sc);
			run_schedule(&tr, prefix, plen);
			runs++;
			took += takes > 0;
			if (check(sc, &tr) && ++fails >= 3)
				break;
			plen = next_schedule(&tr, prefix, sc->max_preempts);
		} while (plen >= 0);
		printf("%-46s %6llu schedules (%llu with a take), %llu wrong\n",
		       sc->name, (unsigned long long)runs,
		       (unsigned long long)took, (unsigned long long)fails);
		failed += fails > 0;
		runs_all += runs;
		t_assert(took > 0);
	}
	printf("%llu schedules in all\n", (unsigned long long)runs_all);
	actors_stop();
	free(shm);
	t_assert_eq(failed, 0);
	return 0;
}
