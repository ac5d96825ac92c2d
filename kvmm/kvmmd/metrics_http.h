/* SPDX-License-Identifier: MIT */
/*
 * kvmmd --metrics-listen [HOST:]PORT: GET /metrics over HTTP/1.x from the
 * daemon's event loop (metrics_http.c), the exposition of metrics_text.c.
 */
#ifndef KVMM_KVMMD_METRICS_HTTP_H
#define KVMM_KVMMD_METRICS_HTTP_H

#include <sys/socket.h>

#include "kvmm/kvmmd/kvmmd.h"

/* kvmmd's option number for --metrics-listen (no short option) */
#define KD_OPT_METRICS_LISTEN 0x203

/*
 * "PORT" (127.0.0.1), "IPV4:PORT", "[IPV6]:PORT" or "localhost:PORT";
 * PORT 0 lets the kernel pick one (the log says which).  0, or -EINVAL
 * with a message naming --metrics-listen.
 */
int kd_metrics_parse_listen(const char *s, struct sockaddr_storage *ss,
			    socklen_t *len);
/* Listen on cfg.metrics_listen (nothing when ""); -errno with the reason
 * logged when the address cannot be bound. */
int kd_metrics_start(struct kd_daemon *d);
/* Close every scrape connection and the listener. */
void kd_metrics_stop(struct kd_daemon *d);

#endif
