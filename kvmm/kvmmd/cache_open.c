// SPDX-License-Identifier: MIT
/*
 * A set-up of the cache's tiers and policy that failed after the start:
 * undone, and tried again later.
 *
 * Without --cache-block-pages the tiers and the policy are set up by the
 * first publish or prefix open (kc_open(), cache_setup.c), on the loop.  What
 * can fail there is mostly a shortage (memory, fds, threads, epoll
 * watches, GPU address space), which may pass, and a few things no wait
 * mends: a backend without async copies, a setting the tiers cannot take.
 * Until 1.14 any failure left the cache off until kvmmd restarted,
 * because the attempt left its tiers half built.
 *
 * Now a failed attempt takes down what it built (kc_open_undo()): the
 * migration engine (its workers joined, its eventfd out of the loop and
 * closed), the policy, the host tier's slots, the recovered NVMe blocks'
 * index entries.  It keeps what the start paid for and the next attempt
 * uses as it is: the host slab (made, touched and pinned at start: made
 * again it would hold the loop 0.3-0.6 s per GiB) and the NVMe tier
 * (opened at start or by the attempt, its slots read from disk once: the
 * next attempt walks them again from memory, so the blocks on disk come
 * back).  So an attempt costs the loop no more than the first one did.
 *
 * The next attempt is made by the first publish or prefix open once a
 * wait is over, 1 s after the first failure, doubling to at most 60 s: a
 * shortage that lasts costs one attempt a minute, and one ERR line.
 * Meanwhile each publish fails with -EIO (the one whose attempt failed
 * too) and a prefix open finds nothing.  A failure no wait mends makes
 * no more attempts.  TIER_STATS counts the attempts and says the last
 * errno and when the next attempt is due (kvmmctl status, the metrics).
 */
#include "kvmm/kvmmd/cache_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/kvmmd/test_knob.h"
#include "kvmm/kvmmd/tier_host.h"

/* the first wait after a failure, and the longest, as multiples of it */
#define KC_RETRY_FIRST_MS 1000u
#define KC_RETRY_MAX_FACTOR 60u

/* The errnos KVMMD_TEST_CACHE_OPEN_FAIL may name. */
static const struct {
	const char *name;
	int err;
} kc_fail_errnos[] = {
	{ "ENOMEM", ENOMEM }, { "EMFILE", EMFILE },   { "EAGAIN", EAGAIN },
	{ "ENOSPC", ENOSPC }, { "ENOTSUP", ENOTSUP }, { "EINVAL", EINVAL },
};

/* KVMMD_TEST_CACHE_OPEN_FAIL's N: set-ups to fail, from 1 */
#define KC_OPEN_FAIL_MAX 1000000

/*
 * KVMMD_TEST_CACHE_OPEN_FAIL=ERRNO:N into *err (-ERRNO) and *n, or
 * -EINVAL: the one parse of the value, for its reader
 * (kc_open_test_init()) and the start's check of every knob
 * (kc_open_fail_check(), test_knob.c).
 */
static int kc_open_fail_parse(const char *v, int *err, uint32_t *n)
{
	const char *colon = strchr(v, ':');
	char *end;
	long count;

	for (size_t i = 0;
	     colon && i < sizeof(kc_fail_errnos) / sizeof(kc_fail_errnos[0]);
	     i++) {
		if (strlen(kc_fail_errnos[i].name) != (size_t)(colon - v) ||
		    strncmp(v, kc_fail_errnos[i].name, (size_t)(colon - v)))
			continue;
		if (colon[1] < '0' || colon[1] > '9')
			return -EINVAL;
		count = strtol(colon + 1, &end, 10);
		if (*end || count < 1 || count > KC_OPEN_FAIL_MAX)
			return -EINVAL;
		*err = -kc_fail_errnos[i].err;
		*n = (uint32_t)count;
		return 0;
	}
	return -EINVAL;
}

/* What KVMMD_TEST_CACHE_OPEN_FAIL takes, from kc_fail_errnos[] itself. */
static void kc_open_fail_expected(char *buf, size_t len)
{
	size_t used = 0;
	const size_t nr = sizeof(kc_fail_errnos) / sizeof(kc_fail_errnos[0]);
	int w;

	w = snprintf(buf, len, "ERRNO:N (ERRNO ");
	for (size_t i = 0; w >= 0 && i < nr; i++) {
		used += (size_t)w;
		if (used >= len)
			return;
		w = snprintf(buf + used, len - used, "%s%s",
			     i == 0	 ? "" :
			     i == nr - 1 ? " or " :
					   ", ",
			     kc_fail_errnos[i].name);
	}
	used += w > 0 ? (size_t)w : 0;
	if (used < len)
		snprintf(buf + used, len - used, "; N from 1 to %d)",
			 KC_OPEN_FAIL_MAX);
}

int kc_open_fail_check(const char *v, char *why, size_t len)
{
	char want[160];
	uint32_t n;
	int err;

	if (!kc_open_fail_parse(v, &err, &n))
		return 0;
	kc_open_fail_expected(want, sizeof(want));
	snprintf(why, len, "expected %s", want);
	return -EINVAL;
}

/*
 * KVMMD_TEST_NVME_OPEN_FAIL=N fails the first N opens of the first
 * size's NVMe tier (partition 0 with named sizes) that the retries make
 * after the start (kc_nvme_open_tier(); at start a failure stops the
 * start), so that a test can have a later size's partition open without
 * it.  Kept and said by the first size's cache alone (this runs once a
 * size); a bad value stopped the start (kd_test_knobs_check()), whose
 * parse and range kd_test_knob_number() reads it with.
 */
static int kc_nvme_test_init(struct kd_cache *c)
{
	uint64_t n;
	int r = kd_test_knob_number("KVMMD_TEST_NVME_OPEN_FAIL", &n);

	if (r)
		return r == -ENOENT ? 0 : r;
	if (c != c->d->cache || !n)
		return 0;
	c->nvme_open_fail_left = (uint32_t)n;
	vmm_log(VMM_LOG_WARN,
		"cache: KVMMD_TEST_NVME_OPEN_FAIL=%llu: the first %llu opens of the first size's NVMe tier after the start fail on purpose (tests only)",
		(unsigned long long)n, (unsigned long long)n);
	return 0;
}

/*
 * Test knobs, from kvmmd's environment: KVMMD_TEST_CACHE_OPEN_FAIL=ERRNO:N
 * fails the first N set-ups after everything they build is built (so
 * kc_open_undo() takes down all of it), with -ERRNO (ENOMEM, EMFILE,
 * EAGAIN, ENOSPC, ENOTSUP, EINVAL); KVMMD_TEST_CACHE_RETRY_MS=MS waits MS
 * instead of 1 s after the first failure (60 MS at most);
 * KVMMD_TEST_NVME_OPEN_FAIL=N (kc_nvme_test_init()).  A bad value stopped
 * the start (kd_test_knobs_check(); -EINVAL here too, should one get
 * past it).
 */
int kc_open_test_init(struct kd_cache *c)
{
	const char *v = getenv("KVMMD_TEST_CACHE_OPEN_FAIL");
	uint64_t ms;
	int r;

	r = kc_nvme_test_init(c);
	if (r)
		return r;
	c->open_retry_base_ms = KC_RETRY_FIRST_MS;
	r = kd_test_knob_number("KVMMD_TEST_CACHE_RETRY_MS", &ms);
	if (r && r != -ENOENT)
		return r;
	if (!r) {
		c->open_retry_base_ms = ms;
		if (c == c->d->cache) /* said once, however many sizes */
			vmm_log(VMM_LOG_WARN,
				"cache: KVMMD_TEST_CACHE_RETRY_MS=%llu: a failed set-up of each size's cache is tried again after %llu ms at first (tests only)",
				(unsigned long long)ms, (unsigned long long)ms);
	}
	if (!v)
		return 0;
	r = kc_open_fail_parse(v, &c->open_fail_err, &c->open_fail_left);
	if (r) {
		char want[160];

		kc_open_fail_expected(want, sizeof(want));
		vmm_log(VMM_LOG_ERR,
			"KVMMD_TEST_CACHE_OPEN_FAIL=%s: expected %s", v, want);
		return r;
	}
	if (c == c->d->cache) /* said once, however many sizes */
		vmm_log(VMM_LOG_WARN,
			"cache: KVMMD_TEST_CACHE_OPEN_FAIL=%s: the first %u set-ups of each size's tiers fail on purpose (tests only)",
			v, c->open_fail_left);
	return 0;
}

int kc_open_test_fault(struct kd_cache *c)
{
	if (!c->open_fail_left)
		return 0;
	c->open_fail_left--;
	return c->open_fail_err;
}

int kc_open_begin(struct kd_cache *c)
{
	if (c->open_error &&
	    (c->open_for_good || kd_now_ns() < c->open_retry_ns))
		return -EIO;
	c->open_attempts++;
	return 0;
}

/*
 * Take down what a failed kc_open() built, in the reverse order, up to
 * the host slab and the NVMe tier (above).  Nothing outside the cache
 * points at any of it yet: kc_open() hands the policy to the learned
 * state, the tenant limits and telemetry only once nothing can fail.
 */
void kc_open_undo(struct kd_cache *c)
{
	if (c->mig) {
		/* no job was ever submitted: its workers only wait.  A
		 * failed kd_loop_add() left nothing to delete (harmless) */
		kd_loop_del(&c->d->loop, &c->mig_file);
		migrate_close(c->mig);
		c->mig = NULL;
	}
	pol_cache_destroy(c->pol);
	c->pol = NULL;
	/*
	 * Before a set-up works nothing else adds entries: the index holds
	 * only the NVMe blocks kc_recover() found, cold, in no policy.
	 * Their slots stay the tier's, ready, for the next attempt to find
	 * again (as a stop leaves them for the next start).
	 */
	for (uint64_t b = 0; b <= c->index.mask; b++) {
		while (c->index.b[b]) {
			struct kc_entry *e = kc_of(c->index.b[b]);

			e->nvme_slot = MIGRATE_NO_SLOT;
			kc_free(c, e);
		}
	}
	c->st.recovered_blocks = 0; /* counted again by the next attempt */
	/* and so are they as cold (kc_free() counted them dropped) */
	c->st.cold_blocks = c->st.cold_dropped = 0;
	if (c->host) {
		/* the NVMe tier's fixed buffers are in this slab: it stays */
		c->slab = tier_host_close_keep_slab(c->host);
		c->host = NULL;
	}
	c->ppb = 0;
	c->block_bytes = 0;
}

/* A failure the next attempt would meet again whatever the wait. */
static const char *kc_open_unmendable(int err)
{
	switch (err) {
	case -ENOTSUP: /* EOPNOTSUPP too */
		return "the backend cannot copy blocks between tiers";
	case -EINVAL:
		return "a setting the tiers cannot take";
	case -ENOSYS:
		return "a system call this kernel lacks";
	}
	return NULL;
}

uint64_t kc_retry_wait_ms(const struct kd_cache *c, uint64_t attempts)
{
	/* 1, 2, 4 ... 32 s, then 60 s (KVMMD_TEST_CACHE_RETRY_MS: the
	 * first, and 60 times it) */
	unsigned int doublings = attempts > 7 ? 6 : (unsigned)attempts - 1;
	uint64_t ms = c->open_retry_base_ms << doublings;
	uint64_t max = c->open_retry_base_ms * KC_RETRY_MAX_FACTOR;

	return ms > max ? max : ms;
}

void kc_open_failed(struct kd_cache *c, int err)
{
	const char *why = kc_open_unmendable(err);
	uint64_t ms;

	c->open_error = c->open_last_error = err;
	if (c->opening_at_start) {
		/* the start fails with it (kd_cache_init()) */
		vmm_log(VMM_LOG_ERR, "cache: setting up the tiers failed: %s",
			strerror(-err));
		return;
	}
	if (why) {
		c->open_for_good = true;
		vmm_log(VMM_LOG_ERR,
			"cache: setting up the tiers failed: %s (%s, which no wait mends); the cache is off for good, until kvmmd restarts (kvmmctl status)",
			strerror(-err), why);
		return;
	}
	ms = kc_retry_wait_ms(c, c->open_attempts);
	c->open_retry_ns = kd_now_ns() + ms * 1000000ull;
	vmm_log(VMM_LOG_ERR,
		"cache: setting up the tiers failed (attempt %llu): %s; the cache is off, every publish fails with EIO, until a publish or prefix open tries again, in %llu ms at the earliest (kvmmctl status)",
		(unsigned long long)c->open_attempts, strerror(-err),
		(unsigned long long)ms);
}

void kc_open_done(struct kd_cache *c)
{
	if (c->open_error)
		vmm_log(VMM_LOG_INFO,
			"cache: the tiers are set up at attempt %llu (the last one failed: %s); the cache is on",
			(unsigned long long)c->open_attempts,
			strerror(-c->open_error));
	c->open_error = 0;
	c->open_retry_ns = 0;
}

void kc_open_stats(const struct kd_cache *c, struct kvmm_tier_stats_reply *st)
{
	uint64_t now;

	st->cache_open_error = (uint64_t)-c->open_error;
	st->cache_open_attempts = c->open_attempts;
	st->cache_open_last_error = (uint64_t)-c->open_last_error;
	st->cache_open_retry_ms = 0;
	if (!c->open_error)
		return;
	if (c->open_for_good) {
		st->cache_open_retry_ms = UINT64_MAX;
		return;
	}
	now = kd_now_ns();
	/* rounded up: 0 only once the next publish tries */
	if (c->open_retry_ns > now)
		st->cache_open_retry_ms =
			(c->open_retry_ns - now + 999999) / 1000000;
}
