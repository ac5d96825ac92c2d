// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * NVMe admission by use count, with a real kvmmd (--nvme-admit-uses 2)
 * and client processes: room for 3 cached blocks on the GPU and 6 in
 * host memory; content 0 (three blocks) is published and then used again
 * by a second sequence (two uses), content 1 is published once.  More
 * contents push both out of the host tier: content 0 is written to NVMe
 * and comes back byte-identical; contents 1 and 2 are dropped instead
 * (counted in nvme_admission_rejects) and are misses.
 */
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 3

static uint64_t hash_of(int content, int b)
{
	return 0x200000ull * (content + 1) + b + 1;
}

/* A writer process: content k into a new sequence, published, closed. */
static void write_content(const char *sock, int k)
{
	uint64_t h[NB];

	for (int b = 0; b < NB; b++)
		h[b] = hash_of(k, b);
	t_assert_eq(cc_publish_content(sock, h, NB, 300 + k, NULL), 0);
}

/* A reader process: open on content k, expect nb blocks from tier
 * (0 gpu, 1 host, 2 nvme, -1 any), check the bytes. */
static void read_content(const char *sock, int k, uint32_t nb, int tier)
{
	pid_t p = fork();

	if (p == 0) {
		struct cc c;
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[NB * CC_PPB];
		uint64_t h[NB];

		for (int b = 0; b < NB; b++)
			h[b] = hash_of(k, b);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, NB, &rep, ids);
		if (rep.nr_blocks != nb)
			t_fail("content %d: %u blocks, expected %u (gpu %u host %u nvme %u)",
			       k, rep.nr_blocks, nb, rep.from_gpu,
			       rep.from_host, rep.from_nvme);
		if (tier == 0)
			t_assert_eq(rep.from_gpu, nb);
		if (tier == 2)
			t_assert_eq(rep.from_nvme, nb);
		cc_check(&c, ids, nb, 300 + k);
		cc_seq_close(&c, rep.seq_id, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char nvme[256];
	struct td_daemon d;
	struct kvmm_tier_stats_reply ts;
	int r;

	snprintf(nvme, sizeof(nvme), "%s/kvmm-cache-admit-%d",
		 dir ? dir : "/var/tmp", getpid());
	const char *args[] = {
		"--cache-gpu-blocks", "3",  "--host-mem",  "2M",
		"--nvme-path",	      nvme, "--nvme-size", "1867776",
		"--nvme-admit-uses",  "2",  NULL
	};
	r = td_start(&d, args);
	if (r)
		t_fail("kvmmd did not start: %d", r);

	write_content(d.sock, 0);
	read_content(d.sock, 0, NB, 0); /* the second use, from the GPU */
	write_content(d.sock, 1); /* used once */
	for (int k = 2; k < 6; k++)
		write_content(d.sock, k);
	cc_settled_stats(d.sock, &ts);
	/* GPU: 5; host: 3, 4; content 0 on NVMe; 1 and 2 (used once)
	 * dropped when they left the host tier */
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, 2 * NB);
	t_assert_eq(ts.tiers[2].used_blocks, NB);
	t_assert_eq(ts.nvme_admission_rejects, 2 * NB);
	t_assert_eq(ts.tiers[1].drops, 2 * NB);
	t_assert_eq(ts.tiers[2].drops, 0);
	t_assert_eq(ts.migrations_failed, 0);

	read_content(d.sock, 0, NB, 2); /* byte-identical from NVMe */
	read_content(d.sock, 1, 0, -1); /* not kept anywhere */
	read_content(d.sock, 2, 0, -1);
	/* content 0 back on the GPU pushed 5 to host and 3 out (rejected) */
	read_content(d.sock, 3, 0, -1);
	read_content(d.sock, 4, NB, -1); /* still in host memory */
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[2].promotions_out, NB);
	t_assert_eq(ts.tiers[2].hits, NB);
	t_assert_eq(ts.tiers[1].promotions_out, NB);
	t_assert_eq(ts.nvme_admission_rejects, 3 * NB);

	r = td_stop(&d);
	if (r)
		td_dump_log(&d);
	t_assert_eq(r, 0);
	unlink(nvme);
	printf("nvme admission ok\n");
	return 0;
}
