// SPDX-License-Identifier: MIT
/*
 * kvmmd: the kvmm daemon.  Parses options (a config file first, then the
 * command line, which wins), daemonizes unless --foreground (the parent
 * waits until the socket is ready, so "kvmmd && kvmmctl status" works;
 * relative paths made absolute first, paths.c; the log to syslog or
 * --log-file, log_sink.c), then runs the event loop until SIGTERM/SIGINT.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/cache_plan.h"
#include "kvmm/kvmmd/log_sink.h"
#include "kvmm/kvmmd/metrics_http.h"
#include "kvmm/kvmmd/options.h"
#include "kvmm/kvmmd/paths.h"
#include "kvmm/kvmmd/sd_notify.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kvmmd [OPTIONS]\n"
		"  --socket PATH          control socket (default /run/kvmm/kvmm.sock)\n"
		"  --backend host|cuda|auto  memory backend (default auto)\n"
		"  --gpu-mem SIZE         pool capacity, e.g. 64G (default 4096 pages)\n"
		"  --page-size SIZE       host backend page size (default 64K)\n"
		"  --cuda-device N|UUID   GPU ordinal or UUID (GPU-..., as\n"
		"                         nvidia-smi -L prints it; cuda backend)\n"
		"  --cpu N                pin the event loop to CPU N\n"
		"  --revoke-timeout MS    cut off clients that do not answer (2000)\n"
		"  --lend-wait MS         an extend short of quota or pool waits\n"
		"                         this long for the blocks ahead it asks\n"
		"                         other processes of its uid for (1000;\n"
		"                         0: asks none)\n"
		"  --quota UID=SIZE       memory quota of a uid (repeatable)\n"
		"  --spin-us N            ring polling before sleeping (50)\n"
		"  --socket-mode OCTAL    socket permissions (0660)\n"
		"  --socket-group NAME    the socket's group: engine users are\n"
		"                         in it (default kvmmd's own)\n"
		"  --log-level err|warn|info|debug\n"
		"                         the least severe lines logged (info)\n"
		"  --config FILE          'option value' lines, '#' comments\n"
		"                         (repeatable; read first: the command line wins)\n"
		"  --pid-file PATH        write the daemon's pid there\n"
		"  --foreground           do not daemonize, log to stderr\n"
		"  --log-file PATH        log to PATH (appended; reopened on\n"
		"                         SIGHUP), also in the foreground.\n"
		"                         Without it a daemonized kvmmd logs\n"
		"                         to syslog (facility daemon)\n"
		"  --telemetry auto|bpf|shm|off  access telemetry source (auto)\n"
		"  --telemetry-pin-root DIR  BPF map pins (/sys/fs/bpf/kvmm)\n"
		"  --telemetry-attach PATH   trace this binary's kvmm probes\n"
		"                         (repeatable; default libkvmm.so.1, kvmmd)\n"
		"  --profile NAME|PATH    cost model that telemetry corrects\n"
		"                         (h200-llama3-8b)\n"
		"  --host-mem SIZE        host DRAM tier for evicted blocks (0: none)\n"
		"  --host-numa-node N     put it on NUMA node N (default: the\n"
		"                         GPU's node, else the CPU's)\n"
		"  --nvme-path PATH       NVMe tier file or block device (O_DIRECT;\n"
		"                         needs --host-mem)\n"
		"  --nvme-size SIZE       NVMe tier size (the file is preallocated; an\n"
		"                         existing file keeps its size without it;\n"
		"                         shared by --cache-block-pages N,M by their\n"
		"                         weights, equally unless N:W gives them)\n"
		"  --nvme-format          format --nvme-path even if it holds\n"
		"                         something else than a kvmm tier\n"
		"                         (its contents are lost)\n"
		"  --cache-gpu-blocks N   cached blocks kept on the GPU, per size (half\n"
		"                         the pool, shared by the sizes' weights)\n"
		"  --nvme-admit-uses N    write a block to NVMe only if used N times (1)\n"
		"  --nvme-save-on-stop MS at a stop, move the GPU and host tiers'\n"
		"                         blocks to NVMe for up to MS ms, so the\n"
		"                         next start finds them (0: off, default)\n"
		"  --cache-block-pages N[:W][,M[:W]...]  cache blocks of these\n"
		"                         sizes only (2 x layers of each model to\n"
		"                         cache, 4 at most; each gets W/sum of the\n"
		"                         weights of --host-mem, --nvme-size and\n"
		"                         half the pool (--cache-gpu-blocks), W\n"
		"                         from 1 to 1000, 1 unless given; default:\n"
		"                         the first 4 sizes to publish or open a\n"
		"                         prefix, the first with the host tier)\n"
		"  --cache-policy P       cache eviction: asym (default), lru, lfu, arc\n"
		"  --policy-state FILE    keep what the policy learned in FILE across\n"
		"                         restarts (saved every 10 min and at stop;\n"
		"                         every cached block size's, one file)\n"
		"  --restore-mode plan|reload|recompute  lower-tier prefix blocks:\n"
		"                         cost model, always reload, or client\n"
		"                         recomputes (plan; only for clients that\n"
		"                         ask for per-block actions)\n"
		"  --cache-scope shared|uid|gid  who shares cached blocks: every\n"
		"                         client (shared, default) or only the\n"
		"                         processes of one uid, or of one group\n"
		"  --pin-quota N          blocks one session may pin (a quarter\n"
		"                         of the GPU cache)\n"
		"  --max-sessions N       live sessions in all (1024, the most;\n"
		"                         above 16), the last 16 for uid 0 and\n"
		"                         kvmmd's own; its fd budget follows it\n"
		"  --max-sessions-per-uid N  live sessions of one uid (256;\n"
		"                         0: no limit; uid 0 and kvmmd's own\n"
		"                         are exempt and keep the last 16 of\n"
		"                         the 1024 sessions for themselves)\n"
		"  --quarantine-per-uid N  processes of one uid that lost their\n"
		"                         sessions without BYE and live on,\n"
		"                         past which its new processes get no\n"
		"                         session (256; 1 to 4096)\n"
		"  --hello-timeout MS     close a connection that has not sent\n"
		"                         HELLO within MS (5000)\n"
		"  --max-table-entries-per-uid N  block-table entries of one\n"
		"                         uid's sessions together, 8 bytes each\n"
		"                         (0: max(2^20, 2 x pool pages), default)\n"
		"  --tenant-limit ID=TIER:N[,TIER:N...]|ID=none  most cached\n"
		"                         blocks a uid (gid under --cache-scope\n"
		"                         gid) may hold in each tier named (TIER\n"
		"                         gpu, host or nvme, any order); over it,\n"
		"                         its own least recently used go down\n"
		"                         (repeatable)\n"
		"  --metrics-listen [HOST:]PORT  serve Prometheus GET /metrics\n"
		"                         over HTTP (off; PORT alone binds\n"
		"                         127.0.0.1; [IPv6]:PORT; port 0 picks\n"
		"                         one and logs it); unauthenticated\n"
		"  --version, --help\n"
		"SIZE takes K, M, G or T suffixes (powers of 1024).  Relative\n"
		"paths are the start directory's, also once daemonized.\n");
}

static const struct option long_opts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "backend", required_argument, NULL, 'b' },
	{ "gpu-mem", required_argument, NULL, 'm' },
	{ "page-size", required_argument, NULL, 'p' },
	{ "cuda-device", required_argument, NULL, 'd' },
	{ "cpu", required_argument, NULL, 'C' },
	{ "revoke-timeout", required_argument, NULL, 'r' },
	{ "lend-wait", required_argument, NULL, KD_OPT_LEND_WAIT },
	{ "quota", required_argument, NULL, 'q' },
	{ "spin-us", required_argument, NULL, 'S' },
	{ "socket-mode", required_argument, NULL, 'M' },
	{ "socket-group", required_argument, NULL, KD_OPT_SOCKET_GROUP },
	{ "log-level", required_argument, NULL, 'l' },
	{ "config", required_argument, NULL, 'c' },
	{ "pid-file", required_argument, NULL, 'P' },
	{ "foreground", no_argument, NULL, 'f' },
	{ "log-file", required_argument, NULL, KD_OPT_LOG_FILE },
	{ "telemetry", required_argument, NULL, 'T' },
	{ "telemetry-pin-root", required_argument, NULL, 'R' },
	{ "telemetry-attach", required_argument, NULL, 'A' },
	{ "profile", required_argument, NULL, 'W' },
	{ "host-mem", required_argument, NULL, 'H' },
	{ "host-numa-node", required_argument, NULL, KD_OPT_HOST_NUMA_NODE },
	{ "nvme-path", required_argument, NULL, 'N' },
	{ "nvme-size", required_argument, NULL, 'Z' },
	{ "nvme-format", no_argument, NULL, KD_OPT_NVME_FORMAT },
	{ "cache-gpu-blocks", required_argument, NULL, 'G' },
	{ "nvme-admit-uses", required_argument, NULL, 'U' },
	{ "cache-policy", required_argument, NULL, 'Y' },
	{ "restore-mode", required_argument, NULL, KD_OPT_RESTORE_MODE },
	{ "cache-scope", required_argument, NULL, KD_OPT_CACHE_SCOPE },
	{ "policy-state", required_argument, NULL, KD_OPT_POLICY_STATE },
	{ "nvme-save-on-stop", required_argument, NULL, KD_OPT_NVME_SAVE },
	{ "pin-quota", required_argument, NULL, KD_OPT_PIN_QUOTA },
	{ "cache-block-pages", required_argument, NULL,
	  KD_OPT_CACHE_BLOCK_PAGES },
	{ "metrics-listen", required_argument, NULL, KD_OPT_METRICS_LISTEN },
	{ "tenant-limit", required_argument, NULL, KD_OPT_TENANT_LIMIT },
	{ "max-sessions-per-uid", required_argument, NULL,
	  KD_OPT_SESSIONS_PER_UID },
	{ "max-sessions", required_argument, NULL, KD_OPT_MAX_SESSIONS },
	{ "quarantine-per-uid", required_argument, NULL,
	  KD_OPT_QUARANTINE_PER_UID },
	{ "hello-timeout", required_argument, NULL, KD_OPT_HELLO_TIMEOUT },
	{ "max-table-entries-per-uid", required_argument, NULL,
	  KD_OPT_TABLE_ENTRIES },
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * One line of a config file, "name value", "name = value" or "name";
 * '#' starts a comment.  0, or -EINVAL with a line on stderr that says
 * where and why.
 */
static int config_line(struct kd_config *cfg, const char *path, int lineno,
		       char *line)
{
	const struct option *o;
	char *k, *v, *end;
	bool eq = false; /* an '=' between the name and the value */
	int err;

	k = line + strspn(line, " \t");
	end = k + strcspn(k, "#\r\n");
	*end = '\0';
	while (end > k && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	if (!*k)
		return 0;
	v = k + strcspn(k, " \t=");
	if (*v) {
		eq = *v == '=';
		*v++ = '\0';
		v += strspn(v, " \t");
		if (!eq && *v == '=') {
			eq = true;
			v++;
			v += strspn(v, " \t");
		}
	}
	/* one '=' at most: "gpu-mem = = 1M" was read as "gpu-mem 1M", every
	 * '=' and blank skipped, a typo taken for a value */
	if (*v == '=') {
		fprintf(stderr,
			"kvmmd: %s:%d: '%s': a second '=' (one separates the name from its value)\n",
			path, lineno, k);
		return -EINVAL;
	}
	for (o = long_opts; o->name; o++)
		if (!strcmp(o->name, k))
			break;
	if (!o->name) {
		fprintf(stderr, "kvmmd: %s:%d: unknown option '%s'\n", path,
			lineno, k);
		return -EINVAL;
	}
	if (o->val == 'c' || o->val == 'h' || o->val == 'V') {
		fprintf(stderr,
			"kvmmd: %s:%d: '%s' is for the command line only%s\n",
			path, lineno, k,
			o->val == 'c' ?
				" (a config file does not read another)" :
				"");
		return -EINVAL;
	}
	if (o->has_arg == no_argument && eq && !*v) {
		/* "foreground =" turned it on, as the name alone does */
		fprintf(stderr,
			"kvmmd: %s:%d: '%s' takes no value (got '=' and nothing after it): the name alone turns it on\n",
			path, lineno, k);
		return -EINVAL;
	}
	if (o->has_arg == no_argument && *v) {
		/* "foreground no" turned it on */
		fprintf(stderr,
			"kvmmd: %s:%d: '%s' takes no value (got '%s'): the name alone turns it on, leaving it out keeps it off\n",
			path, lineno, k, v);
		return -EINVAL;
	}
	if (o->has_arg == required_argument && !*v) {
		fprintf(stderr, "kvmmd: %s:%d: '%s' needs a value%s\n", path,
			lineno, k, eq ? " (nothing after '=')" : "");
		return -EINVAL;
	}
	/* the checks made once all options are read name this line too */
	cfg->src = (struct kd_opt_origin){ .file = path, .line = lineno };
	err = kd_option_apply(cfg, o->val, *v ? v : NULL);
	cfg->src = (struct kd_opt_origin){ 0 };
	if (err) /* the line above says why */
		fprintf(stderr, "kvmmd: %s:%d: bad value for '%s'\n", path,
			lineno, k);
	return err;
}

/* the largest config file kvmmd reads: 1 MiB, some 20000 lines */
#define KD_CONFIG_MAX_BYTES (1 << 20)

/*
 * A control byte in a line (not a tab, nor the CR and LF that end it):
 * a binary file given as --config was echoed to the terminal in the
 * "unknown option" line, ESC sequences and all.  Named by its value and
 * column instead.
 */
static int config_control_byte(const char *path, int lineno, const char *line)
{
	for (const unsigned char *p = (const unsigned char *)line; *p; p++) {
		if ((*p >= 0x20 && *p != 0x7f) || *p == '\t' || *p == '\r' ||
		    *p == '\n')
			continue;
		fprintf(stderr,
			"kvmmd: %s:%d: a control byte 0x%02x at column %zu (not a text file?)\n",
			path, lineno, *p,
			(size_t)(p - (const unsigned char *)line) + 1);
		return -EINVAL;
	}
	return 0;
}

/* Lines of any length (fgets' 511 bytes cut a long one in two, and its
 * tail was read as an option of its own), in a file of at most
 * KD_CONFIG_MAX_BYTES. */
static int read_config(struct kd_config *cfg, const char *path)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, err = 0, fd;
	size_t read_bytes = 0;
	struct stat st;
	FILE *f;

	/* O_NONBLOCK: a FIFO's open waited for a writer, and the start
	 * hung; a directory opened and failed to read "without a reason" */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		fprintf(stderr, "kvmmd: config %s: %s\n", path, strerror(-err));
		if (fd >= 0)
			close(fd);
		return err;
	}
	/* a file this large is no config file (a log or an image named by
	 * mistake): it was read whole, a line of it into memory at once,
	 * holding the start for as long as that took */
	if (S_ISREG(st.st_mode) && st.st_size > KD_CONFIG_MAX_BYTES) {
		fprintf(stderr,
			"kvmmd: config %s: %lld bytes, more than a config file's %d (not a config file?)\n",
			path, (long long)st.st_size, KD_CONFIG_MAX_BYTES);
		close(fd);
		return -EFBIG;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "kvmmd: config %s: not a regular file (%s)\n",
			path,
			S_ISDIR(st.st_mode)  ? "a directory" :
			S_ISFIFO(st.st_mode) ? "a FIFO" :
			S_ISSOCK(st.st_mode) ? "a socket" :
					       "a device");
		close(fd);
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		err = -errno;
		close(fd);
		fprintf(stderr, "kvmmd: config %s: %s\n", path, strerror(-err));
		return err;
	}
	errno = 0;
	while (!err && (n = getline(&line, &cap, f)) >= 0) {
		char *text = line;

		lineno++;
		read_bytes += (size_t)n;
		if (read_bytes > KD_CONFIG_MAX_BYTES) { /* it grew meanwhile */
			fprintf(stderr,
				"kvmmd: config %s: more than a config file's %d bytes (not a config file?)\n",
				path, KD_CONFIG_MAX_BYTES);
			err = -EFBIG;
			break;
		}
		if (strlen(line) != (size_t)n) {
			fprintf(stderr,
				"kvmmd: %s:%d: a NUL byte (not a text file?)\n",
				path, lineno);
			err = -EINVAL;
			break;
		}
		/* an editor's UTF-8 byte order mark was "unknown option
		 * '<BOM>backend'", the mark unseen */
		if (lineno == 1 && !strncmp(text, "\xef\xbb\xbf", 3))
			text += 3;
		err = config_control_byte(path, lineno, text);
		if (!err)
			err = config_line(cfg, path, lineno, text);
	}
	if (!err && ferror(f)) {
		err = errno ? -errno : -EIO;
		fprintf(stderr, "kvmmd: config %s: cannot read it: %s\n", path,
			strerror(-err));
	}
	free(line);
	fclose(f);
	return err;
}

/*
 * Fork into the background; the parent exits once the child reports,
 * with the status the child would have exited with in the foreground
 * (its report: 0 ready, 2 a bad option found at start, 1 any other
 * failure; the child already said why on the stderr they share).  It
 * exited 1 for all of them, so a script could not tell a bad option
 * from a failure to retry.  A child that dies without a report is 1.
 */
static int daemonize(int *ready_fd)
{
	int p[2];
	pid_t pid;
	char c = 1;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1 || (c != 0 && c != 2))
			c = 1;
		_exit(c);
	}
	close(p[0]);
	setsid();
	if (fork() > 0)
		_exit(0);
	if (chdir("/") < 0) {
		/* stay where we are */
	}
	*ready_fd = p[1];
	return 0;
}

/* 0, or -1 with errno set */
/*
 * Written to a temporary name and renamed over the path, so that whoever
 * reads the pid file (an init script, a test polling for it) sees either
 * no file or the whole pid, never an empty or half-written one.
 */
static int write_pid_file(const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;
	int bad, e;

	if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >=
	    (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	f = fopen(tmp, "we");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	bad = ferror(f);
	if (fclose(f) || bad || rename(tmp, path)) {
		e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

/* Under a Type=notify systemd unit: the control socket accepts now. */
static void notify_ready(const struct kd_config *cfg)
{
	char state[256];
	int err;

	snprintf(state, sizeof(state), "READY=1\nMAINPID=%d\nSTATUS=serving %s",
		 (int)getpid(), cfg->socket_path);
	err = kd_sd_notify(state);
	if (err)
		vmm_log(VMM_LOG_WARN,
			"NOTIFY_SOCKET: %s (systemd is not told that kvmmd is ready)",
			strerror(-err));
}

/*
 * One line for a word getopt did not take (the whole --help, 70 lines,
 * buried it): unknown, an abbreviation of several options, or one
 * without its value.
 */
static void bad_option(const char *word, bool no_value)
{
	size_t len = strcspn(word, "=");
	int matches = 0;
	char shortopt[3] = { '-', (char)optopt, 0 };

	/* a short option may sit in a cluster (-fx): name it alone */
	if (word[0] == '-' && word[1] != '-' && optopt) {
		word = shortopt;
		len = 2;
	}
	if (no_value) {
		fprintf(stderr,
			"kvmmd: option '%s' needs a value (see kvmmd --help)\n",
			word);
		return;
	}
	for (const struct option *o = long_opts; o->name && word[1] == '-'; o++)
		matches += len > 2 && !strncmp(o->name, word + 2, len - 2);
	fprintf(stderr, "kvmmd: %s option '%.*s' (see kvmmd --help)\n",
		matches > 1 ? "ambiguous" : "unknown", (int)len, word);
}

int main(int argc, char **argv)
{
	struct kd_config cfg;
	struct kd_daemon d;
	int c, err, ready_fd = -1;
	bool attach_from_cli = false;
	char ok = 0;

	kd_config_defaults(&cfg);
	/* this executable is kvmmd: its probes are this daemon's, another
	 * kvmmd running it is another daemon (ebpf/telemetry.h) */
	cfg.telemetry_own_exe_self_only = true;
	/*
	 * The config files first, so the command line overrides them, found
	 * by the same getopt_long() that reads the options after: a scan for
	 * "--config" missed the abbreviations it takes (--conf FILE), and
	 * the file was skipped without a word.  Its errors wait for the
	 * second pass.
	 */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fhV", long_opts, NULL)) != -1)
		if (c == 'c' && read_config(&cfg, optarg))
			return 2;
	optind = 0; /* GNU getopt: start over, from scratch */
	/* ':' first: a missing value is ':', not '?' (bad_option()) */
	while ((c = getopt_long(argc, argv, ":fhV", long_opts, NULL)) != -1) {
		if (c == 'c')
			continue;
		/* a repeatable option's list on the command line replaces
		 * the config file's, as any other option does; --quota and
		 * --tenant-limit replace the file's entry for their id */
		if (c == 'A' && !attach_from_cli) {
			cfg.nr_telemetry_attach = 0;
			attach_from_cli = true;
		}
		if (c == 'V') {
			printf("kvmmd %s (ABI %d.%d)\n", KVMM_VERSION,
			       KVMM_ABI_MAJOR, KVMM_ABI_MINOR);
			return 0;
		}
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == '?' || c == ':') {
			bad_option(optind > 1 ? argv[optind - 1] : "",
				   c == ':');
			return 2;
		}
		if (kd_option_apply(&cfg, c, optarg))
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "kvmmd: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	if (kd_config_check(&cfg))
		return 2;
	if (!cfg.foreground && kd_config_paths_absolute(&cfg))
		return 2;
	err = kd_log_start(&cfg); /* its lines said why */
	if (err)
		return kd_path_err_is_operators(err) ? 2 : 1;
	/*
	 * A kvmmd that will take SIGHUP (to reopen --log-file, or to ignore
	 * it once daemonized) ignores it until kd_log_ready() sets that up,
	 * after the ready byte: the parent of a daemonized start exits at
	 * that byte, and a HUP sent at once (logrotate, a test) found the
	 * default action and stopped kvmmd, its socket left behind.
	 */
	if (!cfg.foreground || cfg.log_file[0])
		signal(SIGHUP, SIG_IGN);
	if (!cfg.foreground && daemonize(&ready_fd)) {
		perror("kvmmd: daemonize");
		return 1;
	}
	err = kd_daemon_start(&d, &cfg);
	if (err) {
		/* an option the start found bad (the page size it needed was
		 * the backend's): exit 2, as for the others; the parent of a
		 * daemonized start exits with it too */
		char status = d.bad_option ? 2 : 1;

		/* a bad option's own line said what is wrong; its errno's
		 * text (ENOTEMPTY for a foreign NVMe file) would not */
		if (d.bad_option)
			fprintf(stderr,
				"kvmmd: cannot start: an option is wrong (above)\n");
		else
			fprintf(stderr, "kvmmd: cannot start: %s\n",
				strerror(-err));
		if (ready_fd >= 0 && write(ready_fd, &status, 1) < 0)
			return 1;
		return status;
	}
	/* a pid file that cannot be written fails the start: whoever asked
	 * for it (an init script) would otherwise lose track of us.  A path
	 * the operator must change (a directory, a missing directory) is
	 * exit 2, as any bad option (it was 1: a unit restarted it in vain) */
	if (cfg.pid_file[0] && write_pid_file(cfg.pid_file)) {
		int e = errno;
		char status;

		kd_daemon_stop_refused(&d);
		status = (char)kd_path_refused("--pid-file", cfg.pid_file, e);
		if (ready_fd >= 0 && write(ready_fd, &status, 1) < 0)
			return 1;
		return status;
	}
	notify_ready(&cfg);
	if (ready_fd >= 0) {
		if (write(ready_fd, &ok, 1) < 0) {
			/* parent gone; keep running */
		}
		close(ready_fd);
	}
	kd_log_ready(&cfg);
	err = kd_daemon_run(&d);
	kd_sd_notify("STOPPING=1");
	kd_daemon_stop(&d);
	if (cfg.pid_file[0])
		unlink(cfg.pid_file);
	return err ? 1 : 0;
}
