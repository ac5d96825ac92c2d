// SPDX-License-Identifier: MIT
/*
 * The checks a reply in SEQ_EXTEND's form must pass before libkvmm
 * imports a page of it (kc_extend_reply_check(), kvmm/lib/extend.c: the
 * start of both SEQ_EXTEND's and SEQ_UNSHARE's check()), on bodies no
 * real kvmmd sends: each broken one is -EPROTO and gives im nothing;
 * a good one gives im its page ids and fd count.  A region of 8 blocks
 * of 4 pages, as a client's.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "kvmm/lib/client.h"
#include "tests/lib/test.h"

#define PPB 4u
#define MAX_BLOCKS 8u

static union {
	struct kvmm_seq_extend_reply rep;
	char bytes[sizeof(struct kvmm_seq_extend_reply) +
		   MAX_BLOCKS * PPB * sizeof(uint32_t) + 8];
} body;

static const struct kvmm_region region = { .pages_per_block = PPB,
					   .max_blocks = MAX_BLOCKS };

/* A body of nr blocks from first, len its exact length plus extra. */
static size_t reply(uint32_t first, uint32_t nr, uint32_t ppb, long extra)
{
	memset(&body, 0, sizeof(body));
	body.rep.size = sizeof(body.rep);
	body.rep.first_block = first;
	body.rep.nr_blocks = nr;
	body.rep.pages_per_block = ppb;
	body.rep.nr_fds = nr * ppb;
	for (uint32_t k = 0; k < nr * ppb && k < MAX_BLOCKS * PPB; k++)
		body.rep.page_ids[k] = 100 + k;
	return (size_t)((long)(sizeof(body.rep) +
			       (size_t)nr * ppb * sizeof(uint32_t)) +
			extra);
}

/* -EPROTO, and im untouched. */
static void refused(size_t len, const char *what)
{
	struct kc_import im = { .nr_ids = 77, .nr_fds = 77 };

	if (kc_extend_reply_check(&im, &region, &body, len) != -EPROTO)
		t_fail("%s: accepted", what);
	t_assert(!im.ids);
	t_assert_eq(im.nr_ids, 77);
	t_assert_eq(im.nr_fds, 77);
}

int main(void)
{
	struct kc_import im = { 0 };
	size_t len;

	/* good: blocks 2-4, and none at the region's end */
	len = reply(2, 3, PPB, 0);
	body.rep.nr_fds = 5; /* not the check's to compare (import.c's) */
	t_ok(kc_extend_reply_check(&im, &region, &body, len));
	t_assert(im.ids == body.rep.page_ids);
	t_assert_eq(im.nr_ids, 3 * PPB);
	t_assert_eq(im.nr_fds, 5);
	t_assert_eq(im.ids[3 * PPB - 1], 100 + 3 * PPB - 1);
	len = reply(MAX_BLOCKS, 0, PPB, 0);
	t_ok(kc_extend_reply_check(&im, &region, &body, len));
	t_assert_eq(im.nr_ids, 0);
	len = reply(0, MAX_BLOCKS, PPB, 0);
	t_ok(kc_extend_reply_check(&im, &region, &body, len));
	t_assert_eq(im.nr_ids, MAX_BLOCKS * PPB);

	/* broken */
	reply(0, 0, PPB, 0);
	refused(sizeof(body.rep) - 1, "shorter than the reply struct");
	refused(0, "empty");
	len = reply(2, 3, PPB * 2, 0);
	refused(len, "another block size");
	len = reply(2, 1, PPB / 2, 0);
	refused(len, "a smaller block size");
	len = reply(6, 3, PPB, 0);
	refused(len, "blocks past max_blocks");
	len = reply(UINT32_MAX, 2, PPB, 0);
	refused(len, "first_block + nr_blocks wraps in 32 bits");
	len = reply(2, 3, PPB, -(long)sizeof(uint32_t));
	refused(len, "one page id short");
	len = reply(2, 3, PPB, sizeof(uint32_t));
	refused(len, "one page id too many");
	len = reply(2, 0, PPB, sizeof(uint32_t));
	refused(len, "page ids for no block");
	printf("kc_extend_reply_check: 3 good bodies taken, 9 broken ones "
	       "refused\n");
	return T_PASS;
}
