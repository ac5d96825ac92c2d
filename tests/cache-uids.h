/* SPDX-License-Identifier: MIT */
/*
 * Client processes of other uids against one kvmmd, for the tests of
 * cache scopes and tenants (cache-scope, cache-tenants): each helper
 * forks a child that becomes uid (and gid, no supplementary groups),
 * does one thing through cache-common.h's raw client and checks the
 * answer; the parent waits for it.  Needs root.  And what the tenant
 * tests (cache-tenants, cache-tenant-limit) read back: ADMIN_TENANTS, and
 * kvmmctl's output.
 */
#ifndef KVMM_TESTS_CACHE_UIDS_H
#define KVMM_TESTS_CACHE_UIDS_H

#include <grp.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "tests/cache-common.h"

#define CU_MAX_BLOCKS 8

/* This (child) process becomes uid in group gid, no others. */
static inline void cu_become(uid_t uid, gid_t gid)
{
	t_ok(setgroups(0, NULL));
	t_ok(setresgid(gid, gid, gid));
	t_ok(setresuid(uid, uid, uid));
}

/* A process of uid:gid publishes hashes h[0..n) holding tag's bytes; it
 * must find `published` of them new to its cache (the rest duplicates). */
static inline void cu_publish_as(const char *sock, uid_t uid, gid_t gid,
				 const uint64_t *h, uint32_t n, uint64_t tag,
				 uint32_t published)
{
	pid_t p = fork();

	t_assert(p >= 0 && n <= CU_MAX_BLOCKS);
	if (p == 0) {
		struct kvmm_block_publish_reply rep;
		uint32_t pages[CU_MAX_BLOCKS * CC_PPB];
		struct cc c;
		uint32_t seq;

		cu_become(uid, gid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, n * CC_TPB, pages);
		cc_fill(&c, pages, n, tag);
		t_ok(cc_publish(&c, seq, 0, h, n, &rep));
		if (rep.published != published ||
		    rep.duplicates != n - published)
			t_fail("uid %u: published %u, duplicates %u; expected %u and %u",
			       (unsigned)uid, rep.published, rep.duplicates,
			       published, n - published);
		cc_seq_close(&c, seq, pages, n * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* A process of uid:gid opens hashes h[0..n): it must get nb blocks
 * (from NVMe when tier is 2; -1 or 0: any) holding tag's bytes. */
static inline void cu_open_as(const char *sock, uid_t uid, gid_t gid,
			      const uint64_t *h, uint32_t n, uint32_t nb,
			      uint64_t tag, int tier)
{
	pid_t p = fork();

	t_assert(p >= 0 && n <= CU_MAX_BLOCKS);
	if (p == 0) {
		struct kvmm_prefix_open_reply rep;
		uint32_t ids[CU_MAX_BLOCKS * CC_PPB];
		struct cc c;

		cu_become(uid, gid);
		cc_connect(&c, sock);
		cc_region(&c);
		cc_prefix(&c, h, n, &rep, ids);
		if (rep.nr_blocks != nb)
			t_fail("uid %u: %u blocks, expected %u", (unsigned)uid,
			       rep.nr_blocks, nb);
		if (tier == 2)
			t_assert_eq(rep.from_nvme, nb);
		if (nb)
			cc_check(&c, ids, nb, tag);
		cc_seq_close(&c, rep.seq_id, ids, nb * CC_PPB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/*
 * Uid a publishes ha[0..n) (tag 1), uid b hb[0..n) (tag 2), then uid c
 * three contents of n blocks on top (hashes c_base + 16 k + block, tags
 * 3-5), so that a's and b's go down to NVMe under c's (a GPU and host
 * tier of room for three contents, LRU): TIER_STATS must then count the
 * 2 n on NVMe.
 */
static inline void cu_publish_two_down(const char *sock, uid_t a,
				       const uint64_t *ha, uid_t b,
				       const uint64_t *hb, uid_t c,
				       uint64_t c_base, uint32_t n)
{
	struct kvmm_tier_stats_reply ts;

	cu_publish_as(sock, a, a, ha, n, 1, n);
	cu_publish_as(sock, b, b, hb, n, 2, n);
	for (uint64_t k = 0; k < 3; k++) {
		uint64_t hc[CU_MAX_BLOCKS];

		for (uint32_t i = 0; i < n; i++)
			hc[i] = c_base + 16 * k + i;
		cu_publish_as(sock, c, c, hc, n, 3 + k, n);
	}
	cc_settled_stats(sock, &ts);
	t_assert_eq(ts.tiers[2].used_blocks, 2 * n);
}

/* ADMIN_TENANTS, as an admin session gets it (malloc'ed). */
static inline struct kvmm_tenants_reply *cu_tenants(const char *sock)
{
	struct kvmm_tenants_reply *r = calloc(1, KVMM_MSG_MAX);
	struct kvmm_conn *c;
	size_t len = 0;

	t_assert(r);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_TENANTS, NULL, 0, r, KVMM_MSG_MAX,
			&len));
	kvmm_disconnect(c);
	t_assert_eq(r->size, len);
	t_assert_eq(r->entry_size, sizeof(struct kvmm_tenant_info));
	t_assert_eq(len, sizeof(*r) + r->nr * sizeof(r->tenants[0]));
	return r;
}

/* Tenant id's entry in r; the test fails without one. */
static inline const struct kvmm_tenant_info *
cu_tenant(const struct kvmm_tenants_reply *r, uint32_t id)
{
	for (uint32_t i = 0; i < r->nr; i++)
		if (r->tenants[i].id == id)
			return &r->tenants[i];
	t_fail("no tenant %u", id);
	return NULL;
}

/* `kvmmctl ARGS` succeeds and prints the text fmt makes (a line or a
 * part of one). */
static inline void cu_kvmmctl_has(const char *sock, const char *args,
				  const char *fmt, ...)
{
	static char out[65536];
	char want[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	t_assert_eq(td_kvmmctl(sock, args, out, sizeof(out)), 0);
	if (!strstr(out, want))
		t_fail("kvmmctl %s: no '%s' in:\n%s", args, want, out);
}

/* A new connection to sock: its fd, or -errno when connect() failed. */
static inline int cu_raw_connect(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	t_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -errno;
	}
	return fd;
}

/*
 * An admin-only HELLO (no rings) on a new connection: 0 when answered 0,
 * the reply's status (a refused connection's says why: -EUSERS, -EBUSY,
 * -ETOOMANYREFS), -ECONNRESET when kvmmd closed the connection instead,
 * or connect()'s -errno.
 */
static inline int cu_try_hello(const char *sock)
{
	struct {
		struct kvmm_msg_hdr h;
		struct kvmm_hello hello;
	} m = { .h = { .size = sizeof(m),
		       .cmd = KVMM_CMD_HELLO,
		       .version = KVMM_ABI_MAJOR,
		       .id = 1 },
		.hello = { .size = sizeof(m.hello),
			   .abi_major = KVMM_ABI_MAJOR,
			   .flags = KVMM_HELLO_F_ADMIN } };
	char buf[KVMM_MSG_MAX];
	struct kvmm_msg_hdr *r = (void *)buf;
	int fd = cu_raw_connect(sock);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	if (n == (ssize_t)sizeof(m))
		n = recv(fd, buf, sizeof(buf), 0);
	close(fd);
	if (n <= 0)
		return -ECONNRESET;
	t_assert(n >= (ssize_t)sizeof(*r));
	return r->status;
}

/* A process of uid (in group uid) whose cu_try_hello() must get want. */
static inline void cu_hello_as(const char *sock, uid_t uid, int want)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		cu_become(uid, uid);
		t_assert_eq(cu_try_hello(sock), want);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

/* Start kvmmd with args, its socket open to every uid. */
static inline void cu_start(struct td_daemon *d, const char *const *args)
{
	cc_start(d, args);
	/* mkdtemp made it 0700: let the other uids reach the socket, and
	 * kvmmctl, which the build directory may keep from them */
	t_ok(chmod(d->dir, 0711));
	t_ok(td_kvmmctl_share(d));
}

#endif
