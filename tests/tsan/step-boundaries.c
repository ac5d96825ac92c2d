// SPDX-License-Identifier: MIT
/*
 * Built with -fsanitize=thread by tests/lib-tsan-boundaries.sh, with
 * libkvmm's sources: two threads run steps of one connection (the step
 * boundaries read the revocation ring's head without a lock, and count
 * the steps) while a third has a sequence revoked (kvmmctl revoke) and
 * extends it again (which applies the revocations under the lock).
 * usage: step-boundaries SOCKET KVMMCTL; exit 0, or 1 with a reason (and
 * ThreadSanitizer's own exit status when it reported a race).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "kvmm/kvmm.h"

#define ROUNDS 20
#define BLOCKS 8

static struct kvmm_conn *conn;
static int stop, failed;

static void *stepper(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		if (kvmm_step_begin(conn) < 0 || kvmm_step_end(conn) < 0) {
			__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro),
				       .layers = 2,
				       .kv_heads = 2,
				       .head_dim = 64,
				       .dtype_bytes = 2,
				       .max_seqs = 2,
				       .max_tokens = BLOCKS * 256 };
	struct kvmm_stats st = { .size = sizeof(st) };
	struct kvmm_region *r;
	pthread_t t[2];
	char cmd[512];
	uint32_t seq;

	if (argc != 3)
		return 2;
	co.socket_path = argv[1];
	if (kvmm_connect(&co, &conn) || kvmm_region_create(conn, &ro, &r) ||
	    kvmm_seq_open(r, &seq) || kvmm_seq_extend(r, seq, ro.max_tokens) ||
	    kvmm_get_stats(conn, &st)) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, stepper, NULL);
	/* the daemon's first region is 1; blocks 4.. of the sequence */
	snprintf(cmd, sizeof(cmd), "%s --socket %s revoke %u 1 %u 4 >/dev/null",
		 argv[2], argv[1], st.session_id, seq);
	for (int i = 0; i < ROUNDS; i++) {
		if (system(cmd) != 0) {
			fprintf(stderr, "kvmmctl revoke failed\n");
			failed = 1;
			break;
		}
		if (kvmm_seq_extend(r, seq, ro.max_tokens)) {
			fprintf(stderr, "extend after revocation failed\n");
			failed = 1;
			break;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	if (kvmm_get_stats(conn, &st) || st.pages_revoked < ROUNDS) {
		fprintf(stderr, "pages revoked %llu, want >= %d\n",
			(unsigned long long)st.pages_revoked, ROUNDS);
		failed = 1;
	}
	printf("%d revocations met by 2 stepping threads: %llu pages revoked\n",
	       ROUNDS, (unsigned long long)st.pages_revoked);
	kvmm_disconnect(conn);
	return failed;
}
