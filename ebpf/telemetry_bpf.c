// SPDX-License-Identifier: MIT
/*
 * BPF loader: the BPF half of ebpf/telemetry.h.
 *
 * tel_bpf_open() makes sure bpffs is mounted, takes the pin root and
 * removes the pins another layout version (or a loader that died) left
 * under it (telemetry_pins.c), opens the skeleton with pin_root_path =
 * <pin_root>/v<KVMM_TEL_PIN_VERSION> so libbpf pins every map by name
 * there, loads it, sets up its two rings and attaches each USDT program
 * to every target that has the probe.  Failure at any step leaves a
 * one-line reason in t->reason for the fallback message.
 * tel_bpf_open_pinned() opens the maps a running loader pinned, for a
 * reader (kvmmctl trace).  What reads the maps and drains the rings is
 * telemetry_bpf_read.c.
 * libbpf's own messages go to the debug log; the last warning is kept to
 * explain a failure.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "ebpf/telemetry_int.h"
#include "install_paths.h" /* KVMM_LIBDIR */
#include "vmm/vmm.h"

#if HAVE_BPF
#include "ebpf/telemetry_bpf_int.h"

#define BPF_FS_MAGIC_NR 0xcafe4a11
#define TRACEFS_MAGIC_NR 0x74726163
/* How long a loader waits for a pin root another process holds (a
 * tel_pins_remove_stale() removing it lets go within it). */
#define TEL_PIN_ROOT_WAIT_MS 1000

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
	lock_fd = tel_pins_lock_root(t->pin_root, true, TEL_PIN_ROOT_WAIT_MS,
				     &holder);
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
	tel_pins_remove_stale_held(t);
	err = tel_pins_mkdir(t->pin_dir);
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
				       tel_bpf_on_dirty, b, NULL);
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
				 tel_bpf_on_event, t, NULL);
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
	tel_pins_rm_dir(t->pin_dir);
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
			if (tel_pin_is_ours(path, bpf_map__fd(m)))
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

unsigned int tel_bpf_attachments(const struct tel *t)
{
	return t->bpf ? t->bpf->nr_links : 0;
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

#endif
