// SPDX-License-Identifier: MIT
/*
 * The shm source reads a histogram row whole: a forked client process
 * records restores of exactly 1 MiB in exactly 1 ms through libkvmm's
 * recorder as fast as it can while the daemon side polls; every latency
 * increment the sink gets reads 1 MiB and 1 ms per transfer, and the
 * totals at the end equal what the client recorded.  Before, count,
 * sum_ns and sum_bytes were read one after the other while the client
 * added to them, and the cost model got increments such as 1.5 ms or
 * 0.5 MiB per transfer.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>

#include "tests/ebpf-common.h"

static uint64_t fed, bad, total;

static void on_latency(void *arg, const struct kvmm_hist_key *k, uint64_t count,
		       uint64_t sum_ns, uint64_t sum_bytes)
{
	fed++;
	total += count;
	if (sum_ns != count * 1000000 || sum_bytes != count * (1 << 20))
		bad++;
}

int main(void)
{
	struct tel_opts o = { .size = sizeof(o),
			      .mode = TEL_MODE_SHM,
			      .quiet = true };
	size_t len = kvmm_tel_shm_size(4096);
	struct kvmm_hist_key key = { .kind = KVMM_TEL_RESTORE,
				     .tier = KVMM_TEL_TIER_HOST,
				     .dst_tier = KVMM_TEL_TIER_GPU };
	volatile uint64_t *done;
	struct kvmm_tel_shm *s;
	struct kvmm_hist h;
	struct tel *t;
	pid_t pid;
	int ws;

	s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	done = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	t_assert(s != MAP_FAILED && done != MAP_FAILED);
	t_ok(tel_open(&o, &t));
	t_ok(tel_shm_add(t, 1, 0, s, len));
	tel_set_sink(t, &(struct tel_sink){ .latency = on_latency });
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		while (!done[0]) {
			kvmm_tel_restore(s, 7, KVMM_TEL_TIER_HOST, 1 << 20,
					 1000000);
			done[1]++;
		}
		_exit(0);
	}
	for (int i = 0; i < 50000; i++)
		t_ok(tel_poll(t));
	done[0] = 1;
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) &&
		 !WEXITSTATUS(ws));
	t_ok(tel_poll(t));
	t_ok(tel_hist_lookup(t, &key, &h));
	printf("%llu increments fed, %llu not 1 MiB / 1 ms a transfer; %llu "
	       "restores recorded\n",
	       (unsigned long long)fed, (unsigned long long)bad,
	       (unsigned long long)done[1]);
	t_assert_eq(bad, 0);
	t_assert(fed > 1);
	t_assert_eq(h.count, done[1]);
	t_assert_eq(total, done[1]);
	t_assert_eq(h.sum_ns, done[1] * 1000000);
	t_assert_eq(h.sum_bytes, done[1] << 20);
	tel_close(t);
	return 0;
}
