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

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void publish(const char *sock)
{
	pid_t p = fork();

	if (p == 0) {
		struct kvmm_block_publish_reply rep;
		uint64_t h[NB] = { hash_of(0), hash_of(1) };
		uint32_t ids[NB * CC_PPB], seq;
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, NB * CC_TPB, ids);
		cc_fill(&c, ids, NB, 77);
		t_ok(cc_publish(&c, seq, 0, h, NB, &rep));
		t_assert_eq(rep.published, NB);
		cc_seq_close(&c, seq, ids, NB * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(wait_child(p), 0);
}

/* A's view of the content: every page of both blocks, sampled. */
static int content_ok(struct kvmm_region *r, uint32_t seq)
{
	for (uint32_t b = 0; b < NB; b++) {
		for (uint32_t pg = 0; pg < CC_PPB; pg++) {
			uint64_t base = pg & 1 ?
						kvmm_seq_v_ptr(r, seq, pg / 2) :
						kvmm_seq_k_ptr(r, seq, pg / 2);
			const unsigned char *m =
				(const unsigned char
					 *)(uintptr_t)(base +
						       (uint64_t)b * CC_PAGE);

			for (uint32_t o = 0; o < CC_PAGE; o += 997)
				if (m[o] != cc_pat(77, b, pg, o))
					return 0;
		}
	}
	return 1;
}

static int stepper(const char *sock, int wr, int rd)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "stepper",
					.map_ahead_set = 1 };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = CC_L,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 16,
				       .max_tokens = 16 * CC_TPB };
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

static int b_extend(struct cc *c, uint32_t seq, uint32_t nb, uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = nb * CC_TPB };
	struct kvmm_seq_extend_reply *rep = (void *)buf;
	unsigned int nfds = 0;
	int r;

	r = cc_call(c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), buf, sizeof(buf),
		    fds, &nfds);
	if (r) {
		for (unsigned int i = 0; i < nfds; i++)
			close(fds[i]);
		return r;
	}
	cc_map(c, rep->page_ids, rep->nr_blocks * rep->pages_per_block, fds,
	       nfds);
	for (uint32_t i = 0; i < rep->nr_blocks * rep->pages_per_block; i++)
		ids[rep->first_block * CC_PPB + i] = rep->page_ids[i] &
						     ~KVMM_PAGE_HELD;
	return 0;
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	  "--cache-gpu-blocks",
			       "8",	    "--host-mem", "2M",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[8 * CC_PPB], seq;
	int up[2], down[2], r;
	struct td_daemon d;
	struct cc b;
	char ch;
	pid_t p;

	r = td_start(&d, args);
	if (r)
		t_fail("kvmmd did not start: %d", r);
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
		t_assert_eq(b_extend(&b, seq, 8, ids), -ENOMEM);
	cc_tier_stats(&b, &ts);
	t_assert_eq(ts.pressure_reclaims, 0);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].demotions_in, 0);

	t_assert_eq(write(down[1], "g", 1), 1);
	t_assert_eq(read(up[0], &ch, 1), 1);
	t_assert_eq(ch, 'e');
	t_ok(b_extend(&b, seq, 8, ids));
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
	t_assert_eq(wait_child(p), 0);
	cc_disconnect(&b);
	r = td_stop(&d);
	if (r) {
		td_dump_log(&d);
		t_fail("kvmmd stop: %d", r);
	}
	return T_PASS;
}
