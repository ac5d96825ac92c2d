// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Block pins (BLOCK_PIN / BLOCK_UNPIN through libkvmm) against a real
 * kvmmd: a pool of 8 blocks of 4 pages, all of which the cache may keep on
 * the GPU, and a host tier.  Another client (B) makes pool pressure by
 * extending a sequence over the whole pool.
 *
 *   - a pinned block stays on the GPU while every other cached block is
 *     demoted; an extend that could only be served by it fails (-ENOMEM)
 *     until it is unpinned, then takes it;
 *   - a TTL pin holds until the daemon's clock passes its expiry (same
 *     CLOCK_MONOTONIC as ours), then the block is a victim like any other,
 *     and unpinning it answers -ENOENT;
 *   - a TTL pin with KVMM_PIN_F_DEMOTE does not hold its tier: the same
 *     extend succeeds at once, the block moves to host memory, keeps its
 *     record and comes back byte-identical;
 *   - pins end with their session: a client killed while pinning;
 *   - the quota: by default a quarter of the GPU cache's blocks per
 *     session, --pin-quota N otherwise; re-pinning replaces a record;
 *     pins are per session;
 *   - hostile input on the wire gets its errno and changes nothing.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define MAXB 4

/* the wire ABI: sizes are fixed once published */
_Static_assert(sizeof(struct kvmm_block_pin) == 48, "kvmm_block_pin");
_Static_assert(sizeof(struct kvmm_block_pin_reply) == 40,
	       "kvmm_block_pin_reply");
_Static_assert(sizeof(struct kvmm_block_unpin) == 32, "kvmm_block_unpin");

static uint64_t hash_of(int content, int b)
{
	return 0x700000ull * (content + 1) + b + 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A publisher process writes content k (nb blocks) and exits; ids gets
 * the blocks' page ids. */
static void publish(const char *sock, int k, uint32_t nb, uint32_t *ids)
{
	uint64_t h[MAXB];

	for (uint32_t b = 0; b < nb; b++)
		h[b] = hash_of(k, b);
	t_assert_eq(cc_publish_content(sock, h, nb, 900 + k, ids), 0);
}

/* Cached blocks on the GPU, once the copies in flight are done. */
static uint64_t gpu_used(struct cc *c)
{
	struct kvmm_tier_stats_reply ts;

	for (int i = 0; i < 500; i++) {
		cc_tier_stats(c, &ts);
		if (!ts.migrations_in_flight)
			break;
		usleep(10000);
	}
	return ts.tiers[0].used_blocks;
}

static void pinned_survives(struct cc *b, struct kvmm_conn *p, const char *sock)
{
	uint32_t pub[4 * CC_PPB], ids[8 * CC_PPB];
	struct kvmm_pin_opts o;
	uint32_t seq;

	publish(sock, 0, 4, pub);
	t_assert_eq(gpu_used(b), 4);
	t_ok(cc_pin(p, hash_of(0, 1), 0, 0, 0, &o));
	t_assert_eq(o.tier, 0);
	t_assert_eq(o.pins, 1);
	t_assert_eq(o.pin_quota, 2); /* default: 8 GPU blocks / 4 */
	t_assert_eq(o.expires_ns, 0);
	seq = cc_seq_open(b);
	t_ok(cc_try_extend(b, seq, 7 * CC_TPB,
			   ids)); /* the 3 other blocks go */
	t_assert_eq(gpu_used(b), 1);
	t_assert_eq(cc_overlap(ids, 7 * CC_PPB, pub + CC_PPB, CC_PPB), 0);
	t_assert_eq(cc_try_extend(b, seq, 8 * CC_TPB, ids), -ENOMEM);
	t_assert_eq(gpu_used(b), 1);
	t_ok(kvmm_block_unpin(p, hash_of(0, 1)));
	t_assert_eq(kvmm_block_unpin(p, hash_of(0, 1)), -ENOENT);
	t_ok(cc_try_extend(b, seq, 8 * CC_TPB, ids));
	t_assert_eq(gpu_used(b), 0);
	t_assert_eq(cc_overlap(ids, 8 * CC_PPB, pub + CC_PPB, CC_PPB), CC_PPB);
	cc_seq_close(b, seq, ids, 8 * CC_PPB);
	/* all four come back from host memory, byte-identical */
	{
		struct kvmm_prefix_open_reply rep;
		uint64_t h[4];
		struct cc rd;

		for (int i = 0; i < 4; i++)
			h[i] = hash_of(0, i);
		cc_connect(&rd, sock);
		cc_region(&rd);
		cc_prefix(&rd, h, 4, &rep, pub);
		t_assert_eq(rep.nr_blocks, 4);
		t_assert_eq(rep.from_host, 4);
		cc_check(&rd, pub, 4, 900);
		cc_seq_close(&rd, rep.seq_id, pub, 4 * CC_PPB);
		cc_disconnect(&rd);
	}
}

static void ttl_expires(struct cc *b, struct kvmm_conn *p, const char *sock)
{
	uint32_t pub[2 * CC_PPB], ids[8 * CC_PPB];
	struct kvmm_pin_opts o;
	uint64_t ttl = 400000000ull; /* 400 ms */
	uint32_t seq;
	int r;

	publish(sock, 1, 2, pub);
	t_ok(cc_pin(p, hash_of(1, 0), KVMM_PIN_F_TTL, ttl, 0, &o));
	t_assert(o.expires_ns > now_ns());
	t_assert(o.expires_ns <= now_ns() + ttl);
	seq = cc_seq_open(b);
	r = cc_try_extend(b, seq, 8 * CC_TPB, ids);
	if (now_ns() < o.expires_ns) {
		/* block 1 went, block 0 is TTL-pinned */
		t_assert_eq(r, -ENOMEM);
		t_assert_eq(gpu_used(b), 1);
	} else {
		printf("note: the TTL passed before the first check\n");
	}
	while (now_ns() <= o.expires_ns)
		usleep(10000);
	t_ok(cc_try_extend(b, seq, 8 * CC_TPB, ids));
	t_assert_eq(gpu_used(b), 0);
	t_assert_eq(cc_overlap(ids, 8 * CC_PPB, pub, CC_PPB), CC_PPB);
	t_assert_eq(kvmm_block_unpin(p, hash_of(1, 0)), -ENOENT);
	cc_seq_close(b, seq, ids, 8 * CC_PPB);
}

static void ttl_demotes(struct cc *b, struct kvmm_conn *p, const char *sock)
{
	uint32_t pub[2 * CC_PPB], ids[8 * CC_PPB];
	struct kvmm_prefix_open_reply rep;
	struct kvmm_pin_opts o;
	uint64_t h = hash_of(5, 0);
	uint32_t seq;
	struct cc rd;

	publish(sock, 5, 2, pub);
	t_ok(cc_pin(p, h, KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE, 60000000000ull, 0,
		    &o));
	t_assert_eq(o.tier, 0);
	seq = cc_seq_open(b);
	/* a held TTL refuses this extend (ttl_expires); this one moves */
	t_ok(cc_try_extend(b, seq, 8 * CC_TPB, ids));
	t_assert_eq(gpu_used(b), 0);
	cc_seq_close(b, seq, ids, 8 * CC_PPB);
	/* still cached, in host memory, still pinned: re-pinning says so */
	t_ok(cc_pin(p, h, KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE, 60000000000ull, 0,
		    &o));
	t_assert_eq(o.tier, 1);
	t_assert_eq(o.pins, 1);
	cc_connect(&rd, sock);
	cc_region(&rd);
	cc_prefix(&rd, &h, 1, &rep, pub);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.from_host, 1);
	cc_check(&rd, pub, 1, 905);
	cc_seq_close(&rd, rep.seq_id, pub, CC_PPB);
	cc_disconnect(&rd);
	t_ok(kvmm_block_unpin(p, h));
	t_assert_eq(kvmm_block_unpin(p, h), -ENOENT);
}

static void death_releases(struct cc *b, const char *sock)
{
	uint32_t pub[2 * CC_PPB], ids[8 * CC_PPB];
	int fd[2], r = -1;
	uint32_t seq;
	char ch;
	pid_t p;

	publish(sock, 2, 2, pub);
	t_ok(pipe(fd));
	p = fork();
	if (p == 0) {
		struct kvmm_conn *c = cc_connect_lib(sock, "pinner");
		struct kvmm_pin_opts o;

		t_ok(cc_pin(c, hash_of(2, 0), 0, 0, 0, &o));
		t_ok(cc_pin(c, hash_of(2, 1), KVMM_PIN_F_TTL, 60000000000ull, 0,
			    &o));
		t_assert_eq(write(fd[1], "p", 1), 1);
		for (;;)
			pause();
	}
	t_assert_eq(read(fd[0], &ch, 1), 1);
	seq = cc_seq_open(b);
	t_assert_eq(cc_try_extend(b, seq, 8 * CC_TPB, ids), -ENOMEM);
	t_assert_eq(gpu_used(b), 2);
	kill(p, SIGKILL);
	t_assert_eq(cc_wait_child(p), 128 + SIGKILL);
	for (int i = 0; i < 300 && r; i++) {
		r = cc_try_extend(b, seq, 8 * CC_TPB, ids);
		if (r)
			usleep(10000);
	}
	t_ok(r);
	t_assert_eq(gpu_used(b), 0);
	t_assert_eq(cc_overlap(ids, 8 * CC_PPB, pub, 2 * CC_PPB), 2 * CC_PPB);
	cc_seq_close(b, seq, ids, 8 * CC_PPB);
	close(fd[0]);
	close(fd[1]);
}

static void quota(struct cc *b, struct kvmm_conn *p, const char *sock)
{
	struct kvmm_block_unpin bu = { .size = sizeof(bu),
				       .hash = hash_of(3, 0) };
	uint32_t pub[3 * CC_PPB];
	struct kvmm_pin_opts o;

	publish(sock, 3, 3, pub);
	t_ok(cc_pin(p, hash_of(3, 0), 0, 0, 0, &o));
	t_ok(cc_pin(p, hash_of(3, 1), 0, 0, 0, &o));
	t_assert_eq(o.pins, 2);
	t_assert_eq(cc_pin(p, hash_of(3, 2), 0, 0, 0, &o), -EDQUOT);
	/* the same hash again replaces its record */
	t_ok(cc_pin(p, hash_of(3, 0), KVMM_PIN_F_TTL, 1000000000ull, 0, &o));
	t_assert_eq(o.pins, 2);
	/* pins are per session: B has none to drop */
	t_assert_eq(cc_call(b, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			    NULL, NULL),
		    -ENOENT);
	t_ok(kvmm_block_unpin(p, hash_of(3, 1)));
	t_ok(cc_pin(p, hash_of(3, 2), 0, 0, 0, &o));
	t_assert_eq(o.pins, 2);
	t_ok(kvmm_block_unpin(p, hash_of(3, 0)));
	t_ok(kvmm_block_unpin(p, hash_of(3, 2)));
	/* not cached */
	t_assert_eq(cc_pin(p, hash_of(9, 0), 0, 0, 0, &o), -ENOENT);
}

static int raw_pin(struct cc *c, const struct kvmm_block_pin *bp)
{
	struct kvmm_block_pin_reply rep;

	return cc_call(c, KVMM_CMD_BLOCK_PIN, bp, sizeof(*bp), &rep,
		       sizeof(rep), NULL, NULL);
}

static void hostile(struct cc *h)
{
	const uint64_t hash = hash_of(3, 0); /* cached */
	struct kvmm_block_pin bp;
	struct kvmm_block_unpin bu;
	char big[sizeof(bp) + 8];
	struct kvmm_block_pin_reply rep;

#define FRESH() \
	(bp = (struct kvmm_block_pin){ .size = sizeof(bp), .hash = hash })
	FRESH();
	bp.flags = 0x10; /* unknown */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.flags = KVMM_PIN_F_DEMOTE; /* only with TTL */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.flags = KVMM_PIN_F_DEMOTE | KVMM_PIN_F_PRIORITY;
	bp.priority = 3;
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.hash = 0;
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.flags = KVMM_PIN_F_TTL; /* no ttl */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.ttl_ns = 1000; /* ttl without the flag */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.flags = KVMM_PIN_F_TTL;
	bp.ttl_ns = KVMM_PIN_TTL_MAX_NS + 1;
	t_assert_eq(raw_pin(h, &bp), -ERANGE);
	bp.ttl_ns = UINT64_MAX;
	t_assert_eq(raw_pin(h, &bp), -ERANGE);
	FRESH();
	bp.flags = KVMM_PIN_F_PRIORITY;
	bp.priority = 128;
	t_assert_eq(raw_pin(h, &bp), -ERANGE);
	bp.priority = -129;
	t_assert_eq(raw_pin(h, &bp), -ERANGE);
	FRESH();
	bp.priority = 5; /* priority without the flag */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.flags = KVMM_PIN_F_PRIORITY_ONLY; /* needs PRIORITY */
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	bp.flags = KVMM_PIN_F_PRIORITY_ONLY | KVMM_PIN_F_PRIORITY |
		   KVMM_PIN_F_TTL;
	bp.ttl_ns = 1000;
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.pad = 1;
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.reserved[1] = 1;
	t_assert_eq(raw_pin(h, &bp), -EINVAL);
	FRESH();
	bp.size = 8; /* shorter than the first published size */
	t_assert_eq(cc_call(h, KVMM_CMD_BLOCK_PIN, &bp, 8, &rep, sizeof(rep),
			    NULL, NULL),
		    -EINVAL);
	/* a newer, larger struct: zero tail accepted, nonzero -E2BIG */
	FRESH();
	bp.size = sizeof(big);
	memset(big, 0, sizeof(big));
	memcpy(big, &bp, sizeof(bp));
	big[sizeof(bp)] = 1;
	t_assert_eq(cc_call(h, KVMM_CMD_BLOCK_PIN, big, sizeof(big), &rep,
			    sizeof(rep), NULL, NULL),
		    -E2BIG);
	big[sizeof(bp)] = 0;
	t_ok(cc_call(h, KVMM_CMD_BLOCK_PIN, big, sizeof(big), &rep, sizeof(rep),
		     NULL, NULL));
	t_assert_eq(rep.pins, 1);
	bu = (struct kvmm_block_unpin){ .size = sizeof(bu),
					.flags = 1,
					.hash = hash };
	t_assert_eq(cc_call(h, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			    NULL, NULL),
		    -EINVAL);
	bu.flags = 0;
	bu.hash = 0;
	t_assert_eq(cc_call(h, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			    NULL, NULL),
		    -EINVAL);
	bu.hash = hash;
	t_ok(cc_call(h, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0, NULL,
		     NULL));
	t_assert_eq(cc_call(h, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			    NULL, NULL),
		    -ENOENT);
#undef FRESH
}

static void set_quota(void)
{
	const char *args[] = { "--gpu-mem", "2M", "--pin-quota", "1", NULL };
	struct kvmm_pin_opts o;
	struct kvmm_conn *p;
	struct td_daemon d;
	uint32_t pub[2 * CC_PPB];

	td_start_ok(&d, args);
	publish(d.sock, 0, 2, pub);
	p = cc_connect_lib(d.sock, "pinner");
	t_ok(cc_pin(p, hash_of(0, 0), 0, 0, 0, &o));
	t_assert_eq(o.pin_quota, 1);
	t_assert_eq(cc_pin(p, hash_of(0, 1), 0, 0, 0, &o), -EDQUOT);
	kvmm_disconnect(p);
	t_ok(td_stop(&d));
}

int main(void)
{
	/*
	 * lru: the cases pin a block in the middle of a chain and expect its
	 * parent to go; the prefix rule of the default policy (asym) keeps a
	 * pinned block's parents.
	 */
	const char *args[] = { "--gpu-mem",  "2M", "--cache-gpu-blocks", "8",
			       "--host-mem", "2M", "--cache-policy",	 "lru",
			       NULL };
	struct td_daemon d;
	struct kvmm_conn *p;
	struct cc b, h;

	td_start_ok(&d, args);
	cc_connect(&b, d.sock);
	cc_region(&b);
	p = cc_connect_lib(d.sock, "pinner");

	pinned_survives(&b, p, d.sock);
	ttl_expires(&b, p, d.sock);
	ttl_demotes(&b, p, d.sock);
	death_releases(&b, d.sock);
	quota(&b, p, d.sock);
	cc_connect(&h, d.sock);
	hostile(&h);
	cc_disconnect(&h);

	kvmm_disconnect(p);
	cc_disconnect(&b);
	td_stop_ok(&d);
	set_quota();
	return T_PASS;
}
