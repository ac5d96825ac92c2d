// SPDX-License-Identifier: MIT
/*
 * The size field of libkvmm's option structs, against a real kvmmd: every
 * call taking one (kvmm_connect, kvmm_region_create, kvmm_block_pin,
 * kvmm_seq_open_prefix_opts, kvmm_hash_seed) follows one rule (kvmm.h,
 * the openat2() one):
 *
 *   - below the first published size (KVMM_*_SIZE_VER0): -EINVAL;
 *   - an older caller's smaller struct (connect and region opts, the only
 *     ones that grew): accepted, its missing fields 0, nothing read past
 *     its size (the struct ends where a PROT_NONE page starts);
 *   - a newer caller's larger struct whose bytes past this library's are
 *     0: accepted, the same result as the struct this library knows, out
 *     fields filled and the caller's bytes past ours left alone;
 *   - the same with a nonzero byte there: -E2BIG, and nothing done (no
 *     connection, region, pin or sequence);
 *   - a size past any struct (5000): -E2BIG;
 *   - kvmm_hash_layout's reserved (what was its tail padding, where a
 *     newer header's next field lands) nonzero: -E2BIG, not the seed of
 *     the layout without it.
 *
 * Before, a larger struct with nonzero bytes past the library's was
 * silently taken as if they were not there (kvmm_hash_seed excepted).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/kvmm.h"
#include "tests/lib/daemon.h"
#include "tests/lib/small_region.h"
#include "tests/lib/test.h"

/* A larger struct as a newer kvmm.h would have it: ours, then more. */
#define NEWER(type)                \
	struct {                   \
		type o;            \
		uint64_t newer[2]; \
	}

static const char *sock;

/* len bytes whose end is the start of a PROT_NONE page: a read past
 * them faults. */
static void *before_guard(size_t len)
{
	long ps = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	t_assert(p != MAP_FAILED);
	t_ok(mprotect(p + ps, ps, PROT_NONE));
	memset(p, 0, ps);
	return p + ps - len;
}

static void connect_sizes(void)
{
	NEWER(struct kvmm_connect_opts) big = { 0 };
	struct kvmm_connect_opts *old;
	struct kvmm_conn *c = NULL;
	char huge[5000] = { 0 };

	big.o.size = sizeof(big);
	big.o.socket_path = sock;
	t_ok(kvmm_connect(&big.o, &c));
	kvmm_disconnect(c);
	c = NULL;
	big.newer[1] = 1;
	t_assert_eq(kvmm_connect(&big.o, &c), -E2BIG);
	t_assert(c == NULL);

	/* the first published struct: socket_path and name only */
	old = before_guard(KVMM_CONNECT_OPTS_SIZE_VER0);
	old->size = KVMM_CONNECT_OPTS_SIZE_VER0;
	old->socket_path = sock;
	t_ok(kvmm_connect(old, &c));
	kvmm_disconnect(c);
	old->size = KVMM_CONNECT_OPTS_SIZE_VER0 - 1;
	t_assert_eq(kvmm_connect(old, &c), -EINVAL);

	memcpy(huge, &big.o, sizeof(big.o));
	((struct kvmm_connect_opts *)huge)->size = sizeof(huge);
	t_assert_eq(kvmm_connect((struct kvmm_connect_opts *)huge, &c), -E2BIG);
}

static void region_sizes(struct kvmm_conn *c)
{
	NEWER(struct kvmm_region_opts) big = { .o = tr_small_region };
	struct kvmm_region_opts *old;
	struct kvmm_region *r = NULL;

	big.o.size = sizeof(big);
	big.newer[0] = 7;
	t_assert_eq(kvmm_region_create(c, &big.o, &r), -E2BIG);
	t_assert(r == NULL);
	big.newer[0] = 0;
	t_ok(kvmm_region_create(c, &big.o, &r));
	t_ok(kvmm_region_destroy(r));

	/* before salt: the region's salt is 0 */
	old = before_guard(KVMM_REGION_OPTS_SIZE_VER0);
	memcpy(old, &tr_small_region, KVMM_REGION_OPTS_SIZE_VER0);
	old->size = KVMM_REGION_OPTS_SIZE_VER0;
	t_ok(kvmm_region_create(c, old, &r));
	t_ok(kvmm_region_destroy(r));
	old->size = KVMM_REGION_OPTS_SIZE_VER0 - 4;
	t_assert_eq(kvmm_region_create(c, old, &r), -EINVAL);
}

static void pin_sizes(struct kvmm_conn *c, uint64_t h)
{
	NEWER(struct kvmm_pin_opts) big = { 0 };
	struct kvmm_pin_opts po = { .size = sizeof(po) };

	big.o.size = sizeof(big);
	big.newer[1] = 1;
	t_assert_eq(kvmm_block_pin(c, h, &big.o), -E2BIG);
	/* nothing pinned: an unpin finds no record */
	t_assert_eq(kvmm_block_unpin(c, h), -ENOENT);
	t_assert_eq(big.o.pins, 0);

	big.newer[1] = 0;
	t_ok(kvmm_block_pin(c, h, &big.o));
	t_assert_eq(big.o.pins, 1);
	t_assert(big.o.pin_quota >= 1);
	t_assert_eq(big.newer[0], 0);
	t_assert_eq(big.newer[1], 0);
	t_ok(kvmm_block_unpin(c, h));

	po.size = KVMM_PIN_OPTS_SIZE_VER0 - 8;
	t_assert_eq(kvmm_block_pin(c, h, &po), -EINVAL);
	t_assert_eq(kvmm_block_unpin(c, h), -ENOENT);
}

static void prefix_sizes(struct kvmm_region *r, uint64_t h)
{
	NEWER(struct kvmm_prefix_opts) big = { 0 };
	struct kvmm_prefix_opts po = { .size = sizeof(po) };
	uint32_t seq = 99, nb = 99;
	uint8_t acts[1] = { 0 };

	big.o.size = sizeof(big);
	big.o.actions = acts;
	big.newer[0] = 1;
	t_assert_eq(kvmm_seq_open_prefix_opts(r, &h, 1, &seq, &nb, &big.o),
		    -E2BIG);
	t_assert_eq(seq, 99);
	t_assert_eq(acts[0], 0);
	big.newer[0] = 0;
	t_ok(kvmm_seq_open_prefix_opts(r, &h, 1, &seq, &nb, &big.o));
	t_assert_eq(nb, 1);
	t_assert_eq(big.o.shared, 1);
	t_assert_eq(acts[0], KVMM_BLOCK_GPU_SHARED);
	t_assert_eq(big.newer[0], 0);
	t_assert_eq(big.newer[1], 0);
	t_ok(kvmm_seq_close(r, seq));

	po.size = KVMM_PREFIX_OPTS_SIZE_VER0 - 4;
	t_assert_eq(kvmm_seq_open_prefix_opts(r, &h, 1, &seq, &nb, &po),
		    -EINVAL);
}

static void hash_sizes(void)
{
	NEWER(struct kvmm_hash_layout) big = { 0 };
	struct kvmm_hash_layout l = { .size = sizeof(l),
				      .layers = 2,
				      .kv_heads = 2,
				      .head_dim = 64,
				      .dtype_bytes = 2,
				      .tokens_per_block = 256 };
	static char huge[5000];
	uint64_t want, got = 0;
	int err;

	err = kvmm_hash_seed(&l, &want);
	if (err == -ENOTSUP)
		return; /* built without libxxhash */
	t_ok(err);
	big.o = l;
	big.o.size = sizeof(big);
	t_ok(kvmm_hash_seed(&big.o, &got));
	t_assert_eq(got, want);
	big.newer[0] = 1;
	t_assert_eq(kvmm_hash_seed(&big.o, &got), -E2BIG);

	/*
	 * What was tail padding: a newer kvmm.h's next u32 lands at offset
	 * 36 with sizeof still 40.  Nonzero, it is a layout this library
	 * cannot hash, not the same seed as without it.
	 */
	t_assert_eq(offsetof(struct kvmm_hash_layout, reserved), 36);
	t_assert_eq(sizeof(l), KVMM_HASH_LAYOUT_SIZE_VER0);
	got = 0;
	l.reserved = 1;
	t_assert_eq(kvmm_hash_seed(&l, &got), -E2BIG);
	t_assert_eq(got, 0);
	l.reserved = 0x80000000u;
	t_assert_eq(kvmm_hash_seed(&l, &got), -E2BIG);
	l.reserved = 0;
	t_ok(kvmm_hash_seed(&l, &got));
	t_assert_eq(got, want);

	l.size = KVMM_HASH_LAYOUT_SIZE_VER0 - 4;
	t_assert_eq(kvmm_hash_seed(&l, &got), -EINVAL);
	l.size = sizeof(huge);
	memcpy(huge, &l, sizeof(l));
	t_assert_eq(kvmm_hash_seed((struct kvmm_hash_layout *)huge, &got),
		    -E2BIG);
}

int main(void)
{
	struct kvmm_connect_opts co = { .size = sizeof(co) };
	struct td_daemon d;
	struct kvmm_region *r;
	struct kvmm_conn *c;
	uint32_t seq, tokens[TR_TPB];
	uint64_t seed, h;
	int err;

	td_start_ok(&d, NULL);
	sock = d.sock;
	co.socket_path = sock;

	connect_sizes();
	hash_sizes();
	t_ok(kvmm_connect(&co, &c));
	region_sizes(c);

	/* one published block to pin and open */
	t_ok(kvmm_region_create(c, &tr_small_region, &r));
	t_ok(kvmm_seq_open(r, &seq));
	t_ok(kvmm_seq_extend(r, seq, TR_TPB));
	for (int i = 0; i < TR_TPB; i++)
		tokens[i] = 5 * i + 1;
	t_ok(kvmm_region_hash_seed(r, "sizes", &seed));
	err = kvmm_block_hash(seed, 0, 0, tokens, TR_TPB, &h);
	if (err == -ENOTSUP)
		h = 0x5151515151ull; /* any nonzero hash names a block */
	else
		t_ok(err);
	t_assert_eq(kvmm_block_publish(r, seq, 0, 1, 0, &h), 1);
	pin_sizes(c, h);
	prefix_sizes(r, h);

	kvmm_disconnect(c);
	t_ok(td_stop(&d));
	printf("ok: option struct sizes\n");
	return T_PASS;
}
