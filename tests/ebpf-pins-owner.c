// SPDX-License-Identifier: MIT
/*
 * One loader per pin root: while a loader runs it owns its pin root, so
 * a second one on the same root (a second kvmmd left on the default
 * --telemetry-pin-root) neither wipes nor takes over its pins: in BPF
 * mode it fails with -EBUSY, in auto mode it falls back to shared memory
 * and says why, naming the option; tel_pins_remove_stale() leaves an
 * owned root alone.  At close a loader removes only the pins that are
 * still its maps (another map pinned at one of its paths stays), and the
 * pins a loader that died left are stale and replaced.  Then the same
 * through kvmmd: `--telemetry bpf` on a root another loader holds stops
 * the start with the reason, `--telemetry auto` runs on shared memory
 * with a WARN.  The reason for a held root of 250 characters still
 * names its holder and ends with the option (the root's name is cut).
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_test.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#if HAVE_BPF
#include <bpf/bpf.h>

/* The id of the map pinned at path, 0 if none. */
static uint32_t pinned_id(const char *path)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return 0;
	t_ok(bpf_obj_get_info_by_fd(fd, &info, &len));
	close(fd);
	return info.id;
}

/* kvmmd on the pin root b->pin in mode; its exit (0: started and
 * stopped cleanly, -ECHILD: refused to start) and its log. */
static int daemon_on(const struct bpf_test *b, const char *mode, char *log,
		     size_t len)
{
	const char *args[] = { "--telemetry",
			       mode,
			       "--telemetry-pin-root",
			       b->pin,
			       "--telemetry-attach",
			       b->self,
			       NULL };
	struct td_daemon d;
	int err = td_start(&d, args);

	if (err) {
		td_stop_log(&d, log, len);
		return err;
	}
	return td_stop_log(&d, log, len);
}

/* A root of 250 characters under b->pin, held by this process (an
 * flock of its own on the directory, as a loader takes it): the reason
 * o in auto mode gives ends with the holder and the whole option. */
static void long_root_reason(const struct bpf_test *b, struct tel_opts o)
{
	char root[251], want[128];
	const char *r;
	struct tel *t;
	size_t n;
	int fd;

	n = (size_t)snprintf(root, sizeof(root), "%s/", b->pin);
	memset(root + n, 'x', sizeof(root) - 1 - n);
	root[sizeof(root) - 1] = 0;
	t_ok(mkdir(root, 0700));
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t_assert(fd >= 0);
	t_ok(flock(fd, LOCK_EX | LOCK_NB));
	o.mode = TEL_MODE_AUTO;
	o.pin_root = root;
	t_ok(tel_open(&o, &t));
	t_assert_eq(tel_source(t), TEL_SOURCE_SHM);
	r = tel_unavailable_reason(t);
	printf("auto on a held root of %zu characters: %s\n", strlen(root), r);
	snprintf(want, sizeof(want),
		 " is in use by another loader (process %d): give each kvmmd "
		 "its own --telemetry-pin-root",
		 (int)getpid());
	t_assert(strlen(r) > strlen(want) &&
		 !strcmp(r + strlen(r) - strlen(want), want));
	tel_close(t);
	close(fd);
	t_ok(rmdir(root));
}

int main(void)
{
	static char log[1 << 16];
	struct bpf_test b;
	struct tel_opts o;
	char blocks[256], hist[256];
	uint32_t a_blocks, a_hist, foreign, dead_id;
	struct tel *a, *t;
	struct stat st;
	pid_t pid;
	int ws, fd;

	bpf_test_init(&b, "owner");
	a = bpf_test_open(&b);
	snprintf(blocks, sizeof(blocks), "%s/kvmm_blocks", tel_pin_dir(a));
	snprintf(hist, sizeof(hist), "%s/kvmm_hist", tel_pin_dir(a));
	a_blocks = pinned_id(blocks);
	a_hist = pinned_id(hist);
	t_assert(a_blocks && a_hist);

	/* A second loader on the same root, BPF or nothing: refused. */
	o = (struct tel_opts){ .size = sizeof(o),
			       .mode = TEL_MODE_BPF,
			       .pin_root = b.pin,
			       .targets = (const char *[]){ b.self, NULL },
			       .quiet = true };
	t_assert_eq(tel_open(&o, &t), -EBUSY);
	t_assert_eq(pinned_id(blocks), a_blocks);
	/* auto: shared memory, and the reason names the option */
	o.mode = TEL_MODE_AUTO;
	t_ok(tel_open(&o, &t));
	t_assert_eq(tel_source(t), TEL_SOURCE_SHM);
	printf("auto on a held root: %s\n", tel_unavailable_reason(t));
	t_assert(strstr(tel_unavailable_reason(t), "in use by another loader"));
	t_assert(strstr(tel_unavailable_reason(t), "(process "));
	t_assert(strstr(tel_unavailable_reason(t), "--telemetry-pin-root"));
	tel_close(t);
	long_root_reason(&b, o);
	t_assert_eq(pinned_id(blocks), a_blocks);
	t_assert_eq(tel_pins_remove_stale(b.pin), -EBUSY);
	t_assert_eq(pinned_id(blocks), a_blocks);

	/* kvmmd on the held root: bpf refuses to start, auto warns and
	 * runs on shared memory; neither touches the pins. */
	t_assert_eq(daemon_on(&b, "bpf", log, sizeof(log)), -ECHILD);
	t_assert(strstr(log, "in use by another loader"));
	t_assert(strstr(log, "--telemetry-pin-root"));
	t_assert_eq(pinned_id(blocks), a_blocks);
	t_assert_eq(daemon_on(&b, "auto", log, sizeof(log)), 0);
	t_assert(strstr(log, "WARN") &&
		 strstr(log, "in use by another loader") &&
		 strstr(log, "using shared-memory counters"));
	t_assert(strstr(log, "telemetry: shm"));
	t_assert_eq(pinned_id(blocks), a_blocks);
	t_assert_eq(pinned_id(hist), a_hist);
	printf("ok: a second loader leaves the first's pins alone\n");

	/* Another map pinned at one of a's paths (a loader that does not
	 * take the root) is not a's to remove at close. */
	t_assert(!unlink(hist));
	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "other", 8, 8, 8, NULL);
	t_assert(fd >= 0);
	t_ok(bpf_obj_pin(fd, hist));
	foreign = pinned_id(hist);
	close(fd);
	tel_close(a);
	t_assert(stat(blocks, &st) && errno == ENOENT);
	t_assert_eq(pinned_id(hist), foreign);
	t_ok(tel_pins_remove_stale(b.pin)); /* nobody holds it now */
	t_assert(stat(b.pin, &st) && errno == ENOENT);
	printf("ok: close removes only its own maps' pins\n");

	/* A loader that dies lets go of the root: its pins are stale. */
	fflush(NULL);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0) {
		o.mode = TEL_MODE_BPF;
		_exit(tel_open(&o, &t) ? 1 : 0); /* no close: a crash */
	}
	t_assert(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws));
	t_assert_eq(WEXITSTATUS(ws), 0);
	dead_id = pinned_id(blocks);
	t_assert(dead_id);
	a = bpf_test_open(&b);
	t_assert(pinned_id(blocks) && pinned_id(blocks) != dead_id);
	tel_close(a);
	t_assert(stat(b.pin, &st) && errno == ENOENT);
	printf("ok: a dead loader's pins are replaced\n");
	return 0;
}
#else
int main(void)
{
	t_skip("built without BPF");
}
#endif
