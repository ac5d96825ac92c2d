/* SPDX-License-Identifier: MIT */
/*
 * Cache scopes: whose block hashes meet in the cache.
 *
 * kvmmd never sees tokens; a block is named by the 64-bit hash its client
 * computed.  In the shared scope (the default) every session's hashes
 * name one cache: whoever can connect can open any block and publish
 * under any hash, so a client that publishes wrong bytes under a popular
 * hash changes the outputs of every engine that opens it.  With
 * --cache-scope uid the daemon renames every hash a client sends
 * (BLOCK_PUBLISH, PREFIX_OPEN, PREFIX_QUERY, BLOCK_PIN, BLOCK_UNPIN; after mixing in
 * the salt of the client's region, salt.h) to
 * SipHash-2-4(key, uid || hash) before anything looks at it: processes of
 * one uid still share blocks, those of different uids cannot reach each
 * other's, and without the key no client can pick a hash that lands on
 * another uid's.  --cache-scope gid does the same with the peer's group
 * (SO_PEERCRED's gid): the engines of one group share, as a tenant whose
 * engines run under several uids of its own group wants.  The key is random; the NVMe tier's superblock keeps it
 * so that saved blocks are found again after a restart, and a file that
 * joins after the start gives the daemon its key while nothing has been
 * named under the start's (kd_scope_adopt()).
 *
 * Inside the daemon (index, policy, tiers, telemetry probes) every hash
 * is the renamed one; nothing is renamed back, since no reply carries a
 * hash.
 */
#ifndef KVMM_KVMMD_SCOPE_H
#define KVMM_KVMMD_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/kvmmd/siphash.h"

enum kd_scope_mode {
	KD_SCOPE_SHARED = 0, /* the clients' hashes as they are */
	KD_SCOPE_UID = 1, /* renamed per peer uid (SO_PEERCRED) */
	KD_SCOPE_GID = 2, /* renamed per peer gid (SO_PEERCRED) */
};

/*
 * The key is written by kd_scope_init() and at most once more, by
 * kd_scope_adopt() on the loop.  Every reader but one runs on the loop
 * (requests, pins, tier opens, telemetry's shared-memory polls); the one
 * on another thread, telemetry's BPF poll thread (kd_scope_tel_rename()),
 * exists only between tel_poll_begin() and tel_poll_end(), both called
 * from the loop, and kd_scope_adopt() joins it before the write: the
 * thread's creation orders the write before its reads, so no lock.  A
 * new reader off the loop must be joined there too.
 */
struct kd_scope {
	uint32_t mode; /* enum kd_scope_mode */
	uint8_t key[KD_SIPHASH_KEY_BYTES]; /* all zero in the shared scope */
	/* Hashes the key has named for clients: every hash of a request or
	 * a pin, and every report of a session's telemetry region.  While
	 * 0 no name made with the key exists anywhere a key change could
	 * not reach (the index, the policy, pins, parked requests,
	 * telemetry's totals of a gone region).  BPF reports are left out:
	 * telemetry names them again from the map after the change.  Loop
	 * only. */
	uint64_t names_given;
};

struct kd_daemon;
struct kd_session;

const char *kd_scope_string(uint32_t mode);
/* --cache-scope: 0, or -EINVAL with one line on stderr. */
int kd_scope_parse(const char *val, uint32_t *mode);
/*
 * Set d->scope from d->cfg.cache_scope: in the uid scope, the key the
 * NVMe tier's file was written under if it was written in this scope (its
 * blocks stay reachable), else a new random one (the file is then
 * formatted anew when the tier opens, unless kd_scope_adopt() takes its
 * key first).  0 or -errno (no randomness).
 */
int kd_scope_init(struct kd_daemon *d);
struct tier_nvme_peek;
/*
 * The NVMe tier's file was claimed after the start (cache_nvme_join.c),
 * its superblock pk, before any of its partitions opens: take the key it
 * was written under, so that its blocks are recovered as at a start, if
 * it was written in this scope under another key and nothing was named
 * under the start's (names_given 0, blocks_held, the cache's blocks in
 * every tier, 0).  Else keep the key, saying why when the file's blocks
 * are lost by it (the open formats the file).  Loop only.  True when the
 * key changed.
 */
bool kd_scope_adopt(struct kd_daemon *d, const struct tier_nvme_peek *pk,
		    uint64_t blocks_held);
/* The cache's name for hash as a client of scope id (its uid or gid, as
 * the mode says: kd_scope_id()) sends it (0 stays 0: "no hash" where the
 * ABI has one; nothing else becomes 0). */
uint64_t kd_scope_hash(const struct kd_scope *sc, uint32_t id, uint64_t hash);
/* The id s's hashes are renamed by: its uid or gid (0 when shared). */
uint32_t kd_scope_id(const struct kd_scope *sc, const struct kd_session *s);
/*
 * Rename in place the hashes of a request of s (cmd, payload p of len
 * bytes) before it is handled: BLOCK_PUBLISH's and PREFIX_OPEN's, with
 * the salt of the region they name mixed in first (salt.h), then renamed
 * by the scope.  Only hashes that lie whole inside the payload are
 * touched; a malformed request is left for its handler to refuse.
 */
void kd_scope_request(struct kd_session *s, uint16_t cmd, void *p, size_t len);
/* The same for a whole message as read from s's socket (header, then
 * payload), before kd_proto_socket(); once per message: a parked command
 * run again is not renamed again. */
void kd_scope_message(struct kd_session *s, void *msg, size_t len);

/*
 * The names a BLOCK_PIN's or BLOCK_UNPIN's hash may have in the cache
 * (pin.c tries them in order): a pin names no region, so one per salt of
 * s's regions (oldest region first, each salt once; salt 0 when s has no
 * region), renamed by the scope.  names has room for
 * KD_MAX_REGIONS_PER_SESSION; returns how many (1 or more).
 */
uint32_t kd_scope_pin_names(const struct kd_session *s, uint64_t hash,
			    uint64_t *names);

/*
 * Telemetry's rename hook (tel_set_rename(), arg the daemon): a block a
 * client reported under its hash gets the cache's name for it in its
 * scope (the daemon's own reports already carry the cache's names).  A
 * shm region is its session's (o->src, the session id: false, leave it
 * out, once that session is gone); a BPF entry is renamed by its own uid
 * or gid (the kernel keeps one entry per hash, uid and gid), so reports
 * polled after their client left, or from a client in another pid
 * namespace, still land on its blocks.  BPF entries are renamed on
 * telemetry's poll thread (tel_poll_begin()): that path reads only
 * d->scope's mode and key, which change only while no poll thread runs
 * (struct kd_scope), and never names_given.
 */
struct tel_origin;
bool kd_scope_tel_rename(void *arg, const struct tel_origin *o, uint64_t *hash);

#endif
