// SPDX-License-Identifier: MIT
/*
 * The shm telemetry counts every block access exactly while the daemon
 * takes slots back under the writers: two writer threads access 3000
 * blocks of a 4096-slot region through libkvmm's recorder (bursts over a
 * window of 256 blocks that moves, so the others go cold and are taken
 * back while they come back), and the daemon side polls (tel_poll())
 * as fast as it can for a few seconds.  At the end (the session removed,
 * its statistics retired) every block's count is exactly its accesses
 * less the accesses its writers saw dropped, and the counters agree.
 * Before, the FROZEN handshake's ABA lost an access or gave it to another
 * block every few seconds (tests/ebpf-shm-slot-interleave has the orders
 * that do it).
 *
 * timeout: 60
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "tests/ebpf-common.h"

#define NKEYS 3000
#define NWRITERS 2
#define BURST 256 /* records of one access probe */
#define SECONDS 4 /* at least, and until MIN_TAKES slots were taken */
#define MAX_SECONDS 40
#define MIN_TAKES 100

static struct kvmm_tel_shm *shm;
static volatile int stop;
static uint64_t accessed[NKEYS], dropped[NKEYS];

static uint64_t key_of(int i)
{
	return 0xabc0000000000000ull + (uint64_t)i * 7919 + 1;
}

/* One access probe of n records of blocks in [base, base + 256). */
static void probe(unsigned int *seed, int base)
{
	uint64_t now = kvmm_tel_now_ns();

	KVMM_TEL_ADD(&shm->counters.events[KVMM_TEL_ACCESS], 1);
	for (int j = 0; j < BURST; j++) {
		int k = (base + rand_r(seed) % 256) % NKEYS;
		struct kvmm_access_rec r = { key_of(k), 1, KVMM_TEL_TIER_GPU,
					     0 };

		if (kvmm_tel_shm_block_access(shm, &r, now))
			__atomic_fetch_add(&dropped[k], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&accessed[k], 1, __ATOMIC_RELAXED);
	}
}

/* Slots taken back so far: each take bumped its slot's generation. */
static uint64_t takes(void)
{
	struct kvmm_tel_shm_block *b = kvmm_tel_shm_blocks(shm);
	uint64_t n = 0;

	for (uint32_t i = 0; i < shm->nr_blocks; i++)
		n += (__atomic_load_n(&b[i].stats.count, __ATOMIC_RELAXED) &
		      KVMM_TEL_SHM_GEN_MASK) >>
		     KVMM_TEL_SHM_GEN_SHIFT;
	return n;
}

static void *writer(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg * 7777 + 1;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		probe(&seed, rand_r(&seed) % NKEYS);
	return NULL;
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true };
	size_t len = kvmm_tel_shm_size(4096);
	uint64_t t0, polls = 0, sum = 0, drops = 0, gens = 0, wrong = 0;
	pthread_t th[NWRITERS];
	struct kvmm_counters c;
	unsigned int seed = 1;
	struct tel *t;

	shm = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(shm != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	t_ok(tel_shm_add(t, 1, 100, shm, len));
	/* every block once: more than half the slots in use */
	for (int i = 0; i < NKEYS; i += BURST)
		probe(&seed, i);
	for (int i = 0; i < NWRITERS; i++)
		t_ok(pthread_create(&th[i], NULL, writer,
				    (void *)(uintptr_t)i));
	t0 = kvmm_tel_now_ns();
	for (;;) {
		uint64_t s = (kvmm_tel_now_ns() - t0) / 1000000000ull;

		/* the slots' generations are read every 256 polls only */
		if (s >= MAX_SECONDS ||
		    (s >= SECONDS && !(polls % 256) && takes() >= MIN_TAKES))
			break;
		t_ok(tel_poll(t));
		polls++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NWRITERS; i++)
		t_ok(pthread_join(th[i], NULL));
	gens = takes();
	t_ok(tel_poll(t));
	tel_shm_remove(t, 1);
	t_ok(tel_poll(t));
	for (int i = 0; i < NKEYS; i++) {
		struct kvmm_block_stats st = { 0 };

		tel_block_lookup(t, key_of(i), &st);
		sum += accessed[i];
		drops += dropped[i];
		if (st.count != accessed[i] - dropped[i] && wrong++ < 5)
			printf("block %d: accessed %llu, %llu dropped, "
			       "counted %llu\n",
			       i, (unsigned long long)accessed[i],
			       (unsigned long long)dropped[i],
			       (unsigned long long)st.count);
	}
	tel_counters(t, &c);
	printf("%llu polls, %llu slots taken back; %llu accesses, %llu "
	       "dropped; counters: accesses %llu, blocks_dropped %llu; %llu "
	       "blocks counted wrong\n",
	       (unsigned long long)polls, (unsigned long long)gens,
	       (unsigned long long)sum, (unsigned long long)drops,
	       (unsigned long long)c.accesses,
	       (unsigned long long)c.blocks_dropped, (unsigned long long)wrong);
	t_assert(gens >= MIN_TAKES);
	t_assert_eq(wrong, 0);
	t_assert_eq(c.accesses, sum);
	t_assert_eq(c.blocks_dropped, drops);
	tel_close(t);
	return 0;
}
