// SPDX-License-Identifier: MIT
/*
 * Region salts (see salt.h): the one function that mixes a region's salt
 * into a block's name, linked into kvmmd and libkvmm alike.
 */
#include <endian.h>
#include <string.h>

#include "kvmm/kvmmd/salt.h"
#include "kvmm/kvmmd/siphash.h"

uint64_t kd_salt_hash(uint64_t salt, uint64_t hash)
{
	uint8_t key[KD_SIPHASH_KEY_BYTES];
	uint64_t s = htole64(salt), t = htole64(KD_SALT_TAG);
	uint64_t h = htole64(hash), r;

	if (!salt || !hash)
		return hash;
	memcpy(key, &s, sizeof(s));
	memcpy(key + sizeof(s), &t, sizeof(t));
	r = kd_siphash24(key, &h, sizeof(h));
	return r ? r : 1;
}
