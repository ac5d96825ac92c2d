// SPDX-License-Identifier: MIT
/*
 * Socket message and ring layout helpers shared by kvmmd and libkvmm; see
 * wire.h.  Nothing here keeps state.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kvmm/lib/wire.h"

int kw_send(int sock, const void *buf, size_t len, const int *fds,
	    unsigned int nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KVMM_MSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > KVMM_MSG_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EMSGSIZE;
	return 0;
}

void kw_close_fds(int *fds, unsigned int nfds)
{
	for (unsigned int i = 0; i < nfds; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

/* recvmsg() one message; *ctrunc: the kernel dropped fds (MSG_CTRUNC),
 * an error unless keep_ctrunc. */
static ssize_t recv_msg(int sock, void *buf, size_t cap, int *fds,
			unsigned int *nfds, unsigned int maxfds, int flags,
			bool keep_ctrunc, bool *ctrunc, bool keep_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * KVMM_MSG_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	unsigned int got = 0;
	bool too_many = false;
	ssize_t n;

	*nfds = 0;
	*ctrunc = false;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (got < maxfds && fds)
				fds[got++] = fd;
			else {
				close(fd);
				too_many = true;
			}
		}
	}
	*nfds = got;
	*ctrunc = mh.msg_flags & MSG_CTRUNC;
	if ((mh.msg_flags & MSG_TRUNC) || (*ctrunc && !keep_ctrunc)) {
		if (!keep_fds) {
			kw_close_fds(fds, got);
			*nfds = 0;
		}
		return -EMSGSIZE;
	}
	if (too_many) {
		if (!keep_fds) {
			kw_close_fds(fds, got);
			*nfds = 0;
		}
		return -EBADMSG;
	}
	return n;
}

ssize_t kw_recv(int sock, void *buf, size_t cap, int *fds, unsigned int *nfds,
		unsigned int maxfds, int flags)
{
	bool ctrunc;

	return recv_msg(sock, buf, cap, fds, nfds, maxfds, flags, false,
			&ctrunc, false);
}

ssize_t kw_recv_keep_fds(int sock, void *buf, size_t cap, int *fds,
			 unsigned int *nfds, int flags)
{
	bool ctrunc;

	return recv_msg(sock, buf, cap, fds, nfds, KVMM_MSG_MAX_FDS, flags,
			false, &ctrunc, true);
}

ssize_t kw_recv_fds_lost(int sock, void *buf, size_t cap, int *fds,
			 unsigned int *nfds, unsigned int maxfds,
			 bool *fds_lost)
{
	return recv_msg(sock, buf, cap, fds, nfds, maxfds, 0, true, fds_lost,
			false);
}

int kw_copy_struct(void *out, size_t known, size_t min, const void *payload,
		   size_t len)
{
	uint32_t size;

	if (len < sizeof(uint32_t))
		return -EINVAL;
	memcpy(&size, payload, sizeof(size));
	if (size != len || size < min)
		return -EINVAL;
	if (size > known) {
		if (!kw_all_zero((const char *)payload + known, size - known))
			return -E2BIG;
		size = known;
	}
	memset(out, 0, known);
	memcpy(out, payload, size);
	return 0;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int kr_layout(uint32_t sq, uint32_t cq, uint32_t rq,
	      struct kvmm_ring_offsets *off)
{
	uint32_t pos;

	if (!sq)
		sq = KR_DEFAULT_SQ;
	if (!cq) /* twice the SQ, within the limit (an SQ above half of it
		  * was refused for its default CQ) */
		cq = sq > KR_MAX_ENTRIES / 2 ? KR_MAX_ENTRIES : 2 * sq;
	if (!rq)
		rq = 4096;
	if (sq > KR_MAX_ENTRIES || cq > KR_MAX_ENTRIES || rq > KR_MAX_ENTRIES)
		return -EINVAL;
	sq = pow2_at_least(sq);
	cq = pow2_at_least(cq);
	rq = pow2_at_least(rq);
	if (cq < sq)
		cq = sq;
	memset(off, 0, sizeof(*off));
	off->size = sizeof(*off);
	/* Each index word on its own cache line: the two sides write them. */
	off->flags = 0;
	off->client_flags = 64;
	off->sq_head = 128;
	off->sq_tail = 192;
	off->cq_head = 256;
	off->cq_tail = 320;
	off->rq_head = 384;
	off->rq_tail = 448;
	off->notify = 512; /* ABI 1.16 */
	pos = 4096;
	off->sq_entries = sq;
	off->sq_array = pos;
	pos += sq * sizeof(struct kvmm_sqe);
	off->cq_entries = cq;
	off->cq_array = pos;
	pos += cq * sizeof(struct kvmm_cqe);
	off->rq_entries = rq;
	off->rq_array = pos;
	pos += rq * sizeof(struct kvmm_rqe);
	off->mmap_size = (pos + 4095) & ~4095u;
	return 0;
}

static bool word_ok(uint32_t off, size_t size)
{
	return off % 4 == 0 && (size_t)off + 4 <= size;
}

static bool array_ok(uint32_t off, uint32_t n, size_t esz, size_t size)
{
	return n && !(n & (n - 1)) && n <= KR_MAX_ENTRIES && off % 8 == 0 &&
	       (size_t)off + (size_t)n * esz <= size;
}

int kr_attach(void *mem, size_t size, const struct kvmm_ring_offsets *off,
	      struct kr_rings *r)
{
	char *m = mem;

	if (!word_ok(off->flags, size) || !word_ok(off->client_flags, size) ||
	    !word_ok(off->sq_head, size) || !word_ok(off->sq_tail, size) ||
	    !word_ok(off->cq_head, size) || !word_ok(off->cq_tail, size) ||
	    !word_ok(off->rq_head, size) || !word_ok(off->rq_tail, size) ||
	    !array_ok(off->sq_array, off->sq_entries, sizeof(struct kvmm_sqe),
		      size) ||
	    !array_ok(off->cq_array, off->cq_entries, sizeof(struct kvmm_cqe),
		      size) ||
	    !array_ok(off->rq_array, off->rq_entries, sizeof(struct kvmm_rqe),
		      size))
		return -EINVAL;
	r->mem = mem;
	r->size = size;
	r->flags = (uint32_t *)(m + off->flags);
	r->client_flags = (uint32_t *)(m + off->client_flags);
	/* a daemon before ABI 1.16 has none (0: the offset of flags) */
	r->notify = off->notify && word_ok(off->notify, size) ?
			    (uint32_t *)(m + off->notify) :
			    NULL;
	r->sq = (struct kr_ring){ (uint32_t *)(m + off->sq_head),
				  (uint32_t *)(m + off->sq_tail),
				  off->sq_entries, off->sq_entries - 1,
				  m + off->sq_array };
	r->cq = (struct kr_ring){ (uint32_t *)(m + off->cq_head),
				  (uint32_t *)(m + off->cq_tail),
				  off->cq_entries, off->cq_entries - 1,
				  m + off->cq_array };
	r->rq = (struct kr_ring){ (uint32_t *)(m + off->rq_head),
				  (uint32_t *)(m + off->rq_tail),
				  off->rq_entries, off->rq_entries - 1,
				  m + off->rq_array };
	return 0;
}
