/* SPDX-License-Identifier: MIT */
/*
 * fp16 and bf16 <-> fp32 conversion in plain C, bit-exact with the CUDA
 * intrinsics (__float2bfloat16_rn, __float2half_rn): round to nearest,
 * ties to even; overflow to infinity; NaN stays a quiet NaN.  The CPU
 * references and the GPU tests use these so both sides see the same
 * inputs.
 */
#include <math.h>
#include <string.h>

#include "kernels/msa.h"

static uint32_t float_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_float(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float kern_bf16_to_float(uint16_t h)
{
	return bits_float((uint32_t)h << 16);
}

uint16_t kern_bf16_from_float(float f)
{
	uint32_t u = float_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	/* Adding 0x7fff plus the lowest kept bit rounds ties to even. */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float kern_f16_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (exp == 0x1f) /* inf / NaN */
		return bits_float(sign | 0x7f800000u | (man << 13));
	if (exp == 0) /* zero / subnormal: man * 2^-24, exact in float */
		return bits_float(sign) +
		       (sign ? -1.0f : 1.0f) * ldexpf((float)man, -24);
	return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t kern_f16_from_float(float f)
{
	uint32_t u = float_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;
	int32_t exp;
	uint32_t man, shift, half, rest, r;

	if (a > 0x7f800000u) /* NaN */
		return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* >= 65520 rounds to infinity */
		return (uint16_t)(sign | 0x7c00u);
	exp = (int32_t)(a >> 23) - 127;
	if (exp >= -14) { /* normal half: drop 13 bits, round to even */
		r = a - (112u << 23); /* rebias exponent 127 -> 15 */
		r += 0xfffu + ((r >> 13) & 1u);
		return (uint16_t)(sign | (r >> 13));
	}
	if (exp < -25) /* below half the smallest subnormal: zero */
		return sign;
	/* Subnormal half: value = man * 2^-24 with man < 1024. */
	man = (a & 0x7fffffu) | 0x800000u;
	shift = (uint32_t)(-exp - 14 + 13); /* 14..25 */
	half = 1u << (shift - 1);
	rest = man & ((1u << shift) - 1);
	r = man >> shift;
	if (rest > half || (rest == half && (r & 1u)))
		r++;
	return (uint16_t)(sign | r);
}

float kern_load(enum msa_dtype dtype, const void *base, size_t i)
{
	switch (dtype) {
	case MSA_F16:
		return kern_f16_to_float(((const uint16_t *)base)[i]);
	case MSA_BF16:
		return kern_bf16_to_float(((const uint16_t *)base)[i]);
	case MSA_F32:
		return ((const float *)base)[i];
	}
	return NAN;
}

void kern_store(enum msa_dtype dtype, void *base, size_t i, float f)
{
	switch (dtype) {
	case MSA_F16:
		((uint16_t *)base)[i] = kern_f16_from_float(f);
		break;
	case MSA_BF16:
		((uint16_t *)base)[i] = kern_bf16_from_float(f);
		break;
	case MSA_F32:
		((float *)base)[i] = f;
		break;
	}
}
