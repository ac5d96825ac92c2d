// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A region's salt names a cache namespace of its own (abi.md, "Block
 * identity"; kvmm/kvmmd/salt.h): kvmmd mixes a nonzero salt into every
 * hash the region publishes or looks up.
 *
 *   - blocks a writer with salt 11 published: a reader with salt 999 or 0
 *     finds none of them, one with salt 11 finds all 3 (the writer's
 *     bytes);
 *   - salt 0 behaves as before: the same client hashes published under
 *     salt 0 are a block of their own (published, not a duplicate), which
 *     salt-0 readers get and salt-11 readers do not;
 *   - a pin names no region: it finds the block under the salt of the
 *     session's regions (-ENOENT from a session whose regions have other
 *     salts), and in a session with regions of salts 0 and 11, a hash
 *     cached under either;
 *   - with NVMe (--nvme-save-on-stop), after a restart the blocks
 *     published under salt 11 are found on NVMe by a salt-11 region only,
 *     and the salt-0 ones by salt 0 only.
 * Until 5 December kvmmd kept the salt and never used it: the salt-999
 * reader found all 3 blocks.
 */
#include "tests/cache-common.h"
#include "tests/lib/nvme_cache_args.h"
#include "tests/lib/nvme_probe.h"

#define NB 3

static const uint64_t hashes[NB] = { 0x5a170001, 0x5a170002, 0x5a170003 };
static const uint64_t others[NB] = { 0x5a171001, 0x5a171002, 0x5a171003 };

static struct kvmm_conn *conn(const char *sock)
{
	return cc_connect_lib(sock, "salt");
}

static struct kvmm_region *region(struct kvmm_conn *c, uint64_t salt)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_region *r;

	ro.salt = salt;
	t_ok(kvmm_region_create(c, &ro, &r));
	return r;
}

/* Fill blocks [0, NB) of seq with content tag (cc_pat()'s bytes). */
static void fill(struct kvmm_region *r, uint32_t seq, uint64_t tag)
{
	for (uint32_t b = 0; b < NB; b++)
		for (uint32_t pg = 0; pg < CC_PPB; pg++) {
			uint64_t base = pg & 1 ?
						kvmm_seq_v_ptr(r, seq, pg / 2) :
						kvmm_seq_k_ptr(r, seq, pg / 2);
			unsigned char *m =
				(unsigned char *)(uintptr_t)(base +
							     (uint64_t)b *
								     CC_PAGE);

			for (uint32_t o = 0; o < CC_PAGE; o++)
				m[o] = cc_pat(tag, b, pg, o);
		}
}

/* A writer process with a region of this salt publishes h with tag's
 * bytes; the reply's published count (-errno). */
static int publish(const char *sock, uint64_t salt, const uint64_t *h,
		   uint64_t tag)
{
	int fd[2], n = -1;
	pid_t p;

	t_ok(pipe(fd));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_conn *c = conn(sock);
		struct kvmm_region *r = region(c, salt);
		uint32_t s;

		t_ok(kvmm_seq_open(r, &s));
		t_ok(kvmm_seq_extend(r, s, NB * CC_TPB));
		fill(r, s, tag);
		n = kvmm_block_publish(r, s, 0, NB, 0, h);
		t_ok(kvmm_seq_close(r, s));
		kvmm_disconnect(c);
		t_assert_eq(write(fd[1], &n, sizeof(n)), sizeof(n));
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(read(fd[0], &n, sizeof(n)), sizeof(n));
	close(fd[0]);
	close(fd[1]);
	return n;
}

/*
 * How many of h's blocks a region of this salt finds; those found must
 * hold tag's bytes, and with nvme set come from NVMe.
 */
static uint32_t found(const char *sock, uint64_t salt, const uint64_t *h,
		      uint64_t tag, bool nvme)
{
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	struct kvmm_conn *c = conn(sock);
	struct kvmm_region *r = region(c, salt);
	uint32_t s, n;

	t_ok(kvmm_seq_open_prefix_opts(r, h, NB, &s, &n, &po));
	t_assert_eq(po.recompute, 0);
	if (nvme)
		t_assert_eq(po.reloaded_nvme, n);
	t_assert(cc_seq_content_ok(r, s, n, tag, 4099));
	t_ok(kvmm_seq_close(r, s));
	kvmm_disconnect(c);
	return n;
}

/* The pin checks (no NVMe needed). */
static void pins(const char *sock)
{
	struct kvmm_conn *c = conn(sock);
	struct kvmm_pin_opts o;

	/* no region yet: salt 0, under which hashes[] is cached too */
	t_ok(cc_pin(c, hashes[0], 0, 0, 0, &o));
	t_ok(kvmm_block_unpin(c, hashes[0]));
	/* others[] is cached under salt 11 only */
	t_assert_eq(cc_pin(c, others[0], 0, 0, 0, &o), -ENOENT);
	region(c, 999);
	t_assert_eq(cc_pin(c, hashes[0], 0, 0, 0, &o), -ENOENT);
	t_assert_eq(cc_pin(c, others[0], 0, 0, 0, &o), -ENOENT);
	region(c, 11);
	t_ok(cc_pin(c, others[0], 0, 0, 0, &o));
	t_assert_eq(o.pins, 1);
	t_ok(kvmm_block_unpin(c, others[0]));
	t_assert_eq(kvmm_block_unpin(c, others[0]), -ENOENT);
	kvmm_disconnect(c);
	/* a session with a salt-0 region alone cannot reach salt 11's */
	c = conn(sock);
	region(c, 0);
	t_assert_eq(cc_pin(c, others[0], 0, 0, 0, &o), -ENOENT);
	t_ok(cc_pin(c, hashes[1], 0, 0, 0, &o));
	kvmm_disconnect(c);
}

int main(void)
{
	struct kvmm_tier_stats_reply ts;
	const char *const *a;
	struct nca_args args;
	struct td_daemon d;
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-region-salt");
	t_nvme_require(nvme);
	a = nca_save_args(&args, nvme, 16, 32, "10000", 0);

	cc_start(&d, a);
	t_assert_eq(publish(d.sock, 11, hashes, 1), NB);
	t_assert_eq(found(d.sock, 999, hashes, 1, false), 0);
	t_assert_eq(found(d.sock, 0, hashes, 1, false), 0);
	t_assert_eq(found(d.sock, 11, hashes, 1, false), NB);
	/* the same client hashes under salt 0: a block of their own */
	t_assert_eq(publish(d.sock, 0, hashes, 2), NB);
	t_assert_eq(found(d.sock, 0, hashes, 2, false), NB);
	t_assert_eq(found(d.sock, 11, hashes, 1, false), NB);
	/* another salt-11 writer: its blocks are every salt-11 reader's */
	t_assert_eq(publish(d.sock, 11, others, 3), NB);
	t_assert_eq(found(d.sock, 11, others, 3, false), NB);
	t_assert_eq(found(d.sock, 0, others, 3, false), 0);
	pins(d.sock);
	printf("salt 11: 3 of 3 found by salt 11, 0 by salts 0 and 999\n");

	/* the save on stop moves every block to NVMe; the next start finds
	 * them under the same names */
	cc_stop(&d);
	cc_start(&d, a);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.recovered_blocks, 3 * NB);
	t_assert_eq(found(d.sock, 999, hashes, 1, true), 0);
	t_assert_eq(found(d.sock, 11, hashes, 1, true), NB);
	t_assert_eq(found(d.sock, 0, hashes, 2, true), NB);
	t_assert_eq(found(d.sock, 0, others, 3, true), 0);
	t_assert_eq(found(d.sock, 11, others, 3, true), NB);
	printf("after a restart: %llu blocks recovered, each salt finds its own\n",
	       (unsigned long long)ts.recovered_blocks);
	cc_stop(&d);
	unlink(nvme);
	return 0;
}
