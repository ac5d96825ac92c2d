// SPDX-License-Identifier: MIT
/*
 * libkvmm block pins: keep a cached block where it is for this session
 * (until unpinned, until a TTL passes, or with a priority only), or with
 * a demotable TTL only cached.  Thin
 * wrappers over BLOCK_PIN / BLOCK_UNPIN; the semantics are the daemon's
 * (kvmm/kvmmd/pin.c, Documentation/abi.md).
 */
#include <errno.h>
#include <string.h>

#include "kvmm/lib/client.h"

int kvmm_block_pin(struct kvmm_conn *c, uint64_t hash, struct kvmm_pin_opts *o)
{
	struct kvmm_block_pin bp = { .size = sizeof(bp), .hash = hash };
	struct kvmm_block_pin_reply rep;
	size_t len = 0;
	int err;

	if (!c || !hash)
		return -EINVAL;
	if (o && o->size < sizeof(*o))
		return -EINVAL;
	if (o) {
		bp.flags = o->flags;
		bp.ttl_ns = o->ttl_ns;
		bp.priority = o->priority;
	}
	memset(&rep, 0, sizeof(rep));
	err = kc_request(c, KVMM_CMD_BLOCK_PIN, &bp, sizeof(bp), &rep,
			 sizeof(rep), &len);
	if (err)
		return err;
	if (len < sizeof(rep))
		return -EPROTO;
	if (o) {
		o->tier = rep.tier;
		o->pins = rep.pins;
		o->pin_quota = rep.pin_quota;
		o->expires_ns = rep.expires_ns;
	}
	return 0;
}

int kvmm_block_unpin(struct kvmm_conn *c, uint64_t hash)
{
	struct kvmm_block_unpin bu = { .size = sizeof(bu), .hash = hash };

	if (!c || !hash)
		return -EINVAL;
	return kc_request(c, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			  NULL);
}
