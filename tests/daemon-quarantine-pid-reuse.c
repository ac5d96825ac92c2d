// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A quarantine record without a pidfd does not take in a later process
 * that got its pid.  kvmmd runs without pidfds (tests/lib/nopidfd.h), so
 * every record is polled.  A process of uid UA maps a block and hangs up
 * without BYE (quarantined), then is killed; its pid is handed to a
 * process of uid UB at once (/proc/sys/kernel/ns_last_pid, before the
 * 200 ms poll can see the pid free), which maps a block and hangs up too.
 * UB's process must get its own record, under UB (whose quota a record
 * is charged to), and UA's is gone (its process exited): the pid has one
 * record, UB's, of one block.  The record used to be found by pid alone:
 * UB's pages went into UA's record (2 blocks, charged to UA's quota) and
 * no record of UB was listed.  Needs root.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cache-uids.h"
#include "tests/lib/nopidfd.h"

#define UA 63511
#define UB 63512

static const char *const args[] = { "--socket-mode", "0666", NULL };

/* A process of uid maps one block, hangs up without BYE and lives on
 * until killed. */
static pid_t quarantined_as(const char *sock, uid_t uid)
{
	int p[2];
	pid_t pid;
	char x = 1;

	t_ok(pipe(p));
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		static uint32_t ids[CC_MAX_PAGES];
		struct cc c;
		uint32_t seq;

		close(p[0]);
		cu_become(uid, uid);
		cc_connect(&c, sock);
		cc_region(&c);
		seq = cc_seq_open(&c);
		cc_extend(&c, seq, CC_TPB, ids);
		close(c.sock);
		if (write(p[1], &x, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	t_assert_eq(read(p[0], &x, 1), 1);
	close(p[0]);
	return pid;
}

/* The next fork gets pid (unless another process takes it first). */
static void next_pid(pid_t pid)
{
	char buf[16];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	int n = snprintf(buf, sizeof(buf), "%d", (int)pid - 1);

	t_assert(fd >= 0);
	t_assert_eq(write(fd, buf, n), n);
	close(fd);
}

struct record {
	int found;
	uid_t uid;
	uint64_t pages;
};

/* ADMIN_SESSIONS's quarantine records of pid (the last one's fields). */
static struct record record_of(const char *sock, pid_t pid)
{
	struct kvmm_sessions_reply *rep = calloc(1, KVMM_MSG_MAX);
	struct record r = { 0 };
	struct kvmm_conn *c;
	size_t len = 0;

	t_assert(rep);
	t_ok(kc_connect_admin(sock, &c));
	t_ok(kc_request(c, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, rep, KVMM_MSG_MAX,
			&len));
	kvmm_disconnect(c);
	for (uint32_t i = 0; i < rep->nr; i++) {
		struct kvmm_session_info *s =
			(void *)((char *)rep->sessions +
				 (size_t)i * rep->entry_size);

		if ((pid_t)s->pid != pid ||
		    !(s->flags & KVMM_SESSION_F_QUARANTINED))
			continue;
		r.found++;
		r.uid = s->uid;
		r.pages = s->pages_held;
	}
	free(rep);
	return r;
}

int main(void)
{
	struct td_daemon d;
	struct record rec;
	pid_t a, b = 0;

	if (geteuid())
		t_skip("needs root (processes of other uids)");
	if (access("/proc/sys/kernel/ns_last_pid", W_OK))
		t_skip("/proc/sys/kernel/ns_last_pid is not writable");
	td_start_nopidfd(&d, args);
	t_ok(chmod(d.dir, 0711));

	a = quarantined_as(d.sock, UA);
	cc_wait_quarantined(&d, CC_PPB);
	rec = record_of(d.sock, a);
	t_assert_eq(rec.found, 1);
	t_assert_eq(rec.uid, UA);
	t_assert_eq(rec.pages, CC_PPB);

	/* a start time a clock tick (10 ms) or more before b's: what tells
	 * the two apart (within one tick b gets a record of its own too,
	 * and a's stays until b exits) */
	usleep(50 * 1000);
	t_ok(kill(a, SIGKILL));
	t_assert_eq(waitpid(a, NULL, 0), a);
	for (int tries = 0; tries < 20 && b != a; tries++) {
		next_pid(a);
		b = quarantined_as(d.sock, UB);
		if (b != a) {
			kill(b, SIGKILL);
			waitpid(b, NULL, 0);
			cc_wait_quarantined(&d, 0);
			t_skip("pid %d went to another process first", (int)a);
		}
	}

	/* UB's session ends after its hangup: wait for its record */
	for (int i = 0; i < 2000; i++) {
		rec = record_of(d.sock, b);
		if (rec.found && rec.uid == UB)
			break;
		usleep(1000);
	}
	printf("pid %d: %d record(s), uid %u, %llu pages\n", (int)b, rec.found,
	       rec.uid, (unsigned long long)rec.pages);
	t_assert_eq(rec.found, 1);
	t_assert_eq(rec.uid, UB);
	t_assert_eq(rec.pages, CC_PPB);
	cc_wait_quarantined(&d, CC_PPB);

	t_ok(kill(b, SIGKILL));
	t_assert_eq(waitpid(b, NULL, 0), b);
	cc_wait_quarantined(&d, 0);
	cc_stop(&d);
	return 0;
}
