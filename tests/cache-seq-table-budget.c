// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A session's block tables hold at most KD_SEQ_SLOTS_MIN (2^20) entries
 * together here (twice the pool's 1024 pages is less): prefix opens that
 * share one cached 64-block prefix into sequence after sequence get
 * -ENOBUFS once the next table would pass it (exactly 2^20 / 64 = 16384
 * open), and so does an extend that would grow a table, changing
 * nothing; closing one sequence gives its entries back.  Without the
 * bound a session could make kvmmd allocate block tables without limit
 * (its own blocks never come near: the pool bounds them).
 */
#include <errno.h>
#include <string.h>

#include "tests/seq-table-common.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define NB 64
#define BUDGET (1u << 20)

static uint64_t hashes[NB];

static void stats(struct cc *c, struct kvmm_stats_reply *sr)
{
	t_ok(cc_call(c, KVMM_CMD_STATS, NULL, 0, sr, sizeof(*sr), NULL, NULL));
}

int main(void)
{
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_stats_reply sr;
	uint32_t seq, first = 0, fresh, region_a;
	struct td_daemon d;
	struct cc c;
	int err = 0;
	uint32_t n;

	for (uint32_t i = 0; i < NB; i++)
		hashes[i] = 0x7ab1e000 + i;
	cc_start(&d, NULL);
	st_publish(d.sock, hashes, NB);

	cc_connect(&c, d.sock);
	st_region(&c, 65535, NB);
	region_a = c.region;
	for (n = 0; n < BUDGET / NB + 1; n++) {
		err = st_prefix_open(&c, hashes, NB, &seq);
		if (err)
			break;
		if (!n)
			first = seq;
	}
	printf("%u prefix opens of %d blocks, then %d\n", n, NB, err);
	t_assert_eq(err, -ENOBUFS);
	t_assert_eq(n, BUDGET / NB);
	stats(&c, &sr);
	t_assert_eq(sr.sequences, BUDGET / NB);

	/* an empty sequence costs no entry; its first extend would */
	st_region(&c, 1, NB);
	fresh = cc_seq_open(&c);
	ex.region_id = c.region;
	ex.seq_id = fresh;
	ex.new_len = 1;
	t_assert_eq(cc_call(&c, KVMM_CMD_SEQ_EXTEND, &ex, sizeof(ex), NULL, 0,
			    NULL, NULL),
		    -ENOBUFS);
	stats(&c, &sr);
	t_assert_eq(sr.pages_owned, (uint64_t)BUDGET * CC_PPB);

	/* one sequence closed: its 64 entries come back */
	c.region = region_a;
	t_ok(cc_call(&c, KVMM_CMD_SEQ_CLOSE,
		     &(struct kvmm_region_ref){
			     .size = sizeof(struct kvmm_region_ref),
			     .region_id = region_a,
			     .seq_id = first },
		     sizeof(struct kvmm_region_ref), NULL, 0, NULL, NULL));
	t_ok(st_prefix_open(&c, hashes, NB, &seq));
	t_assert_eq(st_prefix_open(&c, hashes, NB, &seq), -ENOBUFS);

	cc_disconnect(&c);
	cc_stop(&d);
	return 0;
}
