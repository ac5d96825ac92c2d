// SPDX-License-Identifier: MIT
/*
 * The daemon's one event loop, in the style of Redis's ae.c: file events
 * (epoll), timers (one timerfd armed to the earliest deadline) and a hook
 * that polls the session rings.
 *
 * Adaptive spinning: while the ring hook keeps finding work, the loop does
 * not sleep; after spin_ns without work it asks every client to ring the
 * doorbell (prepare_sleep(arm = true)), re-polls once to close the race,
 * and blocks in epoll_wait.  So a busy client sees sub-microsecond ring
 * latency and an idle daemon costs nothing.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmmd/kvmmd.h"

uint64_t kd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void timer_rearm(struct kd_loop *loop)
{
	struct itimerspec its = { 0 };

	if (loop->timers) {
		uint64_t w = loop->timers->when_ns;

		if (!w)
			w = 1;
		its.it_value.tv_sec = w / 1000000000ull;
		its.it_value.tv_nsec = w % 1000000000ull;
	}
	timerfd_settime(loop->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void kd_timer_cancel(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_timer **pp;

	if (!t->armed)
		return;
	for (pp = &loop->timers; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	t->armed = false;
	t->next = NULL;
	timer_rearm(loop);
}

void kd_timer_arm(struct kd_loop *loop, struct kd_timer *t, uint64_t when_ns)
{
	struct kd_timer **pp;

	kd_timer_cancel(loop, t);
	t->when_ns = when_ns;
	for (pp = &loop->timers; *pp && (*pp)->when_ns <= when_ns;
	     pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	t->armed = true;
	timer_rearm(loop);
}

static void timers_fire(struct kd_loop *loop, int fd, uint32_t events,
			void *data)
{
	uint64_t n, now = kd_now_ns();

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	while (loop->timers && loop->timers->when_ns <= now) {
		struct kd_timer *t = loop->timers;

		loop->timers = t->next;
		t->next = NULL;
		t->armed = false;
		t->fn(loop, t);
	}
	timer_rearm(loop);
}

int kd_loop_init(struct kd_loop *loop)
{
	memset(loop, 0, sizeof(*loop));
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0)
		return -errno;
	loop->timerfd =
		timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (loop->timerfd < 0) {
		int err = -errno;

		close(loop->epfd);
		return err;
	}
	return kd_loop_add(loop, &loop->timer_file, loop->timerfd, EPOLLIN,
			   timers_fire, NULL);
}

void kd_loop_fini(struct kd_loop *loop)
{
	if (loop->timerfd >= 0)
		close(loop->timerfd);
	if (loop->epfd >= 0)
		close(loop->epfd);
	loop->timerfd = loop->epfd = -1;
}

int kd_loop_add(struct kd_loop *loop, struct kd_file *f, int fd,
		uint32_t events, kd_file_fn fn, void *data)
{
	struct epoll_event ev = { .events = events, .data.ptr = f };

	f->fd = fd;
	f->fn = fn;
	f->data = data;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int kd_loop_mod(struct kd_loop *loop, struct kd_file *f, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = f };

	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, f->fd, &ev) < 0)
		return -errno;
	return 0;
}

void kd_loop_del(struct kd_loop *loop, struct kd_file *f)
{
	if (f->fd >= 0)
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, f->fd, NULL);
	f->fd = -1;
	if (loop->dispatching && loop->nr_dead < 64)
		loop->dead[loop->nr_dead++] = f;
}

static bool is_dead(struct kd_loop *loop, struct kd_file *f)
{
	for (unsigned int i = 0; i < loop->nr_dead; i++)
		if (loop->dead[i] == f)
			return true;
	return false;
}

#define KD_MAX_EVENTS 64

static int dispatch(struct kd_loop *loop, int timeout_ms)
{
	struct epoll_event ev[KD_MAX_EVENTS];
	int n;

	n = epoll_wait(loop->epfd, ev, KD_MAX_EVENTS, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	loop->dispatching = true;
	loop->nr_dead = 0;
	for (int i = 0; i < n && !loop->stop; i++) {
		struct kd_file *f = ev[i].data.ptr;

		/* A callback may have deleted (and freed) a later file of
		 * this batch; more deletions than we track end the batch. */
		if (loop->nr_dead == 64)
			break;
		if (is_dead(loop, f))
			continue;
		f->fn(loop, f->fd, ev[i].events, f->data);
	}
	loop->dispatching = false;
	return n;
}

int kd_loop_run(struct kd_loop *loop)
{
	uint64_t last_work = kd_now_ns();
	unsigned int iter = 0;

	while (!loop->stop) {
		bool work = loop->poll && loop->poll(loop->hook_data);
		uint64_t now;
		int err;

		if (work) {
			last_work = kd_now_ns();
			loop->spins++;
		}
		/* Look at sockets and timers now and then while spinning. */
		if (work || ++iter % 64 == 0) {
			now = kd_now_ns();
		} else {
			kr_cpu_relax();
			continue;
		}
		if (now - last_work < loop->spin_ns) {
			err = dispatch(loop, 0);
			if (err > 0)
				last_work = kd_now_ns();
			if (err < 0)
				return err;
			continue;
		}
		if (loop->prepare_sleep &&
		    loop->prepare_sleep(loop->hook_data, true)) {
			loop->prepare_sleep(loop->hook_data, false);
			last_work = kd_now_ns();
			continue;
		}
		loop->sleeps++;
		err = dispatch(loop, -1);
		if (loop->prepare_sleep)
			loop->prepare_sleep(loop->hook_data, false);
		if (err < 0)
			return err;
		last_work = kd_now_ns();
	}
	return 0;
}
