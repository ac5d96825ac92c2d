// SPDX-License-Identifier: MIT
/*
 * Real-daemon test helpers; see daemon.h.  The daemon is a child process
 * of the test, started with the host backend so tests run anywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "tests/lib/wait.h"

const char *td_build_path(const char *name, char *buf, size_t len)
{
	const char *b = getenv("KVMM_BUILD");

	snprintf(buf, len, "%s/%s", b && *b ? b : "build", name);
	return buf;
}

const char *td_tmp_path(const char *name, char *buf, size_t len)
{
	const char *t = getenv("TMPDIR");
	int n;

	if (t && *t) {
		n = snprintf(buf, len, "%s/%s", t, name);
		/* the socket path must fit too: 108 bytes with the dir */
		if (n > 0 && (size_t)n < len)
			return buf;
	}
	snprintf(buf, len, "/tmp/%s", name);
	return buf;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

int td_start(struct td_daemon *d, const char *const *extra)
{
	char bin[256];
	const char *argv[64];
	int n = 0;

	memset(d, 0, sizeof(*d));
	td_tmp_path("kvmm-test-XXXXXX", d->dir, sizeof(d->dir));
	if (!mkdtemp(d->dir))
		return -errno;
	snprintf(d->sock, sizeof(d->sock), "%s/kvmm.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/kvmmd.log", d->dir);
	td_build_path("kvmmd", bin, sizeof(bin));
	argv[n++] = bin;
	argv[n++] = "--foreground";
	argv[n++] = "--backend";
	argv[n++] = "host";
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--page-size";
	argv[n++] = "64K";
	argv[n++] = "--gpu-mem";
	argv[n++] = "64M";
	/* BPF setup costs seconds; tests of telemetry ask for it. */
	argv[n++] = "--telemetry";
	argv[n++] = "off";
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	d->pid = fork();
	if (d->pid < 0)
		return -errno;
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		/* A test that fails (exits) takes its daemon with it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);

		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	setenv("KVMM_SOCKET", d->sock, 1);
	/* Up to 30 s: BPF telemetry setup takes seconds on a loaded box. */
	for (int i = 0; i < 3000; i++) {
		int st;

		if (socket_answers(d->sock))
			return 0;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			td_dump_log(d);
			return -ECHILD;
		}
		sleep_ms(10);
	}
	td_dump_log(d);
	return -ETIMEDOUT;
}

void td_dump_log(const struct td_daemon *d)
{
	char line[512];
	FILE *f = fopen(d->log, "r");

	if (!f)
		return;
	fprintf(stderr, "---- kvmmd log ----\n");
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fprintf(stderr, "-------------------\n");
	fclose(f);
}

int td_read_log(const struct td_daemon *d, char *buf, size_t len)
{
	FILE *f = fopen(d->log, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (int)n;
}

void td_log_has(const struct td_daemon *d, const char *what, bool want)
{
	static char log[1 << 16];

	t_assert(td_read_log(d, log, sizeof(log)) >= 0);
	if (!strstr(log, what) != !want) {
		td_dump_log(d);
		t_fail("kvmmd's log %s \"%s\"", want ? "lacks" : "has", what);
	}
}

void td_wait_log(const struct td_daemon *d, const char *what, unsigned int ms)
{
	static char log[1 << 16];
	unsigned long long end = t_now_ms() + ms;

	for (;;) {
		t_assert(td_read_log(d, log, sizeof(log)) >= 0);
		if (strstr(log, what))
			return;
		if (t_now_ms() > end)
			break;
		usleep(10000);
	}
	td_dump_log(d);
	t_fail("kvmmd never said \"%s\" (within %u ms)", what, ms);
}

#define TD_TEL_TICK "telemetry: test knob: tick "

int td_tel_ticks(const struct td_daemon *d)
{
	static char log[1 << 20];

	t_assert(td_read_log(d, log, sizeof(log)) >= 0);
	return t_count(log, TD_TEL_TICK);
}

void td_wait_tel_polled(const struct td_daemon *d, int since, unsigned int ms)
{
	unsigned long long end = t_now_ms() + ms;
	int now;

	for (;;) {
		now = td_tel_ticks(d);
		if (now >= since + 2)
			return;
		if (t_now_ms() > end)
			break;
		usleep(10000);
	}
	td_dump_log(d);
	t_fail("kvmmd logged %d telemetry ticks that fed, not %d (within %u ms; KVMMD_TEST_TEL_POLL_LOG=1 set?)",
	       now, since + 2, ms);
}

void td_start_refused(const char *const *extra, const char *var,
		      const char *value, char *log, size_t len)
{
	struct td_daemon d;

	setenv(var, value, 1);
	if (!td_start(&d, extra)) {
		unsetenv(var);
		td_stop(&d);
		t_fail("kvmmd started with %s='%s'", var, value);
	}
	unsetenv(var);
	t_assert(td_read_log(&d, log, len) > 0);
	unlink(d.log);
	unlink(d.sock);
	rmdir(d.dir);
}

int td_stop(struct td_daemon *d)
{
	return td_stop_log(d, NULL, 0);
}

int td_stop_log(struct td_daemon *d, char *log, size_t len)
{
	int st = 0, ret = -ETIMEDOUT;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (int i = 0; i < 1500; i++) {
			if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
				ret = WIFEXITED(st) ? WEXITSTATUS(st) :
						      128 + WTERMSIG(st);
				break;
			}
			sleep_ms(10);
		}
		if (ret == -ETIMEDOUT) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &st, 0);
		}
		d->pid = 0;
	}
	if (log && len && td_read_log(d, log, len) < 0)
		log[0] = '\0';
	unlink(d->log);
	unlink(d->sock);
	td_kvmmctl_unshare(d);
	rmdir(d->dir);
	return ret;
}

void td_start_ok(struct td_daemon *d, const char *const *extra)
{
	int err = td_start(d, extra);

	if (err)
		t_fail("kvmmd did not start: %d", err);
}

void td_kill(struct td_daemon *d)
{
	t_ok(kill(d->pid, SIGKILL));
	t_assert_eq(waitpid(d->pid, NULL, 0), d->pid);
	d->pid = 0;
}

void td_stop_ok(struct td_daemon *d)
{
	static char log[1 << 16];
	int err = td_stop_log(d, log, sizeof(log));

	if (err) {
		fprintf(stderr, "---- kvmmd log ----\n%s-------------------\n",
			log);
		t_fail("kvmmd stop: %d", err);
	}
}

/*
 * The build's kvmmctl may sit where no other uid can reach it (a checkout
 * under a 0700 home or mktemp -d: exec fails with EACCES, the shell says
 * 126), so tests that run it as another uid run a copy in the daemon's
 * directory, which they open to every uid for the socket anyway.  Always
 * a copy, wherever the build is, so the path is the same one every run.
 */
int td_kvmmctl_share(struct td_daemon *d)
{
	char bin[256], copy[128], buf[1 << 16];
	int in, out, ret = 0;
	ssize_t n;

	td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(copy, sizeof(copy), "%s/kvmmctl", d->dir);
	in = open(bin, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		ret = -errno;
		close(in);
		return ret;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			ret = -EIO;
			break;
		}
	if (n < 0)
		ret = -errno;
	/* fchmod: the umask may have cut the mode open() asked for */
	if (!ret && fchmod(out, 0755))
		ret = -errno;
	close(in);
	if (close(out) && !ret)
		ret = -errno;
	if (ret) {
		unlink(copy);
		return ret;
	}
	return setenv("KVMM_TEST_KVMMCTL", copy, 1) ? -errno : 0;
}

void td_kvmmctl_unshare(struct td_daemon *d)
{
	const char *e = getenv("KVMM_TEST_KVMMCTL");
	char copy[128];

	snprintf(copy, sizeof(copy), "%s/kvmmctl", d->dir);
	if (e && !strcmp(e, copy))
		unsetenv("KVMM_TEST_KVMMCTL");
	unlink(copy);
}

int td_status(const struct td_daemon *d, struct kvmm_status_reply *st)
{
	struct kvmm_conn *c;
	int err = kc_connect_admin(d->sock, &c);

	if (err)
		return err;
	memset(st, 0, sizeof(*st));
	err = kc_request(c, KVMM_CMD_ADMIN_STATUS, NULL, 0, st, sizeof(*st),
			 NULL);
	kvmm_disconnect(c);
	return err;
}

int td_set_quota(const char *sock, uint32_t uid, uint64_t bytes)
{
	struct kvmm_admin_quota q = { .size = sizeof(q),
				      .uid = uid,
				      .bytes = bytes };
	struct kvmm_conn *c;
	int err = kc_connect_admin(sock, &c);

	if (err)
		return err;
	err = kc_request(c, KVMM_CMD_ADMIN_SET_QUOTA, &q, sizeof(q), NULL, 0,
			 NULL);
	kvmm_disconnect(c);
	return err;
}

int td_wait_idle(const struct td_daemon *d, int timeout_ms,
		 struct kvmm_status_reply *st)
{
	struct kvmm_status_reply tmp;

	unsigned long long end = t_now_ms() + timeout_ms;

	if (!st)
		st = &tmp;
	/* a deadline of time: each status is a connection, which takes
	 * longer than the 10 ms between them on a loaded machine */
	for (;;) {
		int err = td_status(d, st);

		if (err)
			return err;
		if (!st->pages_allocated && !st->pages_mapped &&
		    !st->pages_quarantined && st->sessions <= 1 &&
		    !st->sequences)
			return 0;
		if (t_now_ms() > end)
			return -ETIMEDOUT;
		sleep_ms(10);
	}
}

int td_wait_sessions(const struct td_daemon *d, uint32_t n, int timeout_ms,
		     struct kvmm_status_reply *st)
{
	unsigned long long end = t_now_ms() + timeout_ms;

	for (;;) { /* a deadline of time, as td_wait_idle()'s */
		int err = td_status(d, st);

		if (err)
			return err;
		if (st->sessions == n)
			return 0;
		if (t_now_ms() > end)
			return -ETIMEDOUT;
		sleep_ms(10);
	}
}

int td_kvmmctl(const char *sock, const char *args, char *out, size_t cap)
{
	const char *shared = getenv("KVMM_TEST_KVMMCTL");
	char bin[256], cmd[1024];
	size_t n;
	FILE *f;
	int st;

	if (shared && *shared)
		snprintf(bin, sizeof(bin), "%s", shared);
	else
		td_build_path("kvmmctl", bin, sizeof(bin));
	snprintf(cmd, sizeof(cmd), "%s --socket %s %s", bin, sock, args);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
