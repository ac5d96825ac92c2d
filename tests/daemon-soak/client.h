/* SPDX-License-Identifier: MIT */
/*
 * One client process of the soak (its theory in client.c): what its
 * three files share.  client.c connects, creates the region and runs
 * the loop that picks an op; client-ops.c holds the ops (prefix opens,
 * extends, truncates, closes, pins, forks, step boundaries);
 * client-check.c the contents every block's bytes follow from, the
 * checks of those bytes and of the sequences' lengths, the errors each
 * call may return, and the last ops printed when an invariant breaks.
 * The orchestrator sees none of this: it shares soak.h.
 */
#ifndef KVMM_TESTS_DAEMON_SOAK_CLIENT_H
#define KVMM_TESTS_DAEMON_SOAK_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/kvmm.h"
#include "tests/daemon-soak/soak.h"

#define LO56 0x00ffffffffffffffULL
#define LOST 1 /* an op's return: the session is gone, connect again */

struct soak_seq {
	bool open;
	uint32_t id;
	uint32_t fam;
	uint32_t len; /* tokens, as we set it */
	uint32_t valid; /* blocks [0, valid) hold the family's contents */
	/* how each block came: 'w' written by us, 'p' a plain prefix open,
	 * else the action (kvmm_block_action) + '0' */
	char how[SOAK_MAX_BLOCKS];
};

struct client {
	unsigned int slot;
	uid_t uid;
	uint64_t tag; /* 1 + uid index, in the top byte of what we write */
	bool child; /* a forked child, with a session of its own */
	uint64_t rng;
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint64_t seed;
	uint64_t hash[SOAK_FAMILIES][SOAK_MAX_BLOCKS];
	struct soak_seq seq[SOAK_MAX_SEQS];
	/* every slot's ranges, reserved with the region; kept because a
	 * forked child's kvmm_seq_k_ptr() answers 0 */
	uint64_t base[SOAK_MAX_SEQS][SOAK_PPB];
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* client.c */
/* Connect and create the region; waits out a kvmmd restart. */
void connect_region(struct client *cl);
void disconnect(struct client *cl);

/* client-ops.c: each 0, LOST, or (extend's) the allowed -errno */
struct soak_seq *pick_open(struct client *cl);
int op_close(struct client *cl, struct soak_seq *s);
int op_prefix(struct client *cl);
int op_extend(struct client *cl);
int op_truncate(struct client *cl);
int op_pin(struct client *cl);
int op_fork(struct client *cl);
int op_step(struct client *cl);

/* client-check.c */
/* Keep a line on this op, for soak_fail()'s history. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Has the admin revoked anything of this session? */
bool revoked(const struct client *cl);
/* Fill block of seq with the contents named h, under our tag. */
void write_block(struct client *cl, uint32_t seq, uint32_t block, uint64_t h);
void verify_block(struct client *cl, uint32_t seq, uint32_t block, uint64_t h,
		  const char *how);
void check_fresh(struct client *cl, uint32_t seq, uint32_t block,
		 const char *how);
int allowed(struct client *cl, int err, const char *what, const char *ok);
/* Every valid block of s, against its family's contents. */
void verify_seq(struct client *cl, struct soak_seq *s);
void sync_lengths(struct client *cl);

#endif
