// SPDX-License-Identifier: MIT
/*
 * kvmm_get_daemon_info() and the flags a daemon's ABI minor lacks, against
 * a real kvmmd:
 *
 *   - the info is the HELLO reply's: ABI 1.KVMM_ABI_MINOR, the host
 *     backend (KVMM_BACKEND_HOST, as kvmm_stats.backend says), 64 KiB
 *     pages, the pool's 1024 pages, no quota, no GPU UUID, the revoke
 *     timeout kvmmd was given; a size below KVMM_DAEMON_INFO_SIZE_VER0 is
 *     -EINVAL, a larger struct gets our bytes, size says how many, and
 *     its own bytes past them stay as they were;
 *   - kvmm_get_stats() takes its size the same way: every size below
 *     KVMM_STATS_SIZE_VER0 (inside a field, or short of the last one), or
 *     inside a field added since, is -EINVAL and writes nothing, a newer
 *     caller's larger struct gets our 136 bytes (KVMM_STATS_SIZE_VER3),
 *     size says so, and its bytes past them stay; an older caller's
 *     96-byte struct gets 96 and one of 104 gets 104;
 *   - a pin with KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE (ABI 1.3) works on
 *     this daemon; on one that says ABI 1.2 it is -EOPNOTSUPP, not the
 *     -EINVAL a bogus flag gets, and nothing is sent (no record to
 *     unpin), while a plain TTL pin still works.
 *
 * The ABI 1.2 daemon is this one with its HELLO reply's abi_minor
 * rewritten as it arrives: the test's own recvmsg() wraps libc's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

#define REVOKE_MS 4321

static int fake_minor = -1; /* >= 0: the minor HELLO replies say */

/* libkvmm's receives go through here: a HELLO reply gets fake_minor. */
ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, struct msghdr *, int);
	struct kvmm_msg_hdr h;
	uint16_t minor;
	ssize_t n;
	char *p;

	if (!real)
		real = (ssize_t(*)(int, struct msghdr *, int))dlsym(RTLD_NEXT,
								    "recvmsg");
	n = real(fd, mh, flags);
	if (fake_minor < 0 ||
	    n < (ssize_t)(sizeof(h) + sizeof(struct kvmm_hello_reply)) ||
	    mh->msg_iovlen < 1 ||
	    mh->msg_iov[0].iov_len <
		    sizeof(h) + sizeof(struct kvmm_hello_reply))
		return n;
	p = mh->msg_iov[0].iov_base;
	memcpy(&h, p, sizeof(h));
	if (h.cmd != KVMM_CMD_HELLO || !(h.flags & KVMM_MSG_F_REPLY))
		return n;
	minor = (uint16_t)fake_minor;
	memcpy(p + sizeof(h) + offsetof(struct kvmm_hello_reply, abi_minor),
	       &minor, sizeof(minor));
	return n;
}

/* A connection with one published block, its hash in *h. */
static struct kvmm_conn *conn_with_block(const char *sock, uint64_t *h)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq, tokens[TR_TPB];
	uint64_t seed;
	int err;

	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, TR_TPB));
	for (int i = 0; i < TR_TPB; i++)
		tokens[i] = 3 * i + 7;
	t_ok(kvmm_region_hash_seed(r, "info", &seed));
	err = kvmm_block_hash(seed, 0, 0, tokens, TR_TPB, h);
	if (err == -ENOTSUP)
		*h = 0x1f0f0f0full; /* built without libxxhash: any hash */
	else
		t_ok(err);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 1, 0, h), 1);
	return c;
}

static void info_values(struct kvmm_conn *c)
{
	struct {
		struct kvmm_daemon_info i;
		uint64_t newer;
	} big;
	struct kvmm_daemon_info info = { .size = sizeof(info) };
	struct kvmm_stats st = { .size = sizeof(st) };
	static const uint8_t zero[16];

	t_ok(kvmm_get_daemon_info(c, &info));
	t_assert_eq(info.size, sizeof(info));
	t_assert_eq(info.abi_major, KVMM_ABI_MAJOR);
	t_assert_eq(info.abi_minor, KVMM_ABI_MINOR);
	t_assert_eq(info.backend, KVMM_BACKEND_HOST);
	t_assert_eq(info.page_size, 64 * 1024);
	t_assert_eq(info.pages_total, 1024); /* --gpu-mem 64M */
	t_assert_eq(info.quota_pages, 0);
	t_assert_eq(info.revoke_timeout_ms, REVOKE_MS);
	t_assert(!memcmp(info.gpu_uuid, zero, sizeof(zero)));
	t_ok(kvmm_get_stats(c, &st));
	t_assert_eq(st.backend, KVMM_BACKEND_HOST);

	memset(&big, 0xa5, sizeof(big));
	big.i.size = sizeof(big);
	t_ok(kvmm_get_daemon_info(c, &big.i));
	t_assert_eq(big.i.size, sizeof(big.i));
	t_assert_eq(big.i.abi_minor, KVMM_ABI_MINOR);
	t_assert_eq(big.newer, 0xa5a5a5a5a5a5a5a5ull);

	info.size = KVMM_DAEMON_INFO_SIZE_VER0 - 1;
	t_assert_eq(kvmm_get_daemon_info(c, &info), -EINVAL);
	t_assert_eq(kvmm_get_daemon_info(NULL, &info), -EINVAL);
	t_assert_eq(kvmm_get_daemon_info(c, NULL), -EINVAL);
}

/* kvmm_get_stats() takes its size as kvmm_get_daemon_info() does. */
static void stats_sizes(struct kvmm_conn *c)
{
	/* sizes that end inside a field, or before the last one */
	static const size_t bad[] = { 0,
				      8,
				      12,
				      offsetof(struct kvmm_stats, page_size) +
					      4,
				      KVMM_STATS_SIZE_VER0 - 4,
				      KVMM_STATS_SIZE_VER0 - 1,
				      KVMM_STATS_SIZE_VER0 + 4,
				      KVMM_STATS_SIZE_VER1 - 1,
				      KVMM_STATS_SIZE_VER2 - 1,
				      KVMM_STATS_SIZE_VER3 - 1 };
	struct {
		struct kvmm_stats s;
		uint64_t newer[2];
	} big;
	struct kvmm_stats st = { .size = sizeof(st) };

	t_assert_eq(sizeof(struct kvmm_stats), KVMM_STATS_SIZE_VER3);
	t_ok(kvmm_get_stats(c, &st));
	t_assert_eq(st.size, sizeof(st));
	t_assert(st.session_id != 0);
	t_assert_eq(st.page_size, 64 * 1024);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&st, 0xa5, sizeof(st));
		st.size = bad[i];
		if (kvmm_get_stats(c, &st) != -EINVAL)
			t_fail("kvmm_get_stats with size %zu: not -EINVAL",
			       bad[i]);
		/* nothing written, the size left as it was */
		t_assert_eq(st.size, bad[i]);
		t_assert_eq(st.session_id, 0xa5a5a5a5u);
		t_assert_eq(st.pages_held, 0xa5a5a5a5a5a5a5a5ull);
	}
	/* a newer caller's: ours filled, its own bytes kept */
	memset(&big, 0xa5, sizeof(big));
	big.s.size = sizeof(big);
	t_ok(kvmm_get_stats(c, &big.s));
	t_assert_eq(big.s.size, KVMM_STATS_SIZE_VER3);
	t_assert_eq(big.s.page_size, 64 * 1024);
	t_assert_eq(big.newer[0], 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(big.newer[1], 0xa5a5a5a5a5a5a5a5ull);
	/* an older caller's, up to pages_held: nothing written past it */
	memset(&big, 0xa5, sizeof(big));
	big.s.size = KVMM_STATS_SIZE_VER0;
	t_ok(kvmm_get_stats(c, &big.s));
	t_assert_eq(big.s.size, KVMM_STATS_SIZE_VER0);
	t_assert_eq(big.s.page_size, 64 * 1024);
	t_assert_eq(big.s.blocks_lent, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(big.s.map_ahead_backoffs, 0xa5a5a5a5a5a5a5a5ull);
	/* up to a field past it: that one too, none in part */
	memset(&big, 0xa5, sizeof(big));
	big.s.size = KVMM_STATS_SIZE_VER0 + 8;
	t_ok(kvmm_get_stats(c, &big.s));
	t_assert_eq(big.s.size, KVMM_STATS_SIZE_VER0 + 8);
	t_assert_eq(big.s.blocks_lent, 0);
	t_assert_eq(big.s.extends_lent, 0xa5a5a5a5a5a5a5a5ull);
	st.size = sizeof(st);
	t_assert_eq(kvmm_get_stats(NULL, &st), -EINVAL);
	t_assert_eq(kvmm_get_stats(c, NULL), -EINVAL);
}

int main(void)
{
	const char *args[] = { "--revoke-timeout", "4321", NULL };
	struct kvmm_pin_opts po = { .size = sizeof(po),
				    .flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE,
				    .ttl_ns = 1000000000 };
	struct kvmm_daemon_info info = { .size = sizeof(info) };
	struct td_daemon d;
	struct kvmm_conn *c;
	uint64_t h;

	td_start_ok(&d, args);

	c = conn_with_block(d.sock, &h);
	info_values(c);
	stats_sizes(c);
	t_ok(kvmm_block_pin(c, h, &po));
	t_ok(kvmm_block_unpin(c, h));
	po.flags = 0x100; /* no such flag */
	t_assert_eq(kvmm_block_pin(c, h, &po), -EINVAL);

	/* the same daemon saying ABI 1.2 */
	fake_minor = 2;
	{
		struct kvmm_connect_opts co = { .size = sizeof(co),
						.socket_path = d.sock };
		struct kvmm_conn *old;

		t_ok(kvmm_connect(&co, &old));
		fake_minor = -1;
		t_ok(kvmm_get_daemon_info(old, &info));
		t_assert_eq(info.abi_minor, 2);
		po.flags = KVMM_PIN_F_TTL | KVMM_PIN_F_DEMOTE;
		t_assert_eq(kvmm_block_pin(old, h, &po), -EOPNOTSUPP);
		t_assert_eq(kvmm_block_unpin(old, h), -ENOENT);
		po.flags = KVMM_PIN_F_TTL;
		t_ok(kvmm_block_pin(old, h, &po));
		t_assert(po.expires_ns > 0);
		t_ok(kvmm_block_unpin(old, h));
		kvmm_disconnect(old);
	}
	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	printf("ok: daemon info; DEMOTE on ABI 1.2 is -EOPNOTSUPP\n");
	return T_PASS;
}
