// SPDX-License-Identifier: MIT
/*
 * The BPF loader's pin root: <pin_root>/v<KVMM_TEL_PIN_VERSION> holds
 * the maps libbpf pins by name, for bpftool and for pin readers
 * (kvmmctl trace).
 *
 * A loader takes the root with an exclusive flock on its directory,
 * held until it closes (one loader per pin root, so a second kvmmd
 * cannot wipe a running one's pins), and removes everything under it
 * that another layout version or a loader that died left there.  A
 * clean close unpins only the maps whose pins are still its own
 * (tel_pin_is_ours()).  tel_pins_remove_stale() and
 * tel_pins_remove_all() are the tests' and tools' clean-up of a root;
 * tel_pinned_check() tells a pin reader whether the maps it opened are
 * still the ones pinned.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/telemetry_int.h"
#include "vmm/vmm.h"

#if HAVE_BPF
#include "ebpf/telemetry_bpf_int.h"

int tel_pins_mkdir(const char *path)
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
int tel_pins_rm_dir(const char *dir)
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
		r = S_ISDIR(st.st_mode) ? tel_pins_rm_dir(path) :
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
int tel_pins_lock_root(const char *root, bool create, int wait_ms,
		       pid_t *holder)
{
	struct stat st, now;
	int tries = 0, fd, err;

	while (tries++ < 16) {
		if (create) {
			err = tel_pins_mkdir(root);
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
void tel_pins_remove_stale_held(struct tel *t)
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
		if (S_ISDIR(st.st_mode) ? tel_pins_rm_dir(path) : unlink(path))
			tel_log(VMM_LOG_WARN, "cannot remove stale pin %s: %s",
				path, strerror(errno));
		else
			tel_log(VMM_LOG_INFO, "removed stale pin %s", path);
	}
	closedir(d);
}

int tel_pins_remove_stale(const char *pin_root)
{
	int fd = tel_pins_lock_root(pin_root, false, 0, NULL), err;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	err = tel_pins_remove_all(pin_root);
	close(fd);
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
bool tel_pin_is_ours(const char *path, int fd)
{
	__u32 id = pinned_map_id(path);

	return id && id == map_id(fd);
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

#else /* !HAVE_BPF */

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
