/* SPDX-License-Identifier: MIT */
/*
 * kvmmd's event loop (loop.c): file events, timers, the before-sleep hook
 * with bounded adaptive spinning over the session rings, and the clock
 * everything in kvmmd reads (kd_now_ns()).  kvmmd.h includes it.
 */
#ifndef KVMM_KVMMD_LOOP_H
#define KVMM_KVMMD_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct kd_loop;

typedef void (*kd_file_fn)(struct kd_loop *loop, int fd, uint32_t events,
			   void *data);

/* A file event; embedded in the object that owns the fd. */
struct kd_file {
	int fd;
	kd_file_fn fn;
	void *data;
};

struct kd_timer {
	uint64_t when_ns; /* CLOCK_MONOTONIC */
	void (*fn)(struct kd_loop *loop, struct kd_timer *t);
	void *data;
	bool armed;
	struct kd_timer *next;
};

struct kd_loop {
	int epfd;
	int timerfd;
	struct kd_file timer_file;
	struct kd_timer *timers; /* sorted by when_ns */
	bool stop;
	uint64_t spin_ns; /* keep polling this long after the last work */
	/* Polls for work outside epoll (rings); true if it found some. */
	bool (*poll)(void *data);
	/* Before blocking: arm = true asks peers to ring doorbells and
	 * returns true if work arrived meanwhile; arm = false after wake. */
	bool (*prepare_sleep)(void *data, bool arm);
	void *hook_data;
	uint64_t spins, sleeps;
	/* Files deleted while a batch of events is dispatched: their later
	 * events in the batch are stale (the object may be freed). */
	bool dispatching;
	unsigned int nr_dead;
	struct kd_file *dead[64];
};

int kd_loop_init(struct kd_loop *loop);
void kd_loop_fini(struct kd_loop *loop);
int kd_loop_add(struct kd_loop *loop, struct kd_file *f, int fd,
		uint32_t events, kd_file_fn fn, void *data);
/* New event mask (0: only EPOLLHUP / EPOLLERR are reported). */
int kd_loop_mod(struct kd_loop *loop, struct kd_file *f, uint32_t events);
void kd_loop_del(struct kd_loop *loop, struct kd_file *f);
void kd_timer_arm(struct kd_loop *loop, struct kd_timer *t, uint64_t when_ns);
void kd_timer_cancel(struct kd_loop *loop, struct kd_timer *t);
int kd_loop_run(struct kd_loop *loop);
uint64_t kd_now_ns(void);

#endif
