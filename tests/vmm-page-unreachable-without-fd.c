/* SPDX-License-Identifier: MIT */
/*
 * A process that was never given a page's fd cannot reach that page: the
 * creator makes a secret page and a shared page and passes only the shared
 * one.  In the receiver (fork + exec, so nothing is inherited), the secret
 * page's memfd is not among its fds and not in its address space, its own
 * reserved range faults everywhere except where it mapped the shared page,
 * and even that faults until set_access opens it.
 */
#include <sys/stat.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

#define PAGE (8 * 1024)

struct ids {
	uint64_t secret_ino, shared_ino;
};

/* How many mappings of /proc/self/maps name memfd:kvmm-page with inode
 * ino (any inode when ino is 0). */
static int count_page_maps(uint64_t ino)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long inode = 0;

		if (!strstr(line, "memfd:kvmm-page"))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %llu", &inode) != 1)
			continue;
		if (!ino || inode == ino)
			n++;
	}
	fclose(f);
	return n;
}

static int receiver(int sock)
{
	struct vmm_backend *b;
	struct stat secret = { 0 }, st;
	vmm_handle_t page;
	uint64_t va, tag;
	int fd;

	b = vt_open_host(PAGE);
	t_ok(vt_recv_fd(sock, &fd, &tag));
	t_assert(fd >= 0);
	t_ok(fstat(fd, &st));
	t_assert_eq(st.st_ino, tag);
	secret.st_dev = st.st_dev; /* memfds share one internal mount */
	secret.st_ino = vt_recv_u64(sock);
	t_assert(secret.st_ino != st.st_ino);

	t_ok(b->ops->page_import(b, fd, &page));
	close(fd);
	/* The import keeps no fd, only the shared page's anchor mapping
	 * (PROT_NONE); the secret page is held nowhere. */
	t_assert(!vt_holds_file(&st));
	t_assert(!vt_holds_file(&secret));
	t_assert_eq(count_page_maps(st.st_ino), 1);

	t_ok(b->ops->reserve(b, 4 * PAGE, &va));
	for (int i = 0; i < 4; i++)
		t_assert_eq(vt_read_faults((char *)(uintptr_t)(va + i * PAGE)),
			    1);
	t_ok(b->ops->map(b, va, page));
	/* Mapped but not yet accessible, as with cuMemMap. */
	t_assert_eq(vt_read_faults((char *)(uintptr_t)va), 1);
	t_ok(b->ops->set_access(b, va, PAGE, VMM_PROT_READ));
	t_assert_eq(vt_read_faults((char *)(uintptr_t)va), 0);
	t_assert(strcmp((char *)(uintptr_t)va, "shared") == 0);
	for (int i = 1; i < 4; i++)
		t_assert_eq(vt_read_faults((char *)(uintptr_t)(va + i * PAGE)),
			    1);
	t_assert_eq(count_page_maps(secret.st_ino), 0);
	t_assert_eq(count_page_maps(st.st_ino), 2); /* anchor + slot */
	t_assert_eq(count_page_maps(0), 2);

	t_ok(b->ops->unmap(b, va));
	t_ok(b->ops->page_release(b, page));
	t_ok(b->ops->free_range(b, va, 4 * PAGE));
	vmm_backend_close(b);
	t_assert(!vt_holds_file(&st));
	t_assert_eq(count_page_maps(0), 0);
	return 0;
}

int main(int argc, char **argv)
{
	struct vmm_backend *b;
	vmm_handle_t secret, shared;
	struct stat sst, hst;
	int sv[2], fd;
	pid_t pid;

	if (argc == 4 && !strcmp(argv[1], "child"))
		return receiver(atoi(argv[3]));

	b = vt_open_host(PAGE);
	t_ok(b->ops->page_create(b, &secret));
	t_ok(b->ops->page_create(b, &shared));
	t_ok(b->ops->copy_from_host(b, secret, 0, "secret", 7));
	t_ok(b->ops->copy_from_host(b, shared, 0, "shared", 7));
	t_ok(fstat((int)secret, &sst));
	t_ok(fstat((int)shared, &hst));

	t_ok(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	pid = vt_spawn_self("receiver", sv[1]);
	t_assert(pid > 0);
	close(sv[1]);
	t_ok(b->ops->page_export(b, shared, &fd));
	t_ok(vt_send_fd(sv[0], fd, hst.st_ino));
	close(fd);
	t_ok(vt_send_u64(sv[0], sst.st_ino));
	t_assert_eq(vt_wait(pid), 0);

	t_ok(b->ops->page_release(b, secret));
	t_ok(b->ops->page_release(b, shared));
	close(sv[0]);
	vmm_backend_close(b);
	return 0;
}
