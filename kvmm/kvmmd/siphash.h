/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed pseudo-random
 * function with a 128-bit key and a 64-bit output.  kvmmd uses it to put
 * each client's block hashes in a scope of their own (scope.c): without
 * the key nobody can choose an input whose output lands on another
 * scope's hash, which an unkeyed hash (XXH3 with a known seed) allows.
 *
 * The value is the reference one: with the key 00 01 .. 0f and the
 * message 00 01 .. (len - 1) the outputs are the 64 vectors of the
 * reference implementation (tests/siphash-vectors.c checks all).
 */
#ifndef KVMM_KVMMD_SIPHASH_H
#define KVMM_KVMMD_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define KD_SIPHASH_KEY_BYTES 16

uint64_t kd_siphash24(const uint8_t key[KD_SIPHASH_KEY_BYTES], const void *msg,
		      size_t len);

#endif
