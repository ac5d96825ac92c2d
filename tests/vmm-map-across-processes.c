/* SPDX-License-Identifier: MIT */
/*
 * A page created in one process, passed over a Unix socket with
 * SCM_RIGHTS, is mapped by a second process (fork + exec) inside its own
 * reserved range; bytes written by either side are seen by the other.
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (64 * 1024)

static int child(int sock)
{
	struct vmm_backend *b = vt_open_host(PAGE);
	vmm_handle_t page;
	uint64_t tag, va;
	char *p;

	page = vt_import_page(b, sock, &tag);
	t_assert_eq(tag, PAGE);
	/* Slot 2 of the child's own range: a different address than the
	 * parent's, same physical page. */
	t_ok(b->ops->reserve(b, 4 * PAGE, &va));
	t_ok(vmm_map_page(b, va + 2 * PAGE, page, VMM_PROT_RW));
	p = (char *)(uintptr_t)(va + 2 * PAGE);

	t_assert(strcmp(p, "written by the parent") == 0);
	t_assert_eq((unsigned char)p[PAGE - 1], 0xa5);
	strcpy(p + 4096, "written by the child");
	p[PAGE - 2] = 0x5a;
	t_ok(vt_send_u64(sock, va + 2 * PAGE));

	/* The parent writes again; the child sees it without any copy. */
	t_assert_eq(vt_recv_u64(sock), 2);
	t_assert(strcmp(p + 8192, "second write by the parent") == 0);

	t_ok(b->ops->unmap(b, va + 2 * PAGE));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 4 * PAGE));
	vmm_backend_close(b);
	return 0;
}

int main(int argc, char **argv)
{
	struct vmm_backend *b;
	vmm_handle_t page;
	uint64_t va, child_va;
	int sv[2], fd;
	pid_t pid;
	char *p;

	if (argc == 4 && !strcmp(argv[1], "child"))
		return child(atoi(argv[3]));

	b = vt_open_host(PAGE);
	t_ok(b->ops->page_create(b, &page));
	t_ok(b->ops->reserve(b, 2 * PAGE, &va));
	t_ok(vmm_map_page(b, va, page, VMM_PROT_RW));
	p = (char *)(uintptr_t)va;
	strcpy(p, "written by the parent");
	p[PAGE - 1] = (char)0xa5;

	t_ok(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	pid = vt_spawn_self("map", sv[1]);
	t_assert(pid > 0);
	close(sv[1]);
	t_ok(b->ops->page_export(b, page, &fd));
	t_ok(vt_send_fd(sv[0], fd, PAGE));
	close(fd);

	child_va = vt_recv_u64(sv[0]);
	t_assert(child_va != 0);
	t_assert(strcmp(p + 4096, "written by the child") == 0);
	t_assert_eq((unsigned char)p[PAGE - 2], 0x5a);
	strcpy(p + 8192, "second write by the parent");
	t_ok(vt_send_u64(sv[0], 2));
	t_assert_eq(vt_wait(pid), 0);

	/* The copy helpers see the same bytes without a mapping. */
	{
		char buf[32];

		t_ok(b->ops->copy_to_host(b, buf, page, 4096, 21));
		t_assert(memcmp(buf, "written by the child", 21) == 0);
	}
	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 2 * PAGE));
	close(sv[0]);
	vmm_backend_close(b);
	return 0;
}
