// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A client waiting for a deferred PREFIX_OPEN reply cannot acknowledge a
 * revocation (libkvmm applies revocations under the socket lock the open
 * holds), so its revocation clock stops while it waits: a real kvmmd with
 * --revoke-timeout 400 ms whose restores each wait 300 ms, content 0 (8
 * blocks) on its NVMe tier.  A libkvmm client process with a sequence of
 * its own opens content 0 (about 1.2 s of restores); meanwhile the admin
 * revokes blocks 1.. of that other sequence.  The client is not cut off:
 * its open returns all 8 blocks, it then processes the revocation, and
 * the daemon counts it acknowledged, none timed out; the restored blocks
 * are then found cached and byte-identical.
 */
#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/cache-restore-common.h"
#include "tests/lib/revoke_client.h"

static int client(const char *sock, int wr, int rd)
{
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = CC_L,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 4,
				       .max_tokens = 16 * CC_TPB };
	struct kvmm_connect_opts co = { .size = sizeof(co),
					.socket_path = sock,
					.name = "restore-revoke",
					.map_ahead_set = 1 };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t s, s2, nb;
	uint64_t h[CR_NB];
	struct rc_ids ids;
	char go;

	if (kvmm_connect(&co, &c) || kvmm_region_create(c, &ro, &r) ||
	    kvmm_seq_open(r, &s) || kvmm_seq_extend(r, s, 3 * CC_TPB) ||
	    kvmm_get_stats(c, &ks))
		return 1;
	ids = (struct rc_ids){ ks.session_id, r->id, s };
	if (write(wr, &ids, sizeof(ids)) != sizeof(ids) ||
	    read(rd, &go, 1) != 1)
		return 2;
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(0, b);
	if (kvmm_seq_open_prefix(r, h, CR_NB, &s2, &nb))
		return 3; /* cut off while it waited */
	if (nb != CR_NB)
		return 4;
	if (kvmm_process_revocations(c) < 1)
		return 5;
	if (kvmm_seq_len(r, s) != CC_TPB)
		return 6;
	kvmm_disconnect(c);
	return 0;
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0;
	struct kvmm_status_reply st;
	int to_parent[2], to_child[2];
	struct cr_env env;
	struct rc_ids ids;
	struct cc m;
	pid_t p;

	cr_start_args(&env, 40, 300, "--revoke-timeout", "400");
	cr_fill_tiers(&env, &ts0);

	t_ok(pipe(to_parent));
	t_ok(pipe(to_child));
	p = fork();
	t_assert(p >= 0);
	if (p == 0)
		_exit(client(env.d.sock, to_parent[1], to_child[0]));
	t_assert_eq(read(to_parent[0], &ids, sizeof(ids)), sizeof(ids));
	t_assert_eq(write(to_child[1], "g", 1), 1);
	cc_connect(&m, env.d.sock);
	cr_wait_pending(&m, 1);
	cc_disconnect(&m);

	/* revoke blocks 1.. of the client's own sequence while it waits */
	rc_admin_revoke(env.d.sock, &ids, 1);

	t_assert_eq(cc_wait_child(p), 0);
	t_ok(td_status(&env.d, &st));
	t_assert_eq(st.sessions_cut_off, 0);
	t_assert_eq(st.revocations_timed_out, 0);
	t_assert(st.revocations_acked >= 1);
	/* the blocks it restored are cached and intact */
	cr_check_content(env.d.sock, 0);
	cr_stop(&env);
	printf("revocation during a deferred open ok\n");
	return 0;
}
