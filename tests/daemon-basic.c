// SPDX-License-Identifier: MIT
/*
 * One client against a real kvmmd: connect, create a region, open three
 * sequences, grow them block by block, write a pattern through every
 * layer's K and V pointers and read it back, truncate, close; the daemon's
 * page accounting follows exactly (2L pages per block) and returns to zero.
 * Both fd tables are grown ahead of use (client: a reply's fds; kvmmd:
 * one per page it may create).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvmm/kvmm.h"
#include "kvmm/uapi.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#define L 2
#define H 2
#define D 64
#define DT 2
#define TOKB (H * D * DT)

static uint8_t pat(uint32_t seq, uint32_t layer, int kv, uint64_t off)
{
	return (uint8_t)(seq * 131 + layer * 17 + kv * 7 + off * 3 + 1);
}

/* The fd table's size (FDSize in /proc/PID/status; pid 0: this process). */
static long fd_table_size(pid_t pid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path),
		 pid ? "/proc/%d/status" : "/proc/self/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "FDSize: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static void fill(struct kvmm_region *r, uint32_t s, uint32_t from, uint32_t to)
{
	for (uint32_t l = 0; l < L; l++)
		for (int kv = 0; kv < 2; kv++) {
			uint8_t *p = (uint8_t *)(kv ? kvmm_seq_v_ptr(r, s, l) :
						      kvmm_seq_k_ptr(r, s, l));
			for (uint64_t o =
				     ((uint64_t)from * TOKB + 60) / 61 * 61;
			     o < (uint64_t)to * TOKB; o += 61)
				p[o] = pat(s, l, kv, o);
		}
}

static void check(struct kvmm_region *r, uint32_t s, uint32_t to)
{
	for (uint32_t l = 0; l < L; l++)
		for (int kv = 0; kv < 2; kv++) {
			uint8_t *p = (uint8_t *)(kv ? kvmm_seq_v_ptr(r, s, l) :
						      kvmm_seq_k_ptr(r, s, l));
			for (uint64_t o = 0; o < (uint64_t)to * TOKB; o += 61)
				if (p[o] != pat(s, l, kv, o))
					t_fail("seq %u layer %u kv %d off %llu: %u != %u",
					       s, l, kv, (unsigned long long)o,
					       p[o], pat(s, l, kv, o));
		}
}

int main(void)
{
	struct td_daemon d;
	struct kvmm_status_reply st;
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct kvmm_region_opts ro = { .size = sizeof(ro) };
	struct kvmm_stats ks = { .size = sizeof(ks) };
	struct kvmm_conn *c;
	struct kvmm_region *r;
	uint32_t s[3], tpb;
	int err;

	err = td_start(&d, NULL);
	if (err)
		t_fail("daemon did not start: %s", strerror(-err));
	/* a name kvmmctl would show cut short is refused, before any I/O */
	co.name = "basic-0123456789abcdef0123456789";
	t_assert_eq(kvmm_connect(&co, &c), -ENAMETOOLONG);
	co.name = "basic-0123456789abcdef012345678"; /* 31 bytes */
	t_ok(kvmm_connect(&co, &c));
	kvmm_disconnect(c);
	co.name = "basic";
	co.map_ahead_set = 1;
	co.map_ahead_blocks = 0; /* exact accounting: no blocks ahead */
	t_ok(kvmm_connect(&co, &c));
	/*
	 * Both fd tables are grown ahead (vmm_fd_table_reserve()): the
	 * client's holds a whole reply's fds (KVMM_MSG_MAX_FDS) past its
	 * connection's, kvmmd's an fd for every page it may create (1024
	 * here) before it created one, so neither grows inside a call later.
	 */
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_created, 0);
	printf("fd tables: client %ld, kvmmd %ld\n", fd_table_size(0),
	       fd_table_size(d.pid));
	t_assert(fd_table_size(0) >= KVMM_MSG_MAX_FDS + 16);
	t_assert(fd_table_size(d.pid) >= (long)st.pages_total);
	ro.layers = L;
	ro.kv_heads = H;
	ro.head_dim = D;
	ro.dtype_bytes = DT;
	ro.max_seqs = 8;
	ro.max_tokens = 4096;
	t_ok(kvmm_region_create(c, &ro, &r));
	tpb = kvmm_region_tokens_per_block(r);
	t_assert_eq(tpb, 65536 / TOKB);
	for (int i = 0; i < 3; i++) {
		t_ok(kvmm_seq_open(r, &s[i]));
		t_assert(kvmm_seq_k_ptr(r, s[i], 0) != 0);
	}
	t_assert(s[0] != s[1] && s[1] != s[2]);

	/* Grow in uneven steps across block boundaries. */
	for (uint32_t len = 1; len <= 3 * tpb + 5; len += tpb / 3 + 1) {
		for (int i = 0; i < 3; i++) {
			int64_t old = kvmm_seq_len(r, s[i]);

			t_ok(kvmm_seq_extend(r, s[i], len + i));
			t_assert_eq(kvmm_seq_len(r, s[i]), len + i);
			fill(r, s[i], old, len + i);
		}
	}
	for (int i = 0; i < 3; i++)
		check(r, s[i], kvmm_seq_len(r, s[i]));

	t_ok(td_status(&d, &st));
	t_assert_eq(st.sequences, 3);
	/* Each sequence has ceil(len / tpb) blocks of 2L pages. */
	{
		uint64_t pages = 0;

		for (int i = 0; i < 3; i++)
			pages +=
				(kvmm_seq_len(r, s[i]) + tpb - 1) / tpb * 2 * L;
		t_assert_eq(st.pages_allocated, pages);
		t_assert_eq(st.pages_mapped, pages);
	}

	/* Errors on bad arguments. */
	t_assert_eq(kvmm_seq_extend(r, s[0], 4097), -EINVAL);
	t_assert_eq(kvmm_seq_extend(r, s[0], 1), -EINVAL);
	t_assert_eq(kvmm_seq_extend(r, 7, 10), -EINVAL);

	/* Truncate to one block: the rest goes back. */
	t_ok(kvmm_seq_truncate(r, s[1], tpb));
	t_assert_eq(kvmm_seq_len(r, s[1]), tpb);
	check(r, s[1], tpb);
	t_ok(kvmm_seq_extend(r, s[1], 2 * tpb));
	fill(r, s[1], tpb, 2 * tpb);
	check(r, s[1], 2 * tpb);

	t_ok(kvmm_get_stats(c, &ks));
	t_assert(ks.pages_imported > 0);
	t_assert(ks.extends > 0);
	t_assert(ks.cmds_ring > 0);

	t_ok(kvmm_seq_close(r, s[0]));
	t_assert_eq(kvmm_seq_close(r, s[0]), -EINVAL);
	t_ok(kvmm_region_destroy(r));
	t_ok(td_status(&d, &st));
	t_assert_eq(st.pages_allocated, 0);
	t_assert_eq(st.sequences, 0);
	kvmm_disconnect(c);
	err = td_wait_idle(&d, 2000, &st);
	if (err) {
		td_dump_log(&d);
		t_fail("not idle: allocated %llu mapped %llu",
		       (unsigned long long)st.pages_allocated,
		       (unsigned long long)st.pages_mapped);
	}
	t_assert_eq(td_stop(&d), 0);
	return 0;
}
