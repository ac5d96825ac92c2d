// SPDX-License-Identifier: MIT
/* The text of test knobs: a number, and how far a misspelt name is from a
 * knob's (knob_text.h). */
#include "kvmm/kvmmd/knob_text.h"

#include <string.h>

bool knob_number(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t n = 0;

	if (!*v)
		return false;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		n = n * 10 + (uint64_t)(*p - '0');
		if (n > max) /* before it could overflow: max < 2^60 */
			return false;
	}
	if (n < min)
		return false;
	*out = n;
	return true;
}

unsigned int knob_name_distance(const char *a, size_t alen, const char *b)
{
	unsigned int row[64], prev;
	size_t blen = strlen(b);

	if (alen >= 64 || blen >= 64)
		return 64;
	for (size_t j = 0; j <= blen; j++)
		row[j] = (unsigned int)j;
	for (size_t i = 1; i <= alen; i++) {
		prev = row[0];
		row[0] = (unsigned int)i;
		for (size_t j = 1; j <= blen; j++) {
			/* a substitution (or a match), a deletion, an
			 * insertion */
			unsigned int diag = prev + (a[i - 1] != b[j - 1]);
			unsigned int best = row[j] < row[j - 1] ?
						    row[j] + 1 :
						    row[j - 1] + 1;

			prev = row[j];
			row[j] = diag < best ? diag : best;
		}
	}
	return row[blen];
}
