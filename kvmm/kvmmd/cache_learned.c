// SPDX-License-Identifier: MIT
/*
 * --policy-state FILE: what the cache's policy learned from the workload
 * (asym: its return hazards per class and age, pol_cache_learned_save())
 * outlives kvmmd.  It is loaded when the policy is made, before the first
 * block, saved every KC_LEARNED_SAVE_MS (the bytes built on the loop,
 * written by a worker thread) and at the stop (on the loop, after that
 * worker), each time to FILE.tmp, synced, then renamed over FILE (and the
 * directory synced), so a crash leaves the old file or the new one, never
 * half of one.
 *
 * Why: asym learns how long the blocks of each class stay away from what
 * it sees, which takes a few hundred thousand block uses; a restarted
 * kvmmd that starts from nothing ranks blocks by the pooled guess until
 * then.  kvmm-replay --restart-every measures the difference
 * (Documentation/policy.md, "Restarts").
 *
 * The blocks are not in the file: the host tier is gone at a restart and
 * the NVMe tier recovers its own (tiers.md).  A file that is missing,
 * damaged or of another policy is logged and left alone (the next save
 * replaces it); it never stops the start.  Another kvmmd using the same
 * FILE does: each would overwrite the other's learning with its own (and
 * share FILE.tmp), so kvmmd holds an flock on FILE.lock while it runs.
 * So does a FILE.lock that cannot be taken for any other reason (its
 * directory missing): no save could work, and a whole run's learning
 * would be lost.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache_priv.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/paths.h"
#include "kvmm/kvmmd/test_knob.h"

/* ten minutes: a crash loses at most that much learning */
#define KC_LEARNED_SAVE_MS (10 * 60 * 1000u)
/* One save: the bytes built on the loop, written by whoever runs it. */
struct kc_learned_write {
	struct kd_cache *c;
	const char *why;
	void *buf;
	size_t len;
};

/* Write, count, log: on the loop at the stop, on the worker otherwise.
 * The counters are read by ADMIN_STATUS on the loop: atomics. */
static int learned_write(struct kc_learned_write *w)
{
	struct kd_cache *c = w->c;
	const char *path = c->d->cfg.policy_state;
	int r = pol_learned_write_file(path, w->buf, w->len);

	if (r) {
		__atomic_add_fetch(&c->learned_save_errors, 1,
				   __ATOMIC_RELAXED);
		vmm_log(VMM_LOG_WARN, "policy state %s: saving (%s): %s", path,
			w->why, strerror(-r));
	} else {
		__atomic_store_n(&c->learned_saved_ns, kd_now_ns(),
				 __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->learned_saves, 1, __ATOMIC_RELEASE);
		vmm_log(VMM_LOG_INFO,
			"policy state %s: saved what %s learned (%s, %zu bytes)",
			path,
			pol_kind_string((enum pol_kind)c->d->cfg.cache_policy),
			w->why, w->len);
	}
	free(w->buf);
	return r;
}

static void *learned_worker(void *arg)
{
	struct kc_learned_write *w = arg;
	struct kd_cache *c = w->c;

	/* a test knob: a slow disk (the stop must wait for this write).
	 * The line tells a test the save is in flight, where it had to
	 * guess with a sleep. */
	if (c->learned_write_delay_us) {
		vmm_log(VMM_LOG_INFO,
			"policy state: test knob: a periodic save writing, waiting %u ms (KVMMD_TEST_POLICY_WRITE_DELAY_MS)",
			c->learned_write_delay_us / 1000);
		usleep(c->learned_write_delay_us);
	}
	learned_write(w);
	free(w);
	return NULL;
}

/* Is ppb a size this run may cache: named, or any when none is named
 * (a later size's region may come)? */
static bool learned_size_kept(const struct kd_daemon *d, uint32_t ppb)
{
	if (!d->cfg.cache_block_pages)
		return true;
	for (uint32_t i = 0; i < d->cfg.nr_cache_block_sizes; i++)
		if (d->cfg.cache_block_sizes[i] == ppb)
			return true;
	return false;
}

/*
 * Several sizes' states in one file (cache_learned_sizes.c): each open
 * size's policy's, and the sections read at the start of sizes not open
 * yet (kept for when they are), into buf (malloc'd).  0, -ENODATA with
 * none to save, or -ENOMEM.
 */
static int learned_sized_bytes(struct kd_cache *f, void **buf, size_t *len)
{
	struct kc_learned_sec secs[KD_CACHE_SIZES];
	void *own[KD_CACHE_SIZES] = { NULL };
	struct kd_daemon *d = f->d;
	struct kd_cache *c;
	uint32_t nr = 0, i;
	int err = -ENOMEM;

	kc_for_each(d, c, i) {
		size_t n = c->pol ? pol_cache_learned_save(c->pol, NULL, 0) : 0;

		if (!n)
			continue;
		own[nr] = malloc(n);
		if (!own[nr])
			goto out;
		secs[nr].ppb = c->ppb;
		secs[nr].len = pol_cache_learned_save(c->pol, own[nr], n);
		secs[nr].buf = own[nr];
		nr++;
	}
	for (uint32_t k = 0; k < f->nr_learned_secs; k++) {
		const struct kc_learned_sec *s = &f->learned_secs[k];
		bool open = false;

		for (uint32_t j = 0; j < nr; j++)
			open |= secs[j].ppb == s->ppb;
		if (!open && nr < KD_CACHE_SIZES &&
		    learned_size_kept(d, s->ppb))
			secs[nr++] = *s;
	}
	err = -ENODATA;
	if (!nr)
		goto out;
	*len = kc_learned_pack(secs, nr, NULL, 0);
	*buf = malloc(*len);
	err = *buf ? 0 : -ENOMEM;
	if (*buf)
		kc_learned_pack(secs, nr, *buf, *len);
out:
	for (uint32_t k = 0; k < KD_CACHE_SIZES; k++)
		free(own[k]);
	return err;
}

/* Block uses since the start, every size's policy's. */
static uint64_t learned_ticks(struct kd_daemon *d)
{
	struct kd_cache *c;
	uint64_t n = 0;
	uint32_t i;

	kc_for_each(d, c, i)
		if (c->pol)
			n += pol_cache_ticks(c->pol);
	return n;
}

/* The file of several sizes: when more than one is cached, or the file
 * read at the start was one (its other sizes' sections are kept). */
static bool learned_is_sized(const struct kd_cache *f)
{
	return f->d->nr_caches > 1 || f->nr_learned_secs;
}

/* The bytes to save (the policies are the loop's): NULL with nothing to.
 * c is the first size's cache, which saves for every size. */
static struct kc_learned_write *learned_build(struct kd_cache *c,
					      const char *why)
{
	const char *path = c->d->cfg.policy_state;
	struct kc_learned_write *w;
	size_t len;

	if (!path[0] || !c->pol)
		return NULL;
	len = pol_cache_learned_save(c->pol, NULL, 0);
	if (!len)
		return NULL; /* learns nothing: said at load */
	/*
	 * Nothing used since the start: the file says all this run knows,
	 * and more (a loaded state weighs less than it was saved with).
	 */
	if (!learned_ticks(c->d)) {
		if (!strcmp(why, "stop"))
			vmm_log(VMM_LOG_INFO,
				"policy state %s: no block used since the start: left as it is",
				path);
		return NULL;
	}
	/* a start without the lock is refused since 7 December
	 * (kc_learned_lock()): kept so that no path saves unlocked */
	if (c->learned_lock_fd < 0) {
		__atomic_add_fetch(&c->learned_save_errors, 1,
				   __ATOMIC_RELAXED);
		vmm_log(VMM_LOG_WARN,
			"policy state %s: saving (%s): %s.lock: %s", path, why,
			path, strerror(-c->learned_lock_err));
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w)
		w->buf = malloc(len);
	if (!w || !w->buf) {
		free(w);
		vmm_log(VMM_LOG_WARN, "policy state %s: saving (%s): %s", path,
			why, strerror(ENOMEM));
		return NULL;
	}
	w->c = c;
	w->why = why;
	w->len = pol_cache_learned_save(c->pol, w->buf, len);
	if (learned_is_sized(c)) {
		int r;

		free(w->buf);
		w->buf = NULL;
		r = learned_sized_bytes(c, &w->buf, &w->len);
		if (r) {
			if (r != -ENODATA)
				vmm_log(VMM_LOG_WARN,
					"policy state %s: saving (%s): %s",
					path, why, strerror(-r));
			free(w);
			return NULL;
		}
	}
	return w;
}

/*
 * Join the periodic save's worker, if one ran.  One still writing holds
 * the stop up (a slow disk): said, so that a stop that takes long says
 * why.
 */
static void learned_join(struct kd_cache *c)
{
	if (!c->learned_thread_started)
		return;
	if (pthread_tryjoin_np(c->learned_thread, NULL) == EBUSY) {
		vmm_log(VMM_LOG_INFO,
			"policy state %s: the periodic save is still writing: waiting for it",
			c->d->cfg.policy_state);
		pthread_join(c->learned_thread, NULL);
	}
	c->learned_thread_started = false;
}

int kc_learned_save(struct kd_cache *c, const char *why)
{
	struct kc_learned_write *w;
	int r;

	learned_join(c); /* one writer of FILE.tmp at a time */
	w = learned_build(c, why);
	if (!w)
		return 0;
	r = learned_write(w);
	free(w);
	return r;
}

static uint64_t save_every_ns(void)
{
	uint64_t ms;

	if (kd_test_knob_number("KVMMD_TEST_POLICY_SAVE_MS", &ms))
		ms = KC_LEARNED_SAVE_MS;
	return ms * 1000000ull;
}

/*
 * The periodic save: the bytes are built here, on the loop (the policy is
 * its), and written by a worker, so that the write and its two fsyncs,
 * which can take long on a disk the NVMe tier keeps busy, hold up no
 * client.  A save still writing when the next is due makes that one wait
 * for the next period.
 */
static void kc_on_learned_timer(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_cache *c = t->data;
	struct kc_learned_write *w;

	kd_timer_arm(loop, t, kd_now_ns() + save_every_ns());
	if (c->learned_thread_started) {
		if (pthread_tryjoin_np(c->learned_thread, NULL) == EBUSY) {
			/* still writing: said once a write (a disk that
			 * slow is worth knowing of) */
			if (!c->learned_skip_said)
				vmm_log(VMM_LOG_INFO,
					"policy state %s: the last periodic save is still writing: this one and the next wait for it",
					c->d->cfg.policy_state);
			c->learned_skip_said = true;
			return;
		}
		c->learned_thread_started = false;
	}
	w = learned_build(c, "periodic");
	if (!w)
		return;
	if (pthread_create(&c->learned_thread, NULL, learned_worker, w)) {
		/* no thread: write it here */
		learned_write(w);
		free(w);
		return;
	}
	c->learned_thread_started = true;
	c->learned_skip_said = false;
}

/*
 * The file, read once for every size (the first size's cache keeps it):
 * when it holds several sizes' states, their sections; the sizes this run
 * cannot cache (not in --cache-block-pages) are skipped with a log line.
 */
static void learned_read(struct kd_cache *f)
{
	struct kd_daemon *d = f->d;
	const char *path = d->cfg.policy_state;
	int r;

	if (f->learned_read)
		return;
	f->learned_read = true;
	r = pol_learned_read_file(path, &f->learned_file, &f->learned_file_len);
	if (!r && kc_learned_sized(f->learned_file, f->learned_file_len))
		r = kc_learned_parse(f->learned_file, f->learned_file_len,
				     f->learned_secs, KD_CACHE_SIZES,
				     &f->nr_learned_secs);
	f->learned_file_err = r;
	if (r)
		return;
	for (uint32_t k = 0; k < f->nr_learned_secs; k++)
		if (!learned_size_kept(d, f->learned_secs[k].ppb))
			vmm_log(VMM_LOG_INFO,
				"policy state %s: blocks of %u pages are not cached (--cache-block-pages): their state is skipped",
				path, f->learned_secs[k].ppb);
}

/*
 * c's state from the file: 0, or pol_cache_learned_load()'s and
 * pol_learned_read_file()'s errors; *sized when the file holds several
 * sizes' or several are cached (c not the first size: a file of one
 * size's state, the first's, is -ENOENT for it).
 */
static int learned_load_one(struct kd_cache *c, uint64_t *lives, bool *sized)
{
	struct kd_cache *f = c->d->cache;

	learned_read(f);
	*sized = f->nr_learned_secs || c != f ||
		 c->d->cfg.nr_cache_block_sizes > 1;
	if (f->learned_file_err)
		return f->learned_file_err;
	if (!f->nr_learned_secs && c != f)
		return -ENOENT; /* the first size's state alone */
	if (!f->nr_learned_secs) {
		int r = pol_cache_learned_load(c->pol, f->learned_file,
					       f->learned_file_len, lives);

		free(f->learned_file); /* no other size's in it */
		f->learned_file = NULL;
		f->learned_file_len = 0;
		return r;
	}
	for (uint32_t k = 0; k < f->nr_learned_secs; k++)
		if (f->learned_secs[k].ppb == c->ppb)
			return pol_cache_learned_load(c->pol,
						      f->learned_secs[k].buf,
						      f->learned_secs[k].len,
						      lives);
	return -ENOENT;
}

void kc_learned_load(struct kd_cache *c)
{
	const char *path = c->d->cfg.policy_state;
	const char *kind =
		pol_kind_string((enum pol_kind)c->d->cfg.cache_policy);
	char size[48] = "";
	uint64_t lives = 0, save_ms;
	bool sized;
	int r;

	if (!path[0])
		return;
	if (!pol_cache_learned_save(c->pol, NULL, 0)) {
		c->learned_unused = true;
		if (c == c->d->cache) /* one policy for every size */
			vmm_log(VMM_LOG_INFO,
				"policy state %s: %s learns nothing to keep: not used",
				path, kind);
		return;
	}
	r = learned_load_one(c, &lives, &sized);
	/* with several sizes, each size's lines say which */
	if (sized)
		snprintf(size, sizeof(size), " blocks of %u pages:", c->ppb);
	switch (r) {
	case 0:
		c->learned_lives = lives;
		vmm_log(VMM_LOG_INFO,
			"policy state %s:%s loaded what %s learned before (%llu block lives)",
			path, size, kind, (unsigned long long)lives);
		break;
	case -ENOENT:
		vmm_log(VMM_LOG_INFO,
			"policy state %s:%s none yet: %s learns from the start",
			path, size, kind);
		break;
	case -ESTALE:
		vmm_log(VMM_LOG_INFO,
			"policy state %s:%s written by another policy or version: not used, %s learns anew",
			path, size, kind);
		break;
	default:
		vmm_log(VMM_LOG_WARN,
			"policy state %s:%s %s: not used, %s learns anew (the next save replaces it)",
			path, size, r == -EINVAL ? "damaged" : strerror(-r),
			kind);
		break;
	}
	if (c != c->d->cache)
		return; /* the first size's timer saves every size */
	if (!kd_test_knob_number("KVMMD_TEST_POLICY_SAVE_MS", &save_ms))
		vmm_log(VMM_LOG_WARN,
			"policy state: KVMMD_TEST_POLICY_SAVE_MS: saved every %llu ms (tests only)",
			(unsigned long long)save_ms);
	c->learned_write_delay_us =
		kd_test_delay_us("KVMMD_TEST_POLICY_WRITE_DELAY_MS",
				 "policy state", "periodic saves");
	c->learned_timer.fn = kc_on_learned_timer;
	c->learned_timer.data = c;
	kd_timer_arm(&c->d->loop, &c->learned_timer,
		     kd_now_ns() + save_every_ns());
}

int kc_learned_lock(struct kd_cache *c)
{
	const char *path = c->d->cfg.policy_state;
	int fd;

	c->learned_lock_fd = -1;
	if (!path[0])
		return 0;
	fd = pol_learned_lock_file(path);
	if (fd == -EBUSY) {
		vmm_log(VMM_LOG_ERR,
			"policy state %s: another kvmmd keeps its state there (%s.lock is locked: give each kvmmd a file of its own)",
			path, path);
		return fd;
	}
	if (fd < 0) {
		/*
		 * Nothing could be saved without the lock (another writer
		 * would share FILE.tmp): the start is refused.  It went on
		 * with a WARN, and a whole run learned what no save kept.
		 * A missing directory or a link in the way is the
		 * operator's to mend: exit 2 (admin.md, the rule for a
		 * refused start); EMFILE, EIO, ...: exit 1.
		 */
		c->learned_lock_err = fd;
		if (kd_path_err_is_operators(fd))
			c->d->bad_option = true;
		vmm_log(VMM_LOG_ERR, "policy state %s: cannot lock %s.lock: %s",
			path, path, strerror(-fd));
		return fd;
	}
	c->learned_lock_fd = fd;
	return 0;
}

void kc_learned_fini(struct kd_cache *c)
{
	if (c->learned_finished)
		return;
	c->learned_finished = true;
	kd_timer_cancel(&c->d->loop, &c->learned_timer);
	if (c->pol) /* joins the periodic save's worker first */
		kc_learned_save(c, "stop");
	if (c->learned_lock_fd >= 0)
		close(c->learned_lock_fd);
	c->learned_lock_fd = -1;
	free(c->learned_file);
	c->learned_file = NULL;
	c->nr_learned_secs = 0;
}

void kd_cache_learned_stats(struct kd_daemon *d, struct kvmm_status_reply *st)
{
	const struct kd_cache *c = d->cache;
	struct kd_cache *o;
	uint32_t i;

	st->policy_state_save_age_ms = UINT64_MAX;
	if (!d->cfg.policy_state[0]) {
		st->policy_state = KVMM_POLICY_STATE_OFF;
		return;
	}
	st->policy_state = KVMM_POLICY_STATE_ON;
	if (!c)
		return;
	if (c->learned_unused)
		st->policy_state = KVMM_POLICY_STATE_UNUSED;
	/* every size's loaded state */
	st->policy_state_lives = 0;
	kc_for_each(d, o, i)
		st->policy_state_lives += o->learned_lives;
	/* the worker counts its saves */
	st->policy_state_saves =
		__atomic_load_n(&c->learned_saves, __ATOMIC_ACQUIRE);
	st->policy_state_save_errors =
		__atomic_load_n(&c->learned_save_errors, __ATOMIC_RELAXED);
	if (st->policy_state_saves) {
		/* the time first: the worker may store a later one now */
		uint64_t at =
			__atomic_load_n(&c->learned_saved_ns, __ATOMIC_RELAXED);
		uint64_t now = kd_now_ns();

		st->policy_state_save_age_ms = now > at ? (now - at) / 1000000 :
							  0;
	}
}
