// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Two clients open the same NVMe blocks while they are being restored: a
 * real kvmmd whose restore jobs each wait 300 ms, a content of 8 blocks on
 * its NVMe tier, and two client processes A and B.  A's PREFIX_OPEN
 * starts the restores; B's, sent while A's is pending, waits for them
 * instead of missing (no busy_misses) or restoring again.  Both get all 8
 * blocks, byte-identical, on the same pages; the NVMe tier counts 8
 * restores, not 16, and restores_waited counts the blocks B waited for.
 */
#include "tests/cache-restore-common.h"

#define DELAY_MS 300

struct result {
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[CR_NB * CC_PPB];
};

/* A client process: open content 0, check its bytes, send back what it
 * got through fd. */
static pid_t opener(const char *sock, int fd)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct result res;
		uint64_t h[CR_NB];
		struct cc c;

		for (int b = 0; b < CR_NB; b++)
			h[b] = cr_hash(0, b);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, CR_NB, &res.rep, res.ids);
		t_assert_eq(res.rep.nr_blocks, CR_NB);
		cc_check(&c, res.ids, CR_NB, 200);
		t_assert_eq(write(fd, &res, sizeof(res)), sizeof(res));
		cc_seq_close(&c, res.rep.seq_id, res.ids, CR_NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	return p;
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_status_reply st;
	struct result ra, rb;
	int pa[2], pb[2];
	struct cr_env env;
	pid_t a, b;
	struct cc m;

	cr_start(&env, 40, DELAY_MS);
	cr_fill_tiers(&env, &ts0);

	t_ok(pipe(pa));
	t_ok(pipe(pb));
	cc_connect(&m, env.d.sock);
	a = opener(env.d.sock, pa[1]);
	cr_wait_pending(&m, 1);
	b = opener(env.d.sock, pb[1]);
	cr_wait_pending(&m, 2); /* both wait, neither missed */
	t_assert_eq(cc_wait_child(a), 0);
	t_assert_eq(cc_wait_child(b), 0);
	cc_disconnect(&m);
	t_assert_eq(read(pa[0], &ra, sizeof(ra)), sizeof(ra));
	t_assert_eq(read(pb[0], &rb, sizeof(rb)), sizeof(rb));

	/* the same pages, restored once */
	t_assert_eq(memcmp(ra.ids, rb.ids, sizeof(ra.ids)), 0);
	t_assert_eq(ra.rep.from_nvme, CR_NB);
	t_assert_eq(rb.rep.from_nvme + rb.rep.from_gpu, CR_NB);
	cc_settled_stats(env.d.sock, &ts);
	t_assert_eq(ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out,
		    CR_NB);
	t_assert_eq(ts.restores_waited, rb.rep.from_nvme);
	t_assert(ts.restores_waited >= 1);
	t_assert_eq(ts.busy_misses, 0);
	t_assert_eq(ts.misses, 0);
	printf("B waited for %llu of A's %d restores (shared %u already restored); NVMe restores %llu\n",
	       (unsigned long long)ts.restores_waited, CR_NB, rb.rep.from_gpu,
	       (unsigned long long)(ts.tiers[2].promotions_out -
				    ts0.tiers[2].promotions_out));

	/* both gone: the pool holds exactly the cached GPU blocks */
	t_ok(td_status(&env.d, &st));
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * CC_PPB);
	t_assert_eq(st.pages_mapped, 0);
	cr_stop(&env);
	printf("shared restore ok\n");
	return 0;
}
