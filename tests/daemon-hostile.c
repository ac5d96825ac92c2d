// SPDX-License-Identifier: MIT
/*
 * Malformed and hostile input: raw messages on the socket (truncated,
 * oversized, wrong version, wrong sizes, unknown commands, fds where none
 * are expected, bad and foreign ids, commands before HELLO, admin commands
 * from an unprivileged user), hostile ring entries and a corrupted ring
 * index, and a burst of random messages.  Each gets its errno; the daemon
 * keeps serving a well-behaved client the whole time and ends idle.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "kvmm/lib/wire.h"
#include "tests/daemon-hostile/hostile.h"
#include "tests/lib/client_seq.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

static struct td_daemon d;
static uint32_t next_id = 1;

int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		t_fail("connect: %s", strerror(errno));
	return fd;
}

/* Send bytes as one message; return the reply's status (or -1000 if the
 * reply is missing or malformed).  Reply fds are closed. */
int send_raw(int fd, const void *buf, size_t len, const int *fds,
	     unsigned int nfds, void *body, size_t cap)
{
	static char rep[KVMM_MSG_MAX];
	struct kvmm_msg_hdr h;
	int rfds[8];
	unsigned int rn;
	ssize_t n;

	if (kw_send(fd, buf, len, fds, nfds, 0))
		return -1000;
	n = kw_recv(fd, rep, sizeof(rep), rfds, &rn, 8, 0);
	if (n < (ssize_t)sizeof(h))
		return -1000;
	kw_close_fds(rfds, rn);
	memcpy(&h, rep, sizeof(h));
	if (!(h.flags & KVMM_MSG_F_REPLY) || h.size != n)
		return -1000;
	if (body)
		memcpy(body, rep + sizeof(h),
		       n - sizeof(h) < cap ? n - sizeof(h) : cap);
	return h.status;
}

int cmd(int fd, uint16_t c, const void *p, size_t len, void *body, size_t cap)
{
	char buf[KVMM_MSG_MAX + 64];
	struct kvmm_msg_hdr h = { .size = sizeof(h) + len,
				  .cmd = c,
				  .version = KVMM_ABI_MAJOR,
				  .id = next_id++ };

	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	return send_raw(fd, buf, h.size, NULL, 0, body, cap);
}

/* 2 layers of 2 heads of 64 dims: 4 pages a block of 256 tokens */
static const struct kvmm_region_create small_region = {
	.size = sizeof(struct kvmm_region_create),
	.layers = 2,
	.kv_heads = 2,
	.head_dim = 64,
	.dtype_bytes = 2,
	.max_seqs = 4,
	.max_tokens = 1024
};

static struct kvmm_hello hello_msg(void)
{
	struct kvmm_hello h = { .size = sizeof(h),
				.abi_major = KVMM_ABI_MAJOR };

	return h;
}

static void check_good_client(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 1,
				       .head_dim = 128,
				       .dtype_bytes = 2,
				       .max_seqs = 2,
				       .max_tokens = 512 };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s;

	cs_open(&co, &ro, &c, &r, &s);
	t_ok(kvmm_seq_extend(r, s, 300));
	memset((void *)kvmm_seq_k_ptr(r, s, 0), 7, 300 * 256);
	t_ok(kvmm_nop(c, 0));
	t_ok(kvmm_nop(c, 1));
	kvmm_disconnect(c);
}

static void unprivileged(void)
{
	struct kvmm_hello h = hello_msg();
	struct kvmm_admin_cache_drop drop = { .size = sizeof(drop) };
	struct kvmm_status_reply st;
	int status;
	pid_t p;

	chmod(d.dir, 0711); /* mkdtemp made it 0700 */
	p = fork();

	if (p == 0) {
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(77);
		fd = raw_connect();
		h.flags = KVMM_HELLO_F_ADMIN;
		if (cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0))
			_exit(1);
		if (cmd(fd, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st)) !=
		    -EPERM)
			_exit(2);
		if (cmd(fd, KVMM_CMD_ADMIN_CACHE_DROP, &drop, sizeof(drop),
			NULL, 0) != -EPERM)
			_exit(4);
		/* a session without rings may not own pages: nothing could
		 * revoke them (it used to create regions and extend) */
		if (cmd(fd, KVMM_CMD_REGION_CREATE, &small_region,
			sizeof(small_region), NULL, 0) != -EOPNOTSUPP)
			_exit(3);
		_exit(0);
	}
	waitpid(p, &status, 0);
	if (WEXITSTATUS(status) == 77) {
		printf("(not root: unprivileged admin check skipped)\n");
		return;
	}
	t_assert_eq(WEXITSTATUS(status), 0);
}

int main(void)
{
	const char *args[] = { "--socket-mode", "0666", NULL };
	struct kvmm_hello h = hello_msg();
	struct kvmm_hello_reply hr;
	struct kvmm_region_create rc = small_region;
	struct kvmm_region_create_reply rr;
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_status_reply st;
	struct kvmm_msg_hdr mh;
	char big[KVMM_MSG_MAX + 4096];
	int fd, fd2, pipefd[2], err;

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	fd = raw_connect();

	/* Before HELLO. */
	t_assert_eq(cmd(fd, KVMM_CMD_NOP, NULL, 0, NULL, 0), -ENOTCONN);
	/* Truncated header. */
	t_assert_eq(send_raw(fd, "\x10\0\0\0\3\0\1\0", 8, NULL, 0, NULL, 0),
		    -EINVAL);
	/* Header size disagreeing with the message. */
	mh = (struct kvmm_msg_hdr){ .size = 999,
				    .cmd = KVMM_CMD_NOP,
				    .version = KVMM_ABI_MAJOR };
	t_assert_eq(send_raw(fd, &mh, sizeof(mh), NULL, 0, NULL, 0), -EINVAL);
	/* Oversized message. */
	memset(big, 0, sizeof(big));
	mh.size = sizeof(big);
	memcpy(big, &mh, sizeof(mh));
	t_assert_eq(send_raw(fd, big, sizeof(big), NULL, 0, NULL, 0),
		    -EMSGSIZE);
	/* Wrong header version. */
	mh = (struct kvmm_msg_hdr){ .size = sizeof(mh),
				    .cmd = KVMM_CMD_NOP,
				    .version = 9 };
	t_assert_eq(send_raw(fd, &mh, sizeof(mh), NULL, 0, NULL, 0),
		    -EPROTONOSUPPORT);
	/* HELLO: wrong ABI, wrong size, nonzero reserved, then right. */
	h.abi_major = 2;
	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0),
		    -EPROTONOSUPPORT);
	h.abi_major = KVMM_ABI_MAJOR;
	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h) - 4, NULL, 0),
		    -EINVAL);
	h.reserved[1] = 1;
	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0), -EINVAL);
	h.reserved[1] = 0;
	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), &hr, sizeof(hr)), 0);
	t_assert_eq(hr.abi_major, KVMM_ABI_MAJOR);
	t_assert_eq(cmd(fd, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0), -EALREADY);
	/* Unknown and reserved commands. */
	t_assert_eq(cmd(fd, 0x77, NULL, 0, NULL, 0), -ENOTTY);
	t_assert_eq(cmd(fd, 0xffff, NULL, 0, NULL, 0), -ENOTTY);
	t_assert_eq(cmd(fd, KVMM_CMD_RESTORE_PLAN, NULL, 0, NULL, 0),
		    -EOPNOTSUPP);
	/* A block command with no payload. */
	t_assert_eq(cmd(fd, KVMM_CMD_PREFIX_OPEN, NULL, 0, NULL, 0), -EINVAL);
	/* A payload on a command that takes none. */
	t_assert_eq(cmd(fd, KVMM_CMD_NOP, "x", 1, NULL, 0), -EINVAL);
	/* Fds where none are expected (they are closed by the daemon). */
	t_ok(pipe(pipefd));
	mh = (struct kvmm_msg_hdr){ .size = sizeof(mh),
				    .cmd = KVMM_CMD_NOP,
				    .version = KVMM_ABI_MAJOR };
	t_assert_eq(send_raw(fd, &mh, sizeof(mh), pipefd, 2, NULL, 0), -EINVAL);
	/* The daemon closed its copies: with ours of the write end closed,
	 * the read end sees EOF at once. */
	close(pipefd[1]);
	{
		char ch;

		t_assert_eq(read(pipefd[0], &ch, 1), 0);
	}
	close(pipefd[0]);

	/* Region: bad layout, struct sizes. */
	rc.layers = 0;
	t_assert_eq(cmd(fd, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), NULL, 0),
		    -EINVAL);
	rc.layers = 2;
	rc.head_dim = 100; /* 400-byte tokens do not tile 64 KiB pages */
	t_assert_eq(cmd(fd, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), NULL, 0),
		    -EINVAL);
	rc.head_dim = 64;
	t_assert_eq(cmd(fd, KVMM_CMD_REGION_CREATE, &rc, 8, NULL, 0), -EINVAL);
	{
		/* A larger struct from a newer client: zero tail accepted,
		 * nonzero tail refused. */
		char buf[sizeof(rc) + 16] = { 0 };
		struct kvmm_region_create rc2 = rc;

		rc2.size = sizeof(buf);
		memcpy(buf, &rc2, sizeof(rc2));
		buf[sizeof(rc) + 3] = 1;
		t_assert_eq(cmd(fd, KVMM_CMD_REGION_CREATE, buf, sizeof(buf),
				NULL, 0),
			    -E2BIG);
		buf[sizeof(rc) + 3] = 0;
		t_assert_eq(cmd(fd, KVMM_CMD_REGION_CREATE, buf, sizeof(buf),
				&rr, sizeof(rr)),
			    0);
	}
	/* Ids: unknown region, bad and unopened sequences. */
	ref.region_id = 12345;
	t_assert_eq(cmd(fd, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), NULL, 0),
		    -ENOENT);
	ref.region_id = rr.region_id;
	ex.region_id = rr.region_id;
	ex.seq_id = 99;
	ex.new_len = 10;
	t_assert_eq(cmd(fd, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0),
		    -EINVAL);
	ex.seq_id = 1;
	t_assert_eq(cmd(fd, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0),
		    -ENOENT);
	ref.flags = 1;
	t_assert_eq(cmd(fd, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), NULL, 0),
		    -EINVAL);
	ref.flags = 0;
	{
		/* The 8192-page cap in 64 bits: blocks of 2048 pages times
		 * 2^21 blocks wrapped to 0 pages in 32 and passed it, then
		 * tried to allocate 2^32 pages. */
		struct kvmm_region_create big = { .size = sizeof(big),
						  .layers = 1024,
						  .kv_heads = 256,
						  .head_dim = 128,
						  .dtype_bytes = 2,
						  .max_seqs = 2,
						  .max_tokens = 1u << 22 };
		struct kvmm_region_create_reply br;
		struct kvmm_region_ref bref = { .size = sizeof(bref) };
		struct kvmm_seq_extend bx = { .size = sizeof(bx) };

		t_ok(cmd(fd, KVMM_CMD_REGION_CREATE, &big, sizeof(big), &br,
			 sizeof(br)));
		t_assert_eq(br.pages_per_block, 2048);
		bref.region_id = br.region_id;
		t_ok(cmd(fd, KVMM_CMD_SEQ_OPEN, &bref, sizeof(bref), NULL, 0));
		bx.region_id = br.region_id;
		bx.want_blocks = 1u << 21; /* 2^32 pages */
		t_assert_eq(cmd(fd, KVMM_CMD_SEQ_EXTEND, &bx, sizeof(bx), NULL,
				0),
			    -E2BIG);
		bx.want_blocks = (1u << 21) + 4; /* 2^32 + 8192 */
		t_assert_eq(cmd(fd, KVMM_CMD_SEQ_EXTEND, &bx, sizeof(bx), NULL,
				0),
			    -E2BIG);
		t_ok(cmd(fd, KVMM_CMD_REGION_DESTROY, &bref, sizeof(bref), NULL,
			 0));
	}
	{
		/* A newer client's larger PREFIX_OPEN (hashes after its
		 * size): a zero tail is accepted, a nonzero one -E2BIG, as
		 * for the fixed-size commands (it was -EINVAL). */
		struct {
			struct kvmm_prefix_open po;
			uint64_t newer[2];
			uint64_t hash;
		} big = { .po = { .size = sizeof(big.po) + 16,
				  .region_id = rr.region_id,
				  .nr_hashes = 1 },
			  .hash = 0x5eed };
		struct kvmm_prefix_open_reply pr;
		struct kvmm_region_ref cref = ref;

		_Static_assert(sizeof(big) == sizeof(big.po) + 24, "packed");
		big.newer[1] = 1;
		t_assert_eq(cmd(fd, KVMM_CMD_PREFIX_OPEN, &big, sizeof(big),
				NULL, 0),
			    -E2BIG);
		big.newer[1] = 0;
		t_ok(cmd(fd, KVMM_CMD_PREFIX_OPEN, &big, sizeof(big), &pr,
			 sizeof(pr)));
		t_assert_eq(pr.nr_blocks, 0);
		cref.seq_id = pr.seq_id;
		t_ok(cmd(fd, KVMM_CMD_SEQ_CLOSE, &cref, sizeof(cref), NULL, 0));
	}
	t_assert_eq(cmd(fd, KVMM_CMD_REVOKE_ACK,
			&(struct kvmm_revoke_ack){ .size = 32, .cookie = 5 },
			32, NULL, 0),
		    -ENOENT);

	/* Another session's region: -EPERM, and it stays untouched. */
	fd2 = raw_connect();
	t_assert_eq(cmd(fd2, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0), 0);
	t_assert_eq(cmd(fd2, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), NULL, 0),
		    -EPERM);
	t_assert_eq(cmd(fd2, KVMM_CMD_REGION_DESTROY, &ref, sizeof(ref), NULL,
			0),
		    -EPERM);
	t_assert_eq(cmd(fd, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), NULL, 0), 0);
	{
		/* the largest SQ with the default CQ (2 x SQ, at most the
		 * limit): it was refused for its CQ */
		struct kvmm_hello_reply hr3;
		int fd3 = raw_connect();

		h.sq_entries = 16384;
		t_ok(cmd(fd3, KVMM_CMD_HELLO, &h, sizeof(h), &hr3,
			 sizeof(hr3)));
		t_assert_eq(hr3.ring.sq_entries, 16384);
		t_assert_eq(hr3.ring.cq_entries, 16384);
		h.sq_entries = 16385;
		close(fd3);
		fd3 = raw_connect();
		t_assert_eq(cmd(fd3, KVMM_CMD_HELLO, &h, sizeof(h), NULL, 0),
			    -EINVAL);
		h.sq_entries = 0;
		close(fd3);
	}

	check_good_client();
	unprivileged();
	/* the commands of ABI 1.14 on (tests/daemon-hostile/newer.c) */
	hostile_newer_commands(rr.region_id);
	check_good_client();

	/* Random messages with valid headers and random payloads. */
	srand(42);
	for (int i = 0; i < 3000; i++) {
		static const uint16_t cmds[] = {
			KVMM_CMD_NOP,
			KVMM_CMD_REGION_CREATE,
			KVMM_CMD_REGION_DESTROY,
			KVMM_CMD_SEQ_OPEN,
			KVMM_CMD_SEQ_EXTEND,
			KVMM_CMD_SEQ_TRUNCATE,
			KVMM_CMD_SEQ_CLOSE,
			KVMM_CMD_STEP_BEGIN,
			KVMM_CMD_REVOKE_ACK,
			KVMM_CMD_STATS,
			KVMM_CMD_ADMIN_REVOKE,
			KVMM_CMD_ADMIN_SET_QUOTA,
		};
		uint8_t p[128] = { 0 }; /* len bytes of it sent */
		size_t len = rand() % sizeof(p);
		int r;

		for (size_t k = 0; k < len; k++)
			p[k] = rand() % 4 ? rand() % 3 : rand();
		if (len >= 4 && rand() % 2) {
			uint32_t sz = len;

			memcpy(p, &sz, 4); /* a plausible size field */
		}
		r = cmd(fd2, cmds[rand() % (sizeof(cmds) / sizeof(cmds[0]))], p,
			len, NULL, 0);
		t_assert(r != -1000);
		t_assert(r <= 0);
	}
	check_good_client();

	/* Hostile ring entries. */
	{
		struct kvmm_conn *c;
		struct kvmm_connect_opts co = { .size = sizeof(co) };
		struct kvmm_sqe sqe[3] = { { .cmd = KVMM_CMD_NOP, .flags = 1 },
					   { .cmd = 0x99 },
					   { .cmd = KVMM_CMD_SEQ_EXTEND,
					     .region_id = rr.region_id } };
		struct kvmm_cqe cqe[3];

		t_ok(kvmm_connect(&co, &c));
		t_ok(kc_ring_submit_wait(c, sqe, cqe, 3));
		t_assert_eq(cqe[0].res, -EINVAL);
		t_assert_eq(cqe[1].res, -ENOTTY);
		t_assert_eq(cqe[2].res, -EPERM);
		/* A submission tail far beyond the ring: cut off. */
		__atomic_store_n(c->r.sq.tail, c->sq_tail + 100000,
				 __ATOMIC_RELEASE);
		{
			uint64_t one = 1;

			t_assert_eq(write(c->sq_efd, &one, 8), 8);
		}
		t_wait_until(
			20000, t_ok(td_status(&d, &st)),
			st.sessions_cut_off == 1,
			"the session with a tail past its ring not cut off (sessions_cut_off %llu)",
			(unsigned long long)st.sessions_cut_off);
		t_assert(kvmm_nop(c, 1) < 0);
		kvmm_disconnect(c);
	}
	check_good_client();

	close(fd);
	close(fd2);
	err = td_wait_idle(&d, 3000, &st);
	if (err) {
		td_dump_log(&d);
		t_fail("not idle: allocated %llu sessions %llu",
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)st.sessions);
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
