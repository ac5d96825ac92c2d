/* SPDX-License-Identifier: MIT */
/*
 * gzip for the metrics endpoint (metrics_http.c): whether a scrape takes
 * it, and the compressed copy of a built exposition.  A Prometheus asks
 * for gzip on every scrape; the exposition of many tenants is a few
 * hundred KB of repetitive text that compresses about tenfold, and what
 * the loop spends is mostly copying it into sockets.
 */
#ifndef KVMM_KVMMD_METRICS_GZIP_H
#define KVMM_KVMMD_METRICS_GZIP_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Whether an Accept-Encoding header's value (from after its colon to the
 * end of its line; a CR there is ignored) takes gzip (RFC 9110 12.5.3):
 * "gzip" or "x-gzip" with a q other than 0, or "*" with one when gzip is
 * not named.  Codings and parameters are case-insensitive.
 */
bool kd_accepts_gzip(const char *value);

/*
 * The gzip member of len bytes at data (fastest level: made on the loop):
 * 0 with *out (malloc'ed, the caller frees) and *out_len, -ENOMEM, or
 * -EOPNOTSUPP when kvmmd was built without zlib.
 */
int kd_gzip(const void *data, size_t len, char **out, size_t *out_len);

#endif
