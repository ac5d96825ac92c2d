// SPDX-License-Identifier: MIT
/*
 * Pin hygiene: maps are pinned under <root>/v<layout>/; a loader never
 * reuses pins an older layout (v0, or unversioned pins at the root) or a
 * dead loader left, it removes them and pins fresh maps of its own
 * layout; a clean close removes every pin and the directories; keep_pins
 * leaves them for inspection and the next loader replaces them.
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ebpf/telemetry.h"
#include "tests/lib/bpf_pins.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#if HAVE_BPF
#include <bpf/bpf.h>

/* Pin a small hash map at path; returns its id. */
static uint32_t pin_stale(const char *path, uint32_t ksz, uint32_t vsz)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info);
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "stale", ksz, vsz, 8, NULL);

	t_assert(fd >= 0);
	t_ok(bpf_obj_pin(fd, path));
	t_ok(bpf_obj_get_info_by_fd(fd, &info, &len));
	close(fd);
	return info.id;
}

static void pinned_info(const char *path, struct bpf_map_info *info)
{
	uint32_t len = sizeof(*info);
	int fd = bpf_obj_get(path);

	if (fd < 0)
		t_fail("no pin at %s", path);
	memset(info, 0, sizeof(*info));
	t_ok(bpf_obj_get_info_by_fd(fd, info, &len));
	close(fd);
}

int main(void)
{
	char root[128], v0[192], cur[192], path[256];
	/* probes to attach to (this test fires none of its own): an
	 * explicit target without any fails the open */
	char lib[512];
	const char *targets[] = {
		td_build_path("libkvmm.so.1", lib, sizeof(lib)), NULL
	};
	struct tel_opts o = { .size = sizeof(o) };
	struct bpf_map_info info;
	uint32_t stale_id, first_id;
	struct stat st;
	struct tel *t;
	int err;

	if (!HAVE_SDT)
		t_skip("built without USDT support");
	if (geteuid() != 0)
		t_skip("BPF telemetry needs root");
	snprintf(root, sizeof(root), "/sys/fs/bpf/kvmm-pins-%d", (int)getpid());
	bpf_pins_own(root);
	snprintf(v0, sizeof(v0), "%s/v0", root);
	snprintf(cur, sizeof(cur), "%s/v%d", root, KVMM_TEL_PIN_VERSION);
	o.mode = TEL_MODE_BPF;
	o.pin_root = root;
	o.targets = targets;
	o.quiet = true;

	/* Probe that BPF works at all before staging anything. */
	err = tel_open(&o, &t);
	if (err)
		t_skip("BPF unavailable: %s", strerror(-err));
	tel_close(t);
	t_assert(stat(root, &st) && errno == ENOENT);

	/* An older layout's pins, an unversioned pin, and an incompatible
	 * map where ours goes (a loader that died mid-change). */
	t_assert(!mkdir(root, 0755) && !mkdir(v0, 0755) && !mkdir(cur, 0755));
	snprintf(path, sizeof(path), "%s/kvmm_blocks", v0);
	pin_stale(path, 4, 4);
	snprintf(path, sizeof(path), "%s/kvmm_blocks", root);
	pin_stale(path, 8, 8);
	snprintf(path, sizeof(path), "%s/kvmm_blocks", cur);
	stale_id = pin_stale(path, 8, 8);

	t_ok(tel_open(&o, &t));
	t_assert(stat(v0, &st) && errno == ENOENT);
	snprintf(path, sizeof(path), "%s/kvmm_blocks", root);
	t_assert(stat(path, &st) && errno == ENOENT);
	snprintf(path, sizeof(path), "%s/kvmm_blocks", cur);
	pinned_info(path, &info);
	t_assert(info.id != stale_id);
	t_assert_eq(info.type, BPF_MAP_TYPE_LRU_HASH);
	t_assert_eq(info.value_size, sizeof(struct kvmm_block_entry));
	t_assert(info.btf_id != 0); /* bpftool can name the fields */
	tel_close(t);
	t_assert(stat(path, &st) && errno == ENOENT);
	t_assert(stat(cur, &st) && errno == ENOENT);
	t_assert(stat(root, &st) && errno == ENOENT);

	/* keep_pins: they outlive the loader; the next one replaces them. */
	o.keep_pins = true;
	t_ok(tel_open(&o, &t));
	pinned_info(path, &info);
	first_id = info.id;
	tel_close(t);
	pinned_info(path, &info);
	t_assert_eq(info.id, first_id);
	o.keep_pins = false;
	t_ok(tel_open(&o, &t));
	pinned_info(path, &info);
	t_assert(info.id != first_id);
	tel_close(t);
	t_assert(stat(root, &st) && errno == ENOENT);
	printf("ok: stale pins removed, never reused; close unpins\n");
	return 0;
}
#else
int main(void)
{
	t_skip("built without BPF");
}
#endif
