/* SPDX-License-Identifier: MIT */
/*
 * On a GPU, the cuda backend does what the host backend does: 2 MiB-class
 * pages created with POSIX fd handles, exported, imported by a second
 * process (fork + exec, as CUDA requires) that sees the bytes the first
 * wrote and writes back (imported twice: two references, the first
 * release leaves the second working); pages mapped into reserved ranges with access set;
 * async copies through a mapping on the backend's stream; the same errno
 * for the same bad arguments; nothing held at the end.  Skips (77) without
 * a driver and a GPU.
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

static struct vmm_backend *open_cuda(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_backend *b;
	int err;

	cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	err = vmm_backend_open(&cfg, &b);
	if (err == -ENODEV || err == -ENOTSUP)
		t_skip("no CUDA driver or GPU (vmm_cuda_open: %s)",
		       strerror(-err));
	t_ok(err);
	return b;
}

static void check_clean(struct vmm_backend *b)
{
	struct vmm_backend_usage u;

	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 0);
	t_assert_eq(u.ranges, 0);
	t_assert_eq(u.mappings, 0);
}

static int child(int sock)
{
	struct vmm_backend *b = open_cuda();
	struct vmm_backend_usage u;
	vmm_handle_t page, again;
	uint64_t tag;
	char buf[32];
	int fd;

	t_ok(vt_recv_fd(sock, &fd, &tag));
	/* Two imports of one page are two references, as on the host
	 * backend, though the driver gives the same handle for both: the
	 * first release leaves the other working. */
	t_ok(b->ops->page_import(b, fd, &again));
	t_ok(b->ops->page_import(b, fd, &page));
	close(fd);
	vmm_backend_get_usage(b, &u);
	t_assert_eq(u.pages, 2);
	t_ok(b->ops->page_release(b, again));
	t_ok(b->ops->copy_to_host(b, buf, page, 100, 12));
	t_assert(memcmp(buf, "from parent", 12) == 0);
	t_ok(b->ops->copy_from_host(b, page, 200, "from child", 11));
	t_ok(b->ops->page_release(b, page));
	if (again == page)
		t_assert_eq(b->ops->page_release(b, page), -EBADF);
	check_clean(b);
	vmm_backend_close(b);
	return vt_send_u64(sock, 1) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct vmm_backend *b;
	vmm_handle_t page, p2;
	size_t ps;
	uint64_t va;
	char *host, buf[32];
	int sv[2], fd;
	pid_t pid;

	if (argc == 4 && !strcmp(argv[1], "child"))
		return child(atoi(argv[3]));
	b = open_cuda();
	t_ok(b->ops->granularity(b, &ps));
	t_assert(ps >= 4096 && ps % 4096 == 0);
	printf("device %s, page %zu bytes\n", b->device_name, ps);

	/* Copies without a mapping. */
	t_ok(b->ops->page_create(b, &page));
	t_ok(b->ops->copy_from_host(b, page, 100, "from parent", 12));
	t_ok(b->ops->copy_to_host(b, buf, page, 100, 12));
	t_assert(memcmp(buf, "from parent", 12) == 0);

	/* Another process imports the page by fd. */
	t_ok(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	pid = vt_spawn_self("importer", sv[1]);
	close(sv[1]);
	t_ok(b->ops->page_export(b, page, &fd));
	t_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	t_ok(vt_send_fd(sv[0], fd, 0));
	close(fd);
	t_assert_eq(vt_recv_u64(sv[0]), 1);
	t_assert_eq(vt_wait(pid), 0);
	t_ok(b->ops->copy_to_host(b, buf, page, 200, 11));
	t_assert(memcmp(buf, "from child", 11) == 0);
	close(sv[0]);

	/* Map two pages, async copy across the page boundary. */
	t_ok(b->ops->page_create(b, &p2));
	t_ok(b->ops->reserve(b, 4 * ps, &va));
	t_assert_eq(va % ps, 0);
	t_assert_eq(b->ops->map(b, va + 1, page), -EINVAL);
	t_assert_eq(b->ops->map(b, va + 4 * ps, page), -EFAULT);
	t_ok(vmm_map_page(b, va, page, VMM_PROT_RW));
	t_ok(vmm_map_page(b, va + ps, p2, VMM_PROT_RW));
	t_assert_eq(b->ops->map(b, va, p2), -EBUSY);
	host = calloc(1, 2 * ps);
	t_assert(host != NULL);
	t_ok(b->ops->host_register(b, host, 2 * ps));
	memset(host, 0x77, 2 * ps);
	t_ok(b->ops->copy_host_to_va_async(b, va + ps - 8, host, 16));
	t_ok(b->ops->synchronize(b));
	t_ok(b->ops->copy_to_host(b, buf, p2, 0, 8));
	t_assert_eq((unsigned char)buf[7], 0x77);
	memset(host, 0, 2 * ps);
	t_ok(b->ops->copy_va_to_host_async(b, host, va + 100, 12));
	t_ok(b->ops->synchronize(b));
	t_assert(memcmp(host, "from parent", 12) == 0);
	t_assert_eq(b->ops->copy_va_to_host_async(b, host, va + 2 * ps, 1),
		    -ENOENT);
	t_ok(b->ops->host_unregister(b, host));
	free(host);

	t_assert_eq(b->ops->free_range(b, va, 4 * ps), -EBUSY);
	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->unmap(b, va + ps));
	t_assert_eq(b->ops->unmap(b, va), -ENOENT);
	t_ok(b->ops->free_range(b, va, 4 * ps));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->page_release(b, p2));
	t_assert_eq(b->ops->page_release(b, p2), -EBADF);
	check_clean(b);
	vmm_backend_close(b);
	return 0;
}
