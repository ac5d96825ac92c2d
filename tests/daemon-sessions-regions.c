// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * ADMIN_SESSIONS lists, after the session entries, the regions of each
 * session with their open sequences (ABI 1.13): the ids ADMIN_REVOKE
 * takes, which no reply said before (only counts).  A client with two
 * regions, sequences 0 and 2 of the first open (1 closed again), none
 * of the second: both regions are listed under its session with their
 * sizes, the first with ids 0 and 2, and the entries end where the
 * reply does.
 */
#include "tests/cache-common.h"
#include "tests/lib/small_region.h"

int main(void)
{
	static char buf[KVMM_MSG_MAX];
	struct kvmm_sessions_reply *rep = (void *)buf;
	const struct kvmm_sessions_regions *h;
	const struct kvmm_region_info *e;
	struct kvmm_region *r1, *r2;
	struct kvmm_conn *c, *admin;
	uint32_t s0, s1, s2, sid;
	struct td_daemon d;
	const char *p;
	size_t len = 0;
	int seen = 0;

	t_ok(td_start(&d, (const char *[]){ NULL }));
	c = cc_connect_lib(d.sock, "engine");
	sid = c->hello.session_id;
	t_ok(kvmm_region_create(c, &tr_small_region, &r1));
	t_ok(kvmm_region_create(c, &tr_small_region, &r2));
	t_ok(kvmm_seq_open(r1, &s0));
	t_ok(kvmm_seq_open(r1, &s1));
	t_ok(kvmm_seq_open(r1, &s2));
	t_assert_eq(s0, 0);
	t_assert_eq(s1, 1);
	t_assert_eq(s2, 2);
	t_ok(kvmm_seq_close(r1, s1));

	t_ok(kc_connect_admin(d.sock, &admin));
	t_ok(kc_request(admin, KVMM_CMD_ADMIN_SESSIONS, NULL, 0, buf,
			sizeof(buf), &len));
	t_assert_eq(rep->nr, 2); /* the engine and the admin */
	t_assert(len >= sizeof(*rep) + rep->nr * rep->entry_size + sizeof(*h));
	h = (const void *)(buf + sizeof(*rep) + rep->nr * rep->entry_size);
	t_assert_eq(h->entry_size, sizeof(struct kvmm_region_info));
	t_assert_eq(h->nr, 2);
	t_assert_eq(h->total, 2);
	p = (const char *)(h + 1);
	for (uint32_t i = 0; i < h->nr; i++) {
		const uint32_t *ids;

		e = (const void *)p;
		ids = (const void *)(p + h->entry_size);
		t_assert_eq(e->session_id, sid);
		t_assert_eq(e->max_seqs, 4);
		t_assert_eq(e->max_blocks, 2048 / TR_TPB);
		if (e->region_id == r1->id) {
			t_assert_eq(e->nr_open, 2);
			t_assert_eq(e->nr_listed, 2);
			t_assert_eq(ids[0], 0);
			t_assert_eq(ids[1], 2);
			seen |= 1;
		} else {
			t_assert_eq(e->region_id, r2->id);
			t_assert_eq(e->nr_open, 0);
			t_assert_eq(e->nr_listed, 0);
			seen |= 2;
		}
		p += KVMM_REGION_INFO_STRIDE(h->entry_size, e->nr_listed);
	}
	t_assert_eq(seen, 3);
	t_assert_eq((size_t)(p - buf), len);
	t_assert_eq(rep->size, len);
	kvmm_disconnect(admin);
	printf("ok: regions %u and %u listed\n", r1->id, r2->id);
	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	return 0;
}
