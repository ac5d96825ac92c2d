// SPDX-License-Identifier: MIT
/*
 * SIGTERM with clients connected and pages mapped: kvmmd exits 0, releases
 * every page (its log says none were left allocated), removes its socket,
 * and the client sees the connection gone (an error, not a hang) while its
 * own mappings stay readable.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 4,
				       .kv_heads = 1,
				       .head_dim = 128,
				       .dtype_bytes = 4,
				       .max_seqs = 4,
				       .max_tokens = 1024 };
	struct td_daemon d;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	struct stat sb;
	uint32_t s;
	char line[256], logpath[sizeof(d.log)];
	bool clean = false;
	FILE *f;
	int err, status = -1;
	pid_t pid;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	t_ok(kvmm_connect(&co, &c));
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &s));
	t_ok(kvmm_seq_extend(r, s, 700));
	memset((void *)kvmm_seq_k_ptr(r, s, 3), 0x33, 700 * 512);

	/* Stop it by hand to look at the log before td_stop cleans up. */
	pid = d.pid;
	kill(pid, SIGTERM);
	for (int i = 0; i < 1500 && waitpid(pid, &status, WNOHANG) != pid; i++)
		usleep(10000);
	t_assert(WIFEXITED(status));
	t_assert_eq(WEXITSTATUS(status), 0);
	d.pid = 0;
	t_assert(stat(d.sock, &sb) < 0 && errno == ENOENT);
	snprintf(logpath, sizeof(logpath), "%s", d.log);
	f = fopen(logpath, "r");
	t_assert(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "stopped: 0 pages allocated at exit"))
			clean = true;
	fclose(f);
	if (!clean)
		td_dump_log(&d);
	t_assert(clean);

	t_assert(kvmm_nop(c, 1) < 0);
	t_assert(kvmm_nop(c, 0) < 0);
	t_assert_eq(((unsigned char *)kvmm_seq_k_ptr(r, s, 3))[699 * 512],
		    0x33);
	kvmm_disconnect(c);
	td_stop(&d);
	return 0;
}
