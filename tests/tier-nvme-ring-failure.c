// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * When io_uring_enter fails for good (not -EINTR, -EAGAIN, -EBUSY,
 * -ETIME), the tier fails every block, but hands a block back only once
 * the kernel is done with its buffers: the I/Os the ring had taken still
 * complete, into the caller's memory and the tier's header buffers, and a
 * caller that got its block back reuses the buffer at once (kvmmd frees
 * the staging host slot of a failed restore), while the tier frees its
 * header buffers at close.
 *
 * A real failure from the kernel: a seccomp filter (installed in a child
 * process, for all its threads) makes io_uring_enter fail with EFAULT.
 *   1. engine: only the calls that wait (min_complete > 0) fail.  The
 *      completion thread submits each I/O in a call of its own without
 *      waiting and waits once the queue is full, so a read batch of 4
 *      blocks of 32 MiB (queue depth 4, headers apart) has 3 blocks' reads
 *      in the kernel when the wait fails.  Every block fails with
 *      -EFAULT, and its buffer no longer changes once the batch returned
 *      (sampled at return and 300 ms later: before, the batch returned at
 *      once and the reads still landed afterwards).  Later batches fail at
 *      once, the tier closes.
 *   2. recovery: the calls that submit fewer header reads than the queue
 *      depth fail: the restart scan stops with reads in flight (its
 *      second call, or its last ones).  The open fails with -EFAULT after
 *      waiting for those reads (the header buffers it then frees are
 *      theirs); a later open without the filter recovers every slot.
 * Under ASan (make SANITIZE=1) both teardowns run checked.  A machine
 * without seccomp filters skips (77).
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (32u << 20) /* engine blocks */
#define NBIG 4
#define QD 4
#define SMALL 4096 /* recovery blocks */
#define NSMALL 512
#define QD_SCAN 64
#define SAMPLE 4096 /* bytes between the samples of a buffer */

#if defined(__x86_64__)
#define T_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define T_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#if defined(T_AUDIT_ARCH) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__

/*
 * From now on io_uring_enter fails with EFAULT in this process (all its
 * threads) when its argument arg (1 to_submit, 2 min_complete; the low
 * 32 bits) is >= min (ge) or < min (!ge).  Exits 77 when seccomp filters
 * are unavailable.
 */
static void fail_enter(unsigned int arg, uint32_t min, bool ge)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, T_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, args[0]) + 8 * arg),
		/* >= min: to the first return when ge, the second if not */
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, min, ge ? 0 : 1,
			 ge ? 1 : 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EFAULT),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		t_skip("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		    SECCOMP_FILTER_FLAG_TSYNC, &prog))
		t_skip("seccomp filter: %s", strerror(errno));
}

static struct tier_nvme *open_tier(const char *path, size_t payload,
				   uint32_t nslots, unsigned int qd, int *err)
{
	struct tier_nvme_config cfg = {
		.path = path,
		.capacity_bytes = NT_CAPACITY(nslots, payload),
		.payload_bytes = payload,
		.queue_depth = qd,
		.io_bytes = payload, /* one I/O per payload */
	};

	return nt_open(cfg, NULL, err);
}

/* Run fn in a child process; its exit status (77 passes through). */
static int in_child(void (*fn)(const char *), const char *path)
{
	pid_t p = fork();
	int st;

	t_assert(p >= 0);
	if (p == 0) {
		fn(path);
		fflush(stdout);
		_exit(0);
	}
	t_assert_eq(waitpid(p, &st, 0), p);
	if (!WIFEXITED(st))
		t_fail("child died with signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

static void engine_child(const char *path)
{
	struct tier_nvme_io io[NBIG];
	unsigned char *buf[NBIG], *seen;
	struct tier_nvme *t = open_tier(path, BIG, NBIG, QD, NULL);
	int changed = 0;

	for (int i = 0; i < NBIG; i++) {
		buf[i] = t_page_alloc(BIG);
		nt_fill(buf[i], BIG, 900 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0xf00 + i,
					       .layout_id = 1,
					       .buf = buf[i],
					       .length = BIG };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, NBIG), 0);
	for (int i = 0; i < NBIG; i++) {
		memset(buf[i], 0x5a, BIG);
		io[i] = (struct tier_nvme_io){ .hash = 0xf00 + i,
					       .slot = io[i].slot,
					       .buf = buf[i] };
	}
	seen = malloc((size_t)NBIG * (BIG / SAMPLE));
	t_assert(seen);

	fail_enter(2, 1, true); /* every wait fails */
	t_assert_eq(tier_nvme_read_batch(t, io, NBIG), NBIG);
	for (int i = 0; i < NBIG; i++)
		for (size_t o = 0; o < BIG; o += SAMPLE)
			seen[(size_t)i * (BIG / SAMPLE) + o / SAMPLE] =
				buf[i][o];
	usleep(300 * 1000);
	for (int i = 0; i < NBIG; i++) {
		t_assert_eq(io[i].result, -EFAULT);
		t_assert(!io[i].dropped); /* the ring's error, not the disk's */
		for (size_t o = 0; o < BIG; o += SAMPLE)
			changed +=
				seen[(size_t)i * (BIG / SAMPLE) + o / SAMPLE] !=
				buf[i][o];
	}
	if (changed)
		t_fail("%d sampled bytes of the read buffers changed after the batch returned",
		       changed);
	/* a later batch fails at once, with the ring's error */
	io[0].result = 0;
	t_assert_eq(tier_nvme_read_batch(t, io, 1), 1);
	t_assert_eq(io[0].result, -EFAULT);
	tier_nvme_close(t);
	for (int i = 0; i < NBIG; i++)
		free(buf[i]);
	free(seen);
	printf("engine: every block failed, no buffer written after the return\n");
}

static void recovery_child(const char *path)
{
	struct tier_nvme *t;
	int err = 0, tries = 0;

	fail_enter(1, QD_SCAN, false); /* fewer than QD_SCAN to submit */
	while ((t = open_tier(path, SMALL, NSMALL, QD_SCAN, &err))) {
		tier_nvme_close(t);
		if (++tries == 20)
			t_fail("20 scans reaped every read at each wait");
	}
	t_assert_eq(err, -EFAULT);
	printf("recovery: the open failed with EFAULT after %d scans\n",
	       tries + 1);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	struct tier_nvme_io *io = calloc(NSMALL, sizeof(*io));
	struct tier_nvme_stats st;
	struct tier_nvme *t;
	unsigned char *small = NULL;
	char path[256];
	int r, fd;

	t_assert(io);
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-ringfail-%d",
		 dir ? dir : "/var/tmp", getpid());
	if (!t_nvme_usable(path))
		t_skip("no O_DIRECT io_uring I/O in %s", path);
	r = in_child(engine_child, path);
	unlink(path);
	if (r == 77)
		t_skip("no seccomp filter");
	t_assert_eq(r, 0);

	/* a tier of NSMALL written slots for the recovery */
	small = t_page_alloc((size_t)NSMALL * SMALL);
	t = open_tier(path, SMALL, NSMALL, QD_SCAN, NULL);
	for (int i = 0; i < NSMALL; i++) {
		nt_fill(small + (size_t)i * SMALL, SMALL, 40 + i);
		io[i] = (struct tier_nvme_io){ .hash = 0xa00 + i,
					       .layout_id = 1,
					       .buf = small + (size_t)i * SMALL,
					       .length = SMALL };
	}
	t_assert_eq(tier_nvme_write_batch(t, io, NSMALL), 0);
	t_ok(tier_nvme_sync(t));
	tier_nvme_close(t);
	/*
	 * Holes in place of 7 slots in 8: the scan's read of a hole
	 * completes while it is submitted, a written slot's goes to the disk,
	 * so a wait returns with reads of written slots still in flight and
	 * the next call submits fewer than the queue depth (and fails).
	 */
	fd = open(path, O_RDWR | O_CLOEXEC);
	t_assert(fd >= 0);
	for (int i = 0; i < NSMALL; i++)
		if (i % 8 &&
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      NT_SLOT_OFFSET(i, SMALL), NT_SLOT_BYTES(SMALL)))
			t_skip("no hole punching in %s: %s", path,
			       strerror(errno));
	t_ok(fsync(fd));
	close(fd);
	{
		/* the child's log (its stderr) into a file, checked here */
		char logp[300], log[65536];
		int lfd, saved = dup(2);
		ssize_t n;
		unsigned int inflight = 0;
		const char *l;

		snprintf(logp, sizeof(logp), "%s.log", path);
		lfd = open(logp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		t_assert(lfd >= 0 && saved >= 0);
		t_assert_eq(dup2(lfd, 2), 2);
		r = in_child(recovery_child, path);
		t_assert_eq(dup2(saved, 2), 2);
		close(saved);
		n = pread(lfd, log, sizeof(log) - 1, 0);
		close(lfd);
		unlink(logp);
		t_assert(n > 0);
		log[n] = 0;
		fputs(log, stderr);
		t_assert_eq(r, 0);
		/* it failed with reads in flight, and waited for them */
		l = strstr(log, "restart scan: io_uring: ");
		t_assert(l);
		l = strchr(l, '(');
		t_assert(l && sscanf(l, "(%u header reads in flight)",
				     &inflight) == 1);
		t_assert(inflight > 0);
		t_assert(!strstr(log, "leaving"));
		printf("recovery: failed with %u header reads in flight, drained\n",
		       inflight);
	}
	/* the failed open changed nothing on disk */
	t = open_tier(path, SMALL, NSMALL, QD_SCAN, NULL);
	tier_nvme_get_stats(t, &st);
	t_assert_eq(st.recovered_slots, NSMALL / 8);
	t_assert_eq(st.header_failures, 0);
	tier_nvme_close(t);
	unlink(path);
	free(small);
	free(io);
	printf("ring failures ok\n");
	return 0;
}

#else

int main(void)
{
	t_skip("seccomp filter test written for little-endian x86-64 and arm64");
}

#endif
