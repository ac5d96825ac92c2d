// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A published block whose content is cached in a lower tier becomes the
 * GPU copy (tiers are exclusive), with a real kvmmd (--restore-mode
 * recompute) and client processes:
 *   - a writer publishes content A (two blocks); a sequence that needs
 *     the whole pool makes the daemon demote both, block 0 on to NVMe
 *     (the host tier holds one block), block 1 to host memory;
 *   - a recomputing client opens A with per-block actions: both blocks
 *     come back as RECOMPUTE (fresh pages); it writes the same bytes and
 *     publishes them: the reply counts two promotions (not duplicates),
 *     the tier counters show both on the GPU, the host and NVMe slots
 *     freed, one promotions_by_publish from each tier and no restore;
 *   - a reader's PREFIX_OPEN then shares both from the GPU (the very
 *     pages the recomputing client published), byte-identical;
 *   - publishing A again from other pages is a duplicate, as before;
 *   - with the GPU tier full the policy's victim is demoted to make room;
 *     when every GPU block is in use the block stays in host memory and
 *     the publish is a duplicate (nothing lost);
 *   - a block being restored for another open (restores slowed down by
 *     the test knob) is not promoted by a publish meanwhile: the publish
 *     is a duplicate and the restored copy becomes the GPU copy.
 */
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/cache-publish-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_layout.h"

#define NB 2
#define TAG 41

static const uint64_t ha[NB] = { 0xa11ce0001ull, 0xa11ce0002ull };
static const uint64_t hb[1] = { 0xb0b0001ull };

/* A prefix open with KVMM_PREFIX_OPEN_ACTIONS: the reply header in *out,
 * the page ids (mapped) in ids, one action per block in acts. */
static void prefix_acts(struct cc *c, const uint64_t *h, uint32_t n,
			struct kvmm_prefix_open_reply *out, uint32_t *ids,
			uint8_t *acts)
{
	static char buf[KVMM_MSG_MAX];
	static int fds[CC_MAX_PAGES];
	char req[sizeof(struct kvmm_prefix_open) + 64 * 8];
	struct kvmm_prefix_open po = { .size = sizeof(po),
				       .region_id = c->region,
				       .nr_hashes = n,
				       .flags = KVMM_PREFIX_OPEN_ACTIONS };
	struct kvmm_prefix_open_reply *rep = (void *)buf;
	uint32_t np;
	unsigned int nfds;

	t_assert(n <= 64);
	memcpy(req, &po, sizeof(po));
	memcpy(req + sizeof(po), h, n * 8);
	t_ok(cc_call(c, KVMM_CMD_PREFIX_OPEN, req, sizeof(po) + n * 8, buf,
		     sizeof(buf), fds, &nfds));
	*out = *rep;
	np = rep->nr_blocks * rep->pages_per_block;
	t_assert_eq(rep->nr_fds, nfds);
	cc_map(c, rep->page_ids, np, fds, nfds);
	for (uint32_t i = 0; i < np; i++)
		ids[i] = rep->page_ids[i] & ~KVMM_PAGE_HELD;
	memcpy(acts, &rep->page_ids[np], rep->nr_blocks);
}

/* A sequence of the whole pool (8 blocks): the cached blocks are demoted
 * to make room (the extend waits for their copies), then it closes. */
static void pressure(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		uint32_t ids[8 * CC_PPB];
		struct cc c;
		uint32_t seq;

		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, 8 * CC_TPB, ids);
		cc_seq_close(&c, seq, ids, 8 * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/*
 * A client that opens h[0..n) with actions, expects every block back as
 * RECOMPUTE, writes content tag into the fresh pages (what recomputing
 * them gives: the same bytes) and publishes them.  The reply's counts go
 * to *out, the page ids it published to ids; returns its exit status.
 */
static int recompute_publish(const char *sock, const uint64_t *h, uint32_t n,
			     uint64_t tag, struct kvmm_block_publish_reply *out,
			     uint32_t *ids)
{
	int fd[2], st;
	pid_t p;

	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		struct kvmm_block_publish_reply pr;
		uint32_t pages[NB * CC_PPB];
		uint8_t acts[NB];
		struct cc c;

		cc_connect(&c, sock);
		cc_region(&c);
		prefix_acts(&c, h, n, &rep, pages, acts);
		if (rep.nr_blocks != n || rep.nr_recompute != n)
			t_fail("open: %u blocks, %u to recompute (gpu %u host %u nvme %u)",
			       rep.nr_blocks, rep.nr_recompute, rep.from_gpu,
			       rep.from_host, rep.from_nvme);
		for (uint32_t b = 0; b < n; b++)
			t_assert_eq(acts[b], KVMM_BLOCK_RECOMPUTE);
		cc_fill(&c, pages, n, tag);
		t_ok(cc_publish(&c, rep.seq_id, 0, h, n, &pr));
		cc_seq_close(&c, rep.seq_id, pages, n * CC_PPB);
		cc_disconnect(&c);
		t_assert_eq(write(fd[1], &pr, sizeof(pr)), sizeof(pr));
		t_assert_eq(write(fd[1], pages, n * CC_PPB * 4),
			    n * CC_PPB * 4);
		_exit(0);
	}
	st = cc_wait_child(p);
	if (!st) {
		t_assert_eq(read(fd[0], out, sizeof(*out)), sizeof(*out));
		t_assert_eq(read(fd[0], ids, n * CC_PPB * 4), n * CC_PPB * 4);
	}
	close(fd[0]);
	close(fd[1]);
	return st;
}

/* A reader: h[0..n) all shared from the GPU, holding content tag, on the
 * pages want (the recomputing client's). */
static void read_gpu(const char *sock, const uint64_t *h, uint32_t n,
		     uint64_t tag, const uint32_t *want)
{
	cp_read(sock, h, n, tag, 0, want, "reader");
}

/* A writer publishing h[0..n) from fresh pages of its own: the reply. */
static void publish_again(const char *sock, const uint64_t *h, uint32_t n,
			  uint64_t tag, struct kvmm_block_publish_reply *out)
{
	struct cc c;
	uint32_t ids[NB * CC_PPB];
	uint32_t seq;

	cc_connect(&c, sock);
	seq = cp_publish_own(&c, h, n, tag, ids, out);
	cc_seq_close(&c, seq, ids, n * CC_PPB);
	cc_disconnect(&c);
}

/* kvmmctl status (--json when json) has every string in want. */
static void kvmmctl_shows(const char *sock, bool json, const char *const *want)
{
	char bin[256], cmd[700], out[16384];
	size_t len;
	FILE *f;

	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --socket %s %sstatus", bin, sock,
		 json ? "--json " : "");
	f = popen(cmd, "r");
	t_assert(f != NULL);
	len = fread(out, 1, sizeof(out) - 1, f);
	out[len] = '\0';
	t_assert_eq(pclose(f), 0);
	for (int i = 0; want[i]; i++)
		if (!strstr(out, want[i]))
			t_fail("kvmmctl %sstatus lacks \"%s\":\n%s",
			       json ? "--json " : "", want[i], out);
}

static void promote_host_and_nvme(const char *nvme)
{
	char size[NT_SIZE_ARG_LEN];
	/* a pool of 8 blocks; host: 4 slots, the policy keeps 1 there;
	 * NVMe: 7 slots */
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "4",
			       "--host-mem",
			       "1M",
			       "--nvme-path",
			       nvme,
			       "--nvme-size",
			       nt_size_arg(size, sizeof(size), 7, 4 * CC_PAGE),
			       "--restore-mode",
			       "recompute",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_block_publish_reply pr;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB];
	struct td_daemon d;

	cc_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, ha, NB, TAG, NULL), 0);
	pressure(d.sock);
	cc_settled_stats(d.sock, &ts);
	/* block 0 (least recently used) went on to NVMe, block 1 to host */
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	t_assert_eq(ts.tiers[1].used_blocks, 1);
	t_assert_eq(ts.tiers[2].used_blocks, 1);
	t_assert_eq(ts.pressure_reclaims, NB);
	t_assert_eq(ts.migrations_failed, 0);

	t_assert_eq(recompute_publish(d.sock, ha, NB, TAG, &pr, ids), 0);
	printf("publish after recompute: published %u promoted %u duplicates %u not cached %u\n",
	       pr.published, pr.promoted, pr.duplicates, pr.not_cached);
	t_assert_eq(pr.published, NB);
	t_assert_eq(pr.promoted, NB);
	t_assert_eq(pr.duplicates, 0);
	t_assert_eq(pr.not_cached, 0);
	cc_settled_stats(d.sock, &ts);
	printf("tiers: gpu %llu host %llu nvme %llu used; promotions_by_publish host %llu nvme %llu; restores host %llu nvme %llu\n",
	       (unsigned long long)ts.tiers[0].used_blocks,
	       (unsigned long long)ts.tiers[1].used_blocks,
	       (unsigned long long)ts.tiers[2].used_blocks,
	       (unsigned long long)ts.tiers[1].promotions_by_publish,
	       (unsigned long long)ts.tiers[2].promotions_by_publish,
	       (unsigned long long)ts.tiers[1].promotions_out,
	       (unsigned long long)ts.tiers[2].promotions_out);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, 0); /* the slots are free */
	t_assert_eq(ts.tiers[2].used_blocks, 0);
	t_assert_eq(ts.tiers[1].promotions_by_publish, 1);
	t_assert_eq(ts.tiers[2].promotions_by_publish, 1);
	t_assert_eq(ts.tiers[0].promotions_by_publish, 0);
	t_assert_eq(ts.tiers[1].promotions_out, 0); /* nothing reloaded */
	t_assert_eq(ts.tiers[2].promotions_out, 0);
	t_assert_eq(ts.duplicates, 0);
	t_assert_eq(ts.publishes, 2 * NB);

	/* shared from the GPU: the published pages, byte-identical; twice,
	 * so the first reader's close left the copy cached */
	read_gpu(d.sock, ha, NB, TAG, ids);
	read_gpu(d.sock, ha, NB, TAG, ids);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].hits, 2 * NB);
	t_assert_eq(ts.tiers[1].promotions_out + ts.tiers[2].promotions_out, 0);

	/* the GPU copy exists: another publish is a duplicate */
	publish_again(d.sock, ha, NB, TAG, &pr);
	t_assert_eq(pr.published, 0);
	t_assert_eq(pr.promoted, 0);
	t_assert_eq(pr.duplicates, NB);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.duplicates, NB);
	t_assert_eq(ts.tiers[0].used_blocks, NB);

	/* kvmmctl shows the counters */
	const char *json[] = {
		"\"restore_max_ns\":0,\"promotions_by_publish\":1}",
		"\"duplicates\":2,", NULL
	};
	const char *text[] = { "block size   262144 bytes (4 pages)\n",
			       "tier host    0/4 blocks",
			       "0 dropped, 1 up by publish\ntier nvme", NULL };

	kvmmctl_shows(d.sock, true, json);
	kvmmctl_shows(d.sock, false, text);
	cc_stop(&d);
	unlink(nvme);
}

static void restore_keeps_duplicate(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "4",
			       "--host-mem",
			       "2M",
			       "--restore-mode",
			       "recompute",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_block_publish_reply pr;
	struct kvmm_prefix_open_reply rep;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[CC_PPB], pub[CC_PPB];
	struct td_daemon d;
	struct cc r;

	cc_start_with_delay(&d, args, "KVMMD_TEST_RESTORE_DELAY_MS", 300);
	t_assert_eq(cc_publish_content(d.sock, hb, 1, TAG + 1, NULL), 0);
	pressure(d.sock);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 0);
	t_assert_eq(ts.tiers[1].used_blocks, 1);

	/* an open without actions reloads it (slowly); meanwhile another
	 * client recomputes it and publishes */
	cc_connect(&r, d.sock);
	cc_region(&r);
	cc_prefix_send(&r, hb, 1);
	cp_wait_pending(d.sock, "the reloading open");
	t_assert_eq(recompute_publish(d.sock, hb, 1, TAG + 1, &pr, pub), 0);
	t_assert_eq(pr.published, 0);
	t_assert_eq(pr.promoted, 0);
	t_assert_eq(pr.duplicates, 1);
	cc_prefix_recv(&r, &rep, ids);
	t_assert_eq(rep.nr_blocks, 1);
	t_assert_eq(rep.from_host, 1);
	cc_check(&r, ids, 1, TAG + 1);
	t_assert_eq(cc_overlap(ids, CC_PPB, pub, CC_PPB), 0);
	cc_seq_close(&r, rep.seq_id, ids, CC_PPB);
	cc_disconnect(&r);
	cc_settled_stats(d.sock, &ts);
	/* the restored copy is the GPU one, the host slot freed by it */
	t_assert_eq(ts.tiers[0].used_blocks, 1);
	t_assert_eq(ts.tiers[1].used_blocks, 0);
	t_assert_eq(ts.tiers[1].promotions_out, 1);
	t_assert_eq(ts.tiers[1].promotions_by_publish, 0);
	t_assert_eq(ts.duplicates, 1);
	cc_stop(&d);
}

static const struct cc_contents cs = { .base = 0xc0000, .tag0 = 77, .nb = NB };

/*
 * With the GPU tier full the promoted block moves up and the policy's
 * victim goes down into the host slot it left: with the host tier full
 * too (3 blocks: 5 slots, 2 kept spare), nothing is dropped (making room
 * on the GPU first would push a fourth block into the host tier and drop
 * one).  When nothing on the GPU may go (every GPU block in use by a
 * sequence) the block stays in the host tier and the publish is a
 * duplicate.
 */
static void promote_into_full_gpu(void)
{
	const char *args[] = { "--gpu-mem",
			       "2M",
			       "--cache-gpu-blocks",
			       "2",
			       "--host-mem",
			       "1280K",
			       "--restore-mode",
			       "recompute",
			       "--cache-policy",
			       "lru",
			       NULL };
	struct kvmm_block_publish_reply pr;
	struct kvmm_tier_stats_reply ts;
	uint32_t ids[NB * CC_PPB], cids[NB * CC_PPB];
	uint64_t hc[NB];
	struct td_daemon d;
	struct cc c;
	uint32_t seq;

	cc_start(&d, args);
	t_assert_eq(cc_publish_content(d.sock, ha, NB, TAG, NULL), 0);
	t_assert_eq(cc_publish_content(d.sock, hb, 1, TAG + 2, NULL), 0);
	/* content C, kept open: A and B go to host, C's blocks are in use */
	cc_content_hashes(&cs, 0, hc);
	cc_connect(&c, d.sock);
	cc_region(&c);
	seq = cc_seq_open(&c);
	cc_extend(&c, seq, NB * CC_TPB, cids);
	cc_fill(&c, cids, NB, cs.tag0);
	t_ok(cc_publish(&c, seq, 0, hc, NB, &pr));
	t_assert_eq(pr.published, NB);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	/* A and B fill the host tier */
	t_assert_eq(ts.tiers[1].capacity_blocks, 5);
	t_assert_eq(ts.tiers[1].used_blocks, NB + 1);

	/* no room: A stays in host memory, the publish is a duplicate */
	t_assert_eq(recompute_publish(d.sock, ha, NB, TAG, &pr, ids), 0);
	t_assert_eq(pr.promoted, 0);
	t_assert_eq(pr.duplicates, NB);
	t_assert_eq(pr.not_cached, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB);
	t_assert_eq(ts.tiers[1].used_blocks, NB + 1);
	t_assert_eq(ts.tiers[1].promotions_by_publish, 0);
	t_assert_eq(ts.tiers[1].drops, 0);

	/* C's sequence closes: now C is demoted to make room for A */
	cc_seq_close(&c, seq, cids, NB * CC_PPB);
	cc_disconnect(&c);
	t_assert_eq(recompute_publish(d.sock, ha, NB, TAG, &pr, ids), 0);
	t_assert_eq(pr.published, NB);
	t_assert_eq(pr.promoted, NB);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, NB); /* A */
	t_assert_eq(ts.tiers[1].used_blocks, NB + 1); /* C and B */
	t_assert_eq(ts.tiers[1].demotions_in, 2 * NB + 1);
	t_assert_eq(ts.tiers[1].promotions_by_publish, NB);
	t_assert_eq(ts.tiers[1].promotions_out, 0);
	t_assert_eq(ts.tiers[0].drops + ts.tiers[1].drops, 0);
	read_gpu(d.sock, ha, NB, TAG, ids);
	cc_read_content(d.sock, &cs, 0, NB, 1); /* C from host, intact */
	cc_stop(&d);
}

int main(void)
{
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "publish-promote");
	promote_host_and_nvme(nvme);
	promote_into_full_gpu();
	restore_keeps_duplicate();
	printf("ok: recomputed blocks published from host and NVMe became the GPU copies; restores keep duplicates\n");
	return 0;
}
