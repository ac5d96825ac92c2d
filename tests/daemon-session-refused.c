// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A connection kvmmd refuses learns why.  Under --max-sessions-per-uid 1
 * a process of an unprivileged uid holds one session; then
 *   - its second kvmm_connect() fails with -EUSERS, and libkvmm's log
 *     line names the limit;
 *   - a raw connection that kvmmd accepts (and refuses) before it sends
 *     HELLO gets its HELLO answered: status -EUSERS, the request's id and
 *     command, then EOF (not a reset);
 *   - kvmmctl run as that uid says kvmmd refused it and why, exit 1;
 *   - one that never sends HELLO is closed (EOF) after --hello-timeout;
 *   - 100 idle refused connections at once leave kvmmd with at most
 *     KD_REFUSED_WAITING (32) more fds than before.
 * kvmmd used to close a refused connection at accept: the second connect
 * failed with -ECONNRESET, kvmmctl said "connection to kvmmd lost".
 * Needs root (processes of another uid).
 */
#include <dirent.h>
#include <errno.h>
#include <sys/prctl.h>

#include "kvmm/kvmm.h"
#include "tests/cache-uids.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define UID_A 62501
#define FLOOD 100

static int raw_connect(const char *sock)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	t_assert(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	t_ok(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
	return fd;
}

/* One admin session for every status asked: a fresh one each time would
 * leave kvmmd closing the last one's fds while they are counted. */
static struct kvmm_conn *admin;

static uint64_t refused(const struct td_daemon *d)
{
	struct kvmm_status_reply st = { 0 };

	t_ok(kc_request(admin, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st, sizeof(st),
			NULL));
	return st.sessions_refused_uid_limit;
}

/* Wait until kvmmd has refused n connections of UID_A: it accepted them
 * (a test that fails here times out instead). */
static void wait_refused(const struct td_daemon *d, uint64_t n)
{
	for (int i = 0; i < 2000 && refused(d) < n; i++)
		usleep(5000);
	t_assert_eq(refused(d), n);
}

static int nr_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	t_assert(dir != NULL);
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* A HELLO sent on fd only now: answered -EUSERS, then EOF. */
static void late_hello(int fd)
{
	struct {
		struct kvmm_msg_hdr h;
		struct kvmm_hello hello;
	} m = { .h = { .size = sizeof(m),
		       .cmd = KVMM_CMD_HELLO,
		       .version = KVMM_ABI_MAJOR,
		       .id = 7 },
		.hello = { .size = sizeof(m.hello),
			   .abi_major = KVMM_ABI_MAJOR } };
	struct kvmm_msg_hdr r;
	ssize_t n;

	t_assert_eq(send(fd, &m, sizeof(m), MSG_NOSIGNAL), sizeof(m));
	n = recv(fd, &r, sizeof(r), 0);
	if (n < 0)
		t_fail("HELLO of a refused connection: %s", strerror(errno));
	t_assert_eq(n, sizeof(r));
	t_assert_eq(r.status, -EUSERS);
	t_assert_eq(r.id, 7);
	t_assert_eq(r.cmd, KVMM_CMD_HELLO);
	t_assert(r.flags & KVMM_MSG_F_REPLY);
	t_assert_eq(recv(fd, &r, sizeof(r), 0), 0);
	close(fd);
}

/* A child process of UID_A that runs fn(d, arg) and exits 0. */
static pid_t as_uid(const struct td_daemon *d,
		    void (*fn)(const struct td_daemon *d, int arg), int arg)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		cu_become(UID_A, UID_A);
		t_ok(prctl(PR_SET_PDEATHSIG, SIGKILL));
		fn(d, arg);
		_exit(0);
	}
	return p;
}

/* Signals from a child (it connected) and to it (go on); the holder of
 * the session has a "go" pipe of its own, as both wait at once. */
static int to_parent[2], to_child[2], to_holder[2];

static void put(int fd)
{
	char c = 1;

	t_assert_eq(write(fd, &c, 1), 1);
}

static void get(int fd)
{
	char c;

	t_assert_eq(read(fd, &c, 1), 1);
}

/* Holds UID_A's one session until told to go. */
static void hold_session(const struct td_daemon *d, int unused)
{
	struct kvmm_connect_opts o = { .size = sizeof(o),
				       .socket_path = d->sock };
	struct kvmm_conn *c;

	t_ok(kvmm_connect(&o, &c));
	put(to_parent[1]);
	get(to_holder[0]);
	t_ok(kvmm_nop(c, 1)); /* unharmed by the refusals */
	kvmm_disconnect(c);
}

static void second_connect(const struct td_daemon *d, int unused)
{
	struct kvmm_connect_opts o = { .size = sizeof(o),
				       .socket_path = d->sock };
	struct kvmm_conn *c = NULL;
	int pipefd[2];
	char log[4096];
	ssize_t n;

	t_ok(pipe(pipefd));
	vmm_log_to_fd(pipefd[1]);
	t_assert_eq(kvmm_connect(&o, &c), -EUSERS);
	vmm_log_to_fd(2);
	close(pipefd[1]);
	n = read(pipefd[0], log, sizeof(log) - 1);
	t_assert(n > 0);
	log[n] = '\0';
	if (!strstr(log,
		    "libkvmm: kvmmd refused the connection: this uid has its most sessions (kvmmd's --max-sessions-per-uid)"))
		t_fail("libkvmm's log lacks the reason:\n%s", log);
	t_assert(strstr(kvmm_strerror(-EUSERS), "most sessions") != NULL);
}

/* Connects, lets the parent see kvmmd refuse it, then sends HELLO. */
static void hello_after_accept(const struct td_daemon *d, int unused)
{
	int fd = raw_connect(d->sock);

	put(to_parent[1]);
	get(to_child[0]);
	late_hello(fd);
}

static void kvmmctl_refused(const struct td_daemon *d, int unused)
{
	char out[4096];

	t_assert_eq(td_kvmmctl(d->sock, "status 2>&1", out, sizeof(out)), 1);
	if (!strstr(out,
		    "kvmmd refused the connection: this uid has its most sessions (kvmmd's --max-sessions-per-uid)\n"))
		t_fail("kvmmctl does not say why:\n%s", out);
}

/* Sends nothing: kvmmd closes it after --hello-timeout (EOF). */
static void no_hello(const struct td_daemon *d, int unused)
{
	int fd = raw_connect(d->sock);
	char buf[64];

	t_assert_eq(recv(fd, buf, sizeof(buf), 0), 0);
	close(fd);
}

/* n idle connections, kept until the parent says go. */
static void flood(const struct td_daemon *d, int n)
{
	for (int i = 0; i < n; i++)
		raw_connect(d->sock);
	put(to_parent[1]);
	get(to_child[0]);
}

int main(void)
{
	const char *args[] = { "--socket-mode",
			       "0666",
			       "--gpu-mem",
			       "8M",
			       "--max-sessions-per-uid",
			       "1",
			       "--hello-timeout",
			       "1000",
			       NULL };
	struct td_daemon d;
	pid_t holder, p;
	int before, after;

	if (geteuid() != 0)
		t_skip("needs root, to run processes of another uid");
	setvbuf(stdout, NULL, _IONBF, 0);
	t_ok(pipe(to_parent));
	t_ok(pipe(to_child));
	t_ok(pipe(to_holder));
	cu_start(&d, args);
	t_ok(kc_connect_admin(d.sock, &admin));
	holder = as_uid(&d, hold_session, 0);
	get(to_parent[0]);

	p = as_uid(&d, second_connect, 0);
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(refused(&d), 1);

	p = as_uid(&d, hello_after_accept, 0);
	get(to_parent[0]);
	wait_refused(&d, 2); /* accepted and refused before its HELLO */
	put(to_child[1]);
	t_assert_eq(cc_wait_child(p), 0);

	p = as_uid(&d, kvmmctl_refused, 0);
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(refused(&d), 3);

	p = as_uid(&d, no_hello, 0);
	t_assert_eq(cc_wait_child(p), 0);
	t_assert_eq(refused(&d), 4);

	before = nr_fds(d.pid);
	p = as_uid(&d, flood, FLOOD);
	get(to_parent[0]);
	wait_refused(&d, 4 + FLOOD);
	after = nr_fds(d.pid);
	printf("kvmmd's fds: %d before %d idle refused connections, %d after\n",
	       before, FLOOD, after);
	t_assert(after <= before + 32);
	put(to_child[1]);
	t_assert_eq(cc_wait_child(p), 0);

	put(to_holder[1]);
	t_assert_eq(cc_wait_child(holder), 0);
	kvmm_disconnect(admin);
	cc_stop(&d);
	printf("ok\n");
	return 0;
}
