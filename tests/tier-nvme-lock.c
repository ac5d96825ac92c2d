// SPDX-License-Identifier: MIT
/*
 * One NVMe tier per file.  Two kvmmd on one node (one per GPU) given the
 * same --nvme-path would write each other's slots and serve each other's
 * bytes; the tier takes an exclusive lock on the file:
 *
 *   - another process's tier_nvme_open() of an open tier's file is -EBUSY
 *     (the first keeps working: it writes a block after it); once the first
 *     is closed the file opens again at once (the lock ends with close(),
 *     not with the io_uring ring's teardown) and its blocks are recovered;
 *   - two daemons: a kvmmd whose NVMe file another kvmmd holds refuses to
 *     start (--cache-block-pages opens the tiers at start), its log
 *     naming the file and the reason; the first serves on.
 */
#include "kvmm/kvmmd/tier_nvme.h"
#include "tests/lib/daemon.h"
#include "tests/lib/nvme_tier.h"
#include "tests/lib/page_alloc.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAYLOAD (64 * 1024)
#define NSLOTS 4

/* Another process holds the tier open until told to close it. */
static void another_process(const char *path)
{
	struct tier_nvme_config cfg = {
		.size = sizeof(cfg),
		.path = path,
		.capacity_bytes = NT_CAPACITY(NSLOTS, PAYLOAD),
		.payload_bytes = PAYLOAD,
	};
	int up[2], go[2], st;
	struct tier_nvme_stats ts;
	struct tier_nvme *t;
	char c = 0;
	pid_t p;

	t_ok(pipe(up));
	t_ok(pipe(go));
	p = fork();
	t_assert(p >= 0);
	if (p == 0) {
		unsigned char *buf = NULL;

		buf = t_page_alloc(PAYLOAD);
		t = nt_open(cfg, NULL, NULL);
		nt_put(t, 0x101, 0, buf, PAYLOAD);
		t_assert_eq(write(up[1], "u", 1), 1);
		t_assert_eq(read(go[0], &c, 1), 1);
		nt_put(t, 0x102, 0, buf,
		       PAYLOAD); /* unharmed by the refused open */
		tier_nvme_close(t);
		_exit(0);
	}
	if (read(up[0], &c, 1) != 1) { /* the child skipped or failed */
		t_assert_eq(waitpid(p, &st, 0), p);
		t_assert(WIFEXITED(st));
		if (WEXITSTATUS(st) == 77)
			t_skip("NVMe tier not possible here (see above)");
		t_fail("child exited %d", WEXITSTATUS(st));
	}
	t_assert_eq(tier_nvme_open(&cfg, &t), -EBUSY);
	t_assert_eq(write(go[1], "g", 1), 1);
	t_assert_eq(waitpid(p, &st, 0), p);
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* closed: it opens here, the other's two blocks recovered */
	t_ok(tier_nvme_open(&cfg, &t));
	tier_nvme_get_stats(t, &ts);
	t_assert_eq(ts.recovered_slots, 2);
	tier_nvme_close(t);
	/* and again at once in the same process: close() let it go */
	t_ok(tier_nvme_open(&cfg, &t));
	tier_nvme_close(t);
	close(up[0]);
	close(up[1]);
	close(go[0]);
	close(go[1]);
}

static void two_daemons(const char *path)
{
	const char *args[] = { "--cache-block-pages",
			       "4",
			       "--host-mem",
			       "4M",
			       "--nvme-path",
			       path,
			       "--nvme-size",
			       "8M",
			       NULL };
	static char log[1 << 16];
	struct kvmm_status_reply st;
	struct td_daemon d1, d2;
	int r;

	r = td_start(&d1, args);
	if (r)
		t_fail("first kvmmd: %s", strerror(-r));
	t_assert_eq(td_start(&d2, args), -ECHILD);
	t_assert(td_read_log(&d2, log, sizeof(log)) >= 0);
	if (!strstr(log, "is in use by another NVMe tier (process ") ||
	    !strstr(log, path))
		td_dump_log(&d2);
	t_assert(strstr(log, "is in use by another NVMe tier (process ") !=
		 NULL);
	t_assert(strstr(log, "each kvmmd needs its own --nvme-path") != NULL);
	unlink(d2.log);
	rmdir(d2.dir);
	t_ok(td_status(&d1, &st)); /* the first serves on */
	t_assert_eq(td_stop(&d1), 0);
}

int main(void)
{
	const char *dir = getenv("KVMM_NVME_TEST_DIR");
	char path[256];

	if (!dir)
		dir = "/var/tmp";
	snprintf(path, sizeof(path), "%s/kvmm-tier-nvme-lock-%d", dir,
		 getpid());
	another_process(path);
	unlink(path);
	two_daemons(path);
	unlink(path);
	return 0;
}
