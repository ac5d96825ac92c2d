// SPDX-License-Identifier: MIT
/*
 * tests/run.sh starts each test under this launcher, which finds what the
 * test left behind where an environment tag cannot reach:
 *
 *   reaper [-g SECONDS] [-w DIR]... -r REPORT -- COMMAND [ARG]...
 *
 * Processes: it makes itself a child subreaper (PR_SET_CHILD_SUBREAPER),
 * so every process the test starts stays below it even after its parent
 * exits (a daemon that double-forks, one started with `env -i`).  Once
 * COMMAND has exited it gives the rest 5 s (-g) to end (a kvmmd that got its
 * PR_SET_PDEATHSIG may still be shutting down), then lists and kills
 * what is left: any child it still has means a live descendant.
 *
 * Files: with CAP_SYS_ADMIN it watches each DIR (/tmp, /var/tmp,
 * /sys/fs/bpf) with fanotify for new entries and keeps those whose
 * creating process was one of its descendants.  The creator's pid is
 * what attributes an entry, never its name or its time: a concurrent
 * suite's files are made by processes outside this tree, so they cannot
 * be blamed on this test.  A creator still running is placed by its
 * parents in /proc; one already gone by the time the event is read (a
 * shell test's `touch`) by the fork events of the proc connector
 * (netlink, CAP_NET_ADMIN in the first network namespace), read before
 * each batch of fanotify events: its fork was announced before it could
 * create anything.  Without the connector such a short-lived creator
 * is not placed and its entry is left out.  Without CAP_SYS_ADMIN
 * fanotify does not report other processes' pids, so the DIR is not
 * watched and the report says so.
 *
 * REPORT gets one line per finding, fields separated by tabs:
 *   left  PID  PPID  COMMAND-LINE   (killed by the reaper)
 *   made  PATH  PID  COMM           (a top-level entry still present)
 *   unwatched  DIR  REASON
 * The reaper exits with COMMAND's status (128 + signal if it was killed).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/fanotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRS 4
#define KILL_WAIT_MS 2000

struct watch {
	const char *dir;
	bool watched;
	__kernel_fsid_t fsid;
	union {
		struct file_handle h;
		char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} fh;
};

struct made {
	char path[PATH_MAX];
	pid_t pid;
	char comm[32];
};

static struct watch watches[MAX_DIRS];
static int fan_fd = -1; /* the group that watches them, -1: none */
static int nwatches;
static bool stop_requested; /* SIGINT, SIGTERM or SIGHUP came */
static long grace_ms = 5000;

/* Descendants by the connector's fork events, one bit per pid (-1: off). */
static int proc_fd = -1;
static unsigned char *forked;
static long pid_max;
static struct made *made;
static size_t nmade, made_cap;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The parent of PID from /proc/PID/stat, or -1 when PID is gone. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) state ppid": comm may hold spaces and parentheses */
	p = strrchr(buf, ')');
	if (!p || strlen(p) < 4)
		return -1;
	return (pid_t)atoi(p + 4);
}

static bool forked_here(pid_t pid)
{
	return forked && pid > 0 && pid < pid_max &&
	       (forked[pid / 8] & (1u << (pid % 8)));
}

static void mark_forked(pid_t pid, bool ours)
{
	if (!forked || pid <= 0 || pid >= pid_max)
		return;
	if (ours)
		forked[pid / 8] |= 1u << (pid % 8);
	else
		forked[pid / 8] &= ~(1u << (pid % 8));
}

/* Listens to the proc connector's process events; no-op where it cannot. */
static void proc_listen(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
				  .nl_groups = CN_IDX_PROC };
	struct {
		struct nlmsghdr nh;
		struct cn_msg cn;
		enum proc_cn_mcast_op op;
	} __attribute__((packed)) req = { 0 };
	int buf = 4 << 20;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	if (!f || fscanf(f, "%ld", &pid_max) != 1 || pid_max <= 0) {
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	proc_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			 NETLINK_CONNECTOR);
	if (proc_fd < 0)
		return;
	/* every process event of the machine comes here: room for bursts */
	setsockopt(proc_fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = NLMSG_DONE;
	req.nh.nlmsg_pid = getpid();
	req.cn.id.idx = CN_IDX_PROC;
	req.cn.id.val = CN_VAL_PROC;
	req.cn.len = sizeof(req.op);
	req.op = PROC_CN_MCAST_LISTEN;
	forked = calloc(pid_max / 8 + 1, 1);
	if (!forked || bind(proc_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(proc_fd, &req, sizeof(req), 0) != sizeof(req)) {
		close(proc_fd);
		proc_fd = -1;
		free(forked);
		forked = NULL;
	}
}

/* Takes in the fork events queued so far: a child of ours is ours, a
 * pid reused by another process is not any more. */
static void proc_drain(void)
{
	char buf[16384] __attribute__((aligned(8)));
	ssize_t n;

	if (proc_fd < 0)
		return;
	while ((n = recv(proc_fd, buf, sizeof(buf), 0)) > 0 ||
	       (n < 0 && errno == ENOBUFS)) {
		struct nlmsghdr *nh = (void *)buf;

		for (; n > 0 && NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			struct cn_msg *cn = NLMSG_DATA(nh);
			struct proc_event *ev = (void *)cn->data;
			pid_t parent, child;

			if (ev->what != PROC_EVENT_FORK)
				continue;
			parent = ev->event_data.fork.parent_tgid;
			child = ev->event_data.fork.child_tgid;
			if (child != ev->event_data.fork.child_pid)
				continue; /* a thread */
			mark_forked(child,
				    parent == getpid() || forked_here(parent));
		}
	}
}

/* A live process below the reaper, by its parents in /proc. */
static bool in_tree(pid_t pid)
{
	pid_t self = getpid();
	int depth;

	for (depth = 0; pid > 1 && depth < 64; depth++) {
		pid = parent_of(pid);
		if (pid == self)
			return true;
	}
	return false;
}

/*
 * Whether pid, which created an entry, is or was below the reaper: the
 * fork events place one that has gone.  Not for kill(): a pid that ended
 * may be another process's by now, its fork event not read yet.
 */
static bool is_descendant(pid_t pid)
{
	return forked_here(pid) || in_tree(pid);
}

static void read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(buf, len, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n\t")] = '\0';
}

static bool cap_sys_admin(void)
{
	char line[256];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	fclose(f);
	return eff & (1ULL << 21); /* CAP_SYS_ADMIN */
}

static void add_made(const char *dir, const char *name, pid_t pid)
{
	char path[PATH_MAX];
	struct made *m;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (i = 0; i < nmade; i++)
		if (!strcmp(made[i].path, path))
			return;
	if (nmade == made_cap) {
		size_t cap = made_cap ? 2 * made_cap : 16;
		struct made *n = realloc(made, cap * sizeof(*made));

		if (!n)
			return; /* a finding lost, not the test's verdict */
		made = n;
		made_cap = cap;
	}
	m = &made[nmade++];
	memcpy(m->path, path, sizeof(m->path));
	m->pid = pid;
	read_comm(pid, m->comm, sizeof(m->comm));
}

/* The watched DIR an event's directory fid names, NULL if none. */
static struct watch *watch_of(const struct fanotify_event_info_fid *fid)
{
	const struct file_handle *fh = (const void *)fid->handle;
	int i;

	for (i = 0; i < nwatches; i++) {
		struct watch *w = &watches[i];

		if (w->watched &&
		    !memcmp(&w->fsid, &fid->fsid, sizeof(w->fsid)) &&
		    w->fh.h.handle_type == fh->handle_type &&
		    w->fh.h.handle_bytes == fh->handle_bytes &&
		    !memcmp(w->fh.h.f_handle, fh->f_handle, fh->handle_bytes))
			return w;
	}
	return NULL;
}

/* Reads what the group has queued, keeping the descendants' entries. */
static void drain_all(void)
{
	char buf[8192] __attribute__((aligned(8)));
	ssize_t n;

	proc_drain(); /* the forks before the events that follow them */
	if (fan_fd < 0)
		return;
	while ((n = read(fan_fd, buf, sizeof(buf))) > 0) {
		struct fanotify_event_metadata *m = (void *)buf;

		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			struct fanotify_event_info_fid *fid;
			struct file_handle *fh;
			struct watch *w;

			if (m->vers != FANOTIFY_METADATA_VERSION ||
			    m->event_len < m->metadata_len + sizeof(*fid))
				continue;
			fid = (void *)((char *)m + m->metadata_len);
			if (fid->hdr.info_type != FAN_EVENT_INFO_TYPE_DFID_NAME)
				continue;
			fh = (struct file_handle *)fid->handle;
			w = watch_of(fid);
			if (w && m->pid > 0 && is_descendant(m->pid))
				add_made(w->dir,
					 (const char *)fh->f_handle +
						 fh->handle_bytes,
					 m->pid);
		}
	}
}

#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200 /* Linux 6.5 */
#endif

/*
 * The fid fanotify reports for DIR: AT_HANDLE_FID asks for exactly that
 * (bpffs has no other); a kernel before it knows only the handle, which
 * is the same where the filesystem can export one.
 */
static int dir_fid(const char *dir, struct file_handle *fh)
{
	int mount_id;

	fh->handle_bytes = MAX_HANDLE_SZ;
	if (!name_to_handle_at(AT_FDCWD, dir, fh, &mount_id, AT_HANDLE_FID))
		return 0;
	fh->handle_bytes = MAX_HANDLE_SZ;
	return name_to_handle_at(AT_FDCWD, dir, fh, &mount_id, 0);
}

/*
 * One fanotify group for every DIR (a group's release waits for an SRCU
 * grace period: one per DIR made each test 2 ms slower); its events name
 * their directory by fsid and file handle, kept here to match them.
 */
static void watch_dirs(FILE *report)
{
	int i;

	if (!cap_sys_admin()) {
		for (i = 0; i < nwatches; i++)
			fprintf(report,
				"unwatched\t%s\tnot root: fanotify names no "
				"other process without CAP_SYS_ADMIN\n",
				watches[i].dir);
		return;
	}
	fan_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK |
				       FAN_REPORT_DFID_NAME,
			       O_RDONLY | O_CLOEXEC);
	for (i = 0; i < nwatches; i++) {
		struct watch *w = &watches[i];
		struct statfs sf;
		const char *what;

		if (fan_fd < 0)
			what = "fanotify_init";
		else if (statfs(w->dir, &sf) < 0)
			what = "statfs";
		else if (dir_fid(w->dir, &w->fh.h) < 0)
			what = "name_to_handle_at";
		else if (fanotify_mark(fan_fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR,
				       FAN_CREATE | FAN_MOVED_TO | FAN_ONDIR,
				       AT_FDCWD, w->dir) < 0)
			what = "fanotify_mark";
		else
			what = NULL;
		if (what) {
			fprintf(report, "unwatched\t%s\t%s: %s\n", w->dir, what,
				strerror(errno));
			continue;
		}
		memcpy(&w->fsid, &sf.f_fsid, sizeof(w->fsid));
		w->watched = true;
	}
}

/* Waits up to MS for a signal or a watched event; drains the events. */
static void wait_some(int sfd, long ms)
{
	struct pollfd p[3];
	struct signalfd_siginfo si;
	int n = 0;

	p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	if (fan_fd >= 0)
		p[n++] = (struct pollfd){ .fd = fan_fd, .events = POLLIN };
	if (proc_fd >= 0)
		p[n++] = (struct pollfd){ .fd = proc_fd, .events = POLLIN };
	if (poll(p, n, ms < 0 ? -1 : (int)ms) > 0 && (p[0].revents & POLLIN))
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			if (si.ssi_signo != SIGCHLD)
				stop_requested = true;
	drain_all();
}

static void cmdline_of(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n, i;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	buf[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0) {
		read_comm(pid, buf, len); /* a zombie or a kernel thread */
		return;
	}
	for (i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\t' || buf[i] == '\n')
			buf[i] = ' ';
	buf[n] = '\0';
}

/*
 * Every live descendant, from one pass over /proc.  Returns how many it
 * put in PIDS (at most MAX).
 */
static int descendants(pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		pid_t pid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		if (pid != getpid() && in_tree(pid))
			pids[n++] = pid;
	}
	closedir(d);
	return n;
}

static void reap(pid_t child, int *status, bool *child_done)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		if (pid == child) {
			*status = st;
			*child_done = true;
		}
}

/* A live (or unreaped) child means a live descendant: orphans come here. */
static bool has_children(void)
{
	siginfo_t si;

	return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 ||
	       errno != ECHILD;
}

static void kill_leftovers(FILE *report, int sfd)
{
	pid_t pids[256];
	int i, n = descendants(pids, 256);
	long until;

	for (i = 0; i < n; i++) {
		char cmd[512];

		cmdline_of(pids[i], cmd, sizeof(cmd));
		fprintf(report, "left\t%d\t%d\t%s\n", (int)pids[i],
			(int)parent_of(pids[i]), cmd);
	}
	for (i = 0; i < n; i++)
		kill(pids[i], SIGTERM);
	until = now_ms() + KILL_WAIT_MS;
	while (has_children() && now_ms() < until) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		wait_some(sfd, 100);
	}
	/* what ignored SIGTERM, and what it left, however deep; one stuck
	 * in the kernel (D state) is given up on after 10 s */
	until = now_ms() + 10000;
	while (has_children() && now_ms() < until) {
		n = descendants(pids, 256);
		for (i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (has_children())
			wait_some(sfd, 50);
	}
}

static void report_made(FILE *report)
{
	struct stat st;
	size_t i;

	drain_all();
	for (i = 0; i < nmade; i++)
		if (!lstat(made[i].path, &st))
			fprintf(report, "made\t%s\t%d\t%s\n", made[i].path,
				(int)made[i].pid, made[i].comm);
}

static int usage(void)
{
	fprintf(stderr, "usage: reaper [-g SECONDS] [-w DIR]... -r REPORT -- "
			"COMMAND [ARG]...\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *report_path = NULL;
	bool child_done = false, stop_sent = false;
	int opt, sfd, status = 0;
	sigset_t mask, old;
	FILE *report;
	pid_t child;
	long until;

	while ((opt = getopt(argc, argv, "+g:w:r:")) != -1) {
		if (opt == 'g')
			grace_ms = (long)(atof(optarg) * 1000);
		else if (opt == 'w' && nwatches < MAX_DIRS)
			watches[nwatches++].dir = optarg;
		else if (opt == 'r')
			report_path = optarg;
		else
			return usage();
	}
	if (!report_path || optind >= argc)
		return usage();
	report = fopen(report_path, "we");
	if (!report) {
		perror(report_path);
		return 2;
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		fprintf(report,
			"unwatched\tprocesses\tPR_SET_CHILD_SUBREAPER: %s\n",
			strerror(errno));
	watch_dirs(report);
	if (fan_fd >= 0)
		proc_listen();

	/* the runner's ^C or kill ends the test, and then its leftovers */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		perror("signalfd");
		return 2;
	}
	fflush(report);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (!child) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "reaper: %s: %s\n", argv[optind],
			strerror(errno));
		_exit(127);
	}

	while (!child_done) {
		if (stop_requested && !stop_sent) {
			kill(child, SIGTERM);
			stop_sent = true;
		}
		reap(child, &status, &child_done);
		if (!child_done)
			wait_some(sfd, -1);
	}
	until = now_ms() + grace_ms;
	while (has_children() && now_ms() < until && !stop_requested) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (has_children())
			wait_some(sfd, 100);
	}
	if (has_children())
		kill_leftovers(report, sfd);
	report_made(report);
	if (fclose(report))
		perror(report_path);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
