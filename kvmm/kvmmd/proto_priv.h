/* SPDX-License-Identifier: MIT */
/*
 * What proto.c (validation, dispatch, the commands that change state)
 * and proto_admin.c (status and admin commands) share: a command being
 * served, how it copies its struct in and how it replies.
 */
#ifndef KVMM_KVMMD_PROTO_PRIV_H
#define KVMM_KVMMD_PROTO_PRIV_H

#include "kvmm/kvmmd/kvmmd.h"

struct req {
	struct kd_session *s;
	const struct kvmm_msg_hdr *h;
	const void *p;
	size_t len;
};

#define COPY_IN(rq, var) \
	kw_copy_struct(&(var), sizeof(var), sizeof(var), (rq)->p, (rq)->len)

static inline int reply(struct req *rq, int status, const void *body,
			size_t len, const int *fds, unsigned int nfds)
{
	return kd_session_reply(rq->s, rq->h, status, body, len, fds, nfds);
}

/* proto.c: an extend's reply (rep), each page id without KVMM_PAGE_HELD
 * sent with the pool's fd of the page (also SEQ_UNSHARE's).  1 (replied)
 * or -ENOMEM. */
int kd_extend_send(struct req *rq, const struct kvmm_seq_extend_reply *rep);
/* unshare.c: SEQ_UNSHARE (ABI 1.20), 1 or the status to reply with. */
int kd_cmd_seq_unshare(struct req *rq);

/*
 * proto_admin.c: each returns 1 when it replied itself, else the status
 * to reply with (as every command in proto.c's dispatch()).
 */
int kd_cmd_stats(struct req *rq);
int kd_cmd_tier_stats(struct req *rq);
int kd_cmd_admin_status(struct req *rq);
int kd_cmd_admin_sessions(struct req *rq);
int kd_cmd_admin_tenants(struct req *rq);
int kd_cmd_admin_kill(struct req *rq);
int kd_cmd_admin_quota(struct req *rq);
int kd_cmd_admin_tenant_limit(struct req *rq);
int kd_cmd_admin_log_level(struct req *rq);
int kd_cmd_admin_revoke(struct req *rq);

#endif
