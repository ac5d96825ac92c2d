// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A sequence's block table costs what the sequence uses, not what its
 * region allows.  In a region of 2^24 one-token blocks (max_tokens 2^24,
 * so max_blocks 2^24, 128 MB of block pointers per sequence when the
 * table had a slot for each), 256 SEQ_OPENs grow kvmmd's VmSize by less
 * than 64 MB (it was 32 GB), closing an empty sequence and ending the
 * session with all of them open leave another client's NOP waiting less
 * than 2 s (each close scanned 16M entries: about 10 s for the session
 * end here).  The blocks a sequence does use behave as before: an
 * extend of 100 blocks, a truncate to 80, a revocation from block 50
 * (ADMIN_REVOKE: 30 blocks' pages REVOKING), then none left from 50 on
 * nor from block 2^24 - 1 (-ENODATA), block 2^24 -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-common.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NSEQ 256
#define MAX_TOKENS (1u << 24)

/* kvmmd's VmSize in KiB. */
static uint64_t vm_size_kb(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	t_assert(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu", (unsigned long long *)&kb) ==
		    1)
			break;
	fclose(f);
	t_assert(kb > 0);
	return kb;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ull + ts.tv_nsec / 1000000;
}

static int seq_call_reply(struct cc *c, uint16_t cmd, uint32_t seq, void *rep,
			  size_t cap)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref),
				       .region_id = c->region,
				       .seq_id = seq };

	return cc_call(c, cmd, &ref, sizeof(ref), rep, cap, NULL, NULL);
}

static int seq_call(struct cc *c, uint16_t cmd, uint32_t seq)
{
	return seq_call_reply(c, cmd, seq, NULL, 0);
}

int main(void)
{
	/* 256 heads x 128 dims x 2 bytes: one token is one 64 KiB page */
	struct kvmm_region_create rc = { .size = sizeof(rc),
					 .layers = 1,
					 .kv_heads = 256,
					 .head_dim = 128,
					 .dtype_bytes = 2,
					 .max_seqs = NSEQ + 1,
					 .max_tokens = MAX_TOKENS };
	struct kvmm_region_create_reply rr;
	struct kvmm_seq_open_reply so;
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_stats_reply sr;
	struct kvmm_status_reply st;
	struct kvmm_conn *admin;
	uint64_t vm0, vm1, t0, dt;
	struct td_daemon d;
	struct cc c;
	uint32_t seq;
	int err;

	/* the revocation below stays unacknowledged: no cut-off meanwhile */
	const char *args[] = { "--revoke-timeout", "600000", NULL };

	err = td_start(&d, args);
	if (err)
		t_fail("daemon: %s", strerror(-err));
	cc_connect(&c, d.sock);
	t_ok(cc_call(&c, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), &rr,
		     sizeof(rr), NULL, NULL));
	t_assert_eq(rr.tokens_per_block, 1);
	t_assert_eq(rr.max_blocks, MAX_TOKENS);
	c.region = rr.region_id;

	/* an empty sequence: open and close cost nothing of max_blocks */
	vm0 = vm_size_kb(d.pid);
	seq = cc_seq_open(&c);
	t_ok(seq_call(&c, KVMM_CMD_SEQ_CLOSE, seq));
	for (int i = 0; i < NSEQ; i++)
		t_ok(seq_call_reply(&c, KVMM_CMD_SEQ_OPEN, 0, &so, sizeof(so)));
	vm1 = vm_size_kb(d.pid);
	printf("VmSize %llu KiB before, %llu KiB after %d opens\n",
	       (unsigned long long)vm0, (unsigned long long)vm1, NSEQ);
	t_assert(vm1 < vm0 + 64 * 1024);

	/* the blocks one of them uses: 100, then 80, then revoked from 50 */
	ex.region_id = c.region;
	ex.seq_id = so.seq_id;
	ex.new_len = 100;
	t_ok(cc_call(&c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0, NULL,
		     NULL));
	ex.new_len = 80;
	t_ok(cc_call(&c, KVMM_CMD_SEQ_TRUNCATE, &ex, sizeof(ex), NULL, 0, NULL,
		     NULL));
	t_ok(cc_call(&c, KVMM_CMD_STATS, NULL, 0, &sr, sizeof(sr), NULL, NULL));
	t_assert_eq(sr.pages_owned, 80 * 2);
	t_ok(kc_connect_admin(d.sock, &admin));
	t_ok(ar_revoke_on(admin, sr.session_id, c.region, so.seq_id, 50));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_revoking, 30 * 2);
	t_assert_eq(ar_revoke_on(admin, sr.session_id, c.region, so.seq_id, 50),
		    -ENODATA);
	t_assert_eq(ar_revoke_on(admin, sr.session_id, c.region, so.seq_id,
				 MAX_TOKENS - 1),
		    -ENODATA);
	t_assert_eq(ar_revoke_on(admin, sr.session_id, c.region, so.seq_id,
				 MAX_TOKENS),
		    -EINVAL);

	/* the session ends with 256 sequences open (nothing is mapped
	 * here: BYE releases the holds): the status that shows it gone
	 * comes at once */
	t0 = now_ms();
	cc_disconnect(&c);
	do {
		t_ok(kc_request(admin, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
				sizeof(st), NULL));
		dt = now_ms() - t0;
	} while (st.sessions > 1 && dt < 60000);
	printf("session gone after %llu ms\n", (unsigned long long)dt);
	t_assert_eq(st.sessions, 1);
	t_assert(dt < 2000);
	kvmm_disconnect(admin);
	t_ok(td_wait_idle(&d, 5000, &st));
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
