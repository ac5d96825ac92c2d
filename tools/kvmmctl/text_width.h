/* SPDX-License-Identifier: MIT */
/*
 * kvmmctl's table columns in display columns, not bytes: a client's
 * session name in UTF-8 ("café-α", CJK) took more bytes than columns,
 * so printf's "%-16s" padded it short and every column after it moved
 * left on that line alone.
 */
#ifndef KVMM_KVMMCTL_TEXT_WIDTH_H
#define KVMM_KVMMCTL_TEXT_WIDTH_H

#include <stddef.h>
#include <stdio.h>

/*
 * The columns s takes on a terminal of the LC_CTYPE locale (main()
 * sets the user's): each character's wcwidth(), 1 for one the locale
 * calls unprintable and for each byte it cannot decode (a non-UTF-8
 * locale: as many columns as bytes, what "%-Ns" counted).  s is what
 * kvmmctl_text_str() made of a client's bytes, so no control byte,
 * bidi control or zero-width character is left in it: an escape counts
 * the columns it prints (\xe2\x80\xae: 12).
 */
size_t kvmmctl_text_width(const char *s);
/* s on f, then blanks up to width columns (none past it: a longer s
 * pushes the line on, as "%-Ns" did). */
void kvmmctl_text_pad(FILE *f, const char *s, size_t width);

#endif
