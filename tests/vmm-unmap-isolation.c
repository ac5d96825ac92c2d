/* SPDX-License-Identifier: MIT */
/*
 * Unmapping a shared page in one process does not disturb another process
 * that maps it: the other keeps reading and writing it, and the page lives
 * on while any process still holds a handle or a mapping, even after its
 * creator has released and unmapped everything and exited.
 */
#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (16 * 1024)

/* The creator: maps the page, lets the peer map it, unmaps its own
 * mapping while the peer is using it, then drops everything and exits. */
static int creator(int sock)
{
	struct vmm_backend *b = vt_open_host(PAGE);
	vmm_handle_t page;
	uint64_t va;
	int fd;
	volatile char *p;

	t_ok(b->ops->page_create(b, &page));
	t_ok(b->ops->reserve(b, PAGE, &va));
	t_ok(vmm_map_page(b, va, page, VMM_PROT_RW));
	p = (volatile char *)(uintptr_t)va;
	p[0] = 'c';
	t_ok(b->ops->page_export(b, page, &fd));
	t_ok(vt_send_fd(sock, fd, 0));
	close(fd);

	t_assert_eq(vt_recv_u64(sock), 1); /* peer mapped, wrote 'p' */
	t_assert_eq(p[1], 'p');
	t_ok(b->ops->unmap(b, va));
	/* Our slot is reserved again and faults... */
	t_assert_eq(vt_read_faults(p), 1);
	t_ok(vt_send_u64(sock, 2));

	t_assert_eq(vt_recv_u64(sock), 3); /* ...while the peer went on */
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, PAGE));
	vmm_backend_close(b);
	return 0;
}

int main(int argc, char **argv)
{
	struct vmm_backend *b;
	vmm_handle_t page;
	uint64_t va, tag;
	int sv[2];
	pid_t pid;
	volatile char *p;

	if (argc == 4 && !strcmp(argv[1], "child"))
		return creator(atoi(argv[3]));

	t_ok(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	pid = vt_spawn_self("creator", sv[1]);
	t_assert(pid > 0);
	close(sv[1]);

	b = vt_open_host(PAGE);
	page = vt_import_page(b, sv[0], &tag);
	t_ok(b->ops->reserve(b, 2 * PAGE, &va));
	t_ok(vmm_map_page(b, va + PAGE, page, VMM_PROT_RW));
	p = (volatile char *)(uintptr_t)(va + PAGE);
	t_assert_eq(p[0], 'c');
	p[1] = 'p';
	t_ok(vt_send_u64(sv[0], 1));

	/* The creator unmapped: our mapping still reads and writes. */
	t_assert_eq(vt_recv_u64(sv[0]), 2);
	t_assert_eq(vt_read_faults(p), 0);
	t_assert_eq(p[0], 'c');
	t_assert_eq(p[1], 'p');
	p[2] = 'q';
	t_ok(vt_send_u64(sv[0], 3));
	t_assert_eq(vt_wait(pid), 0);

	/* The creator released its handle and exited: the page lives on. */
	t_assert_eq(p[2], 'q');
	/* Our own unmap + remap through our handle keeps the contents. */
	t_ok(b->ops->unmap(b, va + PAGE));
	t_assert_eq(vt_read_faults(p), 1);
	t_ok(vmm_map_page(b, va, page, VMM_PROT_READ));
	t_assert_eq(((volatile char *)(uintptr_t)va)[2], 'q');
	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 2 * PAGE));
	close(sv[0]);
	vmm_backend_close(b);
	return 0;
}
