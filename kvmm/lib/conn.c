// SPDX-License-Identifier: MIT
/*
 * libkvmm connection: connect and HELLO (rings and doorbells arrive as
 * fds), synchronous socket requests (a reply's fds may continue in
 * KVMM_CMD_FDS messages, handed to the request's fd sink one message at a
 * time), goodbye, statistics and error strings.
 *
 * Reply timeout (c->timeout_ms, kc_connect_admin_timed(); 0 waits for
 * ever, as engines' connections do): kvmmctl must not hang on a kvmmd
 * that is stopped, wedged or not kvmmd at all.  The connect waits at
 * most that long for room in the listen backlog (SO_SNDTIMEO, the only
 * bound the kernel gives a Unix socket's connect), and each request's
 * send and every message of its reply wait in poll() against one
 * deadline.  A request that runs past it fails with -ETIMEDOUT and the
 * connection is shut down: a reply that comes later, or the rest of one
 * cut by the deadline, is never read as the answer to a later request
 * (each later request fails with -ETIMEDOUT too).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/telemetry_shm.h"
#include "kvmm/lib/client.h"
#include "kvmm/lib/opts.h"

const char *kc_default_socket(void)
{
	const char *env = getenv("KVMM_SOCKET");

	return env && *env ? env : "/run/kvmm/kvmm.sock";
}

/* Hand one message's fds to the sink, or close them once the reply has
 * failed (or the message lost some: the reply fails with -EMFILE). */
static void deliver(struct kc_fd_sink *sink, int *err, bool lost, int *fds,
		    unsigned int n)
{
	if (!*err && lost) {
		struct rlimit rl = { 0 };

		getrlimit(RLIMIT_NOFILE, &rl);
		vmm_log(VMM_LOG_WARN,
			"libkvmm: the fds of a reply did not fit under RLIMIT_NOFILE %llu (the kernel dropped some): a client needs room for its own fds + %d; the request fails with EMFILE",
			(unsigned long long)rl.rlim_cur, KVMM_MSG_MAX_FDS);
		*err = -EMFILE;
	}
	if (*err || !n) {
		kw_close_fds(fds, n);
		return;
	}
	if (!sink || !sink->fds) {
		kw_close_fds(fds, n);
		*err = -EPROTO; /* fds with a reply that takes none */
		return;
	}
	*err = sink->fds(sink, fds, n);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The deadline of a request begun now on c (CLOCK_MONOTONIC ms), 0 for
 * none. */
static uint64_t request_deadline(const struct kvmm_conn *c)
{
	return c->timeout_ms ? now_ms() + c->timeout_ms : 0;
}

/*
 * The request ran out of time: nothing more is read from or sent on c.
 * shutdown() rather than close(): the fd stays c->sock's until
 * kvmm_disconnect(), and kvmmd sees the hang-up once it runs again.
 */
static int conn_timed_out(struct kvmm_conn *c)
{
	c->timed_out = true;
	c->broken = true;
	shutdown(c->sock, SHUT_RDWR);
	return -ETIMEDOUT;
}

/*
 * Wait until c's socket has events (POLLIN, POLLOUT) or deadline (0:
 * none, nothing to wait for: the blocking call waits).  0 when ready
 * (a hang-up or an error too: the call that follows says which), or
 * -ETIMEDOUT with c shut down.
 */
static int conn_wait(struct kvmm_conn *c, short events, uint64_t deadline)
{
	if (!deadline)
		return 0;
	for (;;) {
		struct pollfd p = { .fd = c->sock, .events = events };
		uint64_t now = now_ms();
		int n;

		if (now >= deadline)
			return conn_timed_out(c);
		n = poll(&p, 1,
			 deadline - now > INT_MAX ? INT_MAX :
						    (int)(deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR) {
			c->broken = true;
			return -errno;
		}
	}
}

/* The request in buf[0..len) to kvmmd, by the deadline (0: none). */
static int send_request(struct kvmm_conn *c, const void *buf, size_t len,
			uint64_t deadline)
{
	int err;

	if (!deadline)
		return kw_send(c->sock, buf, len, NULL, 0, 0);
	for (;;) {
		err = kw_send(c->sock, buf, len, NULL, 0, MSG_DONTWAIT);
		if (err != -EAGAIN)
			return err;
		err = conn_wait(c, POLLOUT, deadline);
		if (err)
			return err;
	}
}

/* One message of the reply (kw_recv_fds_lost()), by the deadline. */
static ssize_t recv_reply(struct kvmm_conn *c, void *buf, size_t cap, int *fds,
			  unsigned int *nfds, bool *lost, uint64_t deadline)
{
	int err = conn_wait(c, POLLIN, deadline);

	if (err) {
		*nfds = 0;
		*lost = false;
		return err;
	}
	return kw_recv_fds_lost(c->sock, buf, cap, fds, nfds, KVMM_MSG_MAX_FDS,
				lost);
}

int kc_request_sink(struct kvmm_conn *c, uint16_t cmd, const void *req,
		    size_t req_len, void *reply, size_t reply_cap,
		    size_t *reply_len, struct kc_fd_sink *sink)
{
	static __thread char buf[KVMM_MSG_MAX];
	int fds[KVMM_MSG_MAX_FDS];
	struct kvmm_msg_hdr h = { 0 };
	unsigned int n = 0;
	uint64_t deadline;
	bool lost = false;
	ssize_t len;
	int err;

	if (kc_inherited(c))
		return -ECHILD; /* the parent's socket: fork.c */
	if (c->timed_out)
		return -ETIMEDOUT; /* what the caller saw first, again */
	if (c->broken)
		return -EPROTO;
	if (sizeof(h) + req_len > KVMM_MSG_MAX)
		return -EMSGSIZE;
	h.size = sizeof(h) + req_len;
	h.cmd = cmd;
	h.version = KVMM_ABI_MAJOR;
	h.id = ++c->next_id;
	memcpy(buf, &h, sizeof(h));
	if (req_len)
		memcpy(buf + sizeof(h), req, req_len);
	deadline = request_deadline(c);
	err = send_request(c, buf, h.size, deadline);
	if (err)
		return err == -EPIPE ? -ECONNRESET : err;
	len = recv_reply(c, buf, sizeof(buf), fds, &n, &lost, deadline);
	if (len == 0)
		return -ECONNRESET;
	if (len < 0) {
		/* a reply too long for KVMM_MSG_MAX (or with more fds than
		 * one message holds) may leave continuations behind: nothing
		 * after it can be trusted */
		if (len == -EMSGSIZE || len == -EBADMSG)
			c->broken = true;
		return len;
	}
	if ((size_t)len < sizeof(h))
		goto err_broken;
	memcpy(&h, buf, sizeof(h));
	if (h.size != len || !(h.flags & KVMM_MSG_F_REPLY) ||
	    h.id != c->next_id || h.cmd != cmd)
		goto err_broken;
	len -= sizeof(h);
	err = h.status;
	if (!err && sink && sink->body && (size_t)len > reply_cap)
		err = -EPROTO; /* body() needs the whole body */
	if (err && len && reply) {
		/* an error with a body (BLOCK_PIN's -EDQUOT, ABI 1.13) */
		if (reply_len)
			*reply_len = len;
		memcpy(reply, buf + sizeof(h),
		       (size_t)len < reply_cap ? (size_t)len : reply_cap);
	}
	if (!err) {
		if (reply_len)
			*reply_len = len;
		if (reply)
			memcpy(reply, buf + sizeof(h),
			       (size_t)len < reply_cap ? (size_t)len :
							 reply_cap);
		if (sink && sink->body)
			err = sink->body(sink, reply, len);
	}
	deliver(sink, &err, lost, fds, n);
	/*
	 * The rest of the fds, message by message: each batch is imported
	 * and closed before the next is received.  After an error the
	 * messages are still read (their fds closed) so that the next
	 * request reads its own reply.
	 */
	while (h.flags & KVMM_MSG_F_MORE_FDS) {
		struct kvmm_msg_hdr fh = { 0 };

		len = recv_reply(c, &fh, sizeof(fh), fds, &n, &lost, deadline);
		if (len == -ETIMEDOUT)
			return len; /* c is shut down: the rest never read */
		if (len != (ssize_t)sizeof(fh) || fh.cmd != KVMM_CMD_FDS ||
		    fh.id != c->next_id || !(fh.flags & KVMM_MSG_F_REPLY)) {
			kw_close_fds(fds, n);
			if (len == 0)
				return -ECONNRESET;
			goto err_broken;
		}
		deliver(sink, &err, lost, fds, n);
		h.flags = fh.flags;
	}
	return err;

err_broken:
	/* Not the reply to this request, or it stops in the middle: where
	 * the next reply starts is unknown. */
	kw_close_fds(fds, n);
	c->broken = true;
	return -EPROTO;
}

/* kc_request_locked(): the fds of the whole reply into one array. */
struct fd_array {
	struct kc_fd_sink sink;
	int *fds;
	unsigned int max, got;
};

static int fd_array_add(struct kc_fd_sink *s, int *fds, unsigned int n)
{
	struct fd_array *a = (struct fd_array *)s;

	if (n > a->max - a->got) {
		kw_close_fds(fds, n);
		return -EPROTO;
	}
	memcpy(a->fds + a->got, fds, n * sizeof(*fds));
	a->got += n;
	return 0;
}

int kc_request_locked(struct kvmm_conn *c, uint16_t cmd, const void *req,
		      size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len, int *fds, unsigned int max_fds,
		      unsigned int *nfds)
{
	struct fd_array a = { .sink.fds = fd_array_add,
			      .fds = fds,
			      .max = fds && nfds ? max_fds : 0 };
	int err;

	if (nfds)
		*nfds = 0;
	err = kc_request_sink(c, cmd, req, req_len, reply, reply_cap, reply_len,
			      &a.sink);
	if (err)
		kw_close_fds(fds, a.got);
	else if (nfds)
		*nfds = a.got;
	return err;
}

int kc_request(struct kvmm_conn *c, uint16_t cmd, const void *req,
	       size_t req_len, void *reply, size_t reply_cap, size_t *reply_len)
{
	int err;

	if (kc_inherited(c))
		return -ECHILD; /* before sock_lock: fork.c */
	pthread_mutex_lock(&c->sock_lock);
	err = kc_request_locked(c, cmd, req, req_len, reply, reply_cap,
				reply_len, NULL, 0, NULL);
	pthread_mutex_unlock(&c->sock_lock);
	return err;
}

/*
 * A socket connected to path.  With timeout_ms (0: none) the connect
 * waits that long at most for room in kvmmd's listen backlog, which
 * fills while kvmmd does not accept (stopped, wedged): a Unix socket's
 * connect() cannot be polled for (non-blocking, it fails at once with
 * EAGAIN), but it waits no longer than the socket's send timeout and
 * then fails with EAGAIN; the send timeout is put back to none after.
 */
static int open_socket(const char *path, unsigned int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	struct timeval none = { 0 };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (timeout_ms &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		goto err_close;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* a blocking connect fails with EAGAIN only past the
		 * timeout, the backlog still full */
		if (errno == EAGAIN && timeout_ms)
			errno = ETIMEDOUT;
		goto err_close;
	}
	if (timeout_ms &&
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) < 0)
		goto err_close;
	return fd;

err_close:
	err = -errno;
	close(fd);
	return err;
}

static struct kvmm_conn *conn_alloc(void)
{
	struct kvmm_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->sock = c->sq_efd = c->cq_efd = c->rv_efd = -1;
	c->ma_epfd = c->ma_wake_efd = -1;
	kc_fork_track(c);
	pthread_mutex_init(&c->sock_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->ring_lock, NULL);
	pthread_cond_init(&c->collect_cond, NULL);
	pthread_cond_init(&c->lend_cond, NULL);
	return c;
}

/* This process's ring mapping and fds of c: what a connection holds in
 * the kernel, also in a forked child (kc_conn_drop_inherited()). */
void kc_conn_release_fds(struct kvmm_conn *c)
{
	if (c->ring_mem)
		munmap(c->ring_mem, c->ring_size);
	if (c->sq_efd >= 0)
		close(c->sq_efd);
	if (c->cq_efd >= 0)
		close(c->cq_efd);
	if (c->rv_efd >= 0)
		close(c->rv_efd);
	/* the map-ahead thread's (a forked child has no thread, only them) */
	if (c->ma_epfd >= 0)
		close(c->ma_epfd);
	if (c->ma_wake_efd >= 0)
		close(c->ma_wake_efd);
	if (c->sock >= 0)
		close(c->sock);
}

static void conn_free(struct kvmm_conn *c)
{
	kc_conn_release_fds(c);
	if (c->backend)
		vmm_backend_close(c->backend);
	free(c->pages);
	free(c->tel_recs);
	pthread_cond_destroy(&c->collect_cond);
	pthread_cond_destroy(&c->lend_cond);
	pthread_mutex_destroy(&c->sock_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->ring_lock);
	free(c);
}

/*
 * Test knob (test_knob.c, tests only): KVMM_TEST_HELLO_MINOR=N in a
 * client's environment makes its HELLO say ABI 1.N, any minor from 1.0
 * (the oldest kvmmd serves) to KVMM_ABI_MINOR, so that a test sees kvmmd
 * serve the process as a client of 1.N: replies cut to what 1.N knew,
 * never asked for its blocks mapped ahead below 1.19, nothing named or
 * acknowledged below 1.20, a revoked publish -EINVAL below 1.20 (abi.md).
 * The library then plays one of 1.N too: c->hello.abi_minor is the
 * older of kvmmd's and N, so every check of the daemon's minor here and
 * in kvmmctl (a call answered -EOPNOTSUPP without asking, a command
 * kvmmctl does not send) takes the path it takes with a daemon of 1.N,
 * and below 1.20 the map-ahead thread leaves kvmmd's requests for blocks
 * ahead to the boundaries, as a libkvmm of 1.19 did (give_watch).
 * KVMM_TEST_GIVE_AHEAD_MAX=N gives at most N blocks a request, as a
 * process whose blocks ahead kvmmd over-counted would.  Unset, what this
 * library does is unchanged.
 */
static int hello(struct kvmm_conn *c, const char *name, uint32_t flags,
		 uint32_t sq_entries, int fds[4], unsigned int *nfds)
{
	struct kvmm_hello h = { .size = sizeof(h) };
	uint16_t minor = kc_test_hello_minor();
	int err;

	h.abi_major = KVMM_ABI_MAJOR;
	h.abi_minor = minor;
	h.flags = flags;
	h.sq_entries = sq_entries;
	if (name)
		snprintf(h.name, sizeof(h.name), "%s", name);
	err = kc_request_locked(c, KVMM_CMD_HELLO, &h, sizeof(h), &c->hello,
				sizeof(c->hello), NULL, fds, 4, nfds);
	/* kvmmd serves us as the older of the two: so do we (the knob).
	 * Without it a newer kvmmd's minor stays what it said, for
	 * kvmm_get_daemon_info(): every check here asks for at least a
	 * minor this library knows, which a newer one passes. */
	if (!err && minor < KVMM_ABI_MINOR &&
	    c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor > minor)
		c->hello.abi_minor = minor;
	return err;
}

/*
 * A connection kvmmd will not serve gets its HELLO answered with one of
 * these (kvmmd/refuse.c).  ENOMEM also answers a HELLO whose rings kvmmd
 * could not make: out of memory all the same.
 */
const char *kc_hello_refusal(int err)
{
	switch (-err) {
	case EUSERS:
		return "this uid has its most sessions (kvmmd's --max-sessions-per-uid)";
	case EBUSY:
		return "no session is left for this uid (all 1024 taken, or the rest kept for admin uids)";
	case ENOMEM:
		return "kvmmd is out of memory";
	case ETOOMANYREFS:
		return "this uid has its most quarantined processes (kvmmd's --quarantine-per-uid, 256 by default: processes that lost their sessions without BYE and live on)";
	default:
		return NULL;
	}
}

/*
 * The start of every connection, kvmmctl's and an engine's: a bad test
 * knob is refused before anything is asked, then a fresh connection with
 * its socket to kvmmd open (socket_path, or the default) and its reply
 * timeout (0: none).  0 with *out set, or -errno with nothing left
 * behind.
 */
static int conn_open(const char *socket_path, unsigned int timeout_ms,
		     struct kvmm_conn **out)
{
	struct kvmm_conn *c;
	int err;

	/* a misspelt or bad test knob: refused before anything is asked */
	err = kc_test_knobs_check();
	if (err)
		return err;
	c = conn_alloc();
	if (!c)
		return -ENOMEM;
	c->sock = open_socket(socket_path ? socket_path : kc_default_socket(),
			      timeout_ms);
	if (c->sock < 0) {
		err = c->sock;
		conn_free(c);
		return err;
	}
	c->timeout_ms = timeout_ms;
	*out = c;
	return 0;
}

int kc_connect_admin(const char *socket_path, struct kvmm_conn **out)
{
	return kc_connect_admin_timed(socket_path, 0, out);
}

int kc_connect_admin_timed(const char *socket_path, unsigned int timeout_ms,
			   struct kvmm_conn **out)
{
	struct kvmm_conn *c;
	int err;

	err = conn_open(socket_path, timeout_ms, &c);
	if (err)
		return err;
	c->admin = true;
	err = hello(c, "kvmmctl", KVMM_HELLO_F_ADMIN, 0, NULL, NULL);
	if (err) {
		conn_free(c);
		return err;
	}
	*out = c;
	return 0;
}

static int setup_rings(struct kvmm_conn *c, int fds[4])
{
	struct stat stb;
	int err;

	if (fstat(fds[0], &stb) < 0)
		return -errno;
	c->ring_size = c->hello.ring.mmap_size;
	if ((uint64_t)stb.st_size < c->ring_size || !c->ring_size)
		return -EPROTO;
	c->ring_mem = mmap(NULL, c->ring_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fds[0], 0);
	if (c->ring_mem == MAP_FAILED) {
		c->ring_mem = NULL;
		return -errno;
	}
	err = kr_attach(c->ring_mem, c->ring_size, &c->hello.ring, &c->r);
	if (err)
		return -EPROTO;
	c->tel = kvmm_tel_shm_at(c->ring_mem, c->ring_size,
				 c->hello.ring.tel_off, c->hello.ring.tel_size);
	close(fds[0]);
	c->sq_efd = fds[1];
	c->cq_efd = fds[2];
	c->rv_efd = fds[3];
	c->sq_tail = kr_load_acquire(c->r.sq.tail);
	c->cq_head = kr_load_acquire(c->r.cq.head);
	c->rq_head = kr_load_acquire(c->r.rq.head);
	return 0;
}

/*
 * Open the backend on the GPU the daemon serves.  Pages live on that GPU
 * and access must be granted on it: ordinal 0 here is another GPU when
 * kvmmd serves the second one (one kvmmd per GPU) or CUDA_VISIBLE_DEVICES
 * numbers them differently, so the device is the one with the UUID the
 * HELLO reply names.  All zero (the host backend, a daemon before ABI
 * 1.13): ordinal 0 as before.  A GPU this process cannot see is -ENODEV,
 * and says which.
 */
static int daemon_gpu(struct kvmm_conn *c, struct vmm_config *vc)
{
	const uint8_t *u = c->hello.gpu_uuid;
	int err;

	if (vc->kind == VMM_BACKEND_CUDA &&
	    !kw_all_zero(u, sizeof(c->hello.gpu_uuid)))
		snprintf(
			vc->gpu_uuid, sizeof(vc->gpu_uuid),
			"GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8],
			u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	err = vmm_backend_open(vc, &c->backend);
	if (err == -ENODEV && vc->gpu_uuid[0])
		vmm_log(VMM_LOG_ERR,
			"libkvmm: kvmmd serves %s, which this process cannot open (hidden by CUDA_VISIBLE_DEVICES, or no CUDA driver here)",
			vc->gpu_uuid);
	return err;
}

int kvmm_connect(const struct kvmm_connect_opts *opts, struct kvmm_conn **out)
{
	struct kvmm_connect_opts o = { 0 };
	struct vmm_config vc = { 0 };
	struct kvmm_conn *c;
	int fds[4] = { -1, -1, -1, -1 };
	unsigned int nfds = 0;
	int err;

	if (!out)
		return -EINVAL;
	if (opts) {
		size_t n;

		err = kc_opts_size(opts, opts->size,
				   KVMM_CONNECT_OPTS_SIZE_VER0, sizeof(o), &n);
		if (err)
			return err;
		memcpy(&o, opts, n);
	}
	/* kvmmctl shows the name: refuse one it would show cut short */
	if (o.name && strlen(o.name) >= sizeof(((struct kvmm_hello *)0)->name))
		return -ENAMETOOLONG;
	err = conn_open(o.socket_path, 0, &c);
	if (err)
		return err;
	c->map_ahead = o.map_ahead_set ? o.map_ahead_blocks : 1;
	c->spin_us = o.spin_us ? o.spin_us : 20;
	err = hello(c, o.name, 0, o.sq_entries, fds, &nfds);
	if (err) {
		/* the errno alone does not say it was kvmmd's refusal */
		if (kc_hello_refusal(err))
			vmm_log(VMM_LOG_WARN,
				"libkvmm: kvmmd refused the connection: %s",
				kc_hello_refusal(err));
		goto err_free;
	}
	if (nfds != 4 || c->hello.nr_fds != 4) {
		kw_close_fds(fds, nfds);
		err = -EPROTO;
		goto err_free;
	}
	err = setup_rings(c, fds);
	if (err) {
		kw_close_fds(fds, 4);
		goto err_free;
	}
	vc.kind = c->hello.backend;
	vc.page_size = c->hello.page_size;
	err = daemon_gpu(c, &vc);
	if (err)
		goto err_free;
	c->page_size = c->hello.page_size;
	c->nr_pages = c->hello.pages_total;
	c->pages = calloc(c->nr_pages, sizeof(*c->pages));
	if (!c->pages) {
		err = -ENOMEM;
		goto err_free;
	}
	c->st.session_id = c->hello.session_id;
	c->st.backend = c->hello.backend;
	c->st.page_size = c->page_size;
	/*
	 * A reply brings up to KVMM_MSG_MAX_FDS page fds at once, taken at
	 * the lowest free numbers: make room for them in the fd table now
	 * rather than inside the recvmsg of a first prefix open, where
	 * growing the table of a CUDA process waits for an RCU grace period
	 * (20-30 ms of a 30 ms open on an H200: Documentation/vmm.md).
	 * Best effort: a table that cannot grow now grows later.
	 */
	{
		int top = c->sock;

		for (int i = 0; i < 4; i++)
			if (fds[i] > top)
				top = fds[i];
		vmm_fd_table_reserve((uint64_t)top + KVMM_MSG_MAX_FDS + 16);
	}
	/* the minor announced, not the daemon's: a libkvmm of 1.20 or later
	 * answers requests for blocks ahead at once from any daemon */
	c->give_watch = kc_test_hello_minor() >= 20;
	c->give_max = kc_test_give_max();
	if (c->map_ahead) {
		err = kc_mapahead_start(c);
		if (err)
			goto err_free;
	}
	*out = c;
	return 0;

err_free:
	conn_free(c);
	return err;
}

void kvmm_disconnect(struct kvmm_conn *c)
{
	if (!c)
		return;
	if (kc_inherited_or_cloned(c)) {
		/* the session is the parent's: drop our copies, say nothing */
		kc_conn_drop_inherited(c);
		return;
	}
	kc_mapahead_stop(c);
	pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	while (c->regions)
		kc_region_free(c->regions);
	pthread_mutex_unlock(&c->lock);
	/* Everything is unmapped: the daemon may reuse the pages at once. */
	kc_request_locked(c, KVMM_CMD_BYE, NULL, 0, NULL, 0, NULL, NULL, 0,
			  NULL);
	pthread_mutex_unlock(&c->sock_lock);
	conn_free(c);
}

int kvmm_poll_fd(struct kvmm_conn *c)
{
	if (c && kc_inherited(c))
		return -ECHILD;
	return c && c->rv_efd >= 0 ? c->rv_efd : -EINVAL;
}

int kvmm_nop(struct kvmm_conn *c, int via_socket)
{
	if (!c)
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD;
	if (via_socket || c->admin)
		return kc_request(c, KVMM_CMD_NOP, NULL, 0, NULL, 0, NULL);
	return kc_ring_cmd(c, KVMM_CMD_NOP, 0, 0, 0, NULL);
}

_Static_assert(offsetof(struct kvmm_stats, pages_held) + sizeof(uint64_t) ==
		       KVMM_STATS_SIZE_VER0,
	       "the first published struct kvmm_stats ends at pages_held");
_Static_assert(sizeof(struct kvmm_stats) == KVMM_STATS_SIZE_VER3,
	       "struct kvmm_stats ends at blocks_unshared");

int kvmm_get_stats(struct kvmm_conn *c, struct kvmm_stats *st)
{
	struct kvmm_stats_reply rep = { 0 };
	struct kvmm_stats local;
	size_t n;
	int err;

	/* an out struct, as kvmm_daemon_info (info.c): a size inside ours
	 * would cut a field, a larger one keeps its bytes past ours */
	if (!c || !st || st->size < KVMM_STATS_SIZE_VER0)
		return -EINVAL;
	/* the fields past the first size are u64s: none filled in part */
	if (st->size < sizeof(local) &&
	    (st->size - KVMM_STATS_SIZE_VER0) % sizeof(uint64_t))
		return -EINVAL;
	if (kc_inherited(c))
		return -ECHILD; /* before c->lock, which a lost thread may hold */
	n = st->size < sizeof(local) ? st->size : sizeof(local);
	err = kc_request(c, KVMM_CMD_STATS, NULL, 0, &rep, sizeof(rep), NULL);
	if (err)
		return err;
	pthread_mutex_lock(&c->lock);
	local = c->st;
	pthread_mutex_unlock(&c->lock);
	local.size = n;
	local.pages_held = rep.pages_held;
	local.cmds_ring = rep.cmds_ring;
	local.cmds_socket = rep.cmds_socket;
	memcpy(st, &local, n);
	return 0;
}

const char *kvmm_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EDQUOT: /* pages of this uid, or pins of this connection */
		return "quota exceeded (this user's pages or this connection's pins)";
	case EUSERS:
		return "kvmmd refused the connection: this uid has its most sessions";
	case ETOOMANYREFS:
		return "kvmmd refused the connection: this uid has its most quarantined processes";
	case ENOMEM:
		return "no memory left in the page pool";
	case ENODATA:
		return "sequence range has no pages (revoked?)";
	case ESTALE: /* ABI 1.20: a publish or wait of a revoked block */
		return "block revoked by kvmmd: apply the revocations, then extend again";
	case EPROTONOSUPPORT:
		return "kvmmd speaks another ABI version";
	case ECONNRESET:
		return "connection to kvmmd lost";
	case EPROTO:
		return "protocol error talking to kvmmd";
	case ECHILD:
		return "connection inherited through fork(): connect again in this process (kvmm_disconnect only drops the copy)";
	default:
		return strerror(err);
	}
}
