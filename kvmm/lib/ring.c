// SPDX-License-Identifier: MIT
/*
 * libkvmm ring client: submit entries on the SQ, wait for completions on
 * the CQ.  Waiting spins for spin_us (the daemon answers in well under a
 * microsecond while it is polling), then sets KVMM_RING_CF_CQ_WAIT and
 * sleeps on the CQ doorbell and the socket (whose hang-up means the daemon
 * is gone).  Submissions ring the SQ doorbell only when the daemon said it
 * sleeps (KVMM_RING_F_NEED_WAKEUP).  A call whose reply the daemon
 * defers (ABI 1.16: a prefix open's restores, an early open's reloads)
 * waits without the socket on the ring's notify word (kc_notify_wait()).
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/lib/client.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Without a lock (a hint for the step boundaries): rq_head is written
 * under sock_lock and lock by kvmm_process_revocations(), hence relaxed
 * atomics on both sides; a stale value costs one call of it that finds
 * nothing to do. */
bool kc_revocations_pending(struct kvmm_conn *c)
{
	return c->ring_mem &&
	       kr_load_acquire(c->r.rq.tail) !=
		       __atomic_load_n(&c->rq_head, __ATOMIC_RELAXED);
}

bool kc_can_notify(struct kvmm_conn *c)
{
	return c->r.notify && c->hello.abi_major == KVMM_ABI_MAJOR &&
	       c->hello.abi_minor >= 16;
}

bool kc_can_collect_extend(struct kvmm_conn *c)
{
	return kc_can_notify(c) && c->hello.abi_minor >= 17;
}

uint32_t kc_notify_seen(struct kvmm_conn *c)
{
	/* pairs with the daemon's bump after it changed what we ask about */
	return kr_load_acquire(c->r.notify);
}

int kc_notify_wait(struct kvmm_conn *c, uint32_t seen)
{
	/* a daemon that dies bumps nothing: look at the socket each second
	 * (one that ends the session, or stops, bumps it) */
	struct timespec ts = { .tv_sec = 1 };
	struct pollfd p = { .fd = c->sock, .events = 0 };

	/* a shared futex: the word is in the ring's memfd, which kvmmd
	 * maps too (no FUTEX_PRIVATE_FLAG) */
	if (syscall(SYS_futex, c->r.notify, FUTEX_WAIT, seen, &ts, NULL, 0) <
		    0 &&
	    errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
		return -errno;
	if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)))
		return -ECONNRESET;
	return 0;
}

/* Wait until the CQ holds at least one entry; ring_lock held. */
static int wait_cq(struct kvmm_conn *c)
{
	uint64_t deadline = 0;
	unsigned int i = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = c->cq_efd, .events = POLLIN },
				       { .fd = c->sock, .events = 0 } };
		uint64_t v;

		if (kr_load_acquire(c->r.cq.tail) != c->cq_head)
			return 0;
		if (++i % 64) {
			kr_cpu_relax();
			continue;
		}
		if (!deadline)
			deadline = now_ns() + c->spin_us * 1000ull;
		if (now_ns() < deadline)
			continue;
		kr_flag_set(c->r.client_flags, KVMM_RING_CF_CQ_WAIT);
		/* Flag before the tail check, so the daemon sees one or we
		 * see its completion. */
		kr_full_barrier();
		if (kr_load_acquire(c->r.cq.tail) != c->cq_head) {
			kr_flag_clear(c->r.client_flags, KVMM_RING_CF_CQ_WAIT);
			return 0;
		}
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			return -errno;
		kr_flag_clear(c->r.client_flags, KVMM_RING_CF_CQ_WAIT);
		if (p[0].revents & POLLIN) {
			if (read(c->cq_efd, &v, sizeof(v)) < 0) {
				/* raced with another reader: harmless */
			}
		}
		if (p[1].revents & (POLLHUP | POLLERR))
			return -ECONNRESET;
		deadline = 0;
	}
}

int kc_ring_submit_wait(struct kvmm_conn *c, struct kvmm_sqe *sqes,
			struct kvmm_cqe *cqes, uint32_t n)
{
	struct kvmm_sqe *ring_sqes;
	struct kvmm_cqe *ring_cqes;
	uint32_t done = 0, sent = 0;
	int err = 0;

	if (!c->ring_mem)
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD; /* the parent's rings: fork.c */
	pthread_mutex_lock(&c->ring_lock);
	ring_sqes = c->r.sq.array;
	ring_cqes = c->r.cq.array;
	while (done < n) {
		uint32_t head = kr_load_acquire(c->r.sq.head);
		uint32_t room = c->r.sq.entries - (c->sq_tail - head);
		uint32_t inflight = sent - done;
		uint32_t k = 0;

		/* Never more in flight than the CQ holds. */
		if (inflight + room > c->r.cq.entries)
			room = c->r.cq.entries > inflight ?
				       c->r.cq.entries - inflight :
				       0;
		while (sent < n && k < room) {
			sqes[sent].user_data = ++c->next_user_data;
			memcpy(&ring_sqes[c->sq_tail & c->r.sq.mask],
			       &sqes[sent], sizeof(sqes[0]));
			c->sq_tail++;
			sent++;
			k++;
		}
		if (k) {
			kr_store_release(c->r.sq.tail, c->sq_tail);
			/* Tail before the flag: see the daemon's sleep. */
			kr_full_barrier();
			if (kr_load_relaxed(c->r.flags) &
			    KVMM_RING_F_NEED_WAKEUP) {
				uint64_t one = 1;

				if (write(c->sq_efd, &one, sizeof(one)) < 0) {
					/* saturated counter: it wakes anyway */
				}
			}
		}
		err = wait_cq(c);
		if (err)
			break;
		while (kr_load_acquire(c->r.cq.tail) != c->cq_head) {
			struct kvmm_cqe *e =
				&ring_cqes[c->cq_head & c->r.cq.mask];

			if (done < n)
				memcpy(&cqes[done++], e, sizeof(*e));
			c->cq_head++;
		}
		kr_store_release(c->r.cq.head, c->cq_head);
	}
	pthread_mutex_unlock(&c->ring_lock);
	return err;
}

int kc_ring_cmd(struct kvmm_conn *c, uint16_t cmd, uint32_t region,
		uint32_t seq, uint64_t arg0, uint64_t *value)
{
	struct kvmm_sqe sqe = {
		.cmd = cmd, .region_id = region, .seq_id = seq, .arg0 = arg0
	};
	struct kvmm_cqe cqe = { 0 };
	int err;

	err = kc_ring_submit_wait(c, &sqe, &cqe, 1);
	if (err)
		return err;
	if (value)
		*value = cqe.value;
	return cqe.res;
}
