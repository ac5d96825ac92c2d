// SPDX-License-Identifier: MIT
/*
 * libkvmm block pins: keep a cached block where it is for this session
 * (until unpinned, until a TTL passes, or with a priority only), or with
 * a demotable TTL only cached.  Thin
 * wrappers over BLOCK_PIN / BLOCK_UNPIN (and BLOCK_PIN_MANY, ABI 1.19:
 * many hashes, one round trip); the semantics are the daemon's
 * (kvmm/kvmmd/pin.c, Documentation/abi.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvmm/lib/client.h"
#include "kvmm/lib/opts.h"

#define PIN_FLAGS_KNOWN                                                    \
	(KVMM_PIN_F_TTL | KVMM_PIN_F_PRIORITY | KVMM_PIN_F_PRIORITY_ONLY | \
	 KVMM_PIN_F_DEMOTE)

_Static_assert(sizeof(struct kvmm_pin_opts) >= KVMM_PIN_OPTS_SIZE_VER0,
	       "KVMM_PIN_OPTS_SIZE_VER0");

/*
 * A flag the daemon's ABI minor lacks would be answered -EINVAL, as a
 * bogus one is: say -EOPNOTSUPP instead, so a client can tell "this
 * daemon is too old" (and fall back) from its own mistake.
 */
static int pin_flags_supported(const struct kvmm_conn *c, uint32_t flags)
{
	if (flags & ~PIN_FLAGS_KNOWN)
		return -EINVAL;
	if ((flags & KVMM_PIN_F_DEMOTE) &&
	    c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 3)
		return -EOPNOTSUPP;
	return 0;
}

/* The caller's options (NULL: none) in *po, checked as above; *n: the
 * bytes of them both know, which the reply's fields go back into. */
static int pin_opts_get(const struct kvmm_conn *c,
			const struct kvmm_pin_opts *o, struct kvmm_pin_opts *po,
			size_t *n)
{
	int err;

	memset(po, 0, sizeof(*po));
	*n = 0;
	if (o) {
		err = kc_opts_size(o, o->size, KVMM_PIN_OPTS_SIZE_VER0,
				   sizeof(*po), n);
		if (err)
			return err;
		memcpy(po, o, *n);
	}
	return pin_flags_supported(c, po->flags);
}

int kvmm_block_pin(struct kvmm_conn *c, uint64_t hash, struct kvmm_pin_opts *o)
{
	struct kvmm_block_pin bp = { .size = sizeof(bp), .hash = hash };
	struct kvmm_block_pin_reply rep;
	struct kvmm_pin_opts po = { 0 };
	size_t len = 0, n = 0;
	int err;

	if (!c || !hash)
		return -EINVAL;
	err = pin_opts_get(c, o, &po, &n);
	if (err)
		return err;
	bp.flags = po.flags;
	bp.ttl_ns = po.ttl_ns;
	bp.priority = po.priority;
	memset(&rep, 0, sizeof(rep));
	err = kc_request(c, KVMM_CMD_BLOCK_PIN, &bp, sizeof(bp), &rep,
			 sizeof(rep), &len);
	if (err == -EDQUOT) {
		/* From ABI 1.13 the refusal says how many pins the session
		 * holds and may hold; an older daemon sends no body: 0s. */
		if (len < sizeof(rep))
			memset(&rep, 0, sizeof(rep));
		po.tier = 0;
		po.pins = rep.pins;
		po.pin_quota = rep.pin_quota;
		po.expires_ns = 0;
	} else if (err) {
		return err;
	} else if (len < sizeof(rep)) {
		return -EPROTO;
	} else {
		po.tier = rep.tier;
		po.pins = rep.pins;
		po.pin_quota = rep.pin_quota;
		po.expires_ns = rep.expires_ns;
	}
	if (o)
		memcpy(o, &po, n);
	return err;
}

int kvmm_block_unpin(struct kvmm_conn *c, uint64_t hash)
{
	struct kvmm_block_unpin bu = { .size = sizeof(bu), .hash = hash };

	if (!c || !hash)
		return -EINVAL;
	return kc_request(c, KVMM_CMD_BLOCK_UNPIN, &bu, sizeof(bu), NULL, 0,
			  NULL);
}

int kvmm_block_pin_many(struct kvmm_conn *c, const uint64_t *hashes,
			uint32_t nr_hashes, struct kvmm_pin_opts *o,
			int32_t *results)
{
	struct kvmm_block_pin_many pm = { .size = sizeof(pm) };
	const struct kvmm_block_pin_many_reply *rep;
	struct kvmm_pin_opts po = { 0 };
	size_t rlen, cap, len = 0, n = 0;
	char *req = NULL, *buf = NULL;
	int err;

	if (!c || !hashes || !nr_hashes || nr_hashes > KVMM_PIN_MANY_MAX)
		return -EINVAL;
	err = pin_opts_get(c, o, &po, &n);
	if (err)
		return err;
	/* a daemon before 1.19 would answer -ENOTTY: say it is too old */
	if (c->hello.abi_major == KVMM_ABI_MAJOR && c->hello.abi_minor < 19)
		return -EOPNOTSUPP;
	pm.flags = po.flags;
	pm.nr_hashes = nr_hashes;
	pm.ttl_ns = po.ttl_ns;
	pm.priority = po.priority;
	rlen = sizeof(pm) + (size_t)nr_hashes * sizeof(uint64_t);
	cap = sizeof(*rep) + (size_t)nr_hashes * sizeof(int32_t) + 8;
	req = malloc(rlen);
	buf = malloc(cap);
	err = -ENOMEM;
	if (!req || !buf)
		goto out;
	memcpy(req, &pm, sizeof(pm));
	memcpy(req + sizeof(pm), hashes, (size_t)nr_hashes * sizeof(uint64_t));
	err = kc_request(c, KVMM_CMD_BLOCK_PIN_MANY, req, rlen, buf, cap, &len);
	if (err == -ENOTTY)
		err = -EOPNOTSUPP; /* a 1.19 daemon of before the command */
	if (err)
		goto out;
	rep = (const struct kvmm_block_pin_many_reply *)buf;
	err = -EPROTO;
	if (len < sizeof(*rep) + (size_t)nr_hashes * sizeof(int32_t) ||
	    rep->nr_hashes != nr_hashes || rep->pinned > nr_hashes)
		goto out;
	if (results)
		memcpy(results, buf + sizeof(*rep),
		       (size_t)nr_hashes * sizeof(int32_t));
	po.tier = 0;
	po.pins = rep->pins;
	po.pin_quota = rep->pin_quota;
	po.expires_ns = rep->expires_ns;
	if (o)
		memcpy(o, &po, n);
	err = (int)rep->pinned;
out:
	free(req);
	free(buf);
	return err;
}
