// SPDX-License-Identifier: MIT
/*
 * Where mremap() cannot duplicate a mapping (old size 0: valgrind's
 * memcheck answers EINVAL), the host backend's imports still map: an
 * import keeps a dup of its fd and maps from it.  The test runs itself
 * again under tests/shims/nomremapdup.so, which makes such an mremap fail
 * as valgrind does, then:
 *
 *   - vmm: a page created by one backend (kvmmd's role), exported and
 *     imported by another (a client's), maps at two slots of the
 *     importer; bytes written through one read back through the other and
 *     through copy_to_host; the import holds one fd, which its release
 *     closes;
 *   - libkvmm, against a real kvmmd (run without the shim): a sequence
 *     extends to two blocks and a byte written at its K cache reads back;
 *     a second sequence opened on the published prefix maps the same
 *     pages and reads it too.
 *
 * Before, map of an imported page was mremap(anchor, 0, ...) only, and
 * failed -EINVAL: the client's first extend failed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (8 * 1024)
#define ENV_CHILD "KVMM_TEST_NOMREMAP_CHILD"

/* Run this test again with the shim preloaded (its ASan runtime, in a
 * SANITIZE=1 build, would refuse a library listed before it). */
static void reexec_with_shim(char **argv)
{
	const char *asan = getenv("ASAN_OPTIONS");
	char shim[256], opts[600];

	td_build_path("tests/shims/nomremapdup.so", shim, sizeof(shim));
	if (access(shim, R_OK))
		t_fail("%s not built", shim);
	snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0",
		 asan ? asan : "", asan ? ":" : "");
	setenv("ASAN_OPTIONS", opts, 1);
	setenv("LD_PRELOAD", shim, 1);
	setenv(ENV_CHILD, "1", 1);
	execv("/proc/self/exe", argv);
	t_fail("exec /proc/self/exe: %s", strerror(errno));
}

static void shim_loaded(void)
{
	void *p =
		mmap(NULL, 4096, PROT_NONE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	t_assert(p != MAP_FAILED);
	errno = 0;
	t_assert(mremap(p, 0, 4096, MREMAP_MAYMOVE) == MAP_FAILED);
	t_assert_eq(errno, EINVAL);
	munmap(p, 4096);
}

/* Whether the n bytes at va are want: read through a volatile pointer,
 * as the bytes change behind the compiler's back (another mapping). */
static bool bytes_at(uint64_t va, const char *want, size_t n)
{
	volatile const char *p = (volatile const char *)(uintptr_t)va;

	for (size_t i = 0; i < n; i++)
		if (p[i] != want[i])
			return false;
	return true;
}

static void vmm_import(void)
{
	struct vmm_backend *d = vt_open_host(PAGE), *b = vt_open_host(PAGE);
	vmm_handle_t src, h;
	uint64_t va;
	char buf[16] = { 0 };
	int fd, fds;

	t_ok(d->ops->page_create(d, &src));
	t_ok(d->ops->copy_from_host(d, src, 0, "from creator", 13));
	t_ok(b->ops->reserve(b, 4 * PAGE, &va));
	t_ok(d->ops->page_export(d, src, &fd));
	fds = vt_count_fds();
	t_ok(b->ops->page_import(b, fd, &h));
	t_ok(close(fd));
	t_ok(b->ops->map(b, va, h));
	t_ok(b->ops->map(b, va + 2 * PAGE, h));
	t_assert_eq(vt_count_fds(), fds); /* its own dup instead of fd */
	t_ok(b->ops->set_access(b, va, PAGE, VMM_PROT_RW));
	t_ok(b->ops->set_access(b, va + 2 * PAGE, PAGE, VMM_PROT_READ));
	t_assert(bytes_at(va + 2 * PAGE, "from creator", 13));
	memcpy((char *)(uintptr_t)va, "from importer", 14);
	t_assert(bytes_at(va + 2 * PAGE, "from importer", 14));
	t_ok(b->ops->copy_to_host(b, buf, h, 0, 14));
	t_assert(!memcmp(buf, "from importer", 14));
	t_ok(d->ops->copy_to_host(d, buf, src, 0, 14));
	t_assert(!memcmp(buf, "from importer", 14));

	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->unmap(b, va + 2 * PAGE));
	t_ok(b->ops->page_release(b, h));
	t_assert_eq(vt_count_fds(), fds - 1); /* fd was closed above */
	t_ok(b->ops->free_range(b, va, 4 * PAGE));
	t_ok(d->ops->page_release(d, src));
	vmm_backend_close(b);
	vmm_backend_close(d);
}

static void client_extend(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_stats st = { .size = sizeof(st) };
	struct td_daemon dm;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s, s2, nb, tokens[2 * TR_TPB];
	uint64_t seed, hashes[2];
	volatile char *k, *k2;
	int err;

	/* kvmmd itself runs without the shim */
	unsetenv("LD_PRELOAD");
	td_start_ok(&dm, NULL);
	co.socket_path = dm.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &tr_small_region, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 2 * TR_TPB));
	t_ok(kvmm_get_stats(c, &st));
	t_assert(st.pages_imported >= 4);
	k = (volatile char *)(uintptr_t)kvmm_seq_k_ptr(r, s, 1);
	k[0] = 42;
	k[TR_TPB * 2 * 64 * 2 + 5] = 43; /* the second block */
	t_assert_eq(k[0], 42);

	for (int i = 0; i < 2 * TR_TPB; i++)
		tokens[i] = i;
	t_ok(kvmm_region_hash_seed(r, "nomremap", &seed));
	err = kvmm_hash_chain(seed, 0, tokens, 2 * TR_TPB, TR_TPB, hashes, 2);
	if (err == -ENOTSUP) {
		hashes[0] = 0xabc1;
		hashes[1] = 0xabc2;
	} else {
		t_assert_eq(err, 2);
	}
	t_assert_eq(kvmm_block_publish(r, s, 0, 2, 0, hashes), 2);
	t_ok(kvmm_seq_open_prefix(r, hashes, 2, &s2, &nb));
	t_assert_eq(nb, 2);
	k2 = (volatile char *)(uintptr_t)kvmm_seq_k_ptr(r, s2, 1);
	t_assert(k2 != k);
	t_assert_eq(k2[0], 42);
	t_assert_eq(k2[TR_TPB * 2 * 64 * 2 + 5], 43);
	kvmm_disconnect(c);
	t_ok(td_stop(&dm));
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv(ENV_CHILD))
		reexec_with_shim(argv);
	shim_loaded();
	vmm_import();
	client_extend();
	printf("ok: imports map without mremap(old_size 0)\n");
	return T_PASS;
}
