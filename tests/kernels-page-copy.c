/* SPDX-License-Identifier: MIT */
/*
 * CPU page gather/scatter: gathering scattered pages into one staging
 * buffer and scattering it to other pages reproduces every byte, for whole
 * pages and for a partial tail (bytes < page, odd sizes); bytes beyond
 * `bytes` are left alone; bad arguments give -EINVAL.
 */
#include <errno.h>

#include "kernels/msa_case.h"
#include "tests/lib/test.h"

#define NP 37
#define PAGE 4096

int main(void)
{
	static unsigned char src[NP][PAGE], dst[NP][PAGE], staging[NP * PAGE];
	const void *in[NP];
	void *out[NP];
	static const size_t sizes[] = { PAGE, 1, 15, 16, 1000, 4095 };
	uint64_t rs = 3;

	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		size_t bytes = sizes[z];

		for (uint32_t i = 0; i < NP; i++) {
			/* Pages in a shuffled order of the source array. */
			in[i] = src[(i * 11) % NP];
			out[i] = dst[(i * 5) % NP];
			for (size_t b = 0; b < PAGE; b++)
				src[i][b] =
					(unsigned char)(msa_rand01(&rs) * 256);
		}
		memset(dst, 0xa5, sizeof(dst));
		memset(staging, 0, sizeof(staging));
		t_ok(kern_page_gather_cpu(staging, in, NP, bytes));
		for (uint32_t i = 0; i < NP; i++)
			t_assert(!memcmp(staging + i * bytes, in[i], bytes));
		t_ok(kern_page_scatter_cpu(out, staging, NP, bytes));
		for (uint32_t i = 0; i < NP; i++) {
			const unsigned char *o = out[i];

			t_assert(!memcmp(o, in[i], bytes));
			for (size_t b = bytes; b < PAGE; b++)
				t_assert(o[b] == 0xa5);
		}
	}
	t_ok(kern_page_gather_cpu(staging, in, 0, PAGE));
	t_assert_eq(kern_page_gather_cpu(NULL, in, 1, PAGE), -EINVAL);
	in[3] = NULL;
	t_assert_eq(kern_page_gather_cpu(staging, in, NP, PAGE), -EINVAL);
	t_assert_eq(kern_page_scatter_cpu(NULL, staging, 1, PAGE), -EINVAL);
	printf("gather/scatter round trips exact\n");
	return 0;
}
