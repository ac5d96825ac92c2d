/* SPDX-License-Identifier: MIT */
/*
 * tests/daemon-hostile: the raw socket helpers of daemon-hostile.c that
 * its other pieces use (newer.c: the commands of ABI 1.14 and later).
 */
#ifndef KVMM_TESTS_DAEMON_HOSTILE_H
#define KVMM_TESTS_DAEMON_HOSTILE_H

#include <stddef.h>
#include <stdint.h>

/* A new connection to the test's kvmmd, no HELLO yet. */
int raw_connect(void);
/* Bytes as one message, with nfds fds; the reply's status (-1000: no
 * reply, or a malformed one), its body copied into body (cap bytes at
 * most), its fds closed. */
int send_raw(int fd, const void *buf, size_t len, const int *fds,
	     unsigned int nfds, void *body, size_t cap);
/* Command c with payload p of len bytes under a well-formed header. */
int cmd(int fd, uint16_t c, const void *p, size_t len, void *body, size_t cap);

/*
 * The commands of ABI 1.14 and later (SEQ_UNSHARE, PREFIX_COLLECT,
 * SEQ_COLLECT, PREFIX_QUERY, BLOCK_PIN_MANY, TIER_STATS' request,
 * ADMIN_CACHE_DROP, the COLLECT flags of PREFIX_OPEN and SEQ_EXTEND):
 * short, long and inconsistent payloads, bad fields, ids, sizes, tiers
 * and counts, fds attached, then a burst of mutated well-formed ones;
 * each answered with its documented errno, and kvmmd serving after.
 * foreign_region: a region of another session.  It leaves nothing
 * cached, open or pinned.
 */
void hostile_newer_commands(uint32_t foreign_region);

#endif
