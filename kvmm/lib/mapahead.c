// SPDX-License-Identifier: MIT
/*
 * libkvmm map-ahead thread: keeps map_ahead blocks beyond each open
 * sequence's length mapped, so that kvmm_seq_extend() in steady state is
 * one ring round trip and never waits for the daemon's pages or for mmap.
 * Kicked by kvmm_seq_extend() when a sequence gets close to its mapped
 * end; scans every region then sleeps.
 *
 * After a shortage (an extend or a fetch of ours short of quota, pool or
 * block tables; the blocks ahead it gave back, lend.c) the thread holds
 * off: mapping ahead again at once would take back the very blocks an
 * extend needs, and each try would be a socket round trip kvmmd answers
 * -EDQUOT.  It goes on when the process shows room (a close or truncate,
 * an extend that got its blocks ahead: kc_mapahead_room()) or when the
 * backoff runs out (room another process made: we cannot see it), and
 * doubles the backoff when its try is short again.
 *
 * The thread also answers kvmmd's requests for the blocks mapped ahead
 * (KVMM_RQE_F_GIVE_AHEAD, lend.c) as soon as they are posted, so that a
 * process that runs no steps and does not poll answers too: it sleeps in
 * epoll_wait() on the revocation ring's eventfd (edge-triggered: every
 * post of kvmmd wakes it, and it does not read the eventfd, which stays
 * the engine's kvmm_poll_fd()) and on an eventfd of its own for kicks.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/lib/client.h"

struct target {
	struct kvmm_region *r;
	uint32_t region_id;
	uint32_t seq;
	uint32_t want;
};

uint32_t kc_mapahead_want(const struct kvmm_conn *c,
			  const struct kvmm_region *r, const struct kc_seq *q)
{
	uint32_t want = kc_blocks_for(r, q->len) + c->map_ahead;

	return want < r->max_blocks ? want : r->max_blocks;
}

/* Collect sequences that need blocks (lock held).  What each wants is
 * looked at again when its fetch is sent (kc_fetch()): the engine may
 * cut or close it meanwhile. */
static size_t collect(struct kvmm_conn *c, struct target *t, size_t max)
{
	size_t n = 0;

	for (struct kvmm_region *r = c->regions; r; r = r->next) {
		for (uint32_t s = 0; s < r->max_seqs && n < max; s++) {
			struct kc_seq *q = &r->seqs[s];
			uint32_t want;

			if (!q->open)
				continue;
			want = kc_mapahead_want(c, r, q);
			if (q->backed >= want)
				continue;
			t[n++] = (struct target){ r, r->id, s, want };
		}
	}
	return n;
}

static bool region_alive(struct kvmm_conn *c, struct target *t)
{
	for (struct kvmm_region *r = c->regions; r; r = r->next)
		if (r == t->r && r->id == t->region_id)
			return true;
	return false;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

void kc_mapahead_hold(struct kvmm_conn *c)
{
	if (!c->ma_started)
		return;
	c->ma_backoff_ms = c->ma_backoff_ms ? 2 * c->ma_backoff_ms :
					      KC_MA_BACKOFF_MIN_MS;
	if (c->ma_backoff_ms > KC_MA_BACKOFF_MAX_MS)
		c->ma_backoff_ms = KC_MA_BACKOFF_MAX_MS;
	c->ma_hold_until = mono_ns() + c->ma_backoff_ms * 1000000ull;
	c->st.map_ahead_backoffs++;
}

void kc_mapahead_room(struct kvmm_conn *c)
{
	bool held = c->ma_hold_until;

	c->ma_hold_until = 0;
	c->ma_backoff_ms = 0;
	if (held)
		kc_mapahead_kick(c);
}

/* Wake the thread (lock held, or what it is to see is set already). */
static void wake(struct kvmm_conn *c)
{
	uint64_t one = 1;

	if (write(c->ma_wake_efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, it wakes anyway */
	}
}

/*
 * Sleep until kicked or stopped (wake()), until kvmmd posts into the
 * revocation ring, or for ms (-1: no bound); lock held, dropped while
 * asleep.  What woke it is looked at under the lock afterwards: a kick
 * sets its flag under the lock before it writes the eventfd, so none is
 * lost between the caller's look and the sleep.
 */
static void sleep_unlocked(struct kvmm_conn *c, int ms)
{
	struct epoll_event ev[2];
	uint64_t v;

	pthread_mutex_unlock(&c->lock);
	if (epoll_wait(c->ma_epfd, ev, 2, ms) < 0) {
		/* EINTR: look again */
	}
	if (read(c->ma_wake_efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: no kick */
	}
	pthread_mutex_lock(&c->lock);
}

/* Sleep until the hold runs out (lock held); true while it holds. */
static bool held(struct kvmm_conn *c)
{
	uint64_t now = mono_ns();

	if (!c->ma_hold_until)
		return false;
	if (now >= c->ma_hold_until) {
		c->ma_hold_until = 0; /* one try, backoff kept */
		return false;
	}
	sleep_unlocked(c, (int)((c->ma_hold_until - now + 999999) / 1000000));
	return true;
}

static void *mapahead_main(void *arg)
{
	struct kvmm_conn *c = arg;
	struct target t[64];
	/* tests: a window between the choice and the fetches */
	uint32_t delay_ms = kc_test_mapahead_delay_ms();

	pthread_mutex_lock(&c->lock);
	while (!c->ma_stop) {
		size_t n;

		/* kvmmd asked for our blocks ahead: first, whatever else */
		if (c->give_watch && kc_give_pending(c)) {
			pthread_mutex_unlock(&c->lock);
			kc_give_ahead_ring(c);
			pthread_mutex_lock(&c->lock);
			continue;
		}
		if (!c->ma_kick) {
			sleep_unlocked(c, -1);
			continue;
		}
		if (held(c))
			continue; /* the kick stays for when it ends */
		c->ma_kick = false;
		n = collect(c, t, 64);
		if (n == 64)
			c->ma_kick = true; /* more next round */
		pthread_mutex_unlock(&c->lock);
		if (delay_ms && n)
			usleep(delay_ms * 1000u);
		for (size_t i = 0; i < n; i++) {
			uint32_t before = 0;
			bool go;
			int err;

			pthread_mutex_lock(&c->sock_lock);
			pthread_mutex_lock(&c->lock);
			/* a shortage since (an extend's, or ours just now)
			 * holds off the rest of the round */
			go = !c->ma_stop && !c->ma_hold_until &&
			     region_alive(c, &t[i]) &&
			     t[i].r->seqs[t[i].seq].open &&
			     t[i].r->seqs[t[i].seq].backed < t[i].want;
			if (go)
				before = t[i].r->seqs[t[i].seq].backed;
			pthread_mutex_unlock(&c->lock);
			err = go ? kc_fetch(t[i].r, t[i].seq, 0, t[i].want,
					    true) :
				   -ECANCELED;
			pthread_mutex_lock(&c->lock);
			if (!err) {
				/* what this fetch mapped, in blocks; a
				 * revocation may have cut the sequence since */
				uint32_t now = t[i].r->seqs[t[i].seq].backed;

				if (now > before)
					c->st.map_ahead_blocks += now - before;
				c->ma_backoff_ms = 0;
			} else if (kc_short_of_blocks(err)) {
				kc_mapahead_hold(c);
				c->ma_kick = true; /* once it ends */
			}
			pthread_mutex_unlock(&c->lock);
			pthread_mutex_unlock(&c->sock_lock);
		}
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/*
 * The thread starts with every signal blocked: it inherits the caller's
 * mask otherwise, and the kernel hands a process-directed signal to any
 * thread that does not block it.  An engine that blocks SIGTERM after
 * kvmm_connect() and takes it in a sigwait() thread was killed by it
 * instead, the map-ahead thread having taken it with the default action.
 */
static void close_fds(struct kvmm_conn *c)
{
	if (c->ma_epfd >= 0)
		close(c->ma_epfd);
	if (c->ma_wake_efd >= 0)
		close(c->ma_wake_efd);
	c->ma_epfd = c->ma_wake_efd = -1;
}

int kc_mapahead_start(struct kvmm_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t all, caller;
	int err;

	c->ma_epfd = epoll_create1(EPOLL_CLOEXEC);
	c->ma_wake_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->ma_epfd < 0 || c->ma_wake_efd < 0)
		goto err_fds;
	if (epoll_ctl(c->ma_epfd, EPOLL_CTL_ADD, c->ma_wake_efd, &ev))
		goto err_fds;
	/* edge-triggered: the engine may leave the eventfd readable for
	 * as long as it likes; each post of kvmmd is an edge */
	ev.events = EPOLLIN | EPOLLET;
	if (c->rv_efd >= 0 &&
	    epoll_ctl(c->ma_epfd, EPOLL_CTL_ADD, c->rv_efd, &ev))
		goto err_fds;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &caller);
	err = pthread_create(&c->ma_thread, NULL, mapahead_main, c);
	pthread_sigmask(SIG_SETMASK, &caller, NULL);
	if (err) {
		errno = err;
		goto err_fds;
	}
	c->ma_started = true;
	return 0;

err_fds:
	err = -errno;
	close_fds(c);
	return err;
}

void kc_mapahead_stop(struct kvmm_conn *c)
{
	if (!c->ma_started)
		return;
	pthread_mutex_lock(&c->lock);
	c->ma_stop = true;
	wake(c);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->ma_thread, NULL);
	c->ma_started = false;
	close_fds(c);
}

/* lock held */
void kc_mapahead_kick(struct kvmm_conn *c)
{
	if (!c->ma_started || c->ma_kick)
		return;
	c->ma_kick = true;
	wake(c);
}
