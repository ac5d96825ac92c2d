// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A connection inherited through fork() can only be dropped.  An engine
 * connects (map-ahead on, so its thread waits on the connection's
 * condition variable), maps 4 blocks and writes them, then forks a worker.
 * In the worker every call on the inherited connection and region returns
 * -ECHILD (kvmm_strerror() says why; kvmm_get_daemon_info() too, which
 * needs no round trip and used to answer), kvmm_seq_k_ptr() gives 0, and
 * kvmm_disconnect() returns (it used to hang in pthread_cond_destroy(),
 * or, past that, break the parent's session and say BYE for it) and
 * unmaps the worker's copy of the KV range; a connection of its own
 * works.  The engine's session is untouched: socket and ring calls
 * work, its bytes are as written, it extends to every block.  Cut off then
 * (kvmmctl kill), its pages are quarantined, every one it held (the
 * worker's BYE used to spare them: the next client got them while the
 * engine still wrote them).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 4

static struct kvmm_conn *connect_engine(const char *sock, const char *name)
{
	/* map-ahead at its default (on): its thread is what hung */
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = name };
	struct kvmm_conn *c;

	t_ok(kvmm_connect(&co, &c));
	return c;
}

static int worker(const char *sock, struct kvmm_conn *c, struct kvmm_region *r,
		  uint32_t seq, uint64_t k0)
{
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_daemon_info di;
	uint32_t ids[CC_PPB], s2;
	struct kvmm_conn *own;

	alarm(20); /* a hang shows as SIGALRM, not as the runner's timeout */
	t_assert_eq(kvmm_nop(c, 0), -ECHILD);
	t_assert_eq(kvmm_nop(c, 1), -ECHILD);
	t_assert_eq(kvmm_get_stats(c, &st), -ECHILD);
	/* answered from the connection's own copy of HELLO, but the session
	 * is the parent's: refused too, and nothing written */
	memset(&di, 0xa5, sizeof(di));
	di.size = sizeof(di);
	t_assert_eq(kvmm_get_daemon_info(c, &di), -ECHILD);
	t_assert_eq(di.size, sizeof(di));
	t_assert_eq(di.abi_major, 0xa5a5a5a5u);
	t_assert_eq(di.page_size, 0xa5a5a5a5a5a5a5a5ull);
	t_assert_eq(kvmm_poll_fd(c), -ECHILD);
	t_assert_eq(kvmm_step_begin(c), -ECHILD);
	t_assert_eq(kvmm_step_end(c), -ECHILD);
	t_assert_eq(kvmm_process_revocations(c), -ECHILD);
	t_assert_eq(kvmm_block_unpin(c, 1), -ECHILD);
	t_assert_eq(kvmm_seq_extend(r, seq, (NB + 2) * CC_TPB), -ECHILD);
	t_assert_eq(kvmm_seq_truncate(r, seq, 0), -ECHILD);
	t_assert_eq(kvmm_seq_len(r, seq), -ECHILD);
	t_assert_eq(kvmm_seq_block_pages(r, seq, 0, ids, CC_PPB), -ECHILD);
	t_assert_eq(kvmm_seq_open(r, &s2), -ECHILD);
	t_assert_eq(kvmm_seq_close(r, seq), -ECHILD);
	t_assert_eq(kvmm_seq_k_ptr(r, seq, 0), 0);
	t_assert_eq(kvmm_region_destroy(r), -ECHILD);
	t_assert(strstr(kvmm_strerror(-ECHILD), "fork") != NULL);

	kvmm_disconnect(c);
	/* the worker's copy of the engine's KV range is gone */
	t_assert_eq(msync((void *)(uintptr_t)k0, CC_PAGE, MS_ASYNC), -1);
	t_assert_eq(errno, ENOMEM);

	own = connect_engine(sock, "worker");
	t_ok(kvmm_nop(own, 0));
	t_ok(kvmm_nop(own, 1));
	kvmm_disconnect(own);
	return 0;
}

int main(void)
{
	struct kvmm_region_opts ro = cc_region_opts();
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_daemon_info di = { 0 };
	struct kvmm_status_reply ds;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	struct td_daemon d;
	unsigned char *k0;
	char cmd[64], out[256];
	uint32_t seq;
	pid_t pid;

	cc_start(&d, NULL);
	c = connect_engine(d.sock, "engine");
	di.size = sizeof(di);
	t_ok(kvmm_get_daemon_info(c, &di));
	t_assert_eq(di.abi_major, KVMM_ABI_MAJOR);
	t_assert_eq(di.page_size, CC_PAGE);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, NB * CC_TPB));
	k0 = (unsigned char *)(uintptr_t)kvmm_seq_k_ptr(r, seq, 0);
	memset(k0, 0x5a, (size_t)NB * CC_PAGE);

	fflush(NULL);
	pid = fork();
	t_assert(pid >= 0);
	if (pid == 0)
		_exit(worker(d.sock, c, r, seq, (uintptr_t)k0));
	t_assert_eq(cc_wait_child(pid), 0);

	/* the engine's session goes on as before */
	t_ok(kvmm_nop(c, 0));
	t_ok(kvmm_nop(c, 1));
	t_assert_eq(kvmm_seq_len(r, seq), NB * CC_TPB);
	for (size_t i = 0; i < (size_t)NB * CC_PAGE; i++)
		if (k0[i] != 0x5a)
			t_fail("engine's byte %zu is %#x after the worker left",
			       i, k0[i]);
	/* every block: the map-ahead thread has none left to add, so the
	 * pages held stay as counted here */
	t_ok(kvmm_seq_extend(r, seq, ro.max_tokens));
	t_ok(kvmm_get_stats(c, &st));
	t_assert_eq(st.pages_held, ro.max_tokens / CC_TPB * CC_PPB);

	/* cut off while it lives and maps its pages: all quarantined */
	snprintf(cmd, sizeof(cmd), "kill %u", st.session_id);
	t_assert_eq(td_kvmmctl(d.sock, cmd, out, sizeof(out)), 0);
	cc_wait_quarantined(&d, st.pages_held);
	t_ok(td_status(&d, &ds));
	printf("engine cut off after its worker dropped the connection: %llu of %llu pages quarantined\n",
	       (unsigned long long)ds.pages_quarantined,
	       (unsigned long long)st.pages_held);
	t_assert_eq(kvmm_nop(c, 1), -ECONNRESET);
	kvmm_disconnect(c);
	cc_stop(&d);
	return 0;
}
