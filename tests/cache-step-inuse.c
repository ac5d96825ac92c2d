// SPDX-License-Identifier: MIT
/*
 * timeout: 30
 * A cached block used by an in-flight step is never demoted under pool
 * pressure, and STEP_BEGIN needs no pins for that: a step uses the
 * session's open sequences, and every block an open sequence uses holds a
 * sequence reference, which the policy never evicts (a block taken from a
 * sequence by a revocation stays mapped, REVOKING, until the client acks at
 * a step boundary: tests/cache-revoke-shared.c).
 *
 * A publisher writes a 2-block content; client A (libkvmm) opens it as a
 * shared prefix and begins a step.  B then asks for the whole pool: the
 * cache holds nothing else, so B's extend fails (-ENOMEM) and nothing is
 * demoted; A still reads the content's bytes.  Once A ends its step and
 * closes the sequence, the same extend demotes both blocks and succeeds,
 * and the blocks come back from host memory byte-identical.
 */
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 2

static uint64_t hash_of(int b)
{
	return 0xb00000ull + b + 1;
}

static void publish(const char *sock)
{
	uint64_t h[NB] = { hash_of(0), hash_of(1) };

	t_assert_eq(cc_publish_content(sock, h, NB, 77, NULL), 0);
}

/* A's view of the content: every page of both blocks, sampled. */
static int content_ok(struct kvmm_region *r, uint32_t seq)
{
	return cc_seq_content_ok(r, seq, NB, 77, 997);
}

static int stepper(const char *sock, int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "stepper",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = cc_region_opts();
	uint64_t h[NB] = { hash_of(0), hash_of(1) };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq, nb;
	char ch;

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open_prefix(r, h, NB, &seq, &nb) || nb != NB ||
	    !content_ok(r, seq) || kvmm_step_begin(c))
		return 2;
	ch = 's';
	if (write(wr, &ch, 1) != 1 || read(rd, &ch, 1) != 1)
		return 3;
	/* the parent pressed the pool while our step ran */
	if (!content_ok(r, seq))
		return 4;
	if (kvmm_step_end(c) || kvmm_seq_close(r, seq))
		return 5;
	ch = 'e';
	if (write(wr, &ch, 1) != 1 || read(rd, &ch, 1) != 1)
		return 6;
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[8 * CC_PPB], seq;
	int up[2], down[2];
	struct td_daemon d;
	struct cc b;
	char ch;
	pid_t p;

	td_start_ok(&d, args);
	publish(d.sock);
	t_ok(pipe(up));
	t_ok(pipe(down));
	p = fork();
	if (p == 0)
		_exit(stepper(d.sock, up[1], down[0]));
	t_assert_eq(read(up[0], &ch, 1), 1);
	t_assert_eq(ch, 's');

	cc_connect(&b, d.sock);
	cc_region(&b);
	seq = cc_seq_open(&b);
	for (int i = 0; i < 3; i++)
		t_assert_eq(cc_try_extend(&b, seq, 8 * CC_TPB, ids), -ENOMEM);
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, 0);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].demotions_in, 0);

	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(read(up[0], &ch, 1), 1);
	t_assert_eq(ch, 'e');
	t_ok(cc_try_extend(&b, seq, 8 * CC_TPB, ids));
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, NB);
	t_assert_eq(ts.tiers[1].demotions_in, NB);
	cc_seq_close(&b, seq, ids, 8 * CC_PPB);
	{
		/* and they come back from host memory, byte-identical */
		struct kvmm_prefix_open_reply rep;
		uint64_t h[NB] = { hash_of(0), hash_of(1) };

		cc_prefix(&b, h, NB, &rep, ids);
		t_assert_eq(rep.from_host, NB);
		cc_check(&b, ids, NB, 77);
		cc_seq_close(&b, rep.seq_id, ids, NB * CC_PPB);
	}
	t_assert_eq(write(down[1], "q", 1), 1);
	t_assert_eq(cc_wait_child(p), 0);
	cc_disconnect(&b);
	td_stop_ok(&d);
	return T_PASS;
}
