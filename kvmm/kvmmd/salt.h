/* SPDX-License-Identifier: MIT */
/*
 * Region salts: a region's salt (REGION_CREATE) names a cache namespace
 * of its own.  kvmmd names a block that a region with a nonzero salt
 * publishes or looks up by kd_salt_hash(salt, hash) instead of the hash
 * the client sent, before the cache scope renames it (scope.c), so
 * regions with different salts share nothing, regions with the same salt
 * share as before, and salt 0 keeps the client's hashes as they are
 * (clients that never set a salt, and the blocks an NVMe tier kept, are
 * untouched).  libkvmm names the blocks it reports to telemetry the same
 * way, since a report carries a hash and no region.
 *
 *   kd_salt_hash(salt, h) = h                      salt 0, or h 0 ("none")
 *                         = SipHash-2-4(k, le64(h)), 0 becoming 1, with
 *                           k = le64(salt) || le64(KD_SALT_TAG)
 *
 * The key is the salt itself, not a secret of the daemon: a client picks
 * its own salt, so whoever knows a salt can reach its namespace anyway
 * (by creating a region with it).  The salt keeps apart engines that do
 * not share on purpose (models, tenants that keep their salts apart);
 * against clients that do not cooperate, --cache-scope uid|gid is the
 * separation, and it renames the salted names again under its key.  The
 * function is part of the ABI (Documentation/abi.md, "Block identity"):
 * the NVMe tier keeps blocks under these names across restarts.
 */
#ifndef KVMM_KVMMD_SALT_H
#define KVMM_KVMMD_SALT_H

#include <stdint.h>

#define KD_SALT_TAG 0x746c61736d6d766bull /* "kvmmsalt", little-endian */

uint64_t kd_salt_hash(uint64_t salt, uint64_t hash);

#endif
