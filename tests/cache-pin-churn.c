// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Pins from several processes at once, at random: plain, TTL (1-30 ms),
 * priority-only and TTL + priority pins and unpins of 6 cached blocks,
 * under a quota of 4 records per session, against a real kvmmd (pool of
 * 8 blocks of 4 pages, no lower tier).  While they run, ADMIN_SESSIONS and
 * ADMIN_STATUS must agree (the sessions' records add up to the total, no
 * session above its quota, no more pinned bytes than the 6 blocks).  The
 * processes end in three ways (BYE, exit without it, SIGKILL); afterwards
 * no record is left and the daemon's policy holds no pin of theirs: an
 * extend over the whole pool, which needs every cached block's pages,
 * succeeds.  Run under ASan too (make SANITIZE=1 check T=pin).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "kvmm/kvmm.h"
#include "tests/cache-common.h"
#include "tests/lib/daemon.h"

#define NB 6
#define NPROC 3
#define ROUNDS 600
#define QUOTA 4
#define BLOCK_BYTES ((uint64_t)CC_PPB * CC_PAGE)

static uint64_t hash_of(int b)
{
	return 0xc30000ull + b + 1;
}

/* One churning process: k = 0 says BYE, 1 exits without it, 2 waits to
 * be killed. */
static void churn(const char *sock, int k, int ready)
{
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "churn",
					.map_ahead_set = 1 };
	unsigned seed = 1234 + k;
	struct kvmm_conn *c;

	t_ok(kvmm_connect(&co, &c));
	for (int i = 0; i < ROUNDS; i++) {
		struct kvmm_pin_opts o = { .size = sizeof(o) };
		uint64_t h = hash_of(rand_r(&seed) % NB);
		int op = rand_r(&seed) % 5, r;

		if (op == 0) {
			r = kvmm_block_unpin(c, h);
			if (r && r != -ENOENT)
				t_fail("unpin: %d", r);
			continue;
		}
		if (op == 2 || op == 4) {
			o.flags |= KVMM_PIN_F_TTL;
			o.ttl_ns = (1 + rand_r(&seed) % 30) * 1000000ull;
		}
		if (op == 3 || op == 4) {
			o.flags |= KVMM_PIN_F_PRIORITY;
			o.priority = (int)(rand_r(&seed) % 256) - 128;
		}
		if (op == 3)
			o.flags |= KVMM_PIN_F_PRIORITY_ONLY;
		r = kvmm_block_pin(c, h, &o);
		if (r && r != -EDQUOT)
			t_fail("pin flags %u: %d", o.flags, r);
		if (!r)
			t_assert(o.pins >= 1 && o.pins <= QUOTA);
		if (i % 64 == 0)
			usleep(1000); /* let some TTLs pass */
	}
	t_assert_eq(write(ready, "d", 1), 1);
	if (k == 0)
		kvmm_disconnect(c);
	if (k == 2)
		for (;;)
			pause();
	_exit(0);
}

/* The sessions' records add up to the status's, within the bounds. */
static uint64_t check_counts(struct cc *adm)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	struct kvmm_status_reply st;
	uint64_t sum = 0;

	/* one loop iteration answers both: nothing changes between them
	 * except by another client's command in between, so retry then */
	for (int tries = 0; tries < 100; tries++) {
		uint64_t before;

		t_ok(cc_call(adm, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			     sizeof(st), NULL, NULL));
		before = st.pins;
		t_ok(cc_call(adm, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			     sizeof(buf), NULL, NULL));
		sum = 0;
		for (uint32_t i = 0; i < rep->nr; i++) {
			const struct kvmm_session_info *s = &rep->sessions[i];

			t_assert(s->pins <= QUOTA);
			t_assert_eq(s->pin_quota, QUOTA);
			t_assert_eq(s->pinned_bytes, s->pins * BLOCK_BYTES);
			sum += s->pins;
		}
		t_ok(cc_call(adm, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			     sizeof(st), NULL, NULL));
		t_assert(st.pinned_bytes <= NB * BLOCK_BYTES);
		t_assert(st.pinned_bytes <= st.pins * BLOCK_BYTES);
		if (st.pins == before && st.pins == sum)
			return sum;
	}
	t_fail("sessions' pins never matched the status: %llu",
	       (unsigned long long)sum);
}

int main(void)
{
	const char *args[] = { "--gpu-mem", "2M",	   "--cache-gpu-blocks",
			       "8",	    "--pin-quota", "4",
			       NULL };
	uint32_t pub[NB * CC_PPB], ids[8 * CC_PPB];
	struct kvmm_status_reply st;
	uint64_t h[NB], max = 0;
	pid_t p[NPROC];
	int ready[2], done = 0;
	struct td_daemon d;
	struct cc adm, b;
	uint32_t seq;
	char ch;

	td_start_ok(&d, args);
	for (int i = 0; i < NB; i++)
		h[i] = hash_of(i);
	t_assert_eq(cc_publish_content(d.sock, h, NB, 31, pub), 0);
	cc_connect(&adm, d.sock);
	cc_region(&adm);
	{
		struct kvmm_prefix_open_reply rep;
		uint32_t got[NB * CC_PPB];

		cc_prefix(&adm, h, NB, &rep, got); /* all there, as written */
		t_assert_eq(rep.from_gpu, NB);
		cc_check(&adm, got, NB, 31);
		cc_seq_close(&adm, rep.seq_id, got, NB * CC_PPB);
	}
	t_ok(pipe(ready));
	for (int k = 0; k < NPROC; k++) {
		p[k] = fork();
		t_assert(p[k] >= 0);
		if (p[k] == 0) {
			close(ready[0]);
			churn(d.sock, k, ready[1]);
		}
	}
	close(ready[1]);
	t_ok(fcntl(ready[0], F_SETFL, O_NONBLOCK));
	while (done < NPROC) {
		uint64_t n = check_counts(&adm);

		if (n > max)
			max = n;
		if (read(ready[0], &ch, 1) == 1)
			done++;
	}
	printf("most records at once: %llu\n", (unsigned long long)max);
	t_assert(max > 0);
	kill(p[2], SIGKILL);
	for (int k = 0; k < NPROC; k++)
		t_assert_eq(cc_wait_child(p[k]), k == 2 ? 128 + SIGKILL : 0);
	close(ready[0]);
	for (int i = 0; i < 500; i++) {
		t_ok(cc_call(&adm, KVMM_CMD_ADMIN_STATUS, NULL, 0, &st,
			     sizeof(st), NULL, NULL));
		if (st.pins == 0 && st.sessions == 1)
			break;
		usleep(10000);
	}
	t_assert_eq(st.pins, 0);
	t_assert_eq(st.pinned_bytes, 0);
	usleep(40000); /* past every TTL the policy was told */
	cc_connect(&b, d.sock);
	cc_region(&b);
	seq = cc_seq_open(&b);
	/* the whole pool: every cached block must go, none is held */
	t_ok(cc_try_extend(&b, seq, 8 * CC_TPB, ids));
	t_assert_eq(cc_overlap(ids, 8 * CC_PPB, pub, NB * CC_PPB), NB * CC_PPB);
	cc_seq_close(&b, seq, ids, 8 * CC_PPB);
	cc_disconnect(&b);
	cc_disconnect(&adm);
	td_stop_ok(&d);
	return T_PASS;
}
