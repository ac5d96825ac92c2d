// SPDX-License-Identifier: MIT
/*
 * An NVMe tier that could not open: out of the cache while it waits, and
 * joining the running cache when a later attempt opens it.
 *
 * The NVMe file is claimed at start (kc_nvme_claim(): opened, locked,
 * checked) and the tier opened for the block size at the cache's set-up
 * (kc_open()).  Either can fail for a reason that passes: a file system
 * not mounted yet at boot, a directory not created yet, a full disk,
 * EACCES.  Until 1.15 the tier then stayed out until kvmmd restarted (a
 * claim that failed stopped the start).  Now the cache runs on the GPU
 * and host tiers and a timer of the loop tries again, 1 s after the first
 * failure, doubling to 60 s (the waits of the cache's own set-up,
 * cache_open.c): a timer, not the next publish, because an idle daemon's
 * blocks should have their disk when the clients come back, and because
 * the attempt holds the loop (the recovery reads a header per slot)
 * better then than inside a client's publish.  A failure no wait mends (a
 * size that holds no slot, a file system without O_DIRECT, a file that is
 * not a kvmm tier) stops the attempts, with one ERR line.
 *
 * When it opens, the tier joins (kc_nvme_join()): the migration engine
 * gets it, the blocks its file holds from a run before are recovered
 * into the index as at a set-up, and the policy's NVMe tier, made with
 * capacity 0 (pol_cache_opts.joins_later: blocks passed it by, host
 * victims were dropped), gets its capacity.  TIER_STATS says how many
 * attempts ran, the last failure and when the next is due (ABI 1.15).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kvmm/kvmmd/tier_host.h"
#include "kvmm/kvmmd/tier_nvme.h"

/*
 * What the start waits out rather than refuse: the file, or the file
 * system or device under it, is not there or not usable yet.  Anything
 * else a claim meets at start (another kvmmd's lock, a file that is no
 * kvmm tier, no O_DIRECT) stops the start as before.
 */
static bool kc_nvme_absent(int err)
{
	switch (err) {
	case -ENOENT:
	case -EACCES:
	case -EPERM:
	case -EROFS:
	case -ENOSPC:
	case -EDQUOT:
	case -EIO:
	case -ENXIO:
	case -ENODEV:
	case -ENOMEDIUM:
	case -ESTALE:
		return true;
	}
	return false;
}

/* A failure the next attempt would meet again whatever the wait. */
static const char *kc_nvme_unmendable(int err)
{
	switch (err) {
	case -EINVAL:
		return "a size or file the tier cannot take";
	case -EOPNOTSUPP: /* ENOTSUP */
		return "no O_DIRECT there";
	case -ENOTEMPTY:
		return "the file is no kvmm tier (--nvme-format formats it)";
	case -ENOSYS:
		return "a system call this kernel lacks";
	case -ENOTDIR:
	case -EISDIR:
	case -ELOOP:
	case -ENAMETOOLONG:
		return "the path can name no file";
	}
	return NULL;
}

bool kc_has_nvme(const struct kd_cache *c)
{
	const struct kd_config *cfg = &c->d->cfg;

	return cfg->nvme_path[0] &&
	       (c == c->d->cache || cfg->nr_cache_block_sizes > 1);
}

int kc_nvme_fd(const struct kd_cache *c)
{
	return c->d->cache ? c->d->cache->nvme_fd : -1;
}

/*
 * The tier's partition for c: with several sizes named, the size's index
 * among them, each a share of the file by the sizes' weights (equal
 * unless --cache-block-pages N:W gives them; tiers.md, "Several block
 * sizes"), and the first size's layout id when its tier is open (else
 * 0: the tier reads it from partition 0's superblock, writing one there
 * when the file was not cut so, tier_nvme_config.layout_id; both run on
 * the loop, as every open of partition 0 does); else the whole file.
 */
void kc_nvme_partition(const struct kd_cache *c, struct tier_nvme_config *nc)
{
	const struct kd_config *cfg = &c->d->cfg;
	const struct kd_cache *f = c->d->cache;

	if (cfg->nr_cache_block_sizes < 2)
		return;
	nc->part_count = cfg->nr_cache_block_sizes;
	nc->part_index = c->idx;
	for (uint32_t i = 0; i < nc->part_count && i < TIER_NVME_PARTS_MAX; i++)
		nc->part_weights[i] = kd_cache_weight(cfg, i);
	if (c != f && f->nvme)
		nc->layout_id = tier_nvme_layout_id(f->nvme);
}

int kc_nvme_claim(struct kd_cache *c)
{
	const struct kd_config *cfg = &c->d->cfg;
	struct stat st;
	bool missing;
	int r;

	missing = stat(cfg->nvme_path, &st) && errno == ENOENT;
	r = tier_nvme_claim(cfg->nvme_path, cfg->nvme_format, &c->nvme_fd);
	if (r) {
		c->nvme_fd = -1;
		return r;
	}
	c->nvme_made = missing;
	return 0;
}

int kc_nvme_claim_at_start(struct kd_cache *c)
{
	int r = kc_nvme_claim(c);

	if (!r || !kc_nvme_absent(r))
		return r;
	c->nvme_attempts = 1;
	kc_nvme_failed(c, r);
	return 0;
}

static const char *kc_nvme_name(const struct kd_cache *c, char *buf,
				size_t len);

/* KVMMD_TEST_NVME_OPEN_FAIL (kc_open_test_init()): this open fails. */
static bool kc_nvme_test_open_fail(struct kd_cache *c)
{
	if (c != c->d->cache || c->opening_at_start || !c->nvme_open_fail_left)
		return false;
	c->nvme_open_fail_left--;
	return true;
}

int kc_nvme_open_tier(struct kd_cache *c)
{
	const struct kd_config *cfg = &c->d->cfg;
	char name[sizeof(cfg->nvme_path) + 64];
	size_t reg_len;
	int r;
	void *reg = tier_host_base(c->host, &reg_len);
	struct tier_nvme_config nc = { .size = sizeof(nc),
				       .path = cfg->nvme_path,
				       .capacity_bytes = cfg->nvme_size,
				       .payload_bytes = c->block_bytes,
				       .reg_base = reg,
				       .reg_len = reg_len,
				       .fd_held = kc_nvme_fd(c) >= 0,
				       .fd = kc_nvme_fd(c) };

	nc.scope = c->d->scope.mode;
	memcpy(nc.scope_key, c->d->scope.key, sizeof(nc.scope_key));
	kc_nvme_partition(c, &nc);
	/* drops answered while it was out: applied before its recovery */
	nc.pending_drop = kc_drop_pending_get(c);
	if (kc_nvme_test_open_fail(c))
		return -EIO;
	if (nc.pending_drop)
		kc_drop_pending_opening(c, kc_nvme_name(c, name, sizeof(name)));
	r = tier_nvme_open(&nc, &c->nvme);
	if (!r && nc.pending_drop)
		kc_drop_pending_opened(c, kc_nvme_name(c, name, sizeof(name)));
	return r;
}

static void kc_nvme_on_timer(struct kd_loop *loop, struct kd_timer *t)
{
	kc_nvme_retry(t->data);
}

/* The NVMe tier's name in c's lines: the path, and with several sizes
 * named which size's partition it is. */
static const char *kc_nvme_name(const struct kd_cache *c, char *buf, size_t len)
{
	const struct kd_config *cfg = &c->d->cfg;

	if (cfg->nr_cache_block_sizes < 2)
		return cfg->nvme_path;
	snprintf(buf, len, "%s (the partition of blocks of %u pages)",
		 cfg->nvme_path, c->opened ? c->ppb : c->named_ppb);
	return buf;
}

void kc_nvme_failed(struct kd_cache *c, int err)
{
	char name[sizeof(c->d->cfg.nvme_path) + 64];
	const char *path = kc_nvme_name(c, name, sizeof(name));
	const char *why = kc_nvme_unmendable(err);
	uint64_t ms;

	c->nvme = NULL;
	c->nvme_error = c->nvme_last_error = err;
	if (why) {
		c->nvme_for_good = true;
		c->nvme_retry_ns = 0;
		vmm_log(VMM_LOG_ERR,
			"cache: the NVMe tier %s cannot open%s%s: %s (%s, which no wait mends); the cache runs without it until kvmmd restarts (kvmmctl status)",
			path, c->block_bytes ? " for blocks of " : "",
			c->block_bytes ? "this size" : "", strerror(-err), why);
		return;
	}
	/* the cache set-up's waits (kc_open_failed()) */
	ms = kc_retry_wait_ms(c, c->nvme_attempts);
	c->nvme_retry_ns = kd_now_ns() + ms * 1000000ull;
	c->nvme_timer.fn = kc_nvme_on_timer;
	c->nvme_timer.data = c;
	kd_timer_arm(&c->d->loop, &c->nvme_timer, c->nvme_retry_ns);
	vmm_log(VMM_LOG_ERR,
		"cache: the NVMe tier %s cannot open (attempt %llu): %s; the cache runs without it and tries again in %llu ms (kvmmctl status)",
		path, (unsigned long long)c->nvme_attempts, strerror(-err),
		(unsigned long long)ms);
}

/*
 * The tier opened on a running cache: hand it to the engine, find the
 * blocks its file holds, and give the policy's NVMe tier its capacity,
 * so that host victims go down to it from now on.
 */
static void kc_nvme_join(struct kd_cache *c)
{
	char name[sizeof(c->d->cfg.nvme_path) + 64];
	struct tier_nvme_stats ns;
	uint64_t cap;
	int r;

	tier_nvme_get_stats(c->nvme, &ns);
	/* one slot spare, as at a set-up (kc_open()) */
	cap = ns.capacity_slots > 1 ? ns.capacity_slots - 1 : 1;
	(void)migrate_set_nvme(c->mig, c->nvme);
	/*
	 * The blocks a run before left there: cold entries, as at a set-up.
	 * A hash the cache holds already (on the GPU or host tier now)
	 * frees its slot (kc_recovered()).  A recovery cut short (no
	 * memory) keeps what it found; the rest of the tier still works.
	 */
	r = kc_recover(c, &ns);
	if (!r)
		r = kc_order_cold(c);
	if (r)
		vmm_log(VMM_LOG_WARN,
			"cache: recovering the NVMe tier's blocks: %s (%llu found)",
			strerror(-r),
			(unsigned long long)c->st.recovered_blocks);
	(void)pol_cache_set_capacity(c->pol, POL_TIER_NVME, cap);
	c->st.tiers[POL_TIER_NVME].capacity_blocks = cap;
	c->st.tiers[POL_TIER_NVME].block_bytes = c->block_bytes;
	kc_hold_slots(c);
	kc_nvme_clear_marked(c);
	kc_cold_limits(c);
	vmm_log(VMM_LOG_INFO,
		"cache: the NVMe tier %s opened at attempt %llu (the last one failed: %s) and joined the cache: %llu of %llu slots, %llu blocks recovered",
		kc_nvme_name(c, name, sizeof(name)),
		(unsigned long long)c->nvme_attempts,
		strerror(-c->nvme_last_error), (unsigned long long)cap,
		(unsigned long long)ns.capacity_slots,
		(unsigned long long)c->st.recovered_blocks);
}

/*
 * A later size's attempt (its own partition): on the first size's claim,
 * once the first's attempt is over (its tier opened, or failed), so that
 * its layout id is known; the first's attempts run these when they end.
 */
static void kc_nvme_retry_part(struct kd_cache *c)
{
	const struct kd_cache *f = c->d->cache;
	int r;

	c->nvme_attempts++;
	if (f->nvme_fd < 0) {
		/* the first size's claim failed: the same reason */
		kc_nvme_failed(c, f->nvme_last_error ? f->nvme_last_error :
						       -ENOENT);
		return;
	}
	c->nvme_error = 0;
	c->nvme_retry_ns = 0;
	if (!c->opened || !c->host || !c->mig)
		return; /* it opens with the cache's tiers (kc_open()) */
	r = kc_nvme_open_tier(c);
	if (r) {
		kc_nvme_failed(c, r);
		return;
	}
	kc_nvme_join(c);
}

/* The first size's attempt is over: the later sizes' that wait try now. */
static void kc_nvme_retry_parts(struct kd_daemon *d)
{
	struct kd_cache *o;
	uint32_t i;

	kc_for_each(d, o, i) {
		if (!i || !kc_has_nvme(o) || o->closing || o->nvme ||
		    o->nvme_for_good)
			continue;
		kd_timer_cancel(&d->loop, &o->nvme_timer);
		kc_nvme_retry_part(o);
	}
}

/* The first size's attempt failed and waits: the later sizes, which
 * wait for it, say its reason and its next attempt in TIER_STATS. */
static void kc_nvme_parts_wait(struct kd_daemon *d)
{
	const struct kd_cache *f = d->cache;
	struct kd_cache *o;
	uint32_t i;

	kc_for_each(d, o, i) {
		if (!i || !kc_has_nvme(o) || o->nvme || o->nvme_for_good)
			continue;
		o->nvme_error = o->nvme_last_error = f->nvme_error;
		o->nvme_retry_ns = f->nvme_retry_ns;
	}
}

static void kc_nvme_retry_first(struct kd_cache *c);

void kc_nvme_retry(struct kd_cache *c)
{
	if (c->closing || c->nvme || c->nvme_for_good)
		return;
	if (c != c->d->cache) {
		kc_nvme_retry_part(c);
		return;
	}
	kc_nvme_retry_first(c);
	if (c->nvme_fd >= 0 || c->nvme_for_good)
		kc_nvme_retry_parts(c->d);
	else
		kc_nvme_parts_wait(c->d);
}

/*
 * The file just claimed, before any partition opens: under a keyed
 * scope, the start (which could not read it) made a new key, under
 * which every partition would be formatted; its own key is taken
 * instead when nothing was named yet (kd_scope_adopt(): no hash renamed
 * for a client, no block in any size's cache).  Checked at the claim, so
 * that every partition opens under one key.
 */
static void kc_nvme_take_key(struct kd_cache *c)
{
	struct kd_daemon *d = c->d;
	struct tier_nvme_peek pk;
	struct kd_cache *o;
	uint64_t blocks = 0;
	uint32_t i;

	if (d->scope.mode == KD_SCOPE_SHARED ||
	    tier_nvme_peek_fd(c->nvme_fd, &pk))
		return; /* no key, or a new file: nothing of it to keep */
	kc_for_each(d, o, i)
		blocks += o->index.n;
	(void)kd_scope_adopt(d, &pk, blocks);
}

static void kc_nvme_retry_first(struct kd_cache *c)
{
	int r;

	c->nvme_attempts++;
	if (c->nvme_fd < 0) {
		r = kc_nvme_claim(c);
		if (r) {
			kc_nvme_failed(c, r);
			return;
		}
		kc_nvme_take_key(c);
	}
	if (!c->opened) {
		/* claimed before the block size is known: opened now for
		 * the size the file's blocks have, as at start, so that
		 * they are found before the first publish; else the set-up
		 * opens it (kc_open()), as it does a file claimed at start */
		vmm_log(VMM_LOG_INFO,
			"cache: the NVMe tier %s is claimed at attempt %llu (the last one failed: %s); it opens with the cache's tiers",
			c->d->cfg.nvme_path,
			(unsigned long long)c->nvme_attempts,
			strerror(-c->nvme_last_error));
		c->nvme_error = 0;
		c->nvme_retry_ns = 0;
		if (!c->nvme)
			(void)kc_open_nvme_early(c);
		return;
	}
	if (!c->host || !c->mig) {
		/* no host tier for blocks of this size: nothing reaches NVMe
		 * (kc_no_host_tier() said so) */
		c->nvme_error = 0;
		c->nvme_retry_ns = 0;
		return;
	}
	r = kc_nvme_open_tier(c);
	if (r) {
		kc_nvme_failed(c, r);
		return;
	}
	c->nvme_error = 0;
	c->nvme_retry_ns = 0;
	kc_nvme_join(c);
}

/*
 * Out for a drop too before the cache's set-up, even with the tier open
 * for the size its blocks have (kc_open_nvme_early(), at start or at a
 * late claim): none of its file's blocks is in the cache yet, so the
 * drop has nothing to walk, and the set-up would recover them all.  The
 * drop is remembered and applied when the set-up opens it
 * (kc_drop_pending_add()).
 */
bool kc_nvme_out(const struct kd_cache *c)
{
	return kc_has_nvme(c) && (!c->opened || (!c->nvme && c->nvme_error));
}

void kc_nvme_stats(const struct kd_cache *c, struct kvmm_tier_stats_reply *st)
{
	uint64_t now = kd_now_ns();

	st->nvme_open_error = (uint64_t)-c->nvme_error;
	st->nvme_open_attempts = c->nvme_attempts;
	st->nvme_open_last_error = (uint64_t)-c->nvme_last_error;
	st->nvme_open_retry_ms = 0;
	if (!c->nvme_error)
		return;
	if (c->nvme_for_good) {
		st->nvme_open_retry_ms = UINT64_MAX;
		return;
	}
	/* rounded up: 0 only while the attempt that is due runs */
	if (c->nvme_retry_ns > now)
		st->nvme_open_retry_ms =
			(c->nvme_retry_ns - now + 999999) / 1000000;
}
