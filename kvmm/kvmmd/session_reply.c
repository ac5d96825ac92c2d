// SPDX-License-Identifier: MIT
/*
 * Replies to a session: a message and its fds, those past the first
 * KVMM_MSG_MAX_FDS in FDS continuations, the read-only fds of shared
 * pages taken from the pool for each message and given back once it is
 * sent; a client that does not read its replies is cut off.  Its own
 * file because every command's reply goes through it and it touches
 * only the socket and the pool, not the session's life (session.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/test_knob.h"

/*
 * A test knob: KVMMD_TEST_FDS_FAULT=cmd|id|flags|hangup in kvmmd's
 * environment spoils the first KVMM_CMD_FDS continuation of every reply
 * (another command, another request id, no REPLY flag) or ends the
 * session instead of sending it, so tests see what libkvmm does with a
 * daemon that breaks the protocol (Documentation/abi.md).  Never set it
 * in production; it is logged as a warning.
 */
enum fds_fault {
	FDS_FAULT_NONE,
	FDS_FAULT_CMD,
	FDS_FAULT_ID,
	FDS_FAULT_FLAGS,
	FDS_FAULT_HANGUP
};

/* The knob's values, by enum fds_fault ("" for none: never matched). */
static const char *const fds_fault_names[] = {
	[FDS_FAULT_NONE] = "",	       [FDS_FAULT_CMD] = "cmd",
	[FDS_FAULT_ID] = "id",	       [FDS_FAULT_FLAGS] = "flags",
	[FDS_FAULT_HANGUP] = "hangup",
};
#define FDS_FAULT_COUNT \
	(int)(sizeof(fds_fault_names) / sizeof(fds_fault_names[0]))

/* The fault v names, FDS_FAULT_NONE for none: the one parse of the knob,
 * for fds_fault() and the start's check (kd_fds_fault_check()). */
static enum fds_fault fds_fault_parse(const char *v)
{
	for (int i = FDS_FAULT_NONE + 1; v && i < FDS_FAULT_COUNT; i++)
		if (!strcmp(v, fds_fault_names[i]))
			return (enum fds_fault)i;
	return FDS_FAULT_NONE;
}

int kd_fds_fault_check(const char *v, char *why, size_t len)
{
	size_t used;

	if (fds_fault_parse(v) != FDS_FAULT_NONE)
		return 0;
	used = (size_t)snprintf(why, len, "expected one of ");
	for (int i = FDS_FAULT_NONE + 1; i < FDS_FAULT_COUNT && used < len; i++)
		used += (size_t)snprintf(why + used, len - used, "%s%s",
					 fds_fault_names[i],
					 i + 1 < FDS_FAULT_COUNT ? ", " : "");
	return -EINVAL;
}

static enum fds_fault fds_fault(void)
{
	static int fault = -1;
	const char *v;

	if (fault >= 0)
		return (enum fds_fault)fault;
	v = getenv("KVMMD_TEST_FDS_FAULT");
	fault = fds_fault_parse(v);
	if (fault != FDS_FAULT_NONE)
		vmm_log(VMM_LOG_WARN,
			"KVMMD_TEST_FDS_FAULT=%s: fd continuations are broken on purpose (tests only)",
			v);
	return (enum fds_fault)fault;
}

/*
 * The fds of one message: fds[i] as is, or, where ro[i] names a page, the
 * read-only fd of that page, which the pool keeps while the page is
 * allocated (opened at its first read-only hand-out, raise_nofile()
 * counts it) and may close under an fd shortage only once put_fds() says
 * the message went (the backend's own fd where it has no read-only one).
 * Past the pool's cap of kept fds (cap_ro_fds(), daemon.c; moved by a
 * changed RLIMIT_NOFILE, kd_nofile_check()) the fd is opened for this
 * message alone and put_fds() closes it.
 * -errno when one cannot be opened.
 */
static int take_fds(struct kd_session *s, const int *fds, const uint32_t *ro,
		    unsigned int n, int *out)
{
	uint64_t domain = kd_cache_owner(s);
	int err;

	if (ro)
		kd_nofile_check(s->d); /* the cap follows a changed limit */
	for (unsigned int i = 0; i < n; i++) {
		out[i] = fds[i];
		if (!ro || ro[i] == KD_PAGE_AS_IS ||
		    s->client_minor < KD_ABI_RO_FDS)
			continue;
		err = vmm_pool_page_fd_readonly(s->d->pool, ro[i], domain,
						&out[i]);
		if (err == -EOPNOTSUPP) {
			out[i] = fds[i]; /* cuda: no read-only handle */
			continue;
		}
		if (err) {
			vmm_log(VMM_LOG_ERR,
				"session %u: no read-only fd for page %u: %s",
				s->id, ro[i], strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The message's read-only fds went (or will not): the pool may close
 * the kept ones again when it is short of fds, and closes those opened
 * for the message alone now. */
static void put_fds(struct kd_session *s)
{
	vmm_pool_readonly_sent(s->d->pool);
}

int kd_session_reply(struct kd_session *s, const struct kvmm_msg_hdr *req,
		     int status, const void *body, size_t len, const int *fds,
		     unsigned int nfds)
{
	return kd_session_reply_pages(s, req, status, body, len, fds, NULL,
				      nfds);
}

int kd_session_reply_pages(struct kd_session *s, const struct kvmm_msg_hdr *req,
			   int status, const void *body, size_t len,
			   const int *fds, const uint32_t *ro,
			   unsigned int nfds)
{
	char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h = { 0 };
	unsigned int first = nfds > KVMM_MSG_MAX_FDS ? KVMM_MSG_MAX_FDS : nfds;
	int msg_fds[KVMM_MSG_MAX_FDS];
	uint64_t t0;
	int err;

	if (s->fd < 0 || s->doomed)
		return -EPIPE;
	if (sizeof(h) + len > sizeof(buf))
		return -EMSGSIZE;
	h.size = sizeof(h) + len;
	h.cmd = req ? req->cmd : 0;
	h.version = KVMM_ABI_MAJOR;
	h.flags = KVMM_MSG_F_REPLY | (nfds > first ? KVMM_MSG_F_MORE_FDS : 0);
	h.id = req ? req->id : 0;
	h.status = status;
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), body, len);
	t0 = kd_slow_cmd_ns() ? kd_now_ns() : 0; /* the clock only when asked */
	err = take_fds(s, fds, ro, first, msg_fds);
	if (!err)
		err = kw_send(s->fd, buf, h.size, msg_fds, first, MSG_DONTWAIT);
	put_fds(s);
	for (unsigned int i = first; !err && i < nfds; i += KVMM_MSG_MAX_FDS) {
		unsigned int n = nfds - i;

		if (n > KVMM_MSG_MAX_FDS)
			n = KVMM_MSG_MAX_FDS;
		h.size = sizeof(h);
		h.cmd = KVMM_CMD_FDS;
		h.status = 0;
		h.flags = KVMM_MSG_F_REPLY |
			  (i + n < nfds ? KVMM_MSG_F_MORE_FDS : 0);
		if (i == first && fds_fault() != FDS_FAULT_NONE) {
			enum fds_fault f = fds_fault();

			if (f == FDS_FAULT_HANGUP) {
				kd_session_doom(s, "KVMMD_TEST_FDS_FAULT");
				return -EPIPE;
			}
			if (f == FDS_FAULT_CMD)
				h.cmd = KVMM_CMD_NOP;
			else if (f == FDS_FAULT_ID)
				h.id++;
			else
				h.flags &= ~KVMM_MSG_F_REPLY;
		}
		err = take_fds(s, fds + i, ro ? ro + i : NULL, n, msg_fds);
		if (!err)
			err = kw_send(s->fd, &h, sizeof(h), msg_fds, n,
				      MSG_DONTWAIT);
		put_fds(s);
	}
	if (t0)
		s->reply_send_ns += kd_now_ns() - t0;
	if (err) {
		/* A client that does not read its replies is cut off rather
		 * than allowed to block the daemon; one whose reply lacks
		 * the read-only fd it announced, too (its sequence holds
		 * pages it never got). */
		kd_session_doom(s, err == -EAGAIN ? "not reading replies" :
						    "reply failed");
	}
	return err;
}
