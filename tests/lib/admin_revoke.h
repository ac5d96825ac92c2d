/* SPDX-License-Identifier: MIT */
/*
 * ADMIN_REVOKE as the revocation tests send it: blocks [first_block, end)
 * of sequence seq_id of region region_id in session session_id, taken
 * back by an admin.  The status is returned, not asserted on: some tests
 * expect a refusal.
 */
#ifndef KVMM_TESTS_ADMIN_REVOKE_H
#define KVMM_TESTS_ADMIN_REVOKE_H

#include <stdint.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/client.h"
#include "tests/lib/test.h"

/* Over admin, an admin's connection the caller keeps. */
static inline int ar_revoke_on(struct kvmm_conn *admin, uint32_t session_id,
			       uint32_t region_id, uint32_t seq_id,
			       uint32_t first_block)
{
	struct kvmm_admin_revoke a = { .size = sizeof(a),
				       .session_id = session_id,
				       .region_id = region_id,
				       .seq_id = seq_id,
				       .first_block = first_block };

	return kc_request(admin, KVMM_CMD_ADMIN_REVOKE, &a, sizeof(a), NULL, 0,
			  NULL);
}

/* Over a new admin connection to sock (the test fails without one). */
static inline int ar_revoke(const char *sock, uint32_t session_id,
			    uint32_t region_id, uint32_t seq_id,
			    uint32_t first_block)
{
	struct kvmm_conn *admin;
	int err;

	t_ok(kc_connect_admin(sock, &admin));
	err = ar_revoke_on(admin, session_id, region_id, seq_id, first_block);
	kvmm_disconnect(admin);
	return err;
}

#endif
