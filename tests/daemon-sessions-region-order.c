// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * ADMIN_SESSIONS lists a session's regions in the order they were made,
 * and so does kvmmctl sessions (text and --json).  A client makes
 * regions A, B, C, destroys B and makes D: the list is A, C, D.  It was
 * newest first (D, C, A): the daemon walked its list as it grew, at the
 * head.
 */
#include "tests/cache-common.h"
#include "tests/lib/small_region.h"

/* The region ids of the reply's region list, in its order. */
static uint32_t listed(struct kvmm_conn *admin, uint32_t *ids, uint32_t max)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	const struct kvmm_sessions_regions *h;
	const char *p;
	size_t len = 0;

	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			sizeof(buf), &len));
	h = (const void *)(buf + sizeof(*rep) + rep->nr * rep->entry_size);
	t_assert(h->nr <= max);
	p = (const char *)(h + 1);
	for (uint32_t i = 0; i < h->nr; i++) {
		const struct kvmm_region_info *e = (const void *)p;

		ids[i] = e->region_id;
		p += KVMM_REGION_INFO_STRIDE(h->entry_size, e->nr_listed);
	}
	return h->nr;
}

/* Where "what" first appears in out, failing when it does not. */
static const char *at(const char *out, const char *what)
{
	const char *p = strstr(out, what);

	if (!p)
		t_fail("kvmmctl sessions lacks \"%s\":\n%s", what, out);
	return p;
}

int main(void)
{
	struct kvmm_region *a, *b, *c3, *d4;
	struct kvmm_conn *c, *admin;
	char out[8192], sa[64], sc[64], sd[64];
	uint32_t ids[8];
	struct td_daemon d;

	t_ok(td_start(&d, (const char *[]){ NULL }));
	c = cc_connect_lib(d.sock, "engine");
	t_ok(kvmm_region_create(c, &tr_small_region, &a));
	t_ok(kvmm_region_create(c, &tr_small_region, &b));
	t_ok(kvmm_region_create(c, &tr_small_region, &c3));
	t_ok(kvmm_region_destroy(b));
	t_ok(kvmm_region_create(c, &tr_small_region, &d4));

	t_ok(kc_connect_admin(d.sock, &admin));
	t_assert_eq(listed(admin, ids, 8), 3);
	t_assert_eq(ids[0], a->id);
	t_assert_eq(ids[1], c3->id);
	t_assert_eq(ids[2], d4->id);
	kvmm_disconnect(admin);

	t_assert_eq(td_kvmmctl(d.sock, "sessions", out, sizeof(out)), 0);
	snprintf(sa, sizeof(sa), "  region %u:", a->id);
	snprintf(sc, sizeof(sc), "  region %u:", c3->id);
	snprintf(sd, sizeof(sd), "  region %u:", d4->id);
	if (!(at(out, sa) < at(out, sc) && at(out, sc) < at(out, sd)))
		t_fail("kvmmctl sessions lists the regions out of order:\n%s",
		       out);
	t_assert_eq(td_kvmmctl(d.sock, "sessions --json", out, sizeof(out)), 0);
	snprintf(sa, sizeof(sa), "{\"region\":%u,", a->id);
	snprintf(sc, sizeof(sc), "{\"region\":%u,", c3->id);
	snprintf(sd, sizeof(sd), "{\"region\":%u,", d4->id);
	if (!(at(out, sa) < at(out, sc) && at(out, sc) < at(out, sd)))
		t_fail("kvmmctl sessions --json lists the regions out of order:\n%s",
		       out);
	printf("regions %u, %u, %u listed in that order\n", a->id, c3->id,
	       d4->id);
	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	printf("ok\n");
	return 0;
}
