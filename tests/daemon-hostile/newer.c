// SPDX-License-Identifier: MIT
/*
 * tests/daemon-hostile: the commands of ABI 1.14 and later, which came
 * after the rest of this test: SEQ_UNSHARE (1.20), PREFIX_COLLECT (1.16),
 * SEQ_COLLECT (1.17), PREFIX_QUERY and BLOCK_PIN_MANY (1.19), TIER_STATS'
 * request (1.21), ADMIN_CACHE_DROP (1.14, block_pages 1.22), and the
 * COLLECT flags of PREFIX_OPEN (1.16) and SEQ_EXTEND (1.17).
 *
 * A session of this ABI's minor sets up a region with a block it wrote,
 * published (hash HS_HASH) and shared into a second sequence by a prefix
 * open.  Then, command by command: payloads short, long (a nonzero tail:
 * -E2BIG; a zero one accepted), with a size disagreeing with the length,
 * with fds attached (-EINVAL, the fds closed); every flag, pad and
 * reserved word; ids, block numbers, counts, sizes, tiers and tenants
 * out of range, each answered with the errno abi.md and the uapi
 * headers give it; the valid requests beside them answered with values
 * checked (the copy of the shared block, the query and pins of the
 * hash, the drop that keeps the block in use).  Last, a burst of
 * well-formed requests with a few bytes, the length or the size changed
 * at random (400, or KVMM_HOSTILE_BURST), each answered with one of its
 * command's errnos.  kvmmd
 * answers a NOP after each group, and the caller checks it serves a
 * libkvmm client and ends idle.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/uapi.h"
#include "tests/daemon-hostile/hostile.h"
#include "tests/lib/test.h"

#define HS_HASH 0x5eed0001cafeull
/* small_region's (daemon-hostile.c): 256 tokens, 4 pages a block */
#define HS_TPB 256
#define HS_PPB 4
#define HS_MAX_SEQS 4
#define HS_MAX_BLOCKS 4

struct hs {
	int fd; /* a session of this ABI's minor */
	uint32_t region;
	uint32_t writer; /* block 0 written, published as HS_HASH */
	uint32_t reader; /* a prefix open of HS_HASH: block 0 shared */
	uint32_t foreign; /* another session's region */
};

static int hs_session(uint16_t minor)
{
	struct kvmm_hello h = { .size = sizeof(h),
				.abi_major = KVMM_ABI_MAJOR,
				.abi_minor = minor };
	int fd = raw_connect();

	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0), 0);
	return fd;
}

/* kvmmd still answers this session. */
static void hs_serving(int fd)
{
	t_assert_eq(cmd(fd, KVMM_CMD_NOP, NULL, 0, NULL, 0), 0);
}

/* A call's status in hs_sizes(), failing with the command's number. */
#define HS_EQ(call, want)                                                      \
	do {                                                                   \
		int _r = (call);                                               \
		if (_r != (want))                                              \
			t_fail("command %#x: %s == %d, expected %s", c, #call, \
			       _r, #want);                                     \
	} while (0)

/*
 * The size rules of a fixed-size request (ok: a valid one of known
 * bytes, size first): a payload under its size word or cut short,
 * a size disagreeing with the length either way, or no payload where
 * one is needed: -EINVAL; a longer one with a nonzero tail: -E2BIG; the
 * valid one with an fd attached: -EINVAL, the fd closed by kvmmd.
 */
static void hs_sizes(int fd, uint16_t c, const void *ok, size_t known,
		     bool empty_ok)
{
	char buf[256] = { 0 }, m[sizeof(struct kvmm_msg_hdr) + 256];
	struct kvmm_msg_hdr h = { .size = sizeof(h) + known,
				  .cmd = c,
				  .version = KVMM_ABI_MAJOR };
	uint32_t size;
	int pipefd[2];
	char ch;

	t_assert(known + 16 <= sizeof(buf));
	memcpy(buf, ok, known);
	if (!empty_ok)
		HS_EQ(cmd(fd, c, buf, 0, NULL, 0), -EINVAL);
	HS_EQ(cmd(fd, c, buf, 3, NULL, 0), -EINVAL);
	size = known - 8; /* short, and says so */
	memcpy(buf, &size, 4);
	HS_EQ(cmd(fd, c, buf, size, NULL, 0), -EINVAL);
	size = known; /* says more than it is */
	memcpy(buf, &size, 4);
	HS_EQ(cmd(fd, c, buf, known - 8, NULL, 0), -EINVAL);
	size = known + 8; /* says less */
	memcpy(buf, &size, 4);
	HS_EQ(cmd(fd, c, buf, known, NULL, 0), -EINVAL);
	size = known + 16; /* a newer client's, with a field we lack */
	memcpy(buf, &size, 4);
	buf[known + 5] = 1;
	HS_EQ(cmd(fd, c, buf, size, NULL, 0), -E2BIG);
	/* fds on a command that takes none */
	t_ok(pipe(pipefd));
	memcpy(m, &h, sizeof(h));
	memcpy(m + sizeof(h), ok, known);
	HS_EQ(send_raw(fd, m, h.size, pipefd, 1, NULL, 0), -EINVAL);
	close(pipefd[1]);
	t_assert_eq(read(pipefd[0], &ch, 1), 0); /* kvmmd closed its copy */
	close(pipefd[0]);
	hs_serving(fd);
}

/* The region, the writer's published block and the reader sharing it. */
static void hs_setup(struct hs *x)
{
	struct kvmm_region_create rc = { .size = sizeof(rc),
					 .layers = 2,
					 .kv_heads = 2,
					 .head_dim = 64,
					 .dtype_bytes = 2,
					 .max_seqs = HS_MAX_SEQS,
					 .max_tokens = HS_MAX_BLOCKS * HS_TPB };
	struct kvmm_region_create_reply rr;
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_seq_open_reply so;
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct {
		struct kvmm_block_publish bp;
		uint64_t hash;
	} pub = { .bp = { .size = sizeof(pub.bp), .nr_blocks = 1 },
		  .hash = HS_HASH };
	struct kvmm_block_publish_reply pr;
	struct {
		struct kvmm_prefix_open po;
		uint64_t hash;
	} po = { .po = { .size = sizeof(po.po), .nr_hashes = 1 },
		 .hash = HS_HASH };
	struct kvmm_prefix_open_reply or ;

	x->fd = hs_session(KVMM_ABI_MINOR);
	t_ok(cmd(x->fd, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), &rr,
		 sizeof(rr)));
	t_assert_eq(rr.tokens_per_block, HS_TPB);
	t_assert_eq(rr.pages_per_block, HS_PPB);
	x->region = ref.region_id = rr.region_id;
	t_ok(cmd(x->fd, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &so, sizeof(so)));
	x->writer = so.seq_id;
	ex.region_id = x->region;
	ex.seq_id = x->writer;
	ex.new_len = HS_TPB;
	t_ok(cmd(x->fd, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0));
	pub.bp.region_id = x->region;
	pub.bp.seq_id = x->writer;
	t_ok(cmd(x->fd, KVMM_CMD_BLOCK_PUBLISH, &pub, sizeof(pub), &pr,
		 sizeof(pr)));
	t_assert_eq(pr.published, 1);
	po.po.region_id = x->region;
	t_ok(cmd(x->fd, KVMM_CMD_PREFIX_OPEN, &po, sizeof(po), & or,
		 sizeof(or)));
	t_assert_eq(or.nr_blocks, 1);
	t_assert_eq(or.from_gpu, 1);
	x->reader = or.seq_id;
}

/* SEQ_UNSHARE: the copy of the shared block, and every error. */
static void hs_unshare(const struct hs *x)
{
	struct kvmm_seq_unshare un = { .size = sizeof(un),
				       .region_id = x->region,
				       .seq_id = x->reader };
	struct kvmm_seq_unshare u;
	struct kvmm_seq_extend_reply rep;
	struct {
		struct kvmm_seq_unshare un;
		uint64_t newer[2];
	} big = { .un = un };
	const uint16_t c = KVMM_CMD_SEQ_UNSHARE;

	un.block = 1; /* a valid request (it has no pages: -ENODATA) */
	hs_sizes(x->fd, c, &un, sizeof(un), false);
	t_assert_eq(cmd(x->fd, c, &un, sizeof(un), NULL, 0), -ENODATA);
	u = un, u.flags = 1;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.pad = 1;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.reserved[1] = 1;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.region_id = 12345;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -ENOENT);
	u = un, u.region_id = x->foreign;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EPERM);
	u = un, u.seq_id = HS_MAX_SEQS;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.seq_id = 0xffffffffu;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.seq_id = HS_MAX_SEQS - 1; /* never opened */
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -ENOENT);
	u = un, u.block = HS_MAX_BLOCKS;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	u = un, u.block = 0xffffffffu;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), NULL, 0), -EINVAL);
	hs_serving(x->fd);

	/* the reader's shared block: a copy on fresh pages, their fds
	 * (a newer client's zero tail accepted) */
	big.un.size = sizeof(big);
	big.un.block = 0;
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(cmd(x->fd, c, &big, sizeof(big), &rep, sizeof(rep)), 0);
	t_assert_eq(rep.first_block, 0);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.pages_per_block, HS_PPB);
	t_assert_eq(rep.nr_fds, HS_PPB);
	t_assert_eq(rep.len, HS_TPB);
	/* now its own: nothing to copy */
	u = un, u.block = 0;
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), &rep, sizeof(rep)), 0);
	t_assert_eq(rep.nr_blocks, 0);
	t_assert_eq(rep.nr_fds, 0);
	/* the writer's block is the cache's since its publish: copied */
	u.seq_id = x->writer;
	t_assert_eq(cmd(x->fd, c, &u, sizeof(u), &rep, sizeof(rep)), 0);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.nr_fds, HS_PPB);
	hs_serving(x->fd);
}

/* PREFIX_COLLECT and SEQ_COLLECT: nothing is waiting to be collected. */
static void hs_collects(const struct hs *x)
{
	static const uint16_t cmds[2] = { KVMM_CMD_PREFIX_COLLECT,
					  KVMM_CMD_SEQ_COLLECT };
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = x->region,
				       .seq_id = x->reader },
			       r;

	for (int i = 0; i < 2; i++) {
		uint16_t c = cmds[i];

		hs_sizes(x->fd, c, &ref, sizeof(ref), false);
		t_assert_eq(cmd(x->fd, c, &ref, sizeof(ref), NULL, 0), -ENOENT);
		r = ref, r.flags = 1;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
		r = ref, r.reserved[0] = 1;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
		r = ref, r.region_id = 12345;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -ENOENT);
		r = ref, r.region_id = x->foreign;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EPERM);
		r = ref, r.seq_id = HS_MAX_SEQS;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
		r = ref, r.seq_id = 0xffffffffu;
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
		r = ref, r.seq_id = HS_MAX_SEQS - 1; /* never opened */
		t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -ENOENT);
		hs_serving(x->fd);
	}
}

/* A variable-length request (PREFIX_QUERY, BLOCK_PIN_MANY): its
 * struct, its count word at byte 8, then that many hashes. */
struct hs_var {
	union {
		struct kvmm_prefix_query pq;
		struct kvmm_block_pin_many pm;
		char bytes[64];
	};
	uint64_t hashes[KVMM_PREFIX_MAX_BLOCKS + 2];
};

/*
 * Send v's first bytes bytes (a larger struct's tail zero, or one byte
 * of it 1 with tail) with size in its size word and n in its count
 * word, then hashes of v's hashes: the reply's status, its body in body.
 */
static int hs_var_send(int fd, uint16_t c, const struct hs_var *v,
		       uint32_t size, uint32_t bytes, uint32_t n,
		       uint32_t hashes, bool tail, void *body, size_t cap)
{
	static char buf[KVMM_MSG_MAX];
	size_t known = c == KVMM_CMD_PREFIX_QUERY ? sizeof(v->pq) :
						    sizeof(v->pm);
	size_t len = bytes + (size_t)hashes * 8;

	t_assert(bytes >= 12 && bytes <= sizeof(v->bytes) &&
		 len <= sizeof(buf));
	memset(buf, 0, bytes);
	memcpy(buf, v->bytes, known < bytes ? known : bytes);
	memcpy(buf, &size, 4);
	memcpy(buf + 8, &n, 4); /* both count words are at 8 */
	if (tail)
		buf[bytes - 1] = 1;
	memcpy(buf + bytes, v->hashes, (size_t)hashes * 8);
	return cmd(fd, c, buf, len, body, cap);
}

/* ... with a size word that says what it is. */
static int hs_var_cmd(int fd, uint16_t c, const struct hs_var *v, uint32_t size,
		      uint32_t n, uint32_t hashes, bool tail, void *body,
		      size_t cap)
{
	return hs_var_send(fd, c, v, size, size, n, hashes, tail, body, cap);
}

/* PREFIX_QUERY: its counts and lengths, fields, ids; the hash found. */
static void hs_query(const struct hs *x)
{
	static struct hs_var v;
	const uint16_t c = KVMM_CMD_PREFIX_QUERY;
	const uint32_t k = sizeof(v.pq);
	struct {
		struct kvmm_prefix_query_reply r;
		uint8_t tiers[8];
	} rep;

	memset(&v, 0, sizeof(v));
	v.pq.region_id = x->region;
	v.hashes[0] = HS_HASH;
	for (uint32_t i = 1; i < KVMM_PREFIX_MAX_BLOCKS + 2; i++)
		v.hashes[i] = 0x70000000ull + i; /* none cached */
	t_assert_eq(hs_var_cmd(x->fd, c, &v, 16, 0, 0, false, NULL, 0),
		    -EINVAL); /* under the struct */
	t_assert_eq(hs_var_send(x->fd, c, &v, 16, k, 1, 1, false, NULL, 0),
		    -EINVAL); /* its size word says under it */
	t_assert_eq(hs_var_send(x->fd, c, &v, 0xfffffff0u, k, 1, 1, false, NULL,
				0),
		    -EINVAL); /* ... or far past the message */
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 2, 1, false, NULL, 0),
		    -EINVAL); /* one hash short */
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 2, 3, false, NULL, 0),
		    -EINVAL); /* one too many */
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, KVMM_PREFIX_MAX_BLOCKS + 1,
			       KVMM_PREFIX_MAX_BLOCKS + 1, false, NULL, 0),
		    -EINVAL);
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 0xffffffffu, 2, false, NULL, 0),
		    -EINVAL);
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k + 16, 1, 1, true, NULL, 0),
		    -E2BIG);
	v.pq.flags = 1;
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 1, 1, false, NULL, 0), -EINVAL);
	v.pq.flags = 0;
	v.pq.reserved[1] = 1;
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 1, 1, false, NULL, 0), -EINVAL);
	v.pq.reserved[1] = 0;
	v.pq.region_id = 12345;
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 1, 1, false, NULL, 0), -ENOENT);
	v.pq.region_id = x->foreign;
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 1, 1, false, NULL, 0), -EPERM);
	v.pq.region_id = x->region;
	hs_serving(x->fd);

	/* none asked: none found */
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, 0, 0, false, &rep, sizeof(rep)),
		    0);
	t_assert_eq(rep.r.nr_blocks, 0);
	/* the hash, then ones nobody cached (a newer client's zero tail
	 * accepted): the one block, on the GPU */
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k + 16, 3, 3, false, &rep,
			       sizeof(rep)),
		    0);
	t_assert_eq(rep.r.nr_blocks, 1);
	t_assert_eq(rep.r.gpu, 1);
	t_assert_eq(rep.tiers[0], KVMM_QUERY_GPU);
	t_assert_eq(rep.tiers[1], 0); /* the padding */
	/* the most it takes: cut to the region's blocks */
	t_assert_eq(hs_var_cmd(x->fd, c, &v, k, KVMM_PREFIX_MAX_BLOCKS,
			       KVMM_PREFIX_MAX_BLOCKS, false, &rep,
			       sizeof(rep)),
		    0);
	t_assert_eq(rep.r.nr_blocks, 1);
	hs_serving(x->fd);
}

/* BLOCK_PIN_MANY: counts and lengths, the shared flags' rules (one
 * error fails the whole request), and per-hash results. */
static void hs_pin_many(const struct hs *x)
{
	static struct hs_var v;
	const uint16_t c = KVMM_CMD_BLOCK_PIN_MANY;
	const uint32_t k = sizeof(v.pm);
	struct {
		struct kvmm_block_pin_many_reply r;
		int32_t results[4];
	} rep;
	int fd = hs_session(KVMM_ABI_MINOR); /* pins of its own */

	memset(&v, 0, sizeof(v));
	v.hashes[0] = HS_HASH;
	v.hashes[1] = 0;
	v.hashes[2] = 0x71000000ull; /* not cached */
	t_assert_eq(hs_var_cmd(fd, c, &v, 24, 0, 0, false, NULL, 0),
		    -EINVAL); /* under the struct */
	t_assert_eq(hs_var_cmd(fd, c, &v, k, 0, 0, false, NULL, 0),
		    -EINVAL); /* no hash */
	t_assert_eq(hs_var_cmd(fd, c, &v, k, 2, 1, false, NULL, 0), -EINVAL);
	t_assert_eq(hs_var_cmd(fd, c, &v, k, 2, 3, false, NULL, 0), -EINVAL);
	t_assert_eq(hs_var_cmd(fd, c, &v, k, KVMM_PIN_MANY_MAX + 1,
			       KVMM_PIN_MANY_MAX + 1, false, NULL, 0),
		    -EINVAL);
	t_assert_eq(hs_var_send(fd, c, &v, 0xfffffff0u, k, 1, 1, false, NULL,
				0),
		    -EINVAL);
	t_assert_eq(hs_var_send(fd, c, &v, 24, k, 1, 1, false, NULL, 0),
		    -EINVAL);
	t_assert_eq(hs_var_cmd(fd, c, &v, k + 16, 1, 1, true, NULL, 0), -E2BIG);
	hs_serving(fd);
	/* the flags, TTL and priority every hash shares: checked first */
	{
		static const struct {
			uint32_t flags;
			uint64_t ttl;
			int32_t prio;
			int err;
		} bad[] = {
			{ 0x100, 0, 0, -EINVAL }, /* no such flag */
			{ KVMM_PIN_F_TTL, 0, 0, -EINVAL }, /* TTL 0 */
			{ 0, 1000, 0, -EINVAL }, /* a TTL without the flag */
			{ KVMM_PIN_F_TTL, KVMM_PIN_TTL_MAX_NS + 1, 0, -ERANGE },
			{ KVMM_PIN_F_PRIORITY, 0, 128, -ERANGE },
			{ KVMM_PIN_F_PRIORITY, 0, -129, -ERANGE },
			{ 0, 0, 5, -EINVAL }, /* a priority without it */
			{ KVMM_PIN_F_DEMOTE, 0, 0, -EINVAL }, /* no TTL */
			{ KVMM_PIN_F_PRIORITY_ONLY, 0, 0, -EINVAL },
			{ KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY |
				  KVMM_PIN_F_TTL,
			  1000, 1, -EINVAL },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			int r;

			v.pm.flags = bad[i].flags;
			v.pm.ttl_ns = bad[i].ttl;
			v.pm.priority = bad[i].prio;
			r = hs_var_cmd(fd, c, &v, k, 3, 3, false, NULL, 0);
			if (r != bad[i].err)
				t_fail("pin-many with flags %#x, TTL %llu, priority %d: %d, expected %d",
				       bad[i].flags,
				       (unsigned long long)bad[i].ttl,
				       bad[i].prio, r, bad[i].err);
		}
		v.pm.flags = 0;
		v.pm.ttl_ns = 0;
		v.pm.priority = 0;
		v.pm.reserved[0] = 1;
		t_assert_eq(hs_var_cmd(fd, c, &v, k, 3, 3, false, NULL, 0),
			    -EINVAL);
		v.pm.reserved[0] = 0;
	}
	hs_serving(fd);
	/* nothing pinned by the refused ones: the hash, hash 0 and one not
	 * cached (a newer client's zero tail accepted), each its result */
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(hs_var_cmd(fd, c, &v, k + 16, 3, 3, false, &rep,
			       sizeof(rep)),
		    0);
	t_assert_eq(rep.r.nr_hashes, 3);
	t_assert_eq(rep.r.pinned, 1);
	t_assert_eq(rep.r.pins, 1);
	t_assert_eq(rep.results[0], 0); /* on the GPU */
	t_assert_eq(rep.results[1], -EINVAL);
	t_assert_eq(rep.results[2], -ENOENT);
	t_assert_eq(rep.results[3], 0); /* the padding */
	{
		struct kvmm_block_unpin un = { .size = sizeof(un),
					       .hash = HS_HASH };

		/* now, not at the session's end, which kvmmd sees later */
		t_assert_eq(cmd(fd, KVMM_CMD_BLOCK_UNPIN, &un, sizeof(un), NULL,
				0),
			    0);
	}
	close(fd);
}

/* TIER_STATS' request (ABI 1.21): every size's or one size's stats. */
static void hs_tier_stats(const struct hs *x)
{
	struct kvmm_tier_stats_req q = { .size = sizeof(q) }, r;
	struct kvmm_tier_stats_reply ts;
	const uint16_t c = KVMM_CMD_TIER_STATS;
	int old;

	hs_sizes(x->fd, c, &q, sizeof(q), true);
	t_assert_eq(cmd(x->fd, c, NULL, 0, &ts, sizeof(ts)), 0);
	t_assert_eq(ts.size, sizeof(ts));
	t_assert_eq(ts.nr_sizes, 1);
	t_assert_eq(ts.sizes[0], HS_PPB);
	r = q, r.flags = 1;
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
	r = q, r.pad = 1;
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
	r = q, r.reserved[1] = 1;
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -EINVAL);
	r = q, r.block_pages = HS_PPB + 1; /* no cache of that size */
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -ENOENT);
	r = q, r.block_pages = 0xffffffffu;
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), NULL, 0), -ENOENT);
	r = q, r.block_pages = HS_PPB;
	memset(&ts, 0, sizeof(ts));
	t_assert_eq(cmd(x->fd, c, &r, sizeof(r), &ts, sizeof(ts)), 0);
	t_assert_eq(ts.block_pages, HS_PPB);
	t_assert_eq(ts.tiers[0].used_blocks, 1); /* HS_HASH */
	/* a client of 1.20 knows no request: any body is -EINVAL */
	old = hs_session(20);
	t_assert_eq(cmd(old, c, &r, sizeof(r), NULL, 0), -EINVAL);
	t_assert_eq(cmd(old, c, NULL, 0, &ts, sizeof(ts)), 0);
	close(old);
	hs_serving(x->fd);
}

/*
 * ADMIN_CACHE_DROP: its fields; a drop of the block size's cache
 * (ABI 1.22) that keeps HS_HASH while in_use (a sequence maps it)
 * and drops it after.
 */
static void hs_cache_drop(int fd, bool in_use)
{
	struct kvmm_admin_cache_drop a = { .size = sizeof(a),
					   .block_pages = HS_PPB },
				     b;
	struct kvmm_admin_cache_drop_reply rep;
	const uint16_t c = KVMM_CMD_ADMIN_CACHE_DROP;
	int old;

	hs_sizes(fd, c, &a, sizeof(a), false);
	b = a, b.tiers = KVMM_CACHE_DROP_NVME << 1; /* past NVMe */
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.flags = KVMM_CACHE_DROP_F_TENANT << 1;
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.tenant = 5; /* without the flag */
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.flags = KVMM_CACHE_DROP_F_TENANT;
	b.tenant = KVMM_TENANT_OTHERS;
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.pad = 1;
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.reserved[0] = 1;
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -EINVAL);
	b = a, b.block_pages = HS_PPB + 1; /* no cache of that size */
	t_assert_eq(cmd(fd, c, &b, sizeof(b), NULL, 0), -ENOENT);
	/* block_pages was a reserved word before 1.22 */
	old = hs_session(21);
	t_assert_eq(cmd(old, c, &a, sizeof(a), NULL, 0), -EINVAL);
	close(old);
	hs_serving(fd);
	memset(&rep, 0xff, sizeof(rep));
	t_assert_eq(cmd(fd, c, &a, sizeof(a), &rep, sizeof(rep)), 0);
	t_assert_eq(rep.dropped[0] + rep.dropped[1] + rep.dropped[2],
		    in_use ? 0 : 1);
	t_assert_eq(rep.kept[0], in_use ? 1 : 0);
	t_assert_eq(rep.kept_in_use, in_use ? 1 : 0);
}

/* The COLLECT flags of the older commands, with flags they do not go
 * with. */
static void hs_collect_flags(const struct hs *x)
{
	struct {
		struct kvmm_prefix_open po;
		uint64_t hash;
	} po = { .po = { .size = sizeof(po.po),
			 .region_id = x->region,
			 .nr_hashes = 1 },
		 .hash = HS_HASH };
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = x->region,
				      .seq_id = x->reader,
				      .new_len = HS_TPB };
	static const uint32_t bad_open[] = {
		0x10, /* no such flag */
		KVMM_PREFIX_OPEN_COLLECT | 0x10,
		KVMM_PREFIX_OPEN_SEGMENTS | KVMM_PREFIX_OPEN_COLLECT,
		KVMM_PREFIX_OPEN_EARLY | KVMM_PREFIX_OPEN_COLLECT,
	};

	for (size_t i = 0; i < sizeof(bad_open) / sizeof(bad_open[0]); i++) {
		po.po.flags = bad_open[i];
		t_assert_eq(cmd(x->fd, KVMM_CMD_PREFIX_OPEN, &po, sizeof(po),
				NULL, 0),
			    -EINVAL);
	}
	ex.flags = KVMM_SEQ_EXTEND_COLLECT << 1;
	t_assert_eq(cmd(x->fd, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0),
		    -EINVAL);
	ex.flags = KVMM_SEQ_EXTEND_COLLECT; /* an extend's flag alone */
	t_assert_eq(cmd(x->fd, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL, 0),
		    -EINVAL);
	hs_serving(x->fd);
}

/* ---- a burst of mutated well-formed requests ---------------------- */

static uint64_t hs_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t hs_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(hs_next(s) % n);
}

/* The burst's commands and what each may answer, whatever its payload
 * (0 ends each list). */
static const struct {
	uint16_t cmd;
	int errs[10];
} hs_burst_cmds[] = {
	{ KVMM_CMD_SEQ_UNSHARE,
	  { -EINVAL, -E2BIG, -ENOENT, -EPERM, -ENODATA, -EBUSY, -ENOMEM,
	    -EDQUOT } },
	{ KVMM_CMD_PREFIX_COLLECT, { -EINVAL, -E2BIG, -ENOENT, -EPERM } },
	{ KVMM_CMD_SEQ_COLLECT, { -EINVAL, -E2BIG, -ENOENT, -EPERM } },
	{ KVMM_CMD_PREFIX_QUERY, { -EINVAL, -E2BIG, -ENOENT, -EPERM } },
	{ KVMM_CMD_BLOCK_PIN_MANY, { -EINVAL, -E2BIG, -ERANGE, -EOVERFLOW } },
	{ KVMM_CMD_TIER_STATS, { -EINVAL, -E2BIG, -ENOENT } },
	{ KVMM_CMD_ADMIN_CACHE_DROP, { -EINVAL, -E2BIG, -ENOENT } },
};

#define HS_BURST_CMDS (sizeof(hs_burst_cmds) / sizeof(hs_burst_cmds[0]))

/* A well-formed request of burst command i into p: its length. */
static size_t hs_template(const struct hs *x, size_t i, uint64_t *rng, char *p)
{
	uint32_t seq = hs_below(rng, 2) ? x->reader : x->writer;

	switch (hs_burst_cmds[i].cmd) {
	case KVMM_CMD_SEQ_UNSHARE: {
		struct kvmm_seq_unshare u = { .size = sizeof(u),
					      .region_id = x->region,
					      .seq_id = seq,
					      .block = hs_below(rng, 2) };

		memcpy(p, &u, sizeof(u));
		return sizeof(u);
	}
	case KVMM_CMD_PREFIX_COLLECT:
	case KVMM_CMD_SEQ_COLLECT: {
		struct kvmm_region_ref r = { .size = sizeof(r),
					     .region_id = x->region,
					     .seq_id = seq };

		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	case KVMM_CMD_PREFIX_QUERY:
	case KVMM_CMD_BLOCK_PIN_MANY: {
		bool q = hs_burst_cmds[i].cmd == KVMM_CMD_PREFIX_QUERY;
		struct kvmm_prefix_query pq = { .size = sizeof(pq),
						.region_id = x->region };
		struct kvmm_block_pin_many pm = { .size = sizeof(pm) };
		uint32_t n = 1 + hs_below(rng, 3);
		size_t k = q ? sizeof(pq) : sizeof(pm);
		uint64_t h[3] = { HS_HASH, 0x72000000ull, 0 };

		pq.nr_hashes = pm.nr_hashes = n;
		memcpy(p, q ? (void *)&pq : (void *)&pm, k);
		memcpy(p + k, h, n * sizeof(uint64_t));
		return k + n * sizeof(uint64_t);
	}
	case KVMM_CMD_TIER_STATS: {
		struct kvmm_tier_stats_req r = {
			.size = sizeof(r),
			.block_pages = hs_below(rng, 2) ? HS_PPB : 0
		};

		memcpy(p, &r, sizeof(r));
		return sizeof(r);
	}
	default: {
		struct kvmm_admin_cache_drop a = {
			.size = sizeof(a),
			.tiers = hs_below(rng, 8),
			.block_pages = hs_below(rng, 2) ? HS_PPB : 0
		};

		memcpy(p, &a, sizeof(a));
		return sizeof(a);
	}
	}
}

/*
 * n requests of the burst's commands, each well-formed but for 1-3
 * changes: a byte set to 0, 1, 0xff or a random value; the length cut
 * or grown (zeros or random bytes); the size word set to the length.
 * Every answer is one of its command's errnos (or 0).
 */
static void hs_burst(const struct hs *x, int n)
{
	uint64_t rng = 0x40057113ull;
	char p[256];

	for (int it = 0; it < n; it++) {
		size_t i = hs_below(&rng, HS_BURST_CMDS);
		size_t len = hs_template(x, i, &rng, p);
		uint32_t changes = 1 + hs_below(&rng, 3);
		bool ok = false;
		int r;

		for (uint32_t k = 0; k < changes; k++) {
			static const uint8_t vals[3] = { 0, 1, 0xff };
			uint32_t what = hs_below(&rng, 4), at, nl;

			if (what <= 1 && len) {
				at = hs_below(&rng, (uint32_t)len);
				p[at] = what ? (char)hs_next(&rng) :
					       (char)vals[hs_below(&rng, 3)];
			} else if (what == 2) {
				nl = hs_below(&rng, (uint32_t)len + 24);
				for (size_t b = len; b < nl; b++)
					p[b] = hs_below(&rng, 2) ?
						       0 :
						       (char)hs_next(&rng);
				len = nl;
			} else if (len >= 4) {
				uint32_t size = (uint32_t)len;

				memcpy(p, &size, 4);
			}
		}
		r = cmd(x->fd, hs_burst_cmds[i].cmd, p, len, NULL, 0);
		for (int e = 0; !r || (e < 10 && hs_burst_cmds[i].errs[e]); e++)
			if (!r || r == hs_burst_cmds[i].errs[e]) {
				ok = true;
				break;
			}
		if (!ok)
			t_fail("burst request %d: command %#x of %zu bytes answered %d",
			       it, hs_burst_cmds[i].cmd, len, r);
	}
	hs_serving(x->fd);
}

void hostile_newer_commands(uint32_t foreign_region)
{
	struct hs x = { .foreign = foreign_region };
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	const char *burst;

	hs_setup(&x);
	hs_cache_drop(x.fd, true); /* the writer and the reader map it */
	hs_tier_stats(&x);
	hs_unshare(&x);
	hs_collects(&x);
	hs_query(&x);
	hs_pin_many(&x);
	hs_collect_flags(&x);
	hs_cache_drop(x.fd, false); /* copied by both: nobody maps it */
	/* 400 by default: each is a round trip, which on a loaded machine
	 * costs what the rest of the test does per request;
	 * KVMM_HOSTILE_BURST=N sends N */
	burst = getenv("KVMM_HOSTILE_BURST");
	hs_burst(&x, burst ? atoi(burst) : 400);
	ref.region_id = x.region;
	t_ok(cmd(x.fd, KVMM_CMD_REGION_DESTROY, &ref, sizeof(ref), NULL, 0));
	close(x.fd);
}
