/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's internals, shared by the files that implement
 * metrics_http.h:
 *
 *   metrics_http.c      the listener: start, stop, accepting connections
 *                       and, with every slot taken, evicting the one that
 *                       has waited longest for its request
 *   metrics_addr.c      --metrics-listen's [HOST:]PORT, and the address
 *                       the log prints
 *   metrics_conn.c      a connection's state machine: its events and
 *                       deadlines, WRITE, DRAIN, closing
 *   metrics_request.c   READ: reading the request head and answering it
 *                       (which status, which method, which headers count)
 *   metrics_reply.c     the reply: its status line, headers and an
 *                       error's body, queued for WRITE
 *   metrics_snapshot.c  the built text scrapes share: when it is built,
 *                       reused and compressed
 *
 * Everything runs on the daemon's event-loop thread, so nothing here
 * takes a lock.
 */
#ifndef KVMM_KVMMD_METRICS_HTTP_PRIV_H
#define KVMM_KVMMD_METRICS_HTTP_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmm/kvmmd/metrics_http.h"

#define KD_METRICS_MAX_CONNS 8
/* a built exposition answers plain GETs and HEADs for this long */
#define KD_METRICS_REUSE_MS 1000
/* after a build that took T, the next waits until the loop has run
 * KD_METRICS_BUILD_GAP * T (at most KD_METRICS_REUSE_MS): builds take at
 * most 1% of the loop however the scrapes come */
#define KD_METRICS_BUILD_GAP 99
#define KD_METRICS_REQ_MAX 4096
#define KD_METRICS_READ_MS 2000
#define KD_METRICS_WRITE_MS 10000
#define KD_METRICS_DRAIN_MS 1000
#define KD_METRICS_DRAIN_MAX (256 * 1024)
/* accepts per listener event, so a burst cannot hog one loop turn */
#define KD_METRICS_ACCEPT_BATCH 16
/* accept failing for want of fds: try again after this */
#define KD_METRICS_RETRY_MS 1000

/*
 * One built exposition.  The cache holds a reference while it is the
 * latest, and each connection sending it one, so a text is built once
 * for every scrape it answers and never copied.
 */
struct kd_mtext {
	unsigned int refs;
	uint64_t built_ns; /* when its snapshot was taken */
	size_t len;
	char *data;
	/* its gzip, made at the first scrape that takes it (kd_mtext_gzip());
	 * NULL before, or when that failed (gz_failed: plain text then) */
	char *gz;
	size_t gz_len;
	bool gz_failed;
};

enum kd_mconn_state { KD_MC_READ, KD_MC_WAIT, KD_MC_WRITE, KD_MC_DRAIN };

struct kd_mconn {
	struct kd_metrics *m;
	struct kd_mconn *prev, *next;
	int fd;
	struct kd_file file;
	struct kd_timer timer; /* the deadline of the current state */
	enum kd_mconn_state state;
	size_t req_len;
	/* the reply: head (status line, headers, an error's body), then
	 * body's text when it is a 200 to a GET */
	char head[384];
	size_t head_len;
	struct kd_mtext *body;
	bool gzip; /* the request's Accept-Encoding takes gzip */
	bool body_gz; /* body is sent as its gzip */
	size_t out_off; /* of head then body */
	size_t drained;
	bool linger; /* drain before closing (see DRAIN in metrics_conn.c) */
	char req[KD_METRICS_REQ_MAX + 1]; /* NUL-terminated */
};

struct kd_metrics {
	struct kd_daemon *d;
	int fd;
	struct kd_file file;
	bool accepting; /* the listener is in epoll */
	struct kd_timer retry; /* re-enables accepting after EMFILE */
	struct kd_mconn *conns;
	unsigned int nr_conns;
	struct kd_mtext *text; /* the latest build, or NULL */
	struct kd_timer build; /* builds for the connections in WAIT */
	uint64_t next_build_ns; /* no build before this (the 1% rule) */
	unsigned long long builds;
	unsigned long long gzips; /* texts compressed */
	unsigned long long evictions; /* see evictable(), metrics_http.c */
};

/* metrics_http.c: put the listener in epoll or take it out */
void kd_metrics_set_accepting(struct kd_metrics *m, bool on);

/* metrics_addr.c: "127.0.0.1:9400" or "[::1]:9400" */
void kd_metrics_addr_string(const struct sockaddr_storage *ss, char *buf,
			    size_t len);

/* metrics_conn.c */
void kd_mconn_close(struct kd_mconn *c);
void kd_mconn_deadline(struct kd_mconn *c, unsigned int ms);
void kd_mconn_write(struct kd_mconn *c);
void kd_mconn_on_event(struct kd_loop *loop, int fd, uint32_t events,
		       void *data);
void kd_mconn_on_timeout(struct kd_loop *loop, struct kd_timer *t);

/* metrics_request.c: true while c still waits for the rest of its head,
 * false once it is answered or closed (and perhaps freed) */
bool kd_mconn_read(struct kd_mconn *c);

/* metrics_reply.c */
void kd_mconn_reply(struct kd_mconn *c, int code, struct kd_mtext *text,
		    bool head_only);

/* metrics_snapshot.c */
void kd_mtext_put(struct kd_mtext *t);
void kd_mtext_gzip(struct kd_metrics *m, struct kd_mtext *t);
void kd_metrics_on_build(struct kd_loop *loop, struct kd_timer *timer);
void kd_mconn_reply_metrics(struct kd_mconn *c, bool head_only, bool fresh);

#endif
