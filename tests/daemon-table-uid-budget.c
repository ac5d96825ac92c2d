// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * The block-table budget is one uid's, not one session's: under
 * --max-table-entries-per-uid 1024, prefix opens that share one cached
 * 64-block prefix into sequence after sequence fit 16 times in session A;
 * a second session B of the same uid then gets -ENOBUFS for its first
 * (a budget per session let each of a client's sessions grow its tables
 * to 2^20 entries, 8 MiB: 16 sessions made kvmmd grow by 129 MiB).  A
 * sequence A closes gives B room for one open; A's end gives B room for
 * 15 more.  As root, a process of another uid has a budget of its own
 * meanwhile (16 opens).
 */
#include <errno.h>
#include <string.h>

#include "tests/cache-uids.h"
#include "tests/seq-table-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NB 64
#define BUDGET 1024
#define OTHER_UID 62311

static uint64_t hashes[NB];

/* Prefix opens until one fails: how many worked (the failure must be
 * -ENOBUFS); the first one's sequence in *first. */
static uint32_t open_until_full(struct cc *c, uint32_t *first)
{
	uint32_t n, seq;
	int err = 0;

	for (n = 0; n <= BUDGET / NB; n++) {
		err = st_prefix_open(c, hashes, NB, &seq);
		if (err)
			break;
		if (!n && first)
			*first = seq;
	}
	t_assert_eq(err, -ENOBUFS);
	return n;
}

static void wait_sessions(const struct td_daemon *d, uint64_t n)
{
	struct kvmm_status_reply st;

	for (int i = 0; i < 5000; i++) {
		t_ok(td_status(d, &st));
		if (st.sessions == n)
			return;
		usleep(1000);
	}
	t_fail("kvmmd has %llu sessions, expected %llu",
	       (unsigned long long)st.sessions, (unsigned long long)n);
}

/* As root: a process of another uid fits a whole budget of its own. */
static void other_uid(const char *sock)
{
	pid_t p = fork();

	t_assert(p >= 0);
	if (p == 0) {
		struct cc c;

		cu_become(OTHER_UID, OTHER_UID);
		cc_connect(&c, sock);
		st_region(&c, 64, NB);
		t_assert_eq(open_until_full(&c, NULL), BUDGET / NB);
		cc_disconnect(&c);
		_exit(0);
	}
	t_assert_eq(cc_wait_child(p), 0);
}

int main(void)
{
	const char *args[] = { "--max-table-entries-per-uid", "1024",
			       "--socket-mode", "0666", NULL };
	uint32_t seq, first = 0;
	struct td_daemon d;
	struct cc a, b;

	for (uint32_t i = 0; i < NB; i++)
		hashes[i] = 0x7ab2e000 + i;
	cu_start(&d, args);
	st_publish(d.sock, hashes, NB);

	cc_connect(&a, d.sock);
	st_region(&a, 64, NB);
	t_assert_eq(open_until_full(&a, &first), BUDGET / NB);

	/* the same uid's second session shares the budget */
	cc_connect(&b, d.sock);
	st_region(&b, 64, NB);
	t_assert_eq(st_prefix_open(&b, hashes, NB, &seq), -ENOBUFS);

	if (geteuid() == 0)
		other_uid(d.sock);
	else
		printf("not root: another uid's budget not checked\n");

	/* what A gives back, B gets */
	t_ok(cc_call(&a, KVMM_CMD_SEQ_CLOSE,
		     &(struct kvmm_region_ref){
			     .size = sizeof(struct kvmm_region_ref),
			     .region_id = a.region,
			     .seq_id = first },
		     sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL));
	t_ok(st_prefix_open(&b, hashes, NB, &seq));
	t_assert_eq(st_prefix_open(&b, hashes, NB, &seq), -ENOBUFS);
	cc_disconnect(&a);
	wait_sessions(&d, 2); /* A's end seen: B and the status's own */
	t_assert_eq(open_until_full(&b, NULL), BUDGET / NB - 1);

	cc_disconnect(&b);
	wait_sessions(&d, 1);
	cc_stop(&d);
	printf("ok: %d entries per uid, shared by its sessions\n", BUDGET);
	return 0;
}
