// SPDX-License-Identifier: MIT
/*
 * SipHash-2-4, written from the paper's description: the message is read
 * in little-endian 64-bit words, the last word carries the message length
 * in its top byte, two SipRounds per word and four at the end.  Bytes are
 * loaded with memcpy and converted, so it runs on any alignment and
 * endianness.
 */
#include "siphash.h"

#include <endian.h>
#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL(v[1], 13);
	v[1] ^= v[0];
	v[0] = ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = ROTL(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = ROTL(v[1], 17);
	v[1] ^= v[2];
	v[2] = ROTL(v[2], 32);
}

static inline void sip_word(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

uint64_t kd_siphash24(const uint8_t key[KD_SIPHASH_KEY_BYTES], const void *msg,
		      size_t len)
{
	const uint8_t *p = msg;
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
	uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull,
			  k1 ^ 0x646f72616e646f6dull,
			  k0 ^ 0x6c7967656e657261ull,
			  k1 ^ 0x7465646279746573ull };
	uint8_t tail[8] = { 0 };
	size_t whole = len & ~(size_t)7;

	for (size_t i = 0; i < whole; i += 8)
		sip_word(v, load_le64(p + i));
	memcpy(tail, p + whole, len - whole);
	tail[7] = (uint8_t)len;
	sip_word(v, load_le64(tail));
	v[2] ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
