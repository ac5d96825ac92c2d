// SPDX-License-Identifier: MIT
/*
 * timeout: 120
 * KVMM_PREFIX_OPEN_EARLY and SEQ_WAIT_READY (ABI 1.8) against a real
 * kvmmd (--restore-mode reload) whose restore jobs each wait DELAY_MS,
 * with contents of 8 blocks on its NVMe tier:
 *   - bad input: EARLY without ACTIONS -EINVAL; SEQ_WAIT_READY of an
 *     unknown region or sequence -ENOENT, past the region's blocks or with
 *     unknown flags -EINVAL, past the sequence's blocks -ERANGE;
 *   - an early open of 8 NVMe blocks replies before its reloads are done
 *     (a poll right after says some are pending; the reply took less than
 *     one restore's delay), with every block RELOADED_NVME; a publish of a
 *     block still loading is -EBUSY; the sequence extends meanwhile; a
 *     wait for block 0 returns while later ones still load; a wait for all
 *     8 then finds the bytes identical to what was published, and a
 *     non-early open of the same shape (the baseline, measured in the same
 *     run) takes far longer than the early reply;
 *   - closing the sequence right after an early reply calls its reloads off
 *     (restores_cancelled) and leaks nothing;
 *   - a reload that fails (a payload byte of block 3's NVMe slot flipped:
 *     its CRC32C fails) is reported by SEQ_WAIT_READY as block 3, every
 *     time; the client writes the block (a recompute) and publishes it;
 *   - a sequence truncated to 4 blocks right after its early reply: the
 *     reloads past the cut are called off, a wait for 8 blocks is -ERANGE,
 *     the first 4 load intact;
 *   - a second early open of a content whose reloads another early open
 *     started waits for them (its reply comes when they are done) and
 *     shares the pages (restores_waited);
 *   - revoked by the admin from block 1 while its client waits in
 *     SEQ_WAIT_READY for all 8: the wait ends with -ESTALE (ABI 1.20;
 *     -ERANGE for a client of 1.19), nothing leaks;
 *   - a client killed after its early reply while it waits in
 *     SEQ_WAIT_READY leaks nothing: every reload ends in the cache or is
 *     cancelled, nothing mapped, allocated beyond the cached GPU blocks,
 *     or quarantined;
 *   - a daemon stopped (SIGTERM) while an early open's reloads run and its
 *     client waits in SEQ_WAIT_READY exits cleanly (under ASan: no leak).
 * TIER_STATS counts each case exactly: early_opens and early_reloads at the
 * reply, early_reload_failures for the corrupted block (also in
 * checksum_failures), and a block handed out loading as a hit of its tier
 * (and in prefix_blocks_hit) only once its reload landed in the sequence:
 * not the failed one, nor those of the sequence closed before they landed.
 */
#include <fcntl.h>

#include "tests/cache-restore-common.h"
#include "tests/lib/revoke_client.h"

#define DELAY_MS 250
#define NCONTENT 8
#define NVME_SLOTS 60
#define EARLY (KVMM_PREFIX_OPEN_ACTIONS | KVMM_PREFIX_OPEN_EARLY)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void content_hashes(int k, uint64_t *h)
{
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(k, b);
}

/* PREFIX_OPEN of content k with flags; the reply status. */
static int open_send(struct cc *c, int k, uint32_t flags)
{
	uint64_t h[CR_NB];

	content_hashes(k, h);
	cc_prefix_send_flags(c, h, CR_NB, flags);
	return 0;
}

/* Its reply (must succeed): ids mapped, acts the actions. */
static void open_recv(struct cc *c, struct kvmm_prefix_open_reply *out,
		      uint32_t *ids, uint8_t *acts)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	static int fds[CC_MAX_PAGES];
	unsigned int nfds;
	uint32_t npages;

	t_ok(cc_recv(c, buf, sizeof(buf), fds, &nfds));
	*out = *rep;
	npages = rep->nr_blocks * rep->pages_per_block;
	t_assert_eq(rep->nr_fds, nfds);
	cc_map(c, rep->page_ids, npages, fds, nfds);
	for (uint32_t i = 0; i < npages; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	if (acts)
		memcpy(acts, rep->page_ids + npages, rep->nr_blocks);
}

/* SEQ_WAIT_READY: the status; failed[] and the reply's counts. */
static int wait_ready(struct cc *c, uint32_t seq, uint32_t upto, uint32_t flags,
		      struct kvmm_seq_wait_ready_reply *out, uint32_t *failed)
{
	char buf[sizeof(*out) + 64 * 4];
	struct kvmm_seq_wait_ready_reply *rep = (void *)buf;
	struct kvmm_seq_wait_ready w = { .size = sizeof(w),
					 .region_id = c->region,
					 .seq_id = seq,
					 .upto_block = upto,
					 .flags = flags };
	int r;

	memset(buf, 0, sizeof(buf));
	r = cc_call(c, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w), buf, sizeof(buf),
		    NULL, NULL);
	if (r)
		return r;
	/* cppcheck-suppress uninitvar ; rep is buf, zeroed above, and the
	 * reply is in it */
	t_assert_eq(rep->size, sizeof(*rep) + rep->nr_failed * 4);
	t_assert_eq(rep->upto_block, upto);
	t_assert(rep->nr_failed <= 64);
	if (out)
		*out = *rep;
	if (failed)
		memcpy(failed, rep->failed, rep->nr_failed * 4);
	return 0;
}

/* The early counters and the hits went up from a to b by exactly this. */
static void early_delta(const struct kvmm_tier_stats_reply *a,
			const struct kvmm_tier_stats_reply *b, uint64_t opens,
			uint64_t reloads, uint64_t failures, uint64_t nvme_hits,
			uint64_t blocks_hit)
{
	printf("early opens +%llu, blocks loading at the reply +%llu, failed after it +%llu; NVMe hits +%llu, prefix blocks hit +%llu\n",
	       (unsigned long long)(b->early_opens - a->early_opens),
	       (unsigned long long)(b->early_reloads - a->early_reloads),
	       (unsigned long long)(b->early_reload_failures -
				    a->early_reload_failures),
	       (unsigned long long)(b->tiers[2].hits - a->tiers[2].hits),
	       (unsigned long long)(b->prefix_blocks_hit -
				    a->prefix_blocks_hit));
	t_assert_eq(b->early_opens - a->early_opens, opens);
	t_assert_eq(b->early_reloads - a->early_reloads, reloads);
	t_assert_eq(b->early_reload_failures - a->early_reload_failures,
		    failures);
	t_assert_eq(b->tiers[2].hits - a->tiers[2].hits, nvme_hits);
	t_assert_eq(b->prefix_blocks_hit - a->prefix_blocks_hit, blocks_hit);
}

/* Nothing leaked: only the cached GPU blocks hold pool pages, nothing is
 * mapped, quarantined or open. */
static void check_clean(struct cr_env *env, struct kvmm_tier_stats_reply *ts)
{
	struct kvmm_status_reply st;

	cc_settled_stats(env->d.sock, ts);
	t_ok(td_status(&env->d, &st));
	t_assert_eq(st.pages_allocated, ts->tiers[0].used_blocks * CC_PPB);
	t_assert_eq(st.pages_mapped, 0);
	t_assert_eq(st.pages_quarantined, 0);
	t_assert_eq(st.sequences, 0);
	t_assert_eq(ts->prefix_opens_pending, 0);
	t_assert_eq(ts->migrations_in_flight, 0);
}

/* Flip a payload byte of the NVMe slot holding hash. */
static void corrupt_slot(const char *path, uint64_t hash)
{
	int fd = open(path, O_RDWR);
	bool found = false;

	t_assert(fd >= 0);
	for (int i = 0; i < NVME_SLOTS && !found; i++) {
		off_t off = NT_SLOT_OFFSET(i, CC_PPB * CC_PAGE);
		off_t byte = NT_PAYLOAD_OFFSET(i, CC_PPB * CC_PAGE) + 777;
		uint64_t h;
		unsigned char ch;

		t_assert_eq(pread(fd, &h, 8,
				  off + offsetof(struct tier_nvme_slot_header,
						 hash)),
			    8);
		if (h != hash)
			continue;
		t_assert_eq(pread(fd, &ch, 1, byte), 1);
		ch ^= 0x20;
		t_assert_eq(pwrite(fd, &ch, 1, byte), 1);
		found = true;
	}
	t_ok(fsync(fd));
	close(fd);
	t_assert(found);
}

/*
 * A client process: early open of content k, then (wait) a SEQ_WAIT_READY
 * sent and not answered; it tells the parent through a pipe once the open
 * replied (and the wait is sent) and waits to be killed.
 */
static pid_t early_client(const char *sock, int k, bool wait)
{
	int pfd[2];
	char ch;
	pid_t p;

	t_ok(pipe(pfd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		static uint32_t ids[CR_NB * CC_PPB];
		struct kvmm_prefix_open_reply rep;
		struct kvmm_seq_wait_ready w = { .size = sizeof(w) };
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		open_send(&c, k, EARLY);
		open_recv(&c, &rep, ids, NULL);
		t_assert_eq(rep.nr_blocks, CR_NB);
		if (wait) {
			w.region_id = c.region;
			w.seq_id = rep.seq_id;
			w.upto_block = CR_NB;
			cc_send(&c, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w));
		}
		t_assert_eq(write(pfd[1], "x", 1), 1);
		for (;;)
			pause();
	}
	close(pfd[1]);
	t_assert_eq(read(pfd[0], &ch, 1), 1);
	close(pfd[0]);
	return p;
}

static void bad_input(struct cc *c)
{
	struct kvmm_seq_wait_ready_reply wr;
	static uint32_t ids[16 * CC_PPB];
	uint32_t seq;

	open_send(c, 0, KVMM_PREFIX_OPEN_EARLY);
	t_assert_eq(cc_recv(c, NULL, 0, NULL, NULL), -EINVAL);
	open_send(c, 0, KVMM_PREFIX_OPEN_EARLY | KVMM_PREFIX_OPEN_SEGMENTS);
	t_assert_eq(cc_recv(c, NULL, 0, NULL, NULL), -EINVAL);
	/* an unknown flag (0x8 is KVMM_PREFIX_OPEN_COLLECT since 1.16) */
	open_send(c, 0, 0x10 | KVMM_PREFIX_OPEN_ACTIONS);
	t_assert_eq(cc_recv(c, NULL, 0, NULL, NULL), -EINVAL);

	seq = cc_seq_open(c);
	cc_extend(c, seq, 2 * CC_TPB, ids);
	/* a sequence not opened early is ready */
	t_ok(wait_ready(c, seq, 2, 0, &wr, NULL));
	t_assert_eq(wr.nr_failed, 0);
	t_assert_eq(wr.nr_pending, 0);
	t_ok(wait_ready(c, seq, 0, 0, &wr, NULL));
	t_assert_eq(wait_ready(c, seq, 3, 0, NULL, NULL), -ERANGE);
	t_assert_eq(wait_ready(c, seq, 17, 0, NULL, NULL), -EINVAL);
	t_assert_eq(wait_ready(c, seq, 2, 0x2, NULL, NULL), -EINVAL);
	t_assert_eq(wait_ready(c, seq + 1, 1, 0, NULL, NULL), -ENOENT);
	t_assert_eq(wait_ready(c, 99, 1, 0, NULL, NULL), -EINVAL);
	c->region += 1000;
	t_assert_eq(wait_ready(c, seq, 1, 0, NULL, NULL), -ENOENT);
	c->region -= 1000;
	cc_seq_close(c, seq, ids, 2 * CC_PPB);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_seq_wait_ready_reply wr;
	struct kvmm_block_publish_reply pub;
	struct kvmm_prefix_open_reply rep;
	static uint32_t ids[(CR_NB + 1) * CC_PPB];
	uint8_t acts[CR_NB + 4];
	uint32_t failed[CR_NB];
	uint64_t h[CR_NB];
	double t0, t_reply, t_ready, t_full;
	struct cr_env env;
	struct cc c;
	pid_t p;

	cr_start_args(&env, NVME_SLOTS, DELAY_MS, "--restore-mode", "reload");
	for (int k = 0; k < NCONTENT; k++)
		cr_write_content(env.d.sock, k);
	cc_settled_stats(env.d.sock, &ts0);
	/* GPU: content 7, host: 6 blocks of 6, NVMe: 0-5 and 2 blocks of 6 */
	t_assert_eq(ts0.tiers[0].used_blocks, 8);
	t_assert_eq(ts0.tiers[1].used_blocks, 6);
	t_assert_eq(ts0.tiers[2].used_blocks, NCONTENT * CR_NB - 14);
	t_assert_eq(cr_drops(&ts0), 0);

	cc_connect(&c, env.d.sock);
	cc_region(&c);
	bad_input(&c);
	t_assert_eq(ts0.early_opens, 0);
	t_assert_eq(ts0.early_reloads, 0);
	t_assert_eq(ts0.early_reload_failures, 0);

	/* 1. the early reply comes before the reloads are done */
	cc_settled_stats(env.d.sock, &ts0);
	t0 = now_ms();
	open_send(&c, 0, EARLY);
	open_recv(&c, &rep, ids, acts);
	t_reply = now_ms() - t0;
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert_eq(rep.from_nvme, CR_NB);
	for (int b = 0; b < CR_NB; b++)
		t_assert_eq(acts[b], KVMM_BLOCK_RELOADED_NVME);
	t_ok(wait_ready(&c, rep.seq_id, CR_NB, KVMM_WAIT_READY_POLL, &wr,
			NULL));
	printf("early reply after %.1f ms, %u of %d blocks still loading\n",
	       t_reply, wr.nr_pending, CR_NB);
	t_assert(wr.nr_pending > 0);
	t_assert_eq(wr.nr_failed, 0);
	t_assert(t_reply < DELAY_MS);
	/* a block still loading is not the client's to publish */
	content_hashes(0, h);
	t_assert_eq(cc_publish(&c, rep.seq_id, CR_NB - 1, h + CR_NB - 1, 1,
			       &pub),
		    -EBUSY);
	/* the sequence grows meanwhile */
	cc_extend(&c, rep.seq_id, (CR_NB + 1) * CC_TPB, ids);
	/* block 0 first: later ones still load */
	t_ok(wait_ready(&c, rep.seq_id, 1, 0, &wr, NULL));
	t_assert_eq(wr.nr_failed, 0);
	t_ok(wait_ready(&c, rep.seq_id, CR_NB, KVMM_WAIT_READY_POLL, &wr,
			NULL));
	printf("after block 0 is ready, %u still loading\n", wr.nr_pending);
	t_assert(wr.nr_pending > 0);
	t_ok(wait_ready(&c, rep.seq_id, CR_NB, 0, &wr, NULL));
	t_ready = now_ms() - t0;
	t_assert_eq(wr.nr_failed, 0);
	t_assert_eq(wr.nr_pending, 0);
	t_assert(t_ready >= DELAY_MS);
	/* the reply came before any reload ended (t_reply < DELAY_MS): all
	 * 8 were handed out loading, and each became a hit when it landed */
	cc_tier_stats(&c, &ts);
	early_delta(&ts0, &ts, 1, CR_NB, 0, CR_NB, CR_NB);
	cc_check(&c, ids, CR_NB, 200 + 0);
	t_ok(cc_publish(&c, rep.seq_id, 0, h, CR_NB, &pub));
	t_assert_eq(pub.duplicates, CR_NB);
	cc_seq_close(&c, rep.seq_id, ids, (CR_NB + 1) * CC_PPB);

	/* the baseline: the same shape without the flag */
	cc_settled_stats(env.d.sock, &ts0);
	t0 = now_ms();
	open_send(&c, 1, KVMM_PREFIX_OPEN_ACTIONS);
	open_recv(&c, &rep, ids, acts);
	t_full = now_ms() - t0;
	t_assert_eq(rep.from_nvme, CR_NB);
	cc_tier_stats(&c, &ts);
	early_delta(&ts0, &ts, 0, 0, 0, CR_NB, CR_NB);
	cc_check(&c, ids, CR_NB, 200 + 1);
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	printf("8 NVMe blocks, %d ms a restore: early reply %.1f ms, all ready %.1f ms; reply without the flag %.1f ms; early/without %.3f\n",
	       DELAY_MS, t_reply, t_ready, t_full, t_reply / t_full);
	t_assert(t_reply * 2 < t_full);

	/* 2. closed right after the early reply: its reloads are called off */
	cc_settled_stats(env.d.sock, &ts0);
	open_send(&c, 2, EARLY);
	open_recv(&c, &rep, ids, acts);
	t_assert_eq(rep.from_nvme, CR_NB);
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	check_clean(&env, &ts);
	printf("closed while loading: %llu restores ended, %llu cancelled\n",
	       (unsigned long long)(ts.tiers[2].promotions_out -
				    ts0.tiers[2].promotions_out),
	       (unsigned long long)(ts.restores_cancelled -
				    ts0.restores_cancelled));
	t_assert(ts.restores_cancelled > ts0.restores_cancelled);
	t_assert_eq(ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out +
			    ts.restores_cancelled - ts0.restores_cancelled,
		    CR_NB);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0));
	t_assert_eq(cr_drops(&ts), 0);
	/* handed out, but let go of before they landed: no hit */
	early_delta(&ts0, &ts, 1, CR_NB, 0, 0, 0);

	/* 3. a reload that fails is reported, and recomputed */
	ts0 = ts;
	corrupt_slot(env.nvme, cr_hash(3, 3));
	open_send(&c, 3, EARLY);
	open_recv(&c, &rep, ids, acts);
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert_eq(rep.from_nvme, CR_NB);
	t_assert_eq(wait_ready(&c, rep.seq_id, CR_NB, 0, &wr, failed), 0);
	t_assert_eq(wr.nr_failed, 1);
	t_assert_eq(failed[0], 3);
	/* again: the same answer; below it nothing failed */
	t_ok(wait_ready(&c, rep.seq_id, CR_NB, KVMM_WAIT_READY_POLL, &wr,
			failed));
	t_assert_eq(wr.nr_failed, 1);
	t_assert_eq(failed[0], 3);
	t_ok(wait_ready(&c, rep.seq_id, 3, 0, &wr, NULL));
	t_assert_eq(wr.nr_failed, 0);
	cc_tier_stats(&c, &ts);
	t_assert_eq(ts.checksum_failures, 1);
	/* block 3 went with its NVMe slot: that tier's one drop */
	t_assert_eq(ts.tiers[2].drops, 1);
	t_assert_eq(cr_drops(&ts), 1);
	t_assert_eq(ts.migrations_failed, ts0.migrations_failed);
	/* 8 handed out loading (every reload waits DELAY_MS), 7 landed (hits),
	 * block 3's failed: not a hit */
	early_delta(&ts0, &ts, 1, CR_NB, 1, CR_NB - 1, CR_NB - 1);
	/* the client recomputes block 3 (here: writes its bytes) */
	for (uint32_t pg = 0; pg < CC_PPB; pg++)
		for (uint32_t o = 0; o < CC_PAGE; o++)
			c.map[ids[3 * CC_PPB + pg]][o] =
				cc_pat(200 + 3, 3, pg, o);
	cc_check(&c, ids, CR_NB, 200 + 3);
	content_hashes(3, h);
	t_ok(cc_publish(&c, rep.seq_id, 0, h, CR_NB, &pub));
	t_assert_eq(pub.published + pub.duplicates, CR_NB);
	t_assert_eq(pub.published, 1); /* block 3 is cached again */
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	cc_disconnect(&c);
	cr_check_content(env.d.sock, 3);

	/* 4. truncated while loading: the reloads past the cut are called
	 * off, the blocks before it load */
	cc_connect(&c, env.d.sock);
	cc_region(&c);
	cc_settled_stats(env.d.sock, &ts0);
	open_send(&c, 6, EARLY);
	open_recv(&c, &rep, ids, acts);
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert_eq(rep.from_host + rep.from_nvme, CR_NB);
	{
		struct kvmm_seq_extend ex = { .size = sizeof(ex),
					      .region_id = c.region,
					      .seq_id = rep.seq_id,
					      .new_len = 4 * CC_TPB };

		for (uint32_t i = 4 * CC_PPB; i < CR_NB * CC_PPB; i++) {
			munmap(c.map[ids[i]], CC_PAGE);
			c.map[ids[i]] = NULL;
		}
		t_ok(cc_call(&c, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL,
			     0, NULL, NULL));
	}
	t_assert_eq(wait_ready(&c, rep.seq_id, CR_NB, 0, NULL, NULL), -ERANGE);
	t_ok(wait_ready(&c, rep.seq_id, 4, 0, &wr, NULL));
	t_assert_eq(wr.nr_failed, 0);
	cc_check(&c, ids, 4, 200 + 6);
	cc_seq_close(&c, rep.seq_id, ids, 4 * CC_PPB);
	check_clean(&env, &ts);
	printf("truncated to 4 blocks while loading: %llu restores cancelled\n",
	       (unsigned long long)(ts.restores_cancelled -
				    ts0.restores_cancelled));
	t_assert(ts.restores_cancelled > ts0.restores_cancelled);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0));
	t_assert_eq(cr_drops(&ts), 1); /* block 3's, in 3. */

	/* 5. two early opens of one content: the first takes the reloads'
	 * pages, the second waits for them (a failed reload's pages are one
	 * client's to recompute) and shares them */
	{
		static uint32_t ids2[CR_NB * CC_PPB];
		struct kvmm_prefix_open_reply rep2;
		struct cc c2;

		cc_connect(&c2, env.d.sock);
		cc_region(&c2);
		cc_settled_stats(env.d.sock, &ts0);
		open_send(&c, 7, EARLY);
		open_recv(&c, &rep, ids, acts);
		t_assert_eq(rep.from_host + rep.from_nvme, CR_NB);
		t_ok(wait_ready(&c, rep.seq_id, CR_NB, KVMM_WAIT_READY_POLL,
				&wr, NULL));
		t_assert(wr.nr_pending > 0);
		open_send(&c2, 7, EARLY);
		open_recv(&c2, &rep2, ids2, NULL);
		t_assert_eq(rep2.nr_blocks, CR_NB);
		t_assert_eq(rep2.from_host + rep2.from_nvme, CR_NB);
		/* its reply waited for the reloads */
		t_ok(wait_ready(&c2, rep2.seq_id, CR_NB, KVMM_WAIT_READY_POLL,
				&wr, NULL));
		t_assert_eq(wr.nr_pending, 0);
		cc_check(&c2, ids2, CR_NB, 200 + 7);
		t_ok(wait_ready(&c, rep.seq_id, CR_NB, 0, &wr, NULL));
		t_assert_eq(wr.nr_failed, 0);
		cc_check(&c, ids, CR_NB, 200 + 7);
		t_assert_eq(memcmp(ids, ids2, sizeof(ids2)), 0); /* shared */
		cc_tier_stats(&c, &ts);
		t_assert_eq(ts.restores_waited - ts0.restores_waited, CR_NB);
		/* only the first replied early; both prefixes are hits */
		t_assert_eq(ts.early_opens - ts0.early_opens, 1);
		t_assert(ts.early_reloads > ts0.early_reloads);
		t_assert_eq(ts.early_reload_failures,
			    ts0.early_reload_failures);
		t_assert_eq(ts.prefix_blocks_hit - ts0.prefix_blocks_hit,
			    2 * CR_NB);
		cc_seq_close(&c2, rep2.seq_id, ids2, CR_NB * CC_PPB);
		cc_disconnect(&c2);
		cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
		cc_disconnect(&c);
	}

	/* 6. revoked (by the admin) while its client waits for the reloads:
	 * the wait ends with -ESTALE (ABI 1.20: the blocks were revoked),
	 * -ERANGE for a client of 1.19, the cut reloads are called off */
	for (int old = 0; old < 2; old++) {
		cc_connect_minor(&c, env.d.sock, old ? 19 : KVMM_ABI_MINOR);
		cc_region(&c);
		open_send(&c, 2, EARLY);
		open_recv(&c, &rep, ids, acts);
		t_assert_eq(rep.nr_blocks, CR_NB);
		t_assert(rep.from_host + rep.from_nvme > 1);
		{
			struct kvmm_seq_wait_ready w = { .size = sizeof(w),
							 .region_id = c.region,
							 .seq_id = rep.seq_id,
							 .upto_block = CR_NB };
			struct kvmm_stats_reply sr;
			struct rc_ids rid;

			t_ok(cc_call(&c, KVMM_CMD_STATS, NULL, 0, &sr,
				     sizeof(sr), NULL, NULL));
			rid = (struct rc_ids){ sr.session_id, c.region,
					       rep.seq_id };
			cc_send(&c, KVMM_CMD_SEQ_WAIT_READY, &w, sizeof(w));
			rc_admin_revoke(env.d.sock, &rid, 1);
			t_assert_eq(cc_recv(&c, NULL, 0, NULL, NULL),
				    old ? -ERANGE : -ESTALE);
		}
		cc_disconnect(&c);
		check_clean(&env, &ts);
	}

	/* 7. a client killed while it waits for its reloads */
	cc_settled_stats(env.d.sock, &ts0);
	p = early_client(env.d.sock, 4, true);
	t_ok(kill(p, SIGKILL));
	t_assert_eq(cc_wait_child(p), 128 + SIGKILL);
	check_clean(&env, &ts);
	printf("killed while loading: %llu restores ended, %llu cancelled\n",
	       (unsigned long long)(ts.tiers[2].promotions_out -
				    ts0.tiers[2].promotions_out),
	       (unsigned long long)(ts.restores_cancelled -
				    ts0.restores_cancelled));
	t_assert_eq(ts.tiers[2].promotions_out - ts0.tiers[2].promotions_out +
			    ts.restores_cancelled - ts0.restores_cancelled,
		    CR_NB);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0));
	t_assert_eq(cr_drops(&ts), 1);
	cr_check_content(env.d.sock, 4);

	/* 8. shutdown with an early open loading and its client waiting */
	p = early_client(env.d.sock, 5, true);
	cr_stop(&env);
	t_ok(kill(p, SIGKILL));
	t_assert_eq(cc_wait_child(p), 128 + SIGKILL);
	printf("early prefix open ok\n");
	return 0;
}
