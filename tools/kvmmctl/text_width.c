// SPDX-License-Identifier: MIT
/*
 * Display width of the text kvmmctl prints in its tables (text_width.h):
 * mbrtowc() and wcwidth() under the LC_CTYPE locale main() set from the
 * environment, so a CJK character counts 2, a combining accent 0.
 */
#include <string.h>
#include <wchar.h>

#include "tools/kvmmctl/text_width.h"

size_t kvmmctl_text_width(const char *s)
{
	mbstate_t st;
	size_t cols = 0, left = strlen(s);

	memset(&st, 0, sizeof(st));
	while (left) {
		wchar_t wc;
		size_t n = mbrtowc(&wc, s, left, &st);
		int w;

		/* a byte this locale cannot decode (any byte >= 0x80 under
		 * "C"): one column, as the byte count had it */
		if (n == (size_t)-1 || n == (size_t)-2) {
			memset(&st, 0, sizeof(st));
			cols++;
			s++;
			left--;
			continue;
		}
		w = wcwidth(wc);
		/* unprintable here (unassigned, say): terminals draw a box
		 * or U+FFFD, one column */
		cols += w < 0 ? 1 : (size_t)w;
		n = n ? n : 1; /* a NUL: not before strlen(s) */
		s += n;
		left -= n;
	}
	return cols;
}

void kvmmctl_text_pad(FILE *f, const char *s, size_t width)
{
	size_t cols = kvmmctl_text_width(s);

	fputs(s, f);
	for (; cols < width; cols++)
		fputc(' ', f);
}
