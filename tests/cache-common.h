/* SPDX-License-Identifier: MIT */
/*
 * A raw wire client for the cache tests: HELLO, REGION_CREATE, SEQ_OPEN,
 * SEQ_EXTEND, BLOCK_PUBLISH, PREFIX_OPEN, TIER_STATS, SEQ_CLOSE over the
 * socket (a request may be sent first and its reply taken later), with
 * the page fds of replies mapped into this process (host backend: each fd
 * is a memfd of one page; read-only for a cached block a prefix open
 * shares, so only readable here) so tests can write and compare the bytes
 * of blocks directly.  libkvmm has no publish/prefix calls yet.
 *
 * Below the wire client, the set-up the cache tests share: a publisher
 * process, waiting for a child, settled tier counters, and the libkvmm
 * side of a test (region options matching cc_region(), checking a
 * sequence's bytes through its mapping).
 */
#ifndef KVMM_TESTS_CACHE_COMMON_H
#define KVMM_TESTS_CACHE_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "kvmm/lib/wire.h"
#include "kvmm/uapi.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define CC_PAGE (64 * 1024)
#define CC_L 2
#define CC_PPB (2 * CC_L)
#define CC_TPB 256 /* 64 KiB / (2 heads * 64 dim * 2 bytes) */
#define CC_MAX_PAGES 4096

struct cc {
	int sock;
	uint32_t id;
	int ring_fds[4];
	uint32_t region;
	unsigned char *map[CC_MAX_PAGES]; /* page id -> our mapping */
};

/* Send one request without waiting for its reply (cc_recv()). */
static void cc_send(struct cc *c, uint16_t cmd, const void *body, size_t len)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h = { .size = sizeof(h) + len,
				  .cmd = cmd,
				  .version = KVMM_ABI_MAJOR,
				  .id = ++c->id };

	t_assert(sizeof(h) + len <= sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), body, len);
	t_ok(kw_send(c->sock, buf, h.size, NULL, 0, 0));
}

/* The reply: body into rep (up to cap), fds (with continuations) into
 * fds_out, or closed when it is NULL.  Returns the reply status. */
static int cc_recv(struct cc *c, void *rep, size_t cap, int *fds_out,
		   unsigned int *nfds_out)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h;
	unsigned int total = 0;
	int fds[KVMM_MSG_MAX_FDS];
	unsigned int nfds;
	ssize_t n;

	for (;;) {
		n = kw_recv(c->sock, buf, sizeof(buf), fds, &nfds,
			    KVMM_MSG_MAX_FDS, 0);
		t_assert(n >= (ssize_t)sizeof(h));
		memcpy(&h, buf, sizeof(h));
		for (unsigned int i = 0; i < nfds; i++) {
			if (fds_out)
				fds_out[total++] = fds[i];
			else
				close(fds[i]);
		}
		if (h.cmd == KVMM_CMD_FDS) {
			if (!(h.flags & KVMM_MSG_F_MORE_FDS))
				break;
			continue;
		}
		if (rep && n > (ssize_t)sizeof(h))
			memcpy(rep, buf + sizeof(h),
			       (size_t)n - sizeof(h) < cap ?
				       (size_t)n - sizeof(h) :
				       cap);
		if (!(h.flags & KVMM_MSG_F_MORE_FDS))
			break;
	}
	if (nfds_out)
		*nfds_out = total;
	t_assert_eq(h.id, c->id);
	return h.status;
}

/* One request and its reply (see cc_recv()). */
static int cc_call(struct cc *c, uint16_t cmd, const void *body, size_t len,
		   void *rep, size_t cap, int *fds_out, unsigned int *nfds_out)
{
	cc_send(c, cmd, body, len);
	return cc_recv(c, rep, cap, fds_out, nfds_out);
}

/* Connect raw as a client of ABI 1.minor: the HELLO reply in *rep, its
 * four ring fds in c. */
static void cc_hello(struct cc *c, const char *path, uint16_t minor,
		     struct kvmm_hello_reply *rep)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct kvmm_hello hello = { .size = sizeof(hello),
				    .abi_major = KVMM_ABI_MAJOR,
				    .abi_minor = minor };
	unsigned int n;

	memset(c, 0, sizeof(*c));
	c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	t_assert(c->sock >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	t_ok(connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)));
	snprintf(hello.name, sizeof(hello.name), "cache-test");
	t_ok(cc_call(c, KVMM_CMD_HELLO, &hello, sizeof(hello), rep,
		     sizeof(*rep), c->ring_fds, &n));
	t_assert_eq(n, 4);
}

/* Connect as a client of ABI 1.minor (cc_connect(): this build's). */
static void cc_connect_minor(struct cc *c, const char *path, uint16_t minor)
{
	struct kvmm_hello_reply rep;

	cc_hello(c, path, minor, &rep);
	t_assert_eq(rep.page_size, CC_PAGE);
}

static void cc_connect(struct cc *c, const char *path)
{
	cc_connect_minor(c, path, KVMM_ABI_MINOR);
}

/*
 * A region of `layers` (2 x layers pages a block, CC_TPB tokens a block)
 * into c->region: max_seqs sequences, max_tokens of `blocks` blocks.
 */
static inline void cc_region_sized(struct cc *c, uint32_t layers,
				   uint32_t max_seqs, uint32_t blocks)
{
	struct kvmm_region_create rc = { .size = sizeof(rc),
					 .layers = layers,
					 .kv_heads = 2,
					 .head_dim = 64,
					 .dtype_bytes = 2,
					 .max_seqs = max_seqs,
					 .max_tokens = blocks * CC_TPB };
	struct kvmm_region_create_reply rep;

	t_ok(cc_call(c, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), &rep,
		     sizeof(rep), NULL, NULL));
	t_assert_eq(rep.tokens_per_block, CC_TPB);
	t_assert_eq(rep.pages_per_block, 2 * layers);
	c->region = rep.region_id;
}

/* The tests' usual region: CC_L layers (CC_PPB pages a block), 16
 * sequences. */
static void cc_region(struct cc *c)
{
	cc_region_sized(c, CC_L, 16, 16);
}

/* Map the fds of a reply onto the page ids that lack the HELD bit. */
static void cc_map(struct cc *c, const uint32_t *ids, uint32_t n,
		   const int *fds, unsigned int nfds)
{
	unsigned int k = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = ids[i] & ~KVMM_PAGE_HELD;

		t_assert(id < CC_MAX_PAGES);
		if (ids[i] & KVMM_PAGE_HELD) {
			t_assert(c->map[id] != NULL);
			continue;
		}
		t_assert(k < nfds);
		c->map[id] = mmap(NULL, CC_PAGE, PROT_READ | PROT_WRITE,
				  MAP_SHARED, fds[k], 0);
		/* a cached block a prefix open shares comes read-only (host
		 * backend): such a page is mapped for reading */
		if (c->map[id] == MAP_FAILED && errno == EACCES)
			c->map[id] = mmap(NULL, CC_PAGE, PROT_READ, MAP_SHARED,
					  fds[k], 0);
		t_assert(c->map[id] != MAP_FAILED);
		close(fds[k++]);
	}
	t_assert_eq(k, nfds);
}

static uint32_t cc_seq_open(struct cc *c)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region };
	struct kvmm_seq_open_reply rep;

	t_ok(cc_call(c, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &rep, sizeof(rep),
		     NULL, NULL));
	return rep.seq_id;
}

/* Extend to len tokens (0 or -errno: the daemon's answer); ids gets the
 * page ids of the blocks the reply names, block b's at b x its region's
 * pages a block. */
static inline int cc_try_extend(struct cc *c, uint32_t seq, uint32_t len,
				uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	struct kvmm_seq_extend ex = { .size = sizeof(ex),
				      .region_id = c->region,
				      .seq_id = seq,
				      .new_len = len };
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
	/* the region's stride, which is CC_PPB only in the usual region */
	for (uint32_t i = 0; i < rep->nr_blocks * rep->pages_per_block; i++)
		ids[rep->first_block * rep->pages_per_block + i] =
			rep->page_ids[i] & ~KVMM_PAGE_HELD;
	return 0;
}

/* Extend to len tokens, which must succeed (cc_try_extend()). */
static void cc_extend(struct cc *c, uint32_t seq, uint32_t len, uint32_t *ids)
{
	t_ok(cc_try_extend(c, seq, len, ids));
}

static int cc_publish(struct cc *c, uint32_t seq, uint32_t first,
		      const uint64_t *hashes, uint32_t n,
		      struct kvmm_block_publish_reply *rep)
{
	char buf[sizeof(struct kvmm_block_publish) + 64 * 8];
	struct kvmm_block_publish bp = { .size = sizeof(bp),
					 .region_id = c->region,
					 .seq_id = seq,
					 .first_block = first,
					 .nr_blocks = n,
					 .parent_hash = first ? hashes[-1] :
								0 };

	t_assert(n <= 64);
	memcpy(buf, &bp, sizeof(bp));
	memcpy(buf + sizeof(bp), hashes, n * 8);
	return cc_call(c, KVMM_CMD_BLOCK_PUBLISH, buf, sizeof(bp) + n * 8, rep,
		       sizeof(*rep), NULL, NULL);
}

/* Send a PREFIX_OPEN of n hashes (cc_prefix_recv() takes the reply). */
static void cc_prefix_send_flags(struct cc *c, const uint64_t *hashes,
				 uint32_t n, uint32_t flags)
{
	char req[sizeof(struct kvmm_prefix_open) + 64 * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .region_id = c->region,
				       .nr_hashes = n,
				       .flags = flags };

	t_assert(n <= 64);
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), hashes, n * 8);
	cc_send(c, KVMM_CMD_PREFIX_OPEN, req, sizeof(po) + n * 8);
}

static void cc_prefix_send(struct cc *c, const uint64_t *hashes, uint32_t n)
{
	cc_prefix_send_flags(c, hashes, n, 0);
}

/* Its reply: ids gets the page ids (mapped), the reply header *out. */
static void cc_prefix_recv(struct cc *c, struct kvmm_prefix_open_reply *out,
			   uint32_t *ids)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	static int fds[CC_MAX_PAGES];
	unsigned int nfds;

	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	*out = *rep;
	t_assert_eq(rep->nr_fds, nfds);
	cc_map(c, rep->page_ids, rep->nr_blocks * rep->pages_per_block, fds,
	       nfds);
	for (uint32_t i = 0; i < rep->nr_blocks * rep->pages_per_block; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
}

/* Prefix open: ids gets the page ids, the reply header in *rep. */
static void cc_prefix(struct cc *c, const uint64_t *hashes, uint32_t n,
		      struct kvmm_prefix_open_reply *out, uint32_t *ids)
{
	cc_prefix_send(c, hashes, n);
	cc_prefix_recv(c, out, ids);
}

static inline void cc_tier_stats(struct cc *c, struct kvmm_tier_stats_reply *st)
{
	t_ok(cc_call(c, KVMM_CMD_TIER_STATS, NULL, 0, st, sizeof(*st), NULL,
		     NULL));
}

/* Close a sequence: unmap our mappings of its pages first. */
static void cc_seq_close(struct cc *c, uint32_t seq, const uint32_t *ids,
			 uint32_t npages)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region,
				       .seq_id = seq };

	for (uint32_t i = 0; i < npages; i++) {
		if (c->map[ids[i]]) {
			munmap(c->map[ids[i]], CC_PAGE);
			c->map[ids[i]] = NULL;
		}
	}
	t_ok(cc_call(c, KVMM_CMD_SEQ_CLOSE, &ref, sizeof(ref), NULL, 0, NULL,
		     NULL));
}

static void cc_disconnect(struct cc *c)
{
	for (int i = 0; i < CC_MAX_PAGES; i++)
		if (c->map[i])
			munmap(c->map[i], CC_PAGE);
	cc_call(c, KVMM_CMD_BYE, NULL, 0, NULL, 0, NULL, NULL);
	close(c->sock);
	for (int i = 0; i < 4; i++)
		close(c->ring_fds[i]);
}

/* The byte pattern of block b of content "tag", page p, offset o. */
static inline unsigned char cc_pat(uint64_t tag, uint32_t b, uint32_t p,
				   uint32_t o)
{
	return (unsigned char)(tag * 131 + b * 31 + p * 7 + o * 13 + (o >> 9));
}

static void cc_fill(struct cc *c, const uint32_t *ids, uint32_t nblocks,
		    uint64_t tag)
{
	for (uint32_t b = 0; b < nblocks; b++)
		for (uint32_t p = 0; p < CC_PPB; p++)
			for (uint32_t o = 0; o < CC_PAGE; o++)
				c->map[ids[b * CC_PPB + p]][o] =
					cc_pat(tag, b, p, o);
}

static void cc_check(struct cc *c, const uint32_t *ids, uint32_t nblocks,
		     uint64_t tag)
{
	for (uint32_t b = 0; b < nblocks; b++)
		for (uint32_t p = 0; p < CC_PPB; p++)
			for (uint32_t o = 0; o < CC_PAGE; o++)
				if (c->map[ids[b * CC_PPB + p]][o] !=
				    cc_pat(tag, b, p, o))
					t_fail("block %u page %u byte %u differs",
					       b, p, o);
}

/* A child's exit status, 128 + the signal that killed it, or -1. */
static inline int cc_wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A publisher process: a new sequence of nb blocks (hashes h) filled with
 * content tag (cc_fill()), every block published (asserted), the sequence
 * closed, the process gone.  Returns its exit status (cc_wait_child());
 * when it is 0, ids (may be NULL) has the blocks' page ids.
 */
static inline int cc_publish_content(const char *sock, const uint64_t *h,
				     uint32_t nb, uint64_t tag, uint32_t *ids)
{
	int fd[2], st;
	pid_t p;

	t_assert(nb <= 64);
	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_block_publish_reply rep;
		uint32_t pages[64 * CC_PPB];
		struct cc c;
		uint32_t seq;

		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, nb * CC_TPB, pages);
		cc_fill(&c, pages, nb, tag);
		t_ok(cc_publish(&c, seq, 0, h, nb, &rep));
		if (rep.published != nb)
			t_fail("published %u of %u, duplicates %u, not cached %u",
			       rep.published, nb, rep.duplicates,
			       rep.not_cached);
		cc_seq_close(&c, seq, pages, nb * CC_PPB);
		cc_disconnect(&c);
		t_assert_eq(write(fd[1], pages, nb * CC_PPB * 4),
			    nb * CC_PPB * 4);
		_exit(0);
	}
	st = cc_wait_child(p);
	if (!st && ids)
		t_assert_eq(read(fd[0], ids, nb * CC_PPB * 4), nb * CC_PPB * 4);
	close(fd[0]);
	close(fd[1]);
	return st;
}

/*
 * Tier counters once nothing is in transit (fails after 10 s): no
 * migration in flight (restores reaped but not settled count), no
 * PREFIX_OPEN pending, and no demotion waiting for a host slot
 * (ADMIN_STATUS demotions_queued, asked before and after the counters):
 * such a block is in the host tier for the policy but has no slot yet,
 * so no tier's used_blocks counts it.  This only waits for moves to end:
 * a block lost stays missing from the counters.
 */
static inline void cc_settled_stats(const char *sock,
				    struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_status_reply st;
	struct kvmm_conn *c;
	uint64_t queued = 0;
	int i;

	/* an admin session, as kvmmctl's: any backend and page size */
	t_ok(kc_connect_admin(sock, &c));
	for (i = 0; i < 1000; i++) {
		t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
				sizeof(st), NULL));
		queued = st.demotions_queued;
		t_ok(kc_request(c, KVMM_CMD_TIER_STATS, NULL, 0, ts,
				sizeof(*ts), NULL));
		t_ok(kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
				sizeof(st), NULL));
		queued += st.demotions_queued;
		if (!ts->migrations_in_flight && !ts->prefix_opens_pending &&
		    !queued)
			break;
		usleep(10000);
	}
	kvmm_disconnect(c);
	if (i == 1000)
		t_fail("after 10 s: %llu migrations in flight, %llu opens pending, %llu demotions queued",
		       (unsigned long long)ts->migrations_in_flight,
		       (unsigned long long)ts->prefix_opens_pending,
		       (unsigned long long)queued);
}

/*
 * What became of the blocks a restart recovered (TIER_STATS, ABI 1.24),
 * printed and checked: recovered in all, each of them counted once (cold,
 * taken in, evicted unused or dropped unused), and each count the one
 * given.
 */
static inline void cc_cold_check(const struct kvmm_tier_stats_reply *ts,
				 uint64_t recovered, uint64_t cold,
				 uint64_t admitted, uint64_t evicted,
				 uint64_t dropped)
{
	printf("recovered %llu: cold %llu, admitted %llu, evicted %llu, dropped %llu\n",
	       (unsigned long long)ts->recovered_blocks,
	       (unsigned long long)ts->cold_blocks,
	       (unsigned long long)ts->cold_admitted,
	       (unsigned long long)ts->cold_evicted,
	       (unsigned long long)ts->cold_dropped);
	t_assert_eq(ts->recovered_blocks, recovered);
	t_assert_eq(ts->recovered_blocks, ts->cold_blocks + ts->cold_admitted +
						  ts->cold_evicted +
						  ts->cold_dropped);
	t_assert_eq(ts->cold_blocks, cold);
	t_assert_eq(ts->cold_admitted, admitted);
	t_assert_eq(ts->cold_evicted, evicted);
	t_assert_eq(ts->cold_dropped, dropped);
}

/* The GPU and host tiers' use, drops and host demotions after `when`,
 * for the log of a test that asserts on them. */
static inline void cc_print_gpu_host(const char *when,
				     const struct kvmm_tier_stats_reply *ts)
{
	printf("%s: GPU %llu, host %llu blocks; drops %llu/%llu; host demotions in %llu\n",
	       when, (unsigned long long)ts->tiers[0].used_blocks,
	       (unsigned long long)ts->tiers[1].used_blocks,
	       (unsigned long long)ts->tiers[0].drops,
	       (unsigned long long)ts->tiers[1].drops,
	       (unsigned long long)ts->tiers[1].demotions_in);
}

/* How many of want[0..nw) are among ids[0..n). */
static inline uint32_t cc_overlap(const uint32_t *ids, uint32_t n,
				  const uint32_t *want, uint32_t nw)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < nw; i++) {
		for (uint32_t j = 0; j < n; j++) {
			if (ids[j] == want[i]) {
				k++;
				break;
			}
		}
	}
	return k;
}

/* libkvmm region options with cc_region()'s geometry. */
static inline struct kvmm_region_opts cc_region_opts(void)
{
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = CC_L,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 16,
				       .max_tokens = 16 * CC_TPB };

	return ro;
}

/* Whether blocks [0, nb) of a libkvmm sequence hold content tag, every
 * page sampled every stride bytes through the client's own mapping. */
static inline bool cc_seq_content_ok(struct kvmm_region *r, uint32_t seq,
				     uint32_t nb, uint64_t tag, uint32_t stride)
{
	for (uint32_t b = 0; b < nb; b++) {
		for (uint32_t pg = 0; pg < CC_PPB; pg++) {
			uint64_t base = pg & 1 ?
						kvmm_seq_v_ptr(r, seq, pg / 2) :
						kvmm_seq_k_ptr(r, seq, pg / 2);
			const unsigned char *m =
				(const unsigned char
					 *)(uintptr_t)(base +
						       (uint64_t)b * CC_PAGE);

			for (uint32_t o = 0; o < CC_PAGE; o += stride)
				if (m[o] != cc_pat(tag, b, pg, o))
					return false;
		}
	}
	return true;
}

/*
 * Contents as the tier tests write them: content k is nb (<= 64) blocks
 * with hashes base * (k + 1) + b + 1 holding cc_fill()'s bytes for tag
 * tag0 + k.
 */
struct cc_contents {
	uint64_t base;
	uint64_t tag0;
	uint32_t nb;
};

static inline void cc_content_hashes(const struct cc_contents *cs, int k,
				     uint64_t *h)
{
	for (uint32_t b = 0; b < cs->nb; b++)
		h[b] = cs->base * (uint64_t)(k + 1) + b + 1;
}

/*
 * Content k of cs published from this process, however much of it the
 * cache takes (a tier pinned full may refuse some): the reply's
 * not_cached.
 */
static inline uint32_t cc_publish_any(const char *sock,
				      const struct cc_contents *cs, int k)
{
	struct kvmm_block_publish_reply rep;
	uint32_t pages[64 * CC_PPB];
	uint64_t h[64];
	struct cc c;
	uint32_t seq;

	t_assert(cs->nb <= 64);
	cc_content_hashes(cs, k, h);
	cc_connect(&c, sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, cs->nb * CC_TPB, pages);
	cc_fill(&c, pages, cs->nb, cs->tag0 + k);
	t_ok(cc_publish(&c, seq, 0, h, cs->nb, &rep));
	cc_seq_close(&c, seq, pages, cs->nb * CC_PPB);
	cc_disconnect(&c);
	return rep.not_cached;
}

/* A writer process: content k published (cc_publish_content()). */
static inline void cc_write_content(const char *sock,
				    const struct cc_contents *cs, int k)
{
	uint64_t h[64];

	t_assert(cs->nb <= 64);
	cc_content_hashes(cs, k, h);
	t_assert_eq(cc_publish_content(sock, h, cs->nb, cs->tag0 + k, NULL), 0);
}

/*
 * A reader process: a prefix open on content k must find nb blocks, all
 * of them from tier (0 gpu, 1 host, 2 nvme; -1 any), holding content k's
 * bytes; the sequence is closed and the process gone when this returns.
 */
static inline void cc_read_content(const char *sock,
				   const struct cc_contents *cs, int k,
				   uint32_t nb, int tier)
{
	pid_t p;

	t_assert(cs->nb <= 64);
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[64 * CC_PPB];
		uint64_t h[64];
		uint32_t from[3];
		struct cc c;

		cc_content_hashes(cs, k, h);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, cs->nb, &rep, ids);
		from[0] = rep.from_gpu;
		from[1] = rep.from_host;
		from[2] = rep.from_nvme;
		if (rep.nr_blocks != nb)
			t_fail("content %d: %u blocks, expected %u (gpu %u host %u nvme %u)",
			       k, rep.nr_blocks, nb, from[0], from[1], from[2]);
		for (int t = 0; tier >= 0 && t < 3; t++)
			if (from[t] != (t == tier ? nb : 0))
				t_fail("content %d: gpu %u host %u nvme %u, expected all %u from tier %d",
				       k, from[0], from[1], from[2], nb, tier);
		cc_check(&c, ids, nb, cs->tag0 + k);
		cc_seq_close(&c, rep.seq_id, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/*
 * A prefix open of content k in this process: how many of its blocks it
 * finds, each of which must come from NVMe and hold content k's bytes;
 * the sequence is closed again.
 */
static inline uint32_t cc_found_on_nvme(const char *sock,
					const struct cc_contents *cs, int k)
{
	struct kvmm_prefix_open_reply rep;
	uint32_t ids[64 * CC_PPB];
	uint64_t h[64];
	struct cc c;

	t_assert(cs->nb <= 64);
	cc_content_hashes(cs, k, h);
	cc_connect(&c, sock);
	cc_region(&c);
	cc_prefix(&c, h, cs->nb, &rep, ids);
	t_assert_eq(rep.from_nvme, rep.nr_blocks);
	if (rep.nr_blocks)
		cc_check(&c, ids, rep.nr_blocks, cs->tag0 + k);
	cc_seq_close(&c, rep.seq_id, ids, rep.nr_blocks * CC_PPB);
	cc_disconnect(&c);
	return rep.nr_blocks;
}

/* kvmmd started with args (td_start()), or the test fails. */
static inline void cc_start(struct td_daemon *d, const char *const *args)
{
	int r = td_start(d, args);

	if (r)
		t_fail("kvmmd did not start: %d", r);
}

/* kvmmd stopped, which must be clean (its log is printed if not). */
static inline void cc_stop(struct td_daemon *d)
{
	td_stop_ok(d);
}

/* A path for an NVMe tier file: $KVMM_NVME_TEST_DIR (default /var/tmp)
 * /kvmm-NAME-PID; the test unlinks it. */
static inline void cc_nvme_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");

	snprintf(buf, len, "%s/kvmm-%s-%d", dir ? dir : "/var/tmp", name,
		 (int)getpid());
}

/* Milliseconds on the monotonic clock. */
static inline uint64_t cc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Wait (at most 15 s) for an NVMe tier that is out (its directory
 * missing, an open failing) to join the running cache: TIER_STATS'
 * nvme_open_error 0, the stats settled (cc_settled_stats()) into *ts.
 */
static inline void cc_wait_nvme_joined(const char *sock,
				       struct kvmm_tier_stats_reply *ts)
{
	uint64_t t0 = cc_now_ms();

	for (;;) {
		cc_settled_stats(sock, ts);
		if (!ts->nvme_open_error)
			return;
		if (cc_now_ms() - t0 > 15000)
			t_fail("the NVMe tier did not join in 15 s (error %llu, attempt %llu)",
			       (unsigned long long)ts->nvme_open_error,
			       (unsigned long long)ts->nvme_open_attempts);
		usleep(20000);
	}
}

/* Start kvmmd with args and the test knob env_name (e.g.
 * KVMMD_TEST_DEMOTE_DELAY_MS) set to delay_ms for it alone. */
static inline void cc_start_with_delay(struct td_daemon *d,
				       const char *const *args,
				       const char *env_name, int delay_ms)
{
	char delay[16];
	int r;

	snprintf(delay, sizeof(delay), "%d", delay_ms);
	setenv(env_name, delay, 1);
	r = td_start(d, args);
	unsetenv(env_name);
	if (r)
		t_fail("kvmmd did not start: %d", r);
}

/* Contents 0 .. nk - 1 published by writer processes, nb blocks each
 * (content k's block b named hash(k, b), with the pattern tag + k). */
static inline void cc_publish_contents(const char *sock, int nk, int nb,
				       uint64_t (*hash)(int k, int b),
				       uint64_t tag)
{
	for (int k = 0; k < nk; k++) {
		uint64_t h[nb];

		for (int b = 0; b < nb; b++)
			h[b] = hash(k, b);
		t_assert_eq(cc_publish_content(sock, h, (uint32_t)nb, tag + k,
					       NULL),
			    0);
	}
}

/* Wait (up to 10 s) until kvmmd has n commands parked. */
static inline void cc_wait_parked(struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 10000; i++) {
		t_ok(td_status(d, &st));
		if (st.cmds_parked_now == n)
			return;
		usleep(1000);
	}
	t_fail("cmds_parked_now never reached %llu (is %llu)",
	       (unsigned long long)n, (unsigned long long)st.cmds_parked_now);
}

/* A libkvmm connection (map-ahead off) named name. */
static inline struct kvmm_conn *cc_connect_lib(const char *sock,
					       const char *name)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = name,
					.map_ahead_set = 1 };
	struct kvmm_conn *c;

	t_ok(kvmm_connect(&co, &c));
	return c;
}

/* kvmm_block_pin() with the options filled in o. */
static inline int cc_pin(struct kvmm_conn *c, uint64_t hash, uint32_t flags,
			 uint64_t ttl_ns, int prio, struct kvmm_pin_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->flags = flags;
	o->ttl_ns = ttl_ns;
	o->priority = prio;
	return kvmm_block_pin(c, hash, o);
}

/* Wait (up to 10 s) until kvmmd has quarantined exactly n pages. */
static inline void cc_wait_quarantined(struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 10000; i++) {
		t_ok(td_status(d, &st));
		if (st.pages_quarantined == n)
			return;
		usleep(1000);
	}
	t_fail("pages_quarantined never reached %llu (is %llu)",
	       (unsigned long long)n, (unsigned long long)st.pages_quarantined);
}

#endif
