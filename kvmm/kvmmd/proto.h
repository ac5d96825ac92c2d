/* SPDX-License-Identifier: MIT */
/*
 * Commands in (proto.c): validation and dispatch of a socket message or a
 * ring submission; ADMIN_STATUS's reply (proto_admin.c).  kvmmd.h includes
 * it.
 */
#ifndef KVMM_KVMMD_PROTO_H
#define KVMM_KVMMD_PROTO_H

#include <stddef.h>

#include "kvmm/uapi.h"

struct kd_daemon;
struct kd_session;

/* Handle one socket message; fds that came with it (nfds: none is used,
 * they make it -EINVAL) are the caller's to close. */
void kd_proto_socket(struct kd_session *s, void *buf, size_t len, int *fds,
		     unsigned int nfds);
/* Handle one submission; fills the completion's res and value. */
void kd_proto_ring(struct kd_session *s, const struct kvmm_sqe *sqe,
		   struct kvmm_cqe *cqe);
/* proto_admin.c: ADMIN_STATUS's reply (also the metrics' snapshot) */
int kd_status(struct kd_daemon *d, struct kvmm_status_reply *st);

#endif
