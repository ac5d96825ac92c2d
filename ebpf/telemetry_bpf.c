// SPDX-License-Identifier: MIT
/*
 * BPF loader: the BPF half of ebpf/telemetry.h.
 *
 * tel_bpf_open() makes sure bpffs is mounted, takes the pin root (an
 * exclusive flock on its directory, held until close: one loader per pin
 * root, so a second kvmmd cannot wipe a running one's pins), removes the
 * pins another layout version (or a loader that died) left under it, opens
 * the skeleton with pin_root_path = <pin_root>/v<KVMM_TEL_PIN_VERSION> so
 * libbpf pins every map by name there, loads it and attaches each USDT
 * program to every target that has the probe.  Failure at any step leaves
 * a one-line reason in t->reason for the fallback message.  Walks use
 * bpf_map_lookup_batch() so a walk of 64k blocks is a handful of
 * syscalls; a loader's poll reads the entries the kvmm_dirty ring names
 * one by one instead (telemetry_delta.c), and bumps the poll epoch the
 * programs mark entries with.
 * libbpf's own messages go to the debug log; the last warning is kept to
 * explain a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ebpf/telemetry_int.h"
#include "ebpf/telemetry_targets.h"
#include "install_paths.h" /* KVMM_LIBDIR */
#include "vmm/vmm.h"

#if HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ebpf/kvmm.skel.h"

#define BPF_FS_MAGIC_NR 0xcafe4a11
#define TRACEFS_MAGIC_NR 0x74726163
#define TEL_BATCH 4096
#define TEL_MAX_LINKS (TEL_MAX_TARGETS * 8)
/* How long a loader waits for a pin root another process holds (a
 * tel_pins_remove_stale() removing it lets go within it). */
#define TEL_PIN_ROOT_WAIT_MS 1000

struct tel_bpf {
	struct kvmm_bpf *skel;
	struct bpf_link *links[TEL_MAX_LINKS];
	unsigned int nr_links;
	struct ring_buffer *rb;
	/* the loader's: kvmm_dirty, and what tel_bpf_dirty_drain() calls
	 * (only the poll touches these, on its thread or the loop) */
	struct ring_buffer *dirty_rb;
	tel_dirty_fn dirty_fn;
	void *dirty_arg;
	uint64_t epoch; /* kvmm_poll_epoch as we set it last */
	/* the maps we read: the skeleton's, or pins another loader made */
	int blocks_fd, hist_fd, counters_fd;
	bool own_fds; /* opened from pins (closed by us) */
	int lock_fd; /* the pin root, flocked while we own it (-1: reader) */
	struct tel *owner;
	int ncpus;
	void *keys, *vals; /* batch buffers */
};

static char libbpf_last[256];

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	char buf[512];
	size_t n;

	if (getenv("KVMM_TEL_DEBUG")) /* the verifier log, for developers */
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = 0;
	if (level == LIBBPF_WARN)
		snprintf(libbpf_last, sizeof(libbpf_last), "%.200s", buf);
	tel_log(VMM_LOG_DEBUG, "libbpf: %s", buf);
	return 0;
}

static bool fs_is(const char *path, long magic)
{
	struct statfs st;

	return !statfs(path, &st) && (long)st.f_type == magic;
}

/* Mount bpffs at /sys/fs/bpf if the pin root lives there and it is not. */
static int ensure_bpffs(struct tel *t)
{
	const char *mnt = "/sys/fs/bpf";

	if (strncmp(t->pin_root, mnt, strlen(mnt)) == 0 &&
	    !fs_is(mnt, BPF_FS_MAGIC_NR) && mount("bpf", mnt, "bpf", 0, NULL) &&
	    errno != EBUSY) {
		int err = -errno;

		snprintf(t->reason, sizeof(t->reason),
			 "no bpffs at %s (mount: %s)", mnt, strerror(-err));
		return err;
	}
	return 0;
}

/* uprobes go through the perf PMU; tracefs only matters without it. */
static void ensure_tracefs(void)
{
	const char *mnt = "/sys/kernel/tracing";

	if (!access("/sys/bus/event_source/devices/uprobe/type", R_OK))
		return;
	if (!fs_is(mnt, TRACEFS_MAGIC_NR))
		(void)mount("tracefs", mnt, "tracefs", 0, NULL);
}

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Remove a pin directory's entries (pins are files, no deeper levels). */
static int rm_pin_dir(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);
	int err = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (unlink(path) && !err)
			err = -errno;
	}
	closedir(d);
	if (rmdir(dir) && !err)
		err = -errno;
	return err;
}

int tel_pins_remove_all(const char *pin_root)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(pin_root);
	int err = 0, r;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", pin_root, de->d_name);
		if (lstat(path, &st))
			continue;
		r = S_ISDIR(st.st_mode) ? rm_pin_dir(path) :
					  (unlink(path) ? -errno : 0);
		if (r && !err)
			err = r;
	}
	closedir(d);
	if (rmdir(pin_root) && !err)
		err = -errno;
	return err;
}

/* The process holding a flock on the file st names (/proc/locks), or 0. */
static pid_t lock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	unsigned int maj, min;
	unsigned long ino;
	char line[256];
	pid_t pid = 0;
	int p;

	if (!f)
		return 0;
	while (!pid && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*d: FLOCK %*s WRITE %d %x:%x:%lu", &p, &maj,
			   &min, &ino) == 4 &&
		    ino == st->st_ino && maj == major(st->st_dev) &&
		    min == minor(st->st_dev))
			pid = p;
	}
	fclose(f);
	return pid;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/*
 * Take the pin root: an exclusive flock on its directory (bpffs holds no
 * regular files to lock, but a directory's fd takes one), released when
 * the fd closes, so a loader that dies lets go by itself.  The fd, or
 * -EBUSY (*holder: its process, 0 if unknown) while another loader holds
 * it, or -errno.  With create (a loader) the root is made first, and a
 * root held is tried again for up to wait_ms: tel_pins_remove_stale()
 * holds it while it removes it, a short while; without, a missing root
 * is -ENOENT.  A loader that stops removes the root before it lets go,
 * so a lock taken on a directory no longer at that path (or refused on
 * one) is tried again on the new one.
 */
static int lock_pin_root(const char *root, bool create, int wait_ms,
			 pid_t *holder)
{
	struct stat st, now;
	int tries = 0, fd, err;

	while (tries++ < 16) {
		if (create) {
			err = mkdir_p(root);
			if (err)
				return err;
		}
		fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT && create)
				continue; /* removed since mkdir */
			return -errno;
		}
		if (fstat(fd, &st)) {
			err = -errno;
			close(fd);
			return err;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			err = errno == EWOULDBLOCK ? -EBUSY : -errno;
			close(fd);
			if (err == -EBUSY &&
			    (stat(root, &now) || !same_file(&st, &now)))
				continue; /* its owner is going away */
			if (err == -EBUSY && wait_ms > 0) {
				/* a sweeper removing it, or a loader */
				struct timespec ts = { 0, 10 * 1000000L };

				nanosleep(&ts, NULL);
				wait_ms -= 10;
				tries--;
				continue;
			}
			if (err == -EBUSY && holder)
				*holder = lock_holder(&st);
			return err;
		}
		if (!stat(root, &now) && same_file(&st, &now))
			return fd;
		close(fd);
		if (!create)
			return -ENOENT;
	}
	return -EAGAIN;
}

/*
 * Everything under a pin root we hold is stale: other versions were made
 * for another layout, and our own version's pins belong to a loader that
 * is gone (a live one would hold the root).
 */
static void remove_stale_pins(struct tel *t)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(t->pin_root);

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", t->pin_root, de->d_name);
		if (lstat(path, &st))
			continue;
		if (S_ISDIR(st.st_mode) ? rm_pin_dir(path) : unlink(path))
			tel_log(VMM_LOG_WARN, "cannot remove stale pin %s: %s",
				path, strerror(errno));
		else
			tel_log(VMM_LOG_INFO, "removed stale pin %s", path);
	}
	closedir(d);
}

int tel_pins_remove_stale(const char *pin_root)
{
	int fd = lock_pin_root(pin_root, false, 0, NULL), err;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	err = tel_pins_remove_all(pin_root);
	close(fd);
	return err;
}

/*
 * The default targets (ebpf/telemetry_targets.c): libkvmm.so.1 in LIBDIR,
 * next to us and in the usual places, and us.  With no library among
 * them only our own probes can be traced, which BPF telemetry would not
 * otherwise show: say so, with every place tried.
 */
static int default_targets(char paths[][PATH_MAX], int max)
{
	char exe[PATH_MAX], tried[1024];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int nr;

	if (n <= 0)
		return 0;
	exe[n] = 0;
	nr = tel_default_targets(KVMM_LIBDIR, exe, paths, max, tried,
				 sizeof(tried));
	if (nr < 2)
		tel_log(VMM_LOG_WARN,
			"no libkvmm.so.1 to trace clients in (tried %s): "
			"only %s's probes attach; name the library with "
			"--telemetry-attach",
			tried, exe);
	return nr;
}

/*
 * Attach every program to every target that has its probe.  A default
 * target lacks some probes (kvmmd has no `extend`), or all of them; one
 * the caller named (kvmmd --telemetry-attach) must have at least one:
 * else a wrong path would lose every probe of that binary with BPF
 * telemetry looking healthy.  0, or -errno with t->reason naming it.
 */
static int attach_all(struct tel *t, const struct tel_opts *o)
{
	static char paths[TEL_MAX_TARGETS][PATH_MAX];
	struct tel_bpf *b = t->bpf;
	struct bpf_program *prog;
	pid_t all = o->pid > 0 ? o->pid : -1;
	char self[PATH_MAX];
	bool have_self;
	int nr = 0, i;

	if (o->targets) {
		for (; nr < TEL_MAX_TARGETS && o->targets[nr]; nr++)
			snprintf(paths[nr], PATH_MAX, "%s", o->targets[nr]);
	} else {
		nr = default_targets(paths, TEL_MAX_TARGETS);
	}
	have_self = o->own_exe_self_only && realpath("/proc/self/exe", self);
	for (i = 0; i < nr; i++) {
		unsigned int here = 0;
		int first_err = 0;
		char real[PATH_MAX];
		/*
		 * uprobes filtered by pid count the threads that share its
		 * memory: this process, not its children or another process
		 * running the same file.
		 */
		pid_t pid = have_self && realpath(paths[i], real) &&
					    !strcmp(real, self) ?
				    getpid() :
				    all;

		bpf_object__for_each_program(prog, b->skel->obj)
		{
			/* kvmm_access -> probe "access" */
			const char *probe = bpf_program__name(prog) + 5;
			struct bpf_link *l;

			if (b->nr_links == TEL_MAX_LINKS)
				break;
			l = bpf_program__attach_usdt(prog, pid, paths[i],
						     "kvmm", probe, NULL);
			if (!l) { /* that binary lacks the probe */
				if (!first_err)
					first_err = -errno;
				continue;
			}
			b->links[b->nr_links++] = l;
			here++;
		}
		tel_log(VMM_LOG_INFO, "attached %u probes to %s%s", here,
			paths[i], pid == all ? "" : " (this process only)");
		if (here || !o->targets)
			continue;
		if (access(paths[i], R_OK))
			snprintf(t->reason, sizeof(t->reason),
				 "--telemetry-attach %.180s: %.40s", paths[i],
				 strerror(errno));
		else if (first_err == -ENOENT || !first_err)
			snprintf(t->reason, sizeof(t->reason),
				 "--telemetry-attach %.150s: no kvmm probe in "
				 "it (not a binary or library with libkvmm's "
				 "probes?)",
				 paths[i]);
		else
			snprintf(t->reason, sizeof(t->reason),
				 "--telemetry-attach %.150s: no kvmm probe "
				 "attached: %.60s",
				 paths[i], strerror(-first_err));
		return first_err ? first_err : -ENOENT;
	}
	return 0;
}

static int on_dirty(void *ctx, void *data, size_t size)
{
	struct tel_bpf *b = ctx;
	const struct kvmm_dirty_rec *d = data;

	if (size < sizeof(*d))
		return 0;
	return b->dirty_fn(b->dirty_arg, &d->key, d->epoch);
}

/*
 * kvmm_dirty's size: room for a quarter of the map's entries (32 bytes a
 * record with the ring's header), a power of two of at least 64 KiB.
 * Past a quarter changed, a walk of the map costs about as much as
 * reading them one by one, and a full ring makes the poll walk.
 */
static __u32 dirty_ring_bytes(__u32 max_blocks)
{
	uint64_t want = (uint64_t)(max_blocks / 4) * 32;
	__u32 bytes = 64 * 1024;

	while (bytes < want && bytes < (1u << 30))
		bytes <<= 1;
	return bytes;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct tel *t = ctx;

	if (size >= sizeof(struct kvmm_tel_event_rec) && t->sink.event)
		t->sink.event(t->sink.arg, data);
	return 0;
}

/*
 * Tell the programs who the loader is (its pid in its own pid namespace,
 * which BPF finds by the namespace's device and inode): only its access
 * records may say their hashes are the cache's names (KVMM_ACCESS_NAMED).
 * Without the namespace's identity no record may.
 */
static void set_loader(struct kvmm_bpf *skel)
{
	struct stat st;

	if (stat("/proc/self/ns/pid", &st)) {
		tel_log(VMM_LOG_WARN,
			"no pid namespace identity (%s): kvmmd's own access records are counted as its uid's",
			strerror(errno));
		return;
	}
	skel->rodata->loader_pidns_dev = st.st_dev;
	skel->rodata->loader_pidns_ino = st.st_ino;
	skel->rodata->loader_tgid = (__u32)getpid();
}

/* The reason a second loader on a held pin root gives (tel_bpf_open()). */
#define TEL_ROOT_BUSY_FMT                                 \
	"pin root %.150s is in use by another loader%s: " \
	"give each kvmmd its own --telemetry-pin-root"

int tel_bpf_open(struct tel *t, const struct tel_opts *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct tel_bpf *b;
	pid_t holder = 0;
	int err, lock_fd;

	libbpf_set_print(libbpf_print);
	libbpf_last[0] = 0;
	snprintf(t->pin_dir, sizeof(t->pin_dir), "%s/v%d", t->pin_root,
		 KVMM_TEL_PIN_VERSION);
	err = ensure_bpffs(t);
	if (err)
		return err;
	ensure_tracefs();
	lock_fd =
		lock_pin_root(t->pin_root, true, TEL_PIN_ROOT_WAIT_MS, &holder);
	if (lock_fd == -EBUSY) {
		char who[sizeof(" (process -2147483648)")] = "";

		/* The root's name is what gets cut (to 150 bytes), never the
		 * holder nor the advice at the end, which the longest of
		 * each fill exactly (a root of 160 used to cut the option's
		 * name). */
		_Static_assert(sizeof(TEL_ROOT_BUSY_FMT) - sizeof("%.150s%s") +
					       150 + sizeof(who) <=
				       sizeof(t->reason),
			       "a held pin root's reason is cut");
		if (holder > 0)
			snprintf(who, sizeof(who), " (process %d)",
				 (int)holder);
		snprintf(t->reason, sizeof(t->reason), TEL_ROOT_BUSY_FMT,
			 t->pin_root, who);
		return lock_fd;
	}
	if (lock_fd < 0) {
		snprintf(t->reason, sizeof(t->reason), "cannot take %.200s: %s",
			 t->pin_root, strerror(-lock_fd));
		return lock_fd;
	}
	remove_stale_pins(t);
	err = mkdir_p(t->pin_dir);
	if (err) {
		snprintf(t->reason, sizeof(t->reason),
			 "cannot create %.200s: %s", t->pin_dir,
			 strerror(-err));
		goto err_pins;
	}

	b = calloc(1, sizeof(*b));
	if (!b) {
		err = -ENOMEM;
		goto err_pins;
	}
	b->owner = t;
	b->lock_fd = lock_fd;
	b->ncpus = libbpf_num_possible_cpus();
	b->keys = malloc(TEL_BATCH * TEL_KEY_MAX);
	b->vals = malloc(TEL_BATCH * sizeof(struct kvmm_hist));
	if (b->ncpus <= 0 || !b->keys || !b->vals) {
		err = b->ncpus <= 0 ? b->ncpus : -ENOMEM;
		snprintf(t->reason, sizeof(t->reason), "out of memory");
		goto err_free;
	}
	oo.pin_root_path = t->pin_dir;
	b->skel = kvmm_bpf__open_opts(&oo);
	if (!b->skel) {
		err = -errno;
		snprintf(t->reason, sizeof(t->reason), "BPF open failed: %s",
			 strerror(-err));
		goto err_free;
	}
	if (o->max_blocks)
		bpf_map__set_max_entries(b->skel->maps.kvmm_blocks,
					 o->max_blocks);
	bpf_map__set_max_entries(b->skel->maps.kvmm_dirty,
				 dirty_ring_bytes(bpf_map__max_entries(
					 b->skel->maps.kvmm_blocks)));
	set_loader(b->skel);
	err = kvmm_bpf__load(b->skel);
	if (err) {
		snprintf(t->reason, sizeof(t->reason), "BPF load failed: %s%s",
			 strerror(-err),
			 err == -EPERM ?
				 " (needs root or CAP_BPF+CAP_PERFMON)" :
				 "");
		if (libbpf_last[0] && err != -EPERM)
			snprintf(t->reason + strlen(t->reason),
				 sizeof(t->reason) - strlen(t->reason),
				 " (%.120s)", libbpf_last);
		goto err_skel;
	}
	b->blocks_fd = bpf_map__fd(b->skel->maps.kvmm_blocks);
	b->hist_fd = bpf_map__fd(b->skel->maps.kvmm_hist);
	b->counters_fd = bpf_map__fd(b->skel->maps.kvmm_counters);
	/* epoch 0 is no poll's: every entry's first access queues it */
	b->epoch = 1;
	__atomic_store_n(&b->skel->bss->kvmm_poll_epoch, b->epoch,
			 __ATOMIC_SEQ_CST);
	b->dirty_rb = ring_buffer__new(bpf_map__fd(b->skel->maps.kvmm_dirty),
				       on_dirty, b, NULL);
	if (!b->dirty_rb) {
		err = -errno;
		snprintf(t->reason, sizeof(t->reason),
			 "dirty ring setup failed: %s", strerror(-err));
		goto err_skel;
	}
	t->bpf = b;
	err = attach_all(t, o);
	if (err)
		goto err_detach;
	b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.kvmm_events),
				 on_event, t, NULL);
	if (!b->rb) {
		err = -errno;
		snprintf(t->reason, sizeof(t->reason),
			 "ring buffer setup failed: %s", strerror(-err));
		goto err_detach;
	}
	tel_log(VMM_LOG_INFO, "BPF telemetry: %u attachments, maps in %s",
		b->nr_links, t->pin_dir);
	return 0;

err_detach:
	t->bpf = NULL;
	while (b->nr_links)
		bpf_link__destroy(b->links[--b->nr_links]);
	ring_buffer__free(b->dirty_rb);
err_skel:
	kvmm_bpf__destroy(b->skel);
err_free:
	free(b->keys);
	free(b->vals);
	free(b);
err_pins: /* ours to remove: we still hold the root */
	rm_pin_dir(t->pin_dir);
	rmdir(t->pin_root);
	close(lock_fd);
	return err;
}

static int open_pin(struct tel *t, const char *name, int *fd)
{
	char path[TEL_PIN_ROOT_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", t->pin_dir, name);
	*fd = bpf_obj_get(path);
	if (*fd < 0) {
		int err = -errno;

		snprintf(t->reason, sizeof(t->reason),
			 "no pinned map %.200s: %s%s", path, strerror(-err),
			 err == -ENOENT ? " (is kvmmd running with BPF "
					  "telemetry?)" :
					  "");
		return err;
	}
	return 0;
}

int tel_bpf_open_pinned(struct tel *t)
{
	struct tel_bpf *b;
	int err;

	snprintf(t->pin_dir, sizeof(t->pin_dir), "%s/v%d", t->pin_root,
		 KVMM_TEL_PIN_VERSION);
	err = ensure_bpffs(t);
	if (err)
		return err;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->blocks_fd = b->hist_fd = b->counters_fd = -1;
	b->lock_fd = -1;
	b->own_fds = true;
	b->ncpus = libbpf_num_possible_cpus();
	b->keys = malloc(TEL_BATCH * TEL_KEY_MAX);
	b->vals = malloc(TEL_BATCH * sizeof(struct kvmm_hist));
	if (b->ncpus <= 0 || !b->keys || !b->vals) {
		err = b->ncpus <= 0 ? b->ncpus : -ENOMEM;
		goto err_free;
	}
	err = open_pin(t, "kvmm_blocks", &b->blocks_fd);
	if (!err)
		err = open_pin(t, "kvmm_hist", &b->hist_fd);
	if (!err)
		err = open_pin(t, "kvmm_counters", &b->counters_fd);
	if (err)
		goto err_close;
	t->bpf = b;
	return 0;

err_close:
	if (b->blocks_fd >= 0)
		close(b->blocks_fd);
	if (b->hist_fd >= 0)
		close(b->hist_fd);
err_free:
	free(b->keys);
	free(b->vals);
	free(b);
	return err;
}

static __u32 map_id(int fd)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* The id of the map pinned at path; 0 with errno set if none. */
static __u32 pinned_map_id(const char *path)
{
	int fd = bpf_obj_get(path);
	__u32 id;

	if (fd < 0)
		return 0;
	id = map_id(fd);
	close(fd);
	return id;
}

/*
 * Whether the pin at path is still the map we hold: we hold the root, but
 * a loader that does not take it (an older kvmmd, bpftool) may have pinned
 * another one there, and that one is not ours to remove.
 */
static bool pin_is_ours(const char *path, int fd)
{
	__u32 id = pinned_map_id(path);

	return id && id == map_id(fd);
}

void tel_bpf_close(struct tel *t, bool keep_pins)
{
	struct tel_bpf *b = t->bpf;
	struct bpf_map *m;

	if (!b)
		return;
	if (b->own_fds) { /* a reader of someone else's pins */
		close(b->blocks_fd);
		close(b->hist_fd);
		close(b->counters_fd);
		goto out_free;
	}
	ring_buffer__free(b->rb);
	while (b->nr_links)
		bpf_link__destroy(b->links[--b->nr_links]);
	ring_buffer__free(b->dirty_rb);
	if (!keep_pins) {
		bpf_object__for_each_map(m, b->skel->obj)
		{
			const char *path = bpf_map__pin_path(m);

			if (!path)
				continue;
			if (pin_is_ours(path, bpf_map__fd(m)))
				bpf_map__unpin(m, NULL);
			else
				tel_log(VMM_LOG_WARN,
					"%s is not our map any more: left there",
					path);
		}
		rmdir(t->pin_dir);
		rmdir(t->pin_root); /* fails while other versions live there */
	}
	kvmm_bpf__destroy(b->skel);
	/* last: until the root is removed nobody else may take it */
	close(b->lock_fd);
out_free:
	free(b->keys);
	free(b->vals);
	free(b);
	t->bpf = NULL;
}

int tel_pinned_check(const struct tel *t)
{
	static const char *const names[] = { "kvmm_blocks", "kvmm_hist",
					     "kvmm_counters" };
	char path[TEL_PIN_ROOT_MAX + 64];
	const struct tel_bpf *b = t ? t->bpf : NULL;
	int fds[3];
	__u32 id;
	size_t i;

	if (!b || !b->own_fds)
		return -EINVAL;
	fds[0] = b->blocks_fd;
	fds[1] = b->hist_fd;
	fds[2] = b->counters_fd;
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", t->pin_dir, names[i]);
		errno = 0;
		id = pinned_map_id(path);
		if (!id)
			return errno ? -errno : -ENOENT;
		if (id != map_id(fds[i]))
			return -ESTALE;
	}
	return 0;
}

unsigned int tel_bpf_attachments(const struct tel *t)
{
	return t->bpf ? t->bpf->nr_links : 0;
}

/* Walk a hash map in batches of TEL_BATCH, calling emit per element. */
static int read_batched(int fd, size_t ksz, size_t vsz, void *keys, void *vals,
			int (*emit)(void *arg, const void *k, const void *v),
			void *arg)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	uint64_t in[2], out[2];
	bool first = true;
	__u32 n, i;
	int err, r;

	for (;;) {
		n = TEL_BATCH;
		err = bpf_map_lookup_batch(fd, first ? NULL : in, out, keys,
					   vals, &n, &bo);
		if (err && errno != ENOENT)
			return -errno;
		for (i = 0; i < n; i++) {
			r = emit(arg, (char *)keys + i * ksz,
				 (char *)vals + i * vsz);
			if (r)
				return r;
		}
		if (err) /* ENOENT: that was the last batch */
			return 0;
		memcpy(in, out, sizeof(in));
		first = false;
	}
}

struct emit_ctx {
	tel_bpf_block_fn bfn;
	tel_hist_fn hfn;
	void *arg;
};

static int emit_block(void *arg, const void *k, const void *v)
{
	struct emit_ctx *c = arg;

	return c->bfn(c->arg, k, v);
}

static int emit_hist(void *arg, const void *k, const void *v)
{
	struct emit_ctx *c = arg;

	return c->hfn(c->arg, k, v);
}

int tel_bpf_read_blocks(struct tel *t, tel_bpf_block_fn fn, void *arg)
{
	struct emit_ctx c = { .bfn = fn, .arg = arg };
	struct tel_bpf *b = t->bpf;

	/* the stats lead each kvmm_block_entry */
	return read_batched(b->blocks_fd, sizeof(struct kvmm_block_key),
			    sizeof(struct kvmm_block_entry), b->keys, b->vals,
			    emit_block, &c);
}

bool tel_bpf_has_dirty(const struct tel *t)
{
	return t->bpf && t->bpf->dirty_rb;
}

uint64_t tel_bpf_epoch_next(struct tel *t)
{
	struct tel_bpf *b = t->bpf;

	/* seq_cst: the ring is read, and entries looked up, after it */
	__atomic_store_n(&b->skel->bss->kvmm_poll_epoch, ++b->epoch,
			 __ATOMIC_SEQ_CST);
	return b->epoch;
}

int tel_bpf_dirty_drain(struct tel *t, tel_dirty_fn fn, void *arg)
{
	struct tel_bpf *b = t->bpf;
	int n;

	b->dirty_fn = fn;
	b->dirty_arg = arg;
	n = ring_buffer__consume(b->dirty_rb);
	return n < 0 ? n : 0;
}

uint64_t tel_bpf_dirty_dropped(const struct tel *t)
{
	return __atomic_load_n(&t->bpf->skel->bss->kvmm_dirty_dropped,
			       __ATOMIC_ACQUIRE);
}

int tel_bpf_lookup_block(struct tel *t, const struct kvmm_block_key *key,
			 struct kvmm_block_stats *out)
{
	struct kvmm_block_entry e;

	if (bpf_map_lookup_elem(t->bpf->blocks_fd, key, &e))
		return -errno;
	*out = e.stats;
	return 0;
}

int tel_bpf_read_hist(struct tel *t, tel_hist_fn fn, void *arg)
{
	struct emit_ctx c = { .hfn = fn, .arg = arg };
	struct tel_bpf *b = t->bpf;

	return read_batched(b->hist_fd, sizeof(struct kvmm_hist_key),
			    sizeof(struct kvmm_hist), b->keys, b->vals,
			    emit_hist, &c);
}

int tel_bpf_read_counters(struct tel *t, struct kvmm_counters *out)
{
	struct tel_bpf *b = t->bpf;
	size_t stride = (sizeof(*out) + 7) & ~(size_t)7;
	size_t words = sizeof(*out) / sizeof(uint64_t), w;
	char *vals = calloc(b->ncpus, stride);
	__u32 zero = 0;
	int cpu;

	if (!vals)
		return -ENOMEM;
	memset(out, 0, sizeof(*out));
	if (bpf_map_lookup_elem(b->counters_fd, &zero, vals)) {
		int err = -errno;

		free(vals);
		return err;
	}
	for (cpu = 0; cpu < b->ncpus; cpu++) {
		const uint64_t *v = (const uint64_t *)(vals + cpu * stride);

		for (w = 0; w < words; w++)
			((uint64_t *)out)[w] += v[w];
	}
	free(vals);
	return 0;
}

int tel_bpf_drain_events(struct tel *t)
{
	int n;

	if (!t->bpf->rb) /* a pin reader leaves the events to the daemon */
		return 0;
	n = ring_buffer__consume(t->bpf->rb);

	return n < 0 ? n : 0;
}

#else /* !HAVE_BPF */

int tel_bpf_open_pinned(struct tel *t)
{
	snprintf(t->reason, sizeof(t->reason), "built without BPF");
	return -ENOTSUP;
}

int tel_bpf_open(struct tel *t, const struct tel_opts *o)
{
	snprintf(t->reason, sizeof(t->reason),
		 "built without BPF (clang -target bpf, bpftool or libbpf "
		 "missing at configure time)");
	return -ENOTSUP;
}

void tel_bpf_close(struct tel *t, bool keep_pins)
{
}

unsigned int tel_bpf_attachments(const struct tel *t)
{
	return 0;
}

int tel_bpf_read_blocks(struct tel *t, tel_bpf_block_fn fn, void *arg)
{
	return -ENOTSUP;
}

int tel_bpf_read_hist(struct tel *t, tel_hist_fn fn, void *arg)
{
	return -ENOTSUP;
}

bool tel_bpf_has_dirty(const struct tel *t)
{
	return false;
}

uint64_t tel_bpf_epoch_next(struct tel *t)
{
	return 0;
}

int tel_bpf_dirty_drain(struct tel *t, tel_dirty_fn fn, void *arg)
{
	return -ENOTSUP;
}

uint64_t tel_bpf_dirty_dropped(const struct tel *t)
{
	return 0;
}

int tel_bpf_lookup_block(struct tel *t, const struct kvmm_block_key *key,
			 struct kvmm_block_stats *out)
{
	return -ENOTSUP;
}

int tel_bpf_read_counters(struct tel *t, struct kvmm_counters *out)
{
	return -ENOTSUP;
}

int tel_bpf_drain_events(struct tel *t)
{
	return -ENOTSUP;
}

int tel_pins_remove_stale(const char *pin_root)
{
	return -ENOTSUP;
}

int tel_pinned_check(const struct tel *t)
{
	return -ENOTSUP;
}

int tel_pins_remove_all(const char *pin_root)
{
	return -ENOTSUP;
}

#endif
