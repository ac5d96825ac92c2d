// SPDX-License-Identifier: MIT
/*
 * The ADMIN_SESSIONS reply, fetched and checked once for the commands
 * that read it: `sessions` lists it, `revoke` and `kill` look an id up
 * in it to say which argument the daemon did not know.  Entries are read
 * entry_size bytes apart (a newer daemon's are longer); the regions that
 * follow them since ABI 1.13 are walked once here so that a reply that
 * runs short is -EPROTO before anyone reads it.
 */
#include <errno.h>
#include <stdlib.h>

#include "tools/kvmmctl/kvmmctl.h"

int kvmmctl_sessions_fetch(struct kvmm_conn *c, struct kvmmctl_sessions *out)
{
	size_t len = 0, at;
	struct kvmm_sessions_reply *rep = calloc(1, KVMM_MSG_MAX);
	const struct kvmm_sessions_regions *h;
	const char *p;
	int err;

	*out = (struct kvmmctl_sessions){ 0 };
	if (!rep)
		return -ENOMEM;
	err = kc_request(c, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, rep, KVMM_MSG_MAX,
			 &len);
	if (err)
		goto err_free;
	err = -EPROTO;
	if (len < sizeof(*rep) || rep->entry_size < sizeof(rep->sessions[0]) ||
	    len < sizeof(*rep) + (uint64_t)rep->nr * rep->entry_size)
		goto err_free;
	out->rep = rep;
	at = sizeof(*rep) + (size_t)rep->nr * rep->entry_size;
	if (len - at < sizeof(*h))
		return 0; /* before ABI 1.13: no regions */
	h = (const void *)((const char *)rep + at);
	if (h->entry_size < sizeof(struct kvmm_region_info))
		goto err_proto;
	p = (const char *)(h + 1);
	for (uint32_t i = 0; i < h->nr; i++) {
		const struct kvmm_region_info *e = (const void *)p;
		uint64_t step;

		if ((size_t)((const char *)rep + len - p) < h->entry_size)
			goto err_proto;
		step = KVMM_REGION_INFO_STRIDE(h->entry_size, e->nr_listed);
		if (e->nr_listed > e->nr_open ||
		    step > (size_t)((const char *)rep + len - p))
			goto err_proto;
		p += step;
	}
	out->regions = h;
	return 0;

err_proto:
	out->rep = NULL;
err_free:
	free(rep);
	return err;
}

void kvmmctl_sessions_free(struct kvmmctl_sessions *s)
{
	free(s->rep);
	*s = (struct kvmmctl_sessions){ 0 };
}

struct kvmm_session_info *kvmmctl_session_at(const struct kvmmctl_sessions *s,
					     uint32_t i)
{
	return (void *)((char *)s->rep->sessions +
			(size_t)i * s->rep->entry_size);
}

struct kvmm_session_info *
kvmmctl_session_by_id(const struct kvmmctl_sessions *s, uint32_t id)
{
	for (uint32_t i = 0; i < s->rep->nr; i++)
		if (kvmmctl_session_at(s, i)->session_id == id)
			return kvmmctl_session_at(s, i);
	return NULL;
}

const struct kvmm_region_info *
kvmmctl_region_next(const struct kvmmctl_sessions *s,
		    const struct kvmm_region_info *prev, uint32_t *i)
{
	const struct kvmm_sessions_regions *h = s->regions;

	if (!h)
		return NULL;
	if (!prev) {
		*i = 0;
		return h->nr ? (const void *)(h + 1) : NULL;
	}
	if (++*i >= h->nr)
		return NULL;
	return (const void *)((const char *)prev +
			      KVMM_REGION_INFO_STRIDE(h->entry_size,
						      prev->nr_listed));
}

const uint32_t *kvmmctl_region_seqs(const struct kvmmctl_sessions *s,
				    const struct kvmm_region_info *e)
{
	return (const void *)((const char *)e + s->regions->entry_size);
}

const struct kvmm_region_info *
kvmmctl_region_by_id(const struct kvmmctl_sessions *s, uint32_t id)
{
	const struct kvmm_region_info *e = NULL;
	uint32_t i;

	while ((e = kvmmctl_region_next(s, e, &i)))
		if (e->region_id == id)
			return e;
	return NULL;
}
