/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the vmm tests: passing an fd over a Unix socket with
 * SCM_RIGHTS, counting this process's open fds, re-running the test binary
 * as a child process (fork + exec, so the child inherits no mappings and
 * only the fds it is meant to have), probing whether an address faults,
 * and the host backend and its pages passed between processes.
 */
#ifndef KVMM_TESTS_VMM_UTIL_H
#define KVMM_TESTS_VMM_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/test.h"
#include "vmm/vmm.h"

static inline int vt_send_fd(int sock, int fd, uint64_t tag)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &tag, .iov_len = sizeof(tag) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	memset(cbuf, 0, sizeof(cbuf));
	if (fd >= 0) {
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == sizeof(tag) ? 0 : -errno;
}

/* Receive a tag and, when one was sent, an fd (else *fd = -1). */
static inline int vt_recv_fd(int sock, int *fd, uint64_t *tag)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = tag, .iov_len = sizeof(*tag) };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);

	if (n != sizeof(*tag))
		return n < 0 ? -errno : -EPROTO;
	*fd = -1;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

static inline int vt_send_u64(int sock, uint64_t v)
{
	return vt_send_fd(sock, -1, v);
}

static inline uint64_t vt_recv_u64(int sock)
{
	uint64_t v = 0;
	int fd;

	if (vt_recv_fd(sock, &fd, &v))
		t_fail("recv from peer failed");
	if (fd >= 0)
		close(fd);
	return v;
}

static inline int vt_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

/* Does any open fd of this process refer to the same file as fd_st? */
static inline bool vt_holds_file(const struct stat *want)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while ((e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		if (fstat(atoi(e->d_name), &st) == 0 &&
		    st.st_dev == want->st_dev && st.st_ino == want->st_ino)
			found = true;
	}
	closedir(d);
	return found;
}

/*
 * Run this test binary again as "argv0 child ROLE SOCKFD" with sock as its
 * only extra fd (the socket's CLOEXEC flag is cleared in the child only).
 */
static inline pid_t vt_spawn_self(const char *role, int sock)
{
	pid_t pid = fork();

	if (pid == 0) {
		char fdbuf[16];

		fcntl(sock, F_SETFD, 0);
		snprintf(fdbuf, sizeof(fdbuf), "%d", sock);
		execl("/proc/self/exe", "vmm-test-child", "child", role, fdbuf,
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

static inline int vt_wait(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* 1 when reading addr faults (SIGSEGV or SIGBUS), 0 when it reads. */
static sigjmp_buf vt_probe_jmp;
static void vt_probe_handler(int sig)
{
	siglongjmp(vt_probe_jmp, 1);
}

static inline int vt_read_faults(const volatile char *addr)
{
	struct sigaction sa = { .sa_handler = vt_probe_handler }, old_segv,
			 old_bus;
	volatile int faulted = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (sigsetjmp(vt_probe_jmp, 1) == 0)
		(void)*addr;
	else
		faulted = 1;
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return faulted;
}

/* The host backend with pages of page_size bytes. */
static inline struct vmm_backend *vt_open_host(uint64_t page_size)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST,
				  .page_size = page_size };
	struct vmm_backend *b;

	t_ok(vmm_backend_open(&cfg, &b));
	return b;
}

/*
 * A fault-injection wrapper (vmm_fault_wrap()) over a host backend of
 * host_page_size, or with KVMM_FAULT_BACKEND=cuda over the cuda backend
 * (the mock libcuda of tests/vmm-cuda-mock.sh through KVMM_LIBCUDA, or a
 * GPU); skips when that finds no device.
 */
static inline struct vmm_backend *vt_open_fault(uint64_t host_page_size)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_HOST,
				  .page_size = host_page_size };
	const char *kind = getenv("KVMM_FAULT_BACKEND");
	struct vmm_backend *inner, *b;
	int err;

	if (kind && !strcmp(kind, "cuda")) {
		cfg.kind = VMM_BACKEND_CUDA;
		cfg.page_size = 0;
		cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	}
	err = vmm_backend_open(&cfg, &inner);
	if (err == -ENODEV)
		t_skip("KVMM_FAULT_BACKEND=cuda but no CUDA device");
	t_ok(err);
	t_ok(vmm_fault_wrap(inner, &b));
	return b;
}

/* A page sent over sock (vt_send_fd()) imported into b: its fd, which
 * must have come close-on-exec, is closed; *tag gets the message's tag. */
static inline vmm_handle_t vt_import_page(struct vmm_backend *b, int sock,
					  uint64_t *tag)
{
	vmm_handle_t page;
	int fd;

	t_ok(vt_recv_fd(sock, &fd, tag));
	t_assert(fd >= 0);
	t_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	t_ok(b->ops->page_import(b, fd, &page));
	close(fd);
	return page;
}

#endif
