// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * Revocations and the revocation ring's size, with a real kvmmd and a raw
 * client whose RQ has 16 entries (it maps the ring and takes entries off
 * it by hand):
 *   - a sequence of 8 blocks of 4 pages (32 pages, twice the ring) is
 *     taken back in pieces: ADMIN_REVOKE from block 0 revokes the last 4
 *     blocks (16 entries, the sequence is cut to 4 blocks) and answers
 *     -EAGAIN; -EBUSY while the entries are on the ring; once the client
 *     took them off, the rest (0).  Before, every such request was -EBUSY
 *     for good, even with the ring empty;
 *   - a block of more pages than the ring holds: -E2BIG;
 *   - `kvmmctl revoke` does the pieces itself ("revoked in 2 pieces";
 *     with --json the object naming the sequence and `"pieces":2`)
 *     while the client takes entries and acknowledges them;
 *   - a client that moves its RQ head out of range is cut off at the next
 *     revocation (-ECONNRESET to the admin; it was -EBUSY for good and
 *     the client kept its pages).
 */
#include <signal.h>
#include <sys/wait.h>

#include "tests/cache-common.h"
#include "tests/lib/admin_revoke.h"
#include "tests/lib/raw_ring.h"

#define RQ 16

/* a client of ABI 1.0, whose revocations are acknowledged whole */
static void raw_connect(struct raw_ring *r, const char *path)
{
	raw_ring_connect(r, path, 0, RQ);
}

static uint32_t session_id(struct raw_ring *r)
{
	struct kvmm_stats_reply st;

	t_ok(cc_call(&r->c, KVMM_CMD_STATS, NULL, 0, &st, sizeof(st), NULL,
		     NULL));
	return st.session_id;
}

/* A sequence of nblocks blocks of CC_PPB pages in region r->c.region. */
static uint32_t filled_seq(struct raw_ring *r, uint32_t nblocks)
{
	static uint32_t ids[16 * CC_PPB];
	uint32_t seq = cc_seq_open(&r->c);

	t_ok(cc_try_extend(&r->c, seq, nblocks * CC_TPB, ids));
	return seq;
}

static uint64_t pages_allocated(struct td_daemon *d)
{
	struct kvmm_status_reply st;

	t_ok(td_status(d, &st));
	return st.pages_allocated;
}

/*
 * `kvmmctl CMD` (revoke or --json revoke) of a new 8-block sequence,
 * while this process takes the entries off the ring: its output must be
 * want (NULL: the JSON object naming the sequence and 2 pieces).
 */
static void ctl_revoke(struct td_daemon *d, struct raw_ring *r, uint32_t sid,
		       const char *cmd, const char *want)
{
	uint32_t seq = filled_seq(r, 8), taken = 0;
	char json[256];
	int status;
	pid_t pid;

	if (!want) {
		snprintf(
			json, sizeof(json),
			"{\"session\":%u,\"region\":%u,\"seq\":%u,\"first_block\":0,\"pieces\":2}\n",
			sid, r->c.region, seq);
		want = json;
	}
	pid = fork();
	if (pid == 0) {
		static char out[4096];
		char args[128];

		snprintf(args, sizeof(args), "%s %u %u %u", cmd, sid,
			 r->c.region, seq);
		if (td_kvmmctl(d->sock, args, out, sizeof(out)) != 0) {
			fprintf(stderr, "kvmmctl %s failed:\n%s", args, out);
			_exit(1);
		}
		if (strcmp(out, want)) {
			fprintf(stderr, "kvmmctl %s printed:\n%s\nnot:\n%s",
				args, out, want);
			_exit(1);
		}
		_exit(0);
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		taken += raw_ring_take_entries(r);
		usleep(1000);
	}
	taken += raw_ring_take_entries(r);
	t_assert_eq(taken, 8 * CC_PPB);
	t_assert(WIFEXITED(status));
	t_assert_eq(WEXITSTATUS(status), 0);
	t_assert_eq(pages_allocated(d), 0);
}

int main(void)
{
	struct kvmm_region_create big = { .size = sizeof(big),
					  .layers = 16, /* 32 pages a block */
					  .kv_heads = 2,
					  .head_dim = 64,
					  .dtype_bytes = 2,
					  .max_seqs = 2,
					  .max_tokens = CC_TPB };
	struct kvmm_region_create_reply br;
	struct kvmm_status_reply st;
	struct kvmm_conn *admin;
	struct td_daemon d;
	struct raw_ring r;
	uint32_t sid, seq;

	t_ok(td_start(&d,
		      (const char *[]){ "--revoke-timeout", "60000", NULL }));
	t_ok(kc_connect_admin(d.sock, &admin));
	raw_connect(&r, d.sock);
	cc_region(&r.c);
	sid = session_id(&r);

	/* 32 pages on a ring of 16: two pieces */
	seq = filled_seq(&r, 8);
	t_assert_eq(pages_allocated(&d), 8 * CC_PPB);
	t_assert_eq(ar_revoke_on(admin, sid, r.c.region, seq, 0), -EAGAIN);
	t_assert_eq(ar_revoke_on(admin, sid, r.c.region, seq, 0), -EBUSY);
	t_assert_eq(raw_ring_take_entries(&r), RQ);
	t_assert_eq(pages_allocated(&d), 4 * CC_PPB); /* acked: freed */
	t_ok(ar_revoke_on(admin, sid, r.c.region, seq, 0));
	t_assert_eq(raw_ring_take_entries(&r), RQ);
	t_assert_eq(pages_allocated(&d), 0);
	t_assert_eq(ar_revoke_on(admin, sid, r.c.region, seq, 0), -ENODATA);

	/* a block that never fits */
	t_ok(cc_call(&r.c, KVMM_CMD_REGION_CREATE, &big, sizeof(big), &br,
		     sizeof(br), NULL, NULL));
	{
		struct kvmm_region_ref ref = { .size = sizeof(ref),
					       .region_id = br.region_id };
		struct kvmm_seq_extend ex = { .size = sizeof(ex),
					      .region_id = br.region_id,
					      .new_len = CC_TPB };
		struct kvmm_seq_open_reply so;

		t_ok(cc_call(&r.c, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &so,
			     sizeof(so), NULL, NULL));
		ex.seq_id = so.seq_id;
		t_ok(cc_call(&r.c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL,
			     0, NULL, NULL));
		t_assert_eq(ar_revoke_on(admin, sid, br.region_id, so.seq_id,
					 0),
			    -E2BIG);
		t_ok(cc_call(&r.c, KVMM_CMD_REGION_DESTROY, &ref, sizeof(ref),
			     NULL, 0, NULL, NULL));
	}

	/* kvmmctl revoke does the pieces while the client takes them, and
	 * says how many in text and in JSON */
	ctl_revoke(&d, &r, sid, "revoke", "revoked in 2 pieces\n");
	ctl_revoke(&d, &r, sid, "--json revoke", NULL);

	/* a ring head out of range: cut off, not -EBUSY for good */
	seq = filled_seq(&r, 1);
	__atomic_store_n(raw_ring_word(&r, r.off.rq_head), 0x10000000u,
			 __ATOMIC_RELEASE);
	t_assert_eq(ar_revoke_on(admin, sid, r.c.region, seq, 0), -ECONNRESET);
	for (int i = 0; i < 2000; i++) {
		t_ok(td_status(&d, &st));
		if (st.sessions_cut_off == 1)
			break;
		usleep(1000);
	}
	t_assert_eq(st.sessions_cut_off, 1);
	t_assert_eq(st.revocations_posted, 6);
	t_assert_eq(st.revocations_acked, 6);

	close(r.c.sock);
	kvmm_disconnect(admin);
	t_ok(td_stop(&d));
	printf("ok\n");
	return 0;
}
