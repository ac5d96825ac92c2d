// SPDX-License-Identifier: MIT
/*
 * Drops of the NVMe tier answered while it is out (ADMIN_CACHE_DROP,
 * cache_drop.c), applied when it joins.
 *
 * A kvmmd whose --nvme-path could not open runs without the tier and
 * joins it later (cache_nvme_join.c).  A drop meanwhile cannot write its
 * mark (the file is not open), and the blocks the file holds from a run
 * before would come back at the join: the operator asked for them to be
 * gone (new weights, a tenant's data removed).  So each size's cache
 * remembers what the drops covered (every block, or some tenants: a
 * drop of every block subsumes the tenants'; more than
 * TIER_NVME_PENDING_TENANTS tenants become every block, more dropped,
 * never fewer, as the tier's marks do) and hands it to the tier's next
 * open (tier_nvme_config.pending_drop): the open's scan leaves out every
 * header it covers, before any block is recovered into the index, and
 * writes the marks the drops would have written, durably, before it
 * returns (tier_nvme_keep.c).  A mark write that fails fails that open:
 * the tier stays out, the drop pending, and the next attempt tries again
 * (nothing covered ever came back).  A file formatted anew at the open
 * (another key, block size or layout) holds nothing covered.
 *
 * Order under --cache-scope uid/gid: the key is adopted at the claim
 * (kc_nvme_take_key()), before any partition opens, and the drop is
 * applied by the open: the adopted key's file is the one whose headers
 * the scan judges.  A drop names tenants, not hashes, so it gives out
 * no name (kd_scope.names_given) and does not stop the adoption.
 *
 * Across a restart before the join: with --policy-state FILE, the
 * pending drops are kept in FILE.nvme-drops (written through FILE.nvme-
 * drops.tmp, fsynced, before the drop's reply; under the policy state's
 * lock, FILE.lock) with the --nvme-path they are for, read back at the
 * next start before any tier opens, and removed once every size's open
 * applied its part.  Without --policy-state (or without its lock) they
 * are kept in memory alone, and the drop's log line says so.  The file
 * is rewritten after the open applied its part: a crash in between (or
 * a rewrite that fails, logged) has the next start apply it again, which
 * drops the blocks cached on NVMe since then too (more, never fewer).
 * A file that is not exactly what a save writes (a number past 32 bits,
 * a line cut short, no drop line) is damaged: every block is dropped.
 * One for another --nvme-path is neither applied nor rewritten nor
 * removed: that path's next start applies it.
 *
 * Everything here runs on the loop thread.
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvmm/kvmmd/tier_nvme.h"

#define KC_PENDING_MAGIC "kvmm-nvme-pending-drops 1"

bool kc_drop_pending_any(const struct kd_cache *c)
{
	return c->nvme_pending.all || c->nvme_pending.n;
}

const struct tier_nvme_drop_pending *
kc_drop_pending_get(const struct kd_cache *c)
{
	return kc_drop_pending_any(c) ? &c->nvme_pending : NULL;
}

/* The partition c's line in the file names: its pages a block with
 * several sizes named, 0 for the whole file (one size, named or not). */
static uint32_t kc_pending_part(const struct kd_cache *c)
{
	return c->d->cfg.nr_cache_block_sizes > 1 ? c->named_ppb : 0;
}

/* Combine a drop (of every block, or of tenant's) into p. */
static void kc_pending_merge(struct tier_nvme_drop_pending *p, bool all,
			     uint32_t tenant)
{
	if (p->all)
		return;
	if (all || p->n == TIER_NVME_PENDING_TENANTS) {
		p->all = true;
		p->n = 0;
		return;
	}
	for (uint32_t i = 0; i < p->n; i++)
		if (p->tenants[i] == tenant)
			return;
	p->tenants[p->n++] = tenant;
}

static void kc_pending_path(const struct kd_daemon *d, char *buf, size_t len)
{
	snprintf(buf, len, "%s.nvme-drops", d->cfg.policy_state);
}

/* Whether the pending drops are kept across a restart: a --policy-state
 * file whose lock this kvmmd holds. */
static bool kc_pending_kept(const struct kd_daemon *d)
{
	return d->cfg.policy_state[0] && d->cache &&
	       d->cache->learned_lock_fd >= 0;
}

/*
 * The file at path opened to be read: 0, -ENOENT, -EINVAL for no
 * regular file (not a list: a FIFO there held the start in fopen()
 * until a writer came, for good without one), or the -errno.
 */
static int kc_pending_open(const char *path, FILE **out)
{
	struct stat st;
	int fd, r;

	/* 0 only with *out open: an errno of 0 is no success */
	*out = NULL;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno ? -errno : -EIO;
	r = fstat(fd, &st) ? -errno : S_ISREG(st.st_mode) ? 0 : -EINVAL;
	if (!r) {
		*out = fdopen(fd, "r");
		if (!*out)
			r = errno ? -errno : -ENOMEM;
	}
	if (r)
		close(fd);
	return r;
}

/*
 * The file's header from f: true when its first line is the magic and
 * its second starts "path ", that one left in line as read (its '\n'
 * there unless it was cut short).
 */
static bool kc_pending_header(FILE *f, char *line, int len)
{
	return fgets(line, len, f) && !strcmp(line, KC_PENDING_MAGIC "\n") &&
	       fgets(line, len, f) && !strncmp(line, "path ", 5);
}

/*
 * Whether the file at path holds the drops of another --nvme-path (a
 * start on another path left them, kc_drop_pending_load()): not this
 * run's to rewrite or remove, or that file's blocks come back when a
 * later start names its path again.
 */
static bool kc_pending_foreign(const struct kd_daemon *d, const char *path)
{
	char line[sizeof(d->cfg.nvme_path) + 16];
	bool foreign = false;
	FILE *f = NULL;

	/* !f: 0 comes with the file, which the analyzers do not follow */
	if (kc_pending_open(path, &f) || !f)
		return false;
	if (kc_pending_header(f, line, sizeof(line))) {
		line[strcspn(line, "\n")] = '\0';
		foreign = strcmp(line + 5, d->cfg.nvme_path) != 0;
	}
	fclose(f);
	return foreign;
}

int kc_drop_pending_save(struct kd_daemon *d)
{
	char path[sizeof(d->cfg.policy_state) + 16];
	struct kd_cache *c;
	char *buf;
	size_t cap, at = 0;
	bool any = false;
	uint32_t i;
	int r;

	if (!kc_pending_kept(d))
		return -ENOENT;
	kc_pending_path(d, path, sizeof(path));
	if (kc_pending_foreign(d, path)) {
		vmm_log(VMM_LOG_WARN,
			"cache: %s holds the NVMe drops of another --nvme-path: left as it is (this run's are kept in memory alone; remove it once that path's file is gone)",
			path);
		return -EEXIST;
	}
	cap = 64 + sizeof(d->cfg.nvme_path) +
	      d->nr_caches * (32 + TIER_NVME_PENDING_TENANTS * 32);
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	at += snprintf(buf + at, cap - at, "%s\npath %s\n", KC_PENDING_MAGIC,
		       d->cfg.nvme_path);
	kc_for_each(d, c, i) {
		const struct tier_nvme_drop_pending *p = &c->nvme_pending;

		if (!kc_drop_pending_any(c))
			continue;
		any = true;
		if (p->all)
			at += snprintf(buf + at, cap - at, "part %u all\n",
				       kc_pending_part(c));
		for (uint32_t k = 0; !p->all && k < p->n; k++)
			at += snprintf(buf + at, cap - at,
				       "part %u tenant %u\n",
				       kc_pending_part(c), p->tenants[k]);
	}
	if (!any) {
		free(buf);
		r = unlink(path) && errno != ENOENT ? -errno : 0;
		if (r)
			vmm_log(VMM_LOG_WARN,
				"cache: removing %s, the NVMe drops applied now: %s (the next start applies them again: blocks cached on NVMe since they were applied go too)",
				path, strerror(-r));
		return r;
	}
	r = pol_learned_write_file(path, buf, at);
	free(buf);
	return r;
}

/* A decimal number of 32 bits at *s (no sign, blank or wrap: sscanf's
 * %u took "-1" and 2^32 + 5 as numbers), *s moved past it. */
static int kc_pending_u32(const char **s, uint32_t *v)
{
	unsigned long long x;
	char *end;

	if (**s < '0' || **s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(*s, &end, 10);
	if (errno || x > UINT32_MAX)
		return -EINVAL;
	*v = (uint32_t)x;
	*s = end;
	return 0;
}

/* One line of the file after its header, exactly "part P all" or "part
 * P tenant T", into the cache whose partition is P: anything else is a
 * damaged file, whose drops are not known. */
static int kc_pending_line(struct kd_daemon *d, const char *line)
{
	const char *s = line + 5;
	uint32_t part, tenant = 0, i;
	struct kd_cache *c;
	bool all;

	if (strncmp(line, "part ", 5) || kc_pending_u32(&s, &part))
		return -EINVAL;
	all = !strcmp(s, " all");
	if (!all) {
		if (strncmp(s, " tenant ", 8))
			return -EINVAL;
		s += 8;
		if (kc_pending_u32(&s, &tenant) || *s)
			return -EINVAL;
	}
	kc_for_each(d, c, i) {
		if (!kc_has_nvme(c) || kc_pending_part(c) != part)
			continue;
		kc_pending_merge(&c->nvme_pending, all, tenant);
		return 0;
	}
	return -ENOENT;
}

int kc_drop_pending_load(struct kd_daemon *d)
{
	char path[sizeof(d->cfg.policy_state) + 16];
	char line[sizeof(d->cfg.nvme_path) + 16];
	uint32_t lines = 0, unknown = 0;
	int r = 0;
	FILE *f = NULL;

	if (!kc_pending_kept(d) || !d->cfg.nvme_path[0])
		return 0;
	kc_pending_path(d, path, sizeof(path));
	r = kc_pending_open(path, &f);
	if (r == -ENOENT)
		return 0;
	if (r == -EINVAL)
		goto damaged;
	if (r)
		return r;
	if (!f) /* 0 comes with the file (for the analyzers) */
		return -EIO;
	if (!kc_pending_header(f, line, sizeof(line)) || !strchr(line, '\n')) {
		r = -EINVAL;
		goto out;
	}
	line[strcspn(line, "\n")] = '\0';
	if (strcmp(line + 5, d->cfg.nvme_path)) {
		/* another file's drops: nothing of this one's */
		vmm_log(VMM_LOG_WARN,
			"cache: %s holds NVMe drops answered while the tier %s was out; this run's --nvme-path is %s: they are not applied to it, and the file is left for that path",
			path, line + 5, d->cfg.nvme_path);
		goto out;
	}
	while (fgets(line, sizeof(line), f)) {
		/* a line cut short (the file's end, or longer than any line
		 * a save writes): "tenant 12" may have been 123 */
		if (!strchr(line, '\n')) {
			r = -EINVAL;
			goto out;
		}
		line[strcspn(line, "\n")] = '\0';
		r = kc_pending_line(d, line);
		if (r == -ENOENT) {
			/* a size this run does not cache: the file's
			 * partitions are cut otherwise now, formatted anew */
			unknown++;
			r = 0;
		}
		if (r)
			goto out;
		lines++;
	}
	if (!lines) {
		/* every save writes one at least: cut short */
		r = -EINVAL;
		goto out;
	}
	vmm_log(VMM_LOG_INFO,
		"cache: %s: %u NVMe drops answered while the tier was out in a run before, applied when it opens (%u of a partition this run does not have)",
		path, lines, unknown);
out:
	fclose(f);
damaged:
	if (r == -EINVAL) {
		/*
		 * What it covered is not known: every block of every
		 * partition, rather than fewer (a cache can afford it, a
		 * dropped block served again it cannot).
		 */
		struct kd_cache *c;
		uint32_t i;

		kc_for_each(d, c, i)
			if (kc_has_nvme(c))
				kc_pending_merge(&c->nvme_pending, true, 0);
		vmm_log(VMM_LOG_WARN,
			"cache: %s is damaged (not a list of NVMe drops): every block of the NVMe tier is dropped when it opens",
			path);
		r = 0;
	}
	return r;
}

/* The drop's words in the log: what it covers. */
static void kc_pending_text(const struct tier_nvme_drop_pending *p, char *buf,
			    size_t len)
{
	size_t at;

	if (p->all) {
		snprintf(buf, len, "every block");
		return;
	}
	at = (size_t)snprintf(buf, len, "the blocks of tenant%s",
			      p->n == 1 ? "" : "s");
	for (uint32_t i = 0; i < p->n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%u",
				       i ? ", " : " ", p->tenants[i]);
}

bool kc_drop_pending_add(struct kd_cache *c, bool by_tenant, uint32_t tenant)
{
	kc_pending_merge(&c->nvme_pending, !by_tenant, tenant);
	if (c->nvme && !c->opened) {
		/* opened early for its blocks' size, none of them in the
		 * cache yet: the set-up opens it again, and that open
		 * applies the drop (kc_nvme_out()) */
		tier_nvme_close(c->nvme);
		c->nvme = NULL;
	}
	return kc_pending_kept(c->d);
}

void kc_drop_pending_opening(const struct kd_cache *c, const char *name)
{
	char what[96];

	if (!kc_drop_pending_any(c))
		return;
	kc_pending_text(&c->nvme_pending, what, sizeof(what));
	vmm_log(VMM_LOG_INFO,
		"cache: the NVMe tier %s: opening it with the drop of %s answered while it was out: its marks are written before any block of its file is recovered",
		name, what);
}

void kc_drop_pending_opened(struct kd_cache *c, const char *name)
{
	struct tier_nvme_stats ns;
	char what[96];
	int r;

	if (!kc_drop_pending_any(c))
		return;
	kc_pending_text(&c->nvme_pending, what, sizeof(what));
	tier_nvme_get_stats(c->nvme, &ns);
	vmm_log(VMM_LOG_INFO,
		"cache: the NVMe tier %s: the drop of %s answered while it was out is applied: %llu blocks of its file left out before the recovery, its drop marks on disk",
		name, what, (unsigned long long)ns.pending_dropped_slots);
	memset(&c->nvme_pending, 0, sizeof(c->nvme_pending));
	r = kc_drop_pending_save(c->d);
	if (r && r != -ENOENT && r != -EEXIST) /* -EEXIST: said */
		vmm_log(VMM_LOG_WARN,
			"cache: rewriting the NVMe drops still pending: %s (the next start applies those just applied again: blocks cached on NVMe since then go too)",
			strerror(-r));
}
