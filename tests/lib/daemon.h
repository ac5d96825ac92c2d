/* SPDX-License-Identifier: MIT */
/*
 * Test helpers: run a real kvmmd (host backend) on a socket in a fresh
 * temporary directory, ask it for its status, wait for its page accounting
 * to settle, stop it.  Shared by every test that needs a daemon.
 */
#ifndef KVMM_TESTS_DAEMON_H
#define KVMM_TESTS_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/uapi.h"

struct td_daemon {
	pid_t pid;
	char dir[64]; /* $TMPDIR/kvmm-test-XXXXXX, removed by td_stop */
	char sock[100]; /* dir/kvmm.sock */
	char log[100]; /* dir/kvmmd.log: the daemon's stderr */
};

/*
 * Start build/kvmmd --foreground --backend host --socket DIR/kvmm.sock
 * --page-size 64K --gpu-mem 64M --telemetry off, then the extra arguments (NULL-terminated
 * array, may be NULL; later options override earlier ones), and wait up to
 * 30 s until the socket answers.  Sets KVMM_SOCKET for libkvmm.  0 or
 * -errno.
 */
int td_start(struct td_daemon *d, const char *const *extra);
/* SIGTERM, wait; returns the exit status (0 = clean), -ETIMEDOUT after 15 s
 * (then SIGKILL).  Removes the directory. */
int td_stop(struct td_daemon *d);
/* SIGKILL the daemon and reap it (a crash: nothing it had queued reaches
 * the disk, no stop runs); the test fails if either fails.  td_stop()
 * then only removes its directory. */
void td_kill(struct td_daemon *d);
/* td_stop(), and the daemon's whole log (its first len - 1 bytes) read
 * into log before it is removed: what kvmmd said while it stopped. */
int td_stop_log(struct td_daemon *d, char *log, size_t len);
/* td_start(), failing the test unless kvmmd answers (td_start() printed
 * its log). */
void td_start_ok(struct td_daemon *d, const char *const *extra);
/* td_stop(), failing the test with the daemon's log (read before td_stop()
 * removes it) unless kvmmd stopped and exited 0. */
void td_stop_ok(struct td_daemon *d);
/* Print the daemon's log to stderr (for failing tests). */
void td_dump_log(const struct td_daemon *d);
/* Read the daemon's log (its first len - 1 bytes) into buf as a string;
 * the bytes read, or -errno. */
int td_read_log(const struct td_daemon *d, char *buf, size_t len);
/* The daemon's log (its first 64 KiB) holds what, or not (want); else the
 * test fails, the log printed. */
void td_log_has(const struct td_daemon *d, const char *what, bool want);
/* Wait (ms of the clock at most, polling every 10 ms: tests/lib/wait.h)
 * for the daemon's log to hold what; else the test fails, the log
 * printed. */
void td_wait_log(const struct td_daemon *d, const char *what, unsigned int ms);
/* The telemetry ticks that fed, as kvmmd started with
 * KVMMD_TEST_TEL_POLL_LOG=1 logs them (telemetry.c), in its log so far. */
int td_tel_ticks(const struct td_daemon *d);
/* Wait (ms at most) for two such ticks more than since, td_tel_ticks()
 * read once what is to be counted happened in kvmmd (a session's end
 * it counted, a restore it answered): the first begins a poll after it,
 * the second has fed that poll.  Else the test fails, the log printed. */
void td_wait_tel_polled(const struct td_daemon *d, int since, unsigned int ms);
/* kvmmd with extra and var=value in its environment must refuse to start
 * (else the test fails); its log into log (len bytes, a string), its
 * directory removed. */
void td_start_refused(const char *const *extra, const char *var,
		      const char *value, char *log, size_t len);
/* ADMIN_STATUS over a fresh admin connection. */
int td_status(const struct td_daemon *d, struct kvmm_status_reply *st);
/* ADMIN_SET_QUOTA of uid to bytes (0: none) over a fresh admin
 * connection to the socket at sock. */
int td_set_quota(const char *sock, uint32_t uid, uint64_t bytes);
/* Wait until no page is allocated, mapped or quarantined and no client
 * session is open (only the status connection itself); 0 or -ETIMEDOUT
 * once timeout_ms of the clock have passed (st then holds the last
 * status).  This and td_wait_sessions() poll every 10 ms. */
int td_wait_idle(const struct td_daemon *d, int timeout_ms,
		 struct kvmm_status_reply *st);
/* Wait until kvmmd counts n sessions (the status connection is one);
 * 0 or -ETIMEDOUT once timeout_ms of the clock have passed (st then
 * holds the last status). */
int td_wait_sessions(const struct td_daemon *d, uint32_t n, int timeout_ms,
		     struct kvmm_status_reply *st);
/* Run kvmmctl --socket sock ARGS (split by the shell) and its stdout
 * into out (at most cap - 1 bytes, NUL-terminated); its exit status, -1
 * when it did not exit. */
int td_kvmmctl(const char *sock, const char *args, char *out, size_t cap);
/* Copy kvmmctl into d's directory (mode 0755) and have td_kvmmctl() run
 * that copy, which a process of another uid can exec wherever the build
 * is (the directory must let it in: cache-uids.h's cu_start()); 0 or
 * -errno.  td_stop() removes the copy (td_kvmmctl_unshare()). */
int td_kvmmctl_share(struct td_daemon *d);
void td_kvmmctl_unshare(struct td_daemon *d);
/* $TMPDIR/NAME, or /tmp/NAME when TMPDIR is unset or the path would not
 * fit in len: where a test's temporary files go.  tests/run.sh gives each
 * test a TMPDIR of its own and reports what is left in it. */
const char *td_tmp_path(const char *name, char *buf, size_t len);
/* Path of a built program: $KVMM_BUILD/NAME (default build/NAME). */
const char *td_build_path(const char *name, char *buf, size_t len);

#endif
