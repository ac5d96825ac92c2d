/* SPDX-License-Identifier: MIT */
/*
 * bf16 / fp16 conversions: every one of the 65536 bit patterns round-trips
 * through float (NaN stays NaN); float -> half/bf16 rounds to nearest even
 * (checked on hand-picked ties and limits, and against the compiler's
 * _Float16 on a million random floats where available).
 */
#include <math.h>

#include "kernels/msa_case.h"
#include "tests/lib/test.h"

static float bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

int main(void)
{
	uint64_t rs = 11;

	for (uint32_t h = 0; h < 65536; h++) {
		float f = kern_bf16_to_float((uint16_t)h);
		float g = kern_f16_to_float((uint16_t)h);

		if (isnan(f))
			t_assert(isnan(
				kern_bf16_to_float(kern_bf16_from_float(f))));
		else
			t_assert_eq(kern_bf16_from_float(f), h);
		if (isnan(g))
			t_assert(isnan(
				kern_f16_to_float(kern_f16_from_float(g))));
		else
			t_assert_eq(kern_f16_from_float(g), h);
	}
	/* bf16: 1 + 2^-8 is a tie -> 1 (even); 1 + 3*2^-8 -> 1 + 2^-6. */
	t_assert_eq(kern_bf16_from_float(1.0f + 0x1p-8f), 0x3f80);
	t_assert_eq(kern_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);
	t_assert_eq(kern_bf16_from_float(bits(0x7f7fffffu)), 0x7f80); /* inf */
	/* f16 limits, ties and subnormals. */
	t_assert_eq(kern_f16_from_float(65504.0f), 0x7bff);
	t_assert_eq(kern_f16_from_float(65519.0f), 0x7bff);
	t_assert_eq(kern_f16_from_float(65520.0f), 0x7c00);
	t_assert_eq(kern_f16_from_float(-1e9f), 0xfc00);
	t_assert_eq(kern_f16_from_float(1.0f + 0x1p-11f), 0x3c00);
	t_assert_eq(kern_f16_from_float(1.0f + 3 * 0x1p-11f), 0x3c02);
	t_assert_eq(kern_f16_from_float(0x1p-24f), 0x0001);
	t_assert_eq(kern_f16_from_float(0x1p-25f), 0x0000);
	t_assert_eq(kern_f16_from_float(0x1.8p-25f), 0x0001);
	t_assert_eq(kern_f16_from_float(0x1.8p-24f), 0x0002); /* tie to even */
	t_assert_eq(kern_f16_from_float(0x1p-14f), 0x0400);
	t_assert_eq(kern_f16_from_float(-0.0f), 0x8000);
	t_assert(kern_f16_to_float(0x0001) == 0x1p-24f);
	t_assert(kern_f16_to_float(0x83ff) == -0x3ffp-24f);
#ifdef __FLT16_MAX__
	for (uint32_t i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)(msa_rand01(&rs) * 4294967296.0);
		float f = bits(u);
		_Float16 h = (_Float16)f;
		uint16_t hb;

		if (isnan(f))
			continue;
		memcpy(&hb, &h, 2);
		if (kern_f16_from_float(f) != hb)
			t_fail("f16(%a) = %#x, compiler says %#x", f,
			       kern_f16_from_float(f), hb);
	}
	printf("matches _Float16 on 1e6 random floats\n");
#else
	(void)rs;
#endif
	/* kern_load / kern_store. */
	{
		uint16_t a[2];
		float f[1];

		kern_store(MSA_BF16, a, 1, 2.5f);
		t_assert(kern_load(MSA_BF16, a, 1) == 2.5f);
		kern_store(MSA_F16, a, 0, -0.75f);
		t_assert(kern_load(MSA_F16, a, 0) == -0.75f);
		kern_store(MSA_F32, f, 0, 1.25f);
		t_assert(kern_load(MSA_F32, f, 0) == 1.25f);
	}
	printf("conversions round-trip\n");
	return 0;
}
