// SPDX-License-Identifier: MIT
/*
 * CRC32C, two ways.  The hardware path runs three independent crc32
 * streams over three thirds of each 24 KiB chunk (the instruction has a
 * latency of 3 cycles and a throughput of 1, so one stream leaves two
 * thirds of the unit idle) and merges them with a multiply in GF(2) by
 * x^(8*len) mod P, precomputed for the chunk size.  The table path is
 * slicing-by-8.  Both are reflected, init ~0, final ~0.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define CRC32C_HAVE_X86 1
#else
#define CRC32C_HAVE_X86 0
#endif

#define CRC32C_POLY 0x82F63B78u /* 0x1EDC6F41 reflected */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

/* Three-way interleave: each stream covers CRC_LANE bytes per chunk. */
#define CRC_LANE 8192u
/* x^(8*CRC_LANE) and x^(16*CRC_LANE) mod P, as multiply tables. */
static uint32_t crc_shift1[4][256];
static uint32_t crc_shift2[4][256];

/* a * b mod P in the reflected representation (bit 31 = x^0). */
static uint32_t gf2_mul(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (int i = 0; i < 32; i++) {
		if (a & 0x80000000u)
			prod ^= b;
		a <<= 1;
		b = (b >> 1) ^ ((b & 1) ? CRC32C_POLY : 0);
	}
	return prod;
}

/* x^(8*n) mod P, reflected. */
static uint32_t x_pow_8n(size_t n)
{
	uint32_t result = 0x80000000u; /* x^0 */
	uint32_t base = 0x00800000u; /* x^8 */

	while (n) {
		if (n & 1)
			result = gf2_mul(result, base);
		base = gf2_mul(base, base);
		n >>= 1;
	}
	return result;
}

static void shift_table(uint32_t table[4][256], uint32_t factor)
{
	for (int byte = 0; byte < 4; byte++)
		for (uint32_t v = 0; v < 256; v++)
			table[byte][v] = gf2_mul(v << (8 * byte), factor);
}

static uint32_t shift_apply(uint32_t table[4][256], uint32_t crc)
{
	return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
	       table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ ((c & 1) ? CRC32C_POLY : 0);
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] =
				(crc_table[t - 1][i] >> 8) ^
				crc_table[0][crc_table[t - 1][i] & 0xff];
	shift_table(crc_shift1, x_pow_8n(CRC_LANE));
	shift_table(crc_shift2, x_pow_8n(2 * CRC_LANE));
#if CRC32C_HAVE_X86
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

bool tier_crc32c_hw_available(void)
{
	pthread_once(&crc_once, crc_init);
	return crc_hw;
}

uint32_t tier_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= crc;
		crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
		      crc_table[5][(w >> 16) & 0xff] ^
		      crc_table[4][(w >> 24) & 0xff] ^
		      crc_table[3][(w >> 32) & 0xff] ^
		      crc_table[2][(w >> 40) & 0xff] ^
		      crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if CRC32C_HAVE_X86
/* Raw (no pre/post inversion) single-stream crc32 over len bytes. */
__attribute__((target("sse4.2"))) static uint32_t
crc_hw_stream(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}

__attribute__((target("sse4.2"))) static uint32_t
crc_hw_raw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 3 * CRC_LANE) {
		uint64_t a = crc, b = 0, c = 0;
		const unsigned char *pb = p + CRC_LANE, *pc = p + 2 * CRC_LANE;

		for (size_t i = 0; i < CRC_LANE; i += 8) {
			uint64_t wa, wb, wc;

			memcpy(&wa, p + i, 8);
			memcpy(&wb, pb + i, 8);
			memcpy(&wc, pc + i, 8);
			a = _mm_crc32_u64(a, wa);
			b = _mm_crc32_u64(b, wb);
			c = _mm_crc32_u64(c, wc);
		}
		/* crc(A||B||C) = shift(crc_a, 2 lanes) ^ shift(crc_b, 1) ^ c,
		 * valid for the raw (uninverted) register. */
		crc = shift_apply(crc_shift2, (uint32_t)a) ^
		      shift_apply(crc_shift1, (uint32_t)b) ^ (uint32_t)c;
		p += 3 * CRC_LANE;
		len -= 3 * CRC_LANE;
	}
	return crc_hw_stream(crc, p, len);
}
#endif

uint32_t tier_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
#if CRC32C_HAVE_X86
	if (crc_hw)
		return ~crc_hw_raw(~crc, buf, len);
#endif
	return tier_crc32c_sw(crc, buf, len);
}

uint32_t tier_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return tier_crc32c_hw(crc, buf, len);
}
