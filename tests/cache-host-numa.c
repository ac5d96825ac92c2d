// SPDX-License-Identifier: MIT
/*
 * Where the host tier's slab goes.  On a multi-socket GPU server the host
 * tier belongs on the GPU's NUMA node (copies to the GPU cross no socket
 * link), so kvmmd places it there by the backend's PCI address, or where
 * --host-numa-node says; and it says which in its log.
 *
 *   - --host-numa-node 0: the tier's start-up line says node 0 (asked for);
 *   - no option, host backend (no PCI address): the CPU's node;
 *   - with KVMM_TEST_GPU_PCI=1 (vmm-cuda-mock.sh runs the test so, with
 *     the mock libcuda on LD_LIBRARY_PATH for kvmmd and the client; its
 *     GPU is FFFF:F0:1F.7, a device no machine has): kvmmd,
 *     on the cuda backend, looks the GPU's address up in sysfs, says that
 *     it is unknown and falls back to the CPU's node;
 *   - a node past the machine's last one is refused at start, with the
 *     range in the message, and so is a non-number.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

/* Publish one block, which opens the tiers, then return the log. */
static void run(const char *const *extra, char *log, size_t len)
{
	struct kvmm_connect_opts co = { .size = sizeof(co), .name = "numa" };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 2,
				       .max_tokens = 65536 };
	const uint64_t h = 0x4e0a;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct td_daemon d;
	uint32_t s;
	int err;

	err = td_start(&d, extra);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	co.socket_path = d.sock;
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, kvmm_region_tokens_per_block(r)));
	t_assert_eq(kvmm_block_publish(r, s, 0, 1, 0, &h), 1);
	kvmm_disconnect(c);
	t_assert(td_read_log(&d, log, len) >= 0);
	t_assert_eq(td_stop(&d), 0);
}

/* kvmmd ARG...: its exit status; its output in out. */
static int refused(const char *arg, char *out, size_t len)
{
	char cmd[512], path[256];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd),
		 "%s --foreground --backend host --socket /nonexistent/s "
		 "--host-mem 1M --host-numa-node %s 2>&1",
		 td_build_path("kvmmd", path, sizeof(path)), arg);
	p = popen(cmd, "r");
	t_assert(p != NULL);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	return pclose(p);
}

int main(void)
{
	const char *asked[] = { "--host-mem", "1M", "--host-numa-node", "0",
				NULL };
	const char *dflt[] = { "--host-mem", "1M", NULL };
	const char *cuda[] = { "--backend",  "cuda", "--page-size", "2M",
			       "--host-mem", "16M",  NULL };
	static char log[1 << 16];
	char out[1024];
	int st;

	if (getenv("KVMM_TEST_GPU_PCI")) {
		/* the mock GPU's address, which sysfs here does not know */
		run(cuda, log, sizeof(log));
		t_assert(strstr(
			log,
			"tier_host: NUMA node of GPU FFFF:F0:1F.7 unknown (No such file or directory); using the current CPU's node"));
		t_assert(strstr(log, "(the CPU's)") ||
			 strstr(log, "(no libnuma)"));
		return 0;
	}
	run(asked, log, sizeof(log));
#if HAVE_LIBNUMA
	t_assert(strstr(log, "on NUMA node 0 (asked for)") != NULL);
#else
	t_assert(strstr(log, "(no libnuma)") != NULL);
#endif
	run(dflt, log, sizeof(log));
	t_assert(strstr(log, "tier_host: ") != NULL);
	t_assert(strstr(log, "(the CPU's)") || strstr(log, "(no libnuma)"));
	t_assert(strstr(log, "NUMA node of GPU") == NULL);

	st = refused("4096", out, sizeof(out));
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	t_assert(
		strstr(out,
		       "kvmmd: --host-numa-node 4096: this machine's NUMA nodes are 0 to ") !=
		NULL);
	st = refused("gpu", out, sizeof(out));
	t_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
	t_assert(strstr(out, "--host-numa-node") != NULL);
	return 0;
}
