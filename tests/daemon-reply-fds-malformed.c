// SPDX-License-Identifier: MIT
/*
 * A daemon that breaks the protocol in the middle of a reply's fds cannot
 * make libkvmm leak or map anything.  kvmmd with KVMMD_TEST_FDS_FAULT
 * spoils the first KVMM_CMD_FDS continuation of each reply: another
 * command (cmd), another request id (id), no REPLY flag (flags), or it
 * ends the session where the continuation should come (hangup).  A client
 * process extends a sequence by 128 blocks (512 page fds: the reply and
 * two continuations) and gets -EPROTO (-ECONNRESET for the hang-up); then
 * it holds the fds and the kvmm page mappings it held before (the 253
 * pages of the first message were imported and are released again), its
 * sequence is as long as before, and the connection is broken: a NOP
 * fails -EPROTO rather than reading the spoiled reply's leftovers as its
 * own answer.  The daemon logs the knob, and with the client gone nothing
 * stays mapped.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/client_fds.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define BLOCKS 128 /* one extend: 512 pages */

static const char *const args[] = { "--page-size", "4K", "--gpu-mem", "8M",
				    NULL };
static struct kvmm_region_opts ro = CF_REGION(BLOCKS, 31);
static const struct kvmm_connect_opts co = CF_CONNECT("fd-malformed");
static int expect_err;

static int client(void)
{
	struct kvmm_conn *c;
	struct kvmm_region *r;
	int fds, vmas, err;
	uint32_t s;

	cs_open(&co, &ro, &c, &r, &s);
	/* one block mapped before: its mappings must survive */
	t_ok(kvmm_seq_extend(r, s, CF_TPB));
	cf_fill(r, s, 0, 1, 7);
	fds = cf_count_fds();
	vmas = cf_page_vmas();
	err = kvmm_seq_extend(r, s, BLOCKS * CF_TPB);
	t_assert_eq(err, expect_err);
	t_assert_eq(cf_count_fds(), fds);
	t_assert_eq(cf_page_vmas(), vmas);
	t_assert_eq(kvmm_seq_len(r, s), CF_TPB);
	cf_check(r, s, 0, 1, 7);
	err = kvmm_nop(c, 1);
	t_assert(err < 0);
	if (expect_err == -EPROTO)
		t_assert_eq(err, -EPROTO);
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	static const struct {
		const char *fault;
		int err;
	} cases[] = {
		{ "cmd", -EPROTO },
		{ "id", -EPROTO },
		{ "flags", -EPROTO },
		{ "hangup", -ECONNRESET },
	};
	static char log[1 << 16];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kvmm_status_reply st;
		struct td_daemon d;
		char want[128];
		int err;

		setenv("KVMMD_TEST_FDS_FAULT", cases[i].fault, 1);
		err = td_start(&d, args);
		unsetenv("KVMMD_TEST_FDS_FAULT");
		if (err)
			t_fail("daemon: %s", strerror(-err));
		expect_err = cases[i].err;
		cf_run(&d, client, cases[i].fault);
		for (int k = 0; k < 500; k++) {
			t_ok(td_status(&d, &st));
			if (!st.pages_mapped && !st.sequences &&
			    st.sessions == 1)
				break;
			usleep(10000);
		}
		t_assert_eq(st.pages_mapped, 0);
		t_assert_eq(st.sequences, 0);
		t_assert(td_read_log(&d, log, sizeof(log)) >= 0);
		snprintf(want, sizeof(want),
			 "KVMMD_TEST_FDS_FAULT=%s:", cases[i].fault);
		if (!strstr(log, want))
			t_fail("no '%s' in the log:\n%s", want, log);
		t_assert_eq(td_stop(&d), 0);
		printf("%s: %s, nothing leaked or mapped\n", cases[i].fault,
		       strerror(-cases[i].err));
	}
	return 0;
}
