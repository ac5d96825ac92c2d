// SPDX-License-Identifier: MIT
/*
 * A client opens the GPU its kvmmd serves, named by the UUID in the
 * HELLO reply, not ordinal 0: kvmmd on the second of two GPUs (one kvmmd
 * per GPU), a client that sees both extends a sequence (access granted on
 * the pages' own GPU; the mock libcuda refuses any other, as a GPU
 * without peer access does); one whose devices are
 * renumbered (KVMM_MOCK_VISIBLE, the mock's CUDA_VISIBLE_DEVICES: the
 * served GPU is its ordinal 0) does too; one that cannot see that GPU
 * fails kvmm_connect with -ENODEV.  Needs two GPUs, or the mock libcuda
 * (tests/vmm-cuda-mock.sh runs it with KVMM_MOCK_DEVICES=2); skips (77)
 * otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"
#include "vmm/vmm.h"

/* Connect, extend one sequence (its pages mapped and made accessible
 * here): 0 or -errno. */
static int use_daemon(const char *want_uuid)
{
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 1,
				       .kv_heads = 8,
				       .head_dim = 128,
				       .dtype_bytes = 2,
				       .max_seqs = 2,
				       .max_tokens = 4096 };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq;
	int err;

	err = kvmm_connect(NULL, &c);
	if (err)
		return err;
	t_assert(strstr(c->backend->device_name, want_uuid) != NULL);
	t_ok(kvmm_region_create(c, &ro, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, 100));
	t_ok(kvmm_seq_close(r, seq));
	kvmm_region_destroy(r);
	kvmm_disconnect(c);
	return 0;
}

/* use_daemon() in a child that sees the devices visible lists. */
static int use_daemon_seeing(const char *visible, const char *want_uuid)
{
	int status;
	pid_t pid = fork();

	t_assert(pid >= 0);
	if (pid == 0) {
		setenv("KVMM_MOCK_VISIBLE", visible, 1);
		_exit(-use_daemon(want_uuid));
	}
	t_assert(waitpid(pid, &status, 0) == pid);
	t_assert(WIFEXITED(status));
	return -WEXITSTATUS(status);
}

int main(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA, .cuda_device = 1 };
	const char *extra[] = { "--backend",	 "cuda", "--page-size", "2M",
				"--cuda-device", NULL,	 NULL };
	struct vmm_backend *b;
	struct td_daemon d;
	char uuid[64];
	const char *p;
	int err;

	err = vmm_backend_open(&cfg, &b);
	if (err == -ENODEV || err == -ENOTSUP)
		t_skip("no second GPU (vmm_cuda_open: %s)", strerror(-err));
	t_ok(err);
	p = strstr(b->device_name, " GPU-");
	t_assert(p != NULL);
	snprintf(uuid, sizeof(uuid), "%s", p + 1);
	vmm_backend_close(b);

	extra[5] = uuid;
	t_ok(td_start(&d, extra));
	err = use_daemon(uuid);
	if (err)
		td_dump_log(&d);
	t_ok(err);
	printf("a client seeing both GPUs used %s\n", uuid);
	if (getenv("KVMM_MOCK_DEVICES")) {
		t_ok(use_daemon_seeing("1", uuid));
		t_ok(use_daemon_seeing("1,0", uuid));
		t_assert_eq(use_daemon_seeing("0", uuid), -ENODEV);
		printf("renumbered: the same GPU; hidden: -ENODEV\n");
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
