// SPDX-License-Identifier: MIT
/*
 * The session rings, daemon side.
 *
 * One sealed memfd per session (it cannot shrink under the daemon) holds
 * the SQ, CQ and RQ described by struct kvmm_ring_offsets.  The daemon
 * keeps private copies of the indexes it owns (SQ head, CQ tail, RQ tail)
 * and treats the client's indexes as untrusted: a tail that runs more than
 * the ring size ahead cuts the session off.  Each SQE is copied out once
 * before it is looked at, so the client cannot change it mid-check.
 *
 * Doorbells: the client writes sq_efd only when the daemon has set
 * KVMM_RING_F_NEED_WAKEUP (it is about to sleep); the daemon writes cq_efd
 * only when the client has set KVMM_RING_CF_CQ_WAIT, and rv_efd whenever
 * it posts revocations (that one is kvmm_poll_fd()).
 *
 * The notify word (ABI 1.16) is no doorbell: libkvmm's threads that wait
 * for a deferred reply without the socket (a PREFIX_COLLECT or, ABI
 * 1.17, a SEQ_COLLECT; an early open's blocks) sleep on it with
 * FUTEX_WAIT, and the daemon bumps it and
 * wakes them all whenever one of those may have changed; each then asks
 * again over the socket.  A futex, not an eventfd: several threads wait
 * on it at once and none of them consumes the event.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/kvmmd.h"

struct kd_ring {
	int memfd;
	void *mem;
	size_t size;
	struct kr_rings r;
	int sq_efd, cq_efd, rv_efd;
	struct kd_file sq_file;
	uint32_t sq_head, cq_tail, rq_tail; /* ours; published copies */
};

/* Submissions handled per poll of one session, for fairness. */
#define KD_RING_BATCH 256

static void on_doorbell(struct kd_loop *loop, int fd, uint32_t events,
			void *data)
{
	struct kd_session *s = data;
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	kd_ring_poll(s);
	if (s->doomed)
		kd_session_end(s, true, s->doom_why);
}

int kd_ring_create(struct kd_session *s, const struct kvmm_hello *h,
		   struct kvmm_ring_offsets *off, int fds[4])
{
	struct kd_ring *kr;
	int err;

	err = kr_layout(h->sq_entries, h->cq_entries, h->rq_entries, off);
	if (err)
		return err;
	kd_telemetry_ring_layout(s->d, off);
	kr = calloc(1, sizeof(*kr));
	if (!kr)
		return -ENOMEM;
	kr->sq_efd = kr->cq_efd = kr->rv_efd = -1;
	kr->sq_file.fd = -1;
	kr->size = off->mmap_size;
	kr->memfd = memfd_create("kvmm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (kr->memfd < 0) {
		err = -errno;
		goto err_free;
	}
	if (ftruncate(kr->memfd, kr->size) < 0 ||
	    fcntl(kr->memfd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto err_memfd;
	}
	kr->mem = mmap(NULL, kr->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       kr->memfd, 0);
	if (kr->mem == MAP_FAILED) {
		err = -errno;
		goto err_memfd;
	}
	err = kr_attach(kr->mem, kr->size, off, &kr->r);
	if (err)
		goto err_unmap;
	kd_telemetry_session_add(s->d, s->id, s->pid, kr->mem, off);
	kr->sq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	kr->cq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	kr->rv_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (kr->sq_efd < 0 || kr->cq_efd < 0 || kr->rv_efd < 0) {
		err = -errno;
		goto err_efd;
	}
	err = kd_loop_add(&s->d->loop, &kr->sq_file, kr->sq_efd, EPOLLIN,
			  on_doorbell, s);
	if (err)
		goto err_efd;
	fds[0] = kr->memfd;
	fds[1] = kr->sq_efd;
	fds[2] = kr->cq_efd;
	fds[3] = kr->rv_efd;
	s->ring = kr;
	return 0;

err_efd:
	/* telemetry must not read the region once it is unmapped */
	kd_telemetry_session_remove(s->d, s->id);
	if (kr->sq_efd >= 0)
		close(kr->sq_efd);
	if (kr->cq_efd >= 0)
		close(kr->cq_efd);
	if (kr->rv_efd >= 0)
		close(kr->rv_efd);
err_unmap:
	munmap(kr->mem, kr->size);
err_memfd:
	close(kr->memfd);
err_free:
	free(kr);
	return err;
}

void kd_ring_destroy(struct kd_session *s)
{
	struct kd_ring *kr = s->ring;

	if (!kr)
		return;
	kd_telemetry_session_remove(s->d, s->id);
	/* its waiters ask again, and learn the session is gone */
	kd_ring_notify(s);
	kd_loop_del(&s->d->loop, &kr->sq_file);
	close(kr->sq_efd);
	close(kr->cq_efd);
	close(kr->rv_efd);
	munmap(kr->mem, kr->size);
	close(kr->memfd);
	free(kr);
	s->ring = NULL;
}

static void doorbell(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the peer wakes anyway. */
	}
}

void kd_ring_notify(struct kd_session *s)
{
	struct kd_ring *kr = s->ring;

	if (!kr || !kr->r.notify)
		return;
	/* orders what the waiter will ask about before the bump it sees */
	__atomic_fetch_add(kr->r.notify, 1, __ATOMIC_SEQ_CST);
	/* a shared futex: the word lives in the session's memfd, mapped
	 * by the client too (no FUTEX_PRIVATE_FLAG) */
	(void)syscall(SYS_futex, kr->r.notify, FUTEX_WAKE, INT_MAX, NULL, NULL,
		      0);
}

bool kd_ring_pending(struct kd_session *s)
{
	struct kd_ring *kr = s->ring;

	return kr_load_acquire(kr->r.sq.tail) != kr->sq_head;
}

void kd_ring_need_wakeup(struct kd_session *s, bool on)
{
	if (on)
		kr_flag_set(s->ring->r.flags, KVMM_RING_F_NEED_WAKEUP);
	else
		kr_flag_clear(s->ring->r.flags, KVMM_RING_F_NEED_WAKEUP);
}

bool kd_ring_poll(struct kd_session *s)
{
	struct kd_ring *kr = s->ring;
	struct kvmm_sqe *sqes;
	struct kvmm_cqe *cqes;
	uint32_t tail, n, space, used;

	if (!kr || s->doomed)
		return false;
	tail = kr_load_acquire(kr->r.sq.tail);
	n = tail - kr->sq_head;
	if (!n)
		return false;
	if (n > kr->r.sq.entries) {
		kd_session_doom(s, "submission ring tail out of range");
		return false;
	}
	used = kr->cq_tail - kr_load_acquire(kr->r.cq.head);
	if (used > kr->r.cq.entries) {
		kd_session_doom(s, "completion ring head out of range");
		return false;
	}
	space = kr->r.cq.entries - used;
	if (n > space)
		n = space;
	if (n > KD_RING_BATCH)
		n = KD_RING_BATCH;
	if (!n)
		return false; /* the client must reap completions first */
	sqes = kr->r.sq.array;
	cqes = kr->r.cq.array;
	for (uint32_t i = 0; i < n; i++) {
		struct kvmm_sqe sqe;
		struct kvmm_cqe cqe = { 0 };

		memcpy(&sqe, &sqes[kr->sq_head & kr->r.sq.mask], sizeof(sqe));
		kr->sq_head++;
		cqe.user_data = sqe.user_data;
		kd_proto_ring(s, &sqe, &cqe);
		memcpy(&cqes[kr->cq_tail & kr->r.cq.mask], &cqe, sizeof(cqe));
		kr->cq_tail++;
	}
	/* Completions first: a client seeing its SQ slot free may reuse it. */
	kr_store_release(kr->r.cq.tail, kr->cq_tail);
	kr_store_release(kr->r.sq.head, kr->sq_head);
	s->cmds_ring += n;
	s->d->ctr.cmds_ring += n;
	kr_full_barrier();
	if (kr_load_relaxed(kr->r.client_flags) & KVMM_RING_CF_CQ_WAIT)
		doorbell(kr->cq_efd);
	return true;
}

uint32_t kd_ring_extend_unread(struct kd_session *s, uint32_t region_id,
			       uint32_t seq)
{
	struct kd_ring *kr = s->ring;
	const struct kvmm_sqe *sqes;
	uint32_t tail, n, len = 0;

	if (!kr || s->doomed)
		return 0;
	sqes = kr->r.sq.array;
	tail = kr_load_acquire(kr->r.sq.tail);
	n = tail - kr->sq_head;
	/* a tail out of range dooms the session at its next poll */
	if (n > kr->r.sq.entries)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		struct kvmm_sqe e;

		/* copied out once, as kd_ring_poll() does */
		memcpy(&e, &sqes[(kr->sq_head + i) & kr->r.sq.mask], sizeof(e));
		if (e.cmd == KVMM_CMD_SEQ_EXTEND && e.region_id == region_id &&
		    e.seq_id == seq && e.arg0 > len && e.arg0 <= UINT32_MAX)
			len = (uint32_t)e.arg0;
	}
	return len;
}

int kd_ring_rq_room(struct kd_session *s, uint32_t *room, uint32_t *entries)
{
	struct kd_ring *kr = s->ring;
	uint32_t used;

	if (!kr)
		return -EINVAL;
	used = kr->rq_tail - kr_load_acquire(kr->r.rq.head);
	if (used > kr->r.rq.entries) {
		/* no revocation could ever be posted (it was -EBUSY for
		 * good): the cut-off takes the pages back instead */
		kd_session_doom(s, "revocation ring head out of range");
		return -ECONNRESET;
	}
	*room = kr->r.rq.entries - used;
	if (entries)
		*entries = kr->r.rq.entries;
	return 0;
}

int kd_ring_post_revokes(struct kd_session *s, const struct kvmm_rqe *e,
			 uint32_t n)
{
	struct kd_ring *kr = s->ring;
	struct kvmm_rqe *rqes;
	uint32_t room;
	int err = kd_ring_rq_room(s, &room, NULL);

	if (err)
		return err;
	if (room < n)
		return -EBUSY;
	rqes = kr->r.rq.array;
	for (uint32_t i = 0; i < n; i++) {
		struct kvmm_rqe *to = &rqes[(kr->rq_tail + i) & kr->r.rq.mask];

		memcpy(to, &e[i], sizeof(*e));
		/* a 1.0 client's ring had no opening to name (0: unknown) */
		if (KD_ABI_BEFORE(s, KD_ABI_SEQ_GEN))
			to->seq_gen = 0;
	}
	kr->rq_tail += n;
	kr_store_release(kr->r.rq.tail, kr->rq_tail);
	doorbell(kr->rv_efd);
	/* A client asleep on its CQ should look at revocations too. */
	kr_full_barrier();
	if (kr_load_relaxed(kr->r.client_flags) & KVMM_RING_CF_CQ_WAIT)
		doorbell(kr->cq_efd);
	return 0;
}
