// SPDX-License-Identifier: MIT
/*
 * timeout: 90
 * --cache-scope uid: processes of one uid share cached blocks, those of
 * different uids cannot reach or overwrite each other's, across a restart
 * too; --cache-scope gid the same by group.  Real processes under real
 * uids and gids (setresuid, setresgid), one real kvmmd.  Uids A and C
 * are in group A, B in group B.
 *
 *   - shared (the default), what the scope guards against: a process of
 *     uid B opens the blocks a process of uid A published, and B's own
 *     bytes under the same hashes are refused as duplicates;
 *   - uid: B's open of A's hashes misses; B publishes its bytes under
 *     them (cached, not duplicates); a new process of A gets A's bytes,
 *     one of B B's, one of C (A's group) and one of root nothing; B
 *     cannot pin a hash only A published, A can; the status, kvmmctl
 *     and TIER_STATS say so;
 *   - gid: C reads A's bytes (one group), B does not and caches its own;
 *   - with an NVMe tier and --nvme-save-on-stop: the blocks saved at a
 *     stop are A's again after a restart (the file keeps the key), still
 *     not B's; a restart in the shared scope formats the file anew, so
 *     no raw hash reaches what the uid scope wrote.
 *
 * Needs root (to be two uids); skips otherwise.
 */
#include "tests/cache-uids.h"
#include "tests/lib/nvme_probe.h"

#define UID_A 61001
#define UID_B 61002
#define UID_C 61003 /* in A's group */
#define NB 3
#define TAG_A 7
#define TAG_B 9

static const uint64_t hashes[NB] = { 0x5c09e001, 0x5c09e002, 0x5c09e003 };
static const uint64_t only_a = 0x5c09e0aa; /* published by A alone */

/* The group of a test uid: C is in A's, every other uid in its own. */
static gid_t group_of(uid_t uid)
{
	return uid == UID_C ? UID_A : uid;
}

static void publish_as(const char *sock, uid_t uid, const uint64_t *h,
		       uint32_t n, uint64_t tag, uint32_t published)
{
	cu_publish_as(sock, uid, group_of(uid), h, n, tag, published);
}

static void open_as(const char *sock, uid_t uid, const uint64_t *h, uint32_t n,
		    uint32_t nb, uint64_t tag, int tier)
{
	cu_open_as(sock, uid, group_of(uid), h, n, nb, tag, tier);
}

/* A process of uid pins hash: BLOCK_PIN must return want. */
static void pin_as(const char *sock, uid_t uid, uint64_t hash, int want)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct kvmm_pin_opts o;
		struct kvmm_conn *c;

		cu_become(uid, group_of(uid));
		c = cc_connect_lib(sock, "pin");
		t_assert_eq(cc_pin(c, hash, 0, 0, 0, &o), want);
		kvmm_disconnect(c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

static void shared_scope(void)
{
	const char *args[] = { "--socket-mode", "0666", NULL };
	struct kvmm_status_reply st;
	struct td_daemon d;

	cu_start(&d, args);
	t_ok(td_status(&d, &st));
	t_assert(!strcmp(st.cache_scope, "shared"));
	publish_as(d.sock, UID_A, hashes, NB, TAG_A, NB);
	/* B reads A's bytes, and cannot put its own under those hashes */
	open_as(d.sock, UID_B, hashes, NB, NB, TAG_A, -1);
	publish_as(d.sock, UID_B, hashes, NB, TAG_B, 0);
	open_as(d.sock, UID_A, hashes, NB, NB, TAG_A, -1);
	cc_stop(&d);
	printf("shared scope: uid %d reads uid %d's blocks\n", UID_B, UID_A);
}

static void uid_scope(void)
{
	const char *args[] = { "--socket-mode", "0666", "--cache-scope", "uid",
			       NULL };
	struct kvmm_tier_stats_reply ts;
	struct kvmm_status_reply st;
	struct td_daemon d;
	char out[8192];

	cu_start(&d, args);
	t_ok(td_status(&d, &st));
	t_assert(!strcmp(st.cache_scope, "uid"));
	publish_as(d.sock, UID_A, hashes, NB, TAG_A, NB);
	publish_as(d.sock, UID_A, &only_a, 1, TAG_A, 1);
	/* B sees nothing of A's, and its bytes are its own blocks */
	open_as(d.sock, UID_B, hashes, NB, 0, 0, -1);
	publish_as(d.sock, UID_B, hashes, NB, TAG_B, NB);
	/* each uid gets its own bytes; another uid (root) nothing */
	open_as(d.sock, UID_A, hashes, NB, NB, TAG_A, 0);
	open_as(d.sock, UID_B, hashes, NB, NB, TAG_B, 0);
	open_as(d.sock, UID_C, hashes, NB, 0, 0, -1);
	open_as(d.sock, 0, hashes, NB, 0, 0, -1);
	/* pins name blocks in the pinner's scope */
	pin_as(d.sock, UID_B, only_a, -ENOENT);
	pin_as(d.sock, UID_A, only_a, 0);
	cc_settled_stats(d.sock, &ts);
	t_assert_eq(ts.tiers[0].used_blocks, 2 * NB + 1);
	t_assert_eq(td_kvmmctl(d.sock, "status", out, sizeof(out)), 0);
	t_assert(strstr(out, "cache scope uid") != NULL);
	t_assert_eq(td_kvmmctl(d.sock, "status --json", out, sizeof(out)), 0);
	t_assert(strstr(out, "\"cache_scope\":\"uid\"") != NULL);
	cc_stop(&d);
	printf("uid scope: uids %d and %d keep their own bytes under one hash\n",
	       UID_A, UID_B);
}

static void gid_scope(void)
{
	const char *args[] = { "--socket-mode", "0666", "--cache-scope", "gid",
			       NULL };
	struct kvmm_status_reply st;
	struct td_daemon d;

	cu_start(&d, args);
	t_ok(td_status(&d, &st));
	t_assert(!strcmp(st.cache_scope, "gid"));
	publish_as(d.sock, UID_A, hashes, NB, TAG_A, NB);
	/* C, another uid of A's group, shares A's blocks; B does not */
	open_as(d.sock, UID_C, hashes, NB, NB, TAG_A, 0);
	publish_as(d.sock, UID_C, hashes, NB, TAG_B, 0);
	open_as(d.sock, UID_B, hashes, NB, 0, 0, -1);
	publish_as(d.sock, UID_B, hashes, NB, TAG_B, NB);
	open_as(d.sock, UID_A, hashes, NB, NB, TAG_A, 0);
	open_as(d.sock, UID_B, hashes, NB, NB, TAG_B, 0);
	/* a hash only B's group published: C's group cannot pin it */
	publish_as(d.sock, UID_B, &only_a, 1, TAG_B, 1);
	pin_as(d.sock, UID_C, only_a, -ENOENT);
	pin_as(d.sock, UID_B, only_a, 0);
	cc_stop(&d);
	printf("gid scope: uids %d and %d of one group share, %d does not\n",
	       UID_A, UID_C, UID_B);
}

/* kvmmd's options for a restart test (into a[16]). */
static const char **nvme_args(const char **a, const char *nvme,
			      const char *scope)
{
	int n = 0;

	a[n++] = "--socket-mode";
	a[n++] = "0666";
	a[n++] = "--cache-scope";
	a[n++] = scope;
	a[n++] = "--cache-block-pages";
	a[n++] = "4";
	a[n++] = "--cache-gpu-blocks";
	a[n++] = "2";
	a[n++] = "--host-mem";
	a[n++] = "2M";
	a[n++] = "--nvme-path";
	a[n++] = nvme;
	a[n++] = "--nvme-size";
	a[n++] = "16M";
	a[n++] = "--nvme-save-on-stop";
	a[n++] = "10000";
	a[n] = NULL;
	return a;
}

static void restart(void)
{
	static char log[1 << 16];
	const char *a[20];
	struct td_daemon d;
	char nvme[256];

	cc_nvme_path(nvme, sizeof(nvme), "cache-scope");
	t_nvme_require(nvme);
	cu_start(&d, nvme_args(a, nvme, "uid"));
	publish_as(d.sock, UID_A, hashes, NB, TAG_A, NB);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(t_count(log, "cache scope: uid, with a new key"), 1);
	t_assert_eq(t_count(log, "cache: stopping: 3 blocks written to NVMe"),
		    1);

	cu_start(&d, nvme_args(a, nvme, "uid"));
	open_as(d.sock, UID_B, hashes, NB, 0, 0, -1);
	open_as(d.sock, UID_A, hashes, NB, NB, TAG_A, 2);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(
		t_count(log,
			"cache scope: uid, with the key of the NVMe tier's file"),
		1);

	/* the shared scope cannot name what the uid scope wrote */
	cu_start(&d, nvme_args(a, nvme, "shared"));
	open_as(d.sock, UID_A, hashes, NB, 0, 0, -1);
	t_assert_eq(td_stop_log(&d, log, sizeof(log)), 0);
	t_assert_eq(
		t_count(log,
			"cached under another cache scope or key: formatting it anew"),
		1);
	unlink(nvme);
	printf("uid scope: saved blocks are uid %d's again after a restart\n",
	       UID_A);
}

int main(void)
{
	if (geteuid() != 0)
		t_skip("needs root, to run processes of two uids");
	shared_scope();
	uid_scope();
	gid_scope();
	restart();
	return 0;
}
