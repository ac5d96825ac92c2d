// SPDX-License-Identifier: MIT
/*
 * CRC32C: published check values (RFC 3720 B.4, the "123456789" check),
 * the hardware and table paths agree on every length and alignment around
 * the 3-way interleave and fused-chunk boundaries, and continuing a CRC over a split buffer
 * gives the same value as one pass.
 */
#include "kvmm/kvmmd/crc32c.h"
#include "tests/lib/test.h"

#include <stdint.h>
#include <stdlib.h>

int main(void)
{
	static unsigned char buf[3 * 8192 * 3 + 64];
	unsigned char zeros[32] = { 0 }, ones[32], inc[32], dec[32];
	uint32_t seed = 12345;

	t_assert_eq(tier_crc32c(0, "123456789", 9), 0xE3069283u);
	t_assert_eq(tier_crc32c_sw(0, "123456789", 9), 0xE3069283u);
	t_assert_eq(tier_crc32c(0, "", 0), 0);
	/* RFC 3720 appendix B.4 */
	for (int i = 0; i < 32; i++) {
		ones[i] = 0xff;
		inc[i] = (unsigned char)i;
		dec[i] = (unsigned char)(31 - i);
	}
	t_assert_eq(tier_crc32c(0, zeros, 32), 0x8A9136AAu);
	t_assert_eq(tier_crc32c(0, ones, 32), 0x62A8AB43u);
	t_assert_eq(tier_crc32c(0, inc, 32), 0x46DD794Eu);
	t_assert_eq(tier_crc32c(0, dec, 32), 0x113FDB5Cu);

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
	/* 15872 is one chunk of the fused crc32 + PCLMUL path */
	size_t lens[] = { 1,	 7,	8,     9,     63,    4096,
			  15871, 15872, 15873, 24575, 24576, 24577,
			  31751, 47716, 49152, 49159, 65536, 73000 };
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		for (size_t off = 0; off < 8; off++) {
			uint32_t sw = tier_crc32c_sw(0, buf + off, lens[l]);
			uint32_t hw = tier_crc32c_hw(0, buf + off, lens[l]);

			if (sw != hw)
				t_fail("len %zu off %zu: sw %08x hw %08x",
				       lens[l], off, sw, hw);
		}
	}
	/* continuation */
	uint32_t whole = tier_crc32c(0, buf, 60000);
	uint32_t part = tier_crc32c(tier_crc32c(0, buf, 25001), buf + 25001,
				    60000 - 25001);
	t_assert_eq(part, whole);
	/* a single flipped bit changes the value */
	buf[30000] ^= 1;
	t_assert(tier_crc32c(0, buf, 60000) != whole);
	printf("crc32c ok (hardware path: %s)\n",
	       tier_crc32c_hw_available() ? "sse4.2" : "table");
	return 0;
}
