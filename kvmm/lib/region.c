// SPDX-License-Identifier: MIT
/*
 * libkvmm regions and sequences: the vAttention side.
 *
 * A region reserves, for each (layer, K|V), one virtual range of
 * max_seqs * seq_stride bytes; sequence s of layer l starts at
 * k_base[l] + s * seq_stride.  Block b of a sequence is one page at
 * + b * page_size in all 2L ranges.  Extending past the mapped blocks asks
 * the daemon for pages over the socket (fds arrive with the reply; each
 * page is imported once per process and counted in c->pages[]), then maps
 * them; extending within mapped blocks is a ring round trip.  A background
 * thread keeps map_ahead blocks mapped beyond each sequence's length so
 * the engine's extend normally never waits (st.extend_waits counts the
 * times it did).  The extend itself and its fetch are extend.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvmm/lib/client.h"
#include "kvmm/lib/opts.h"

uint64_t kc_slot_va(struct kvmm_region *r, uint32_t seq, uint32_t block,
		    uint32_t i)
{
	uint64_t base = (i & 1) ? r->v_base[i / 2] : r->k_base[i / 2];

	return base + seq * r->seq_stride +
	       (uint64_t)block * r->conn->page_size;
}

void kc_page_unref(struct kvmm_conn *c, uint32_t id)
{
	struct kc_page *p = &c->pages[id];

	if (p->refs && --p->refs == 0)
		c->backend->ops->page_release(c->backend, p->handle);
}

void kc_unmap_slot(struct kvmm_region *r, uint32_t seq, uint32_t block,
		   uint32_t i)
{
	struct kvmm_conn *c = r->conn;
	uint32_t *ids = r->seqs[seq].block_pages[block];

	if (!ids || ids[i] == KC_NO_PAGE)
		return;
	c->backend->ops->unmap(c->backend, kc_slot_va(r, seq, block, i));
	kc_page_unref(c, ids[i]);
	ids[i] = KC_NO_PAGE;
}

void kc_unmap_blocks(struct kvmm_region *r, uint32_t seq, uint32_t from)
{
	struct kc_seq *q = &r->seqs[seq];

	for (uint32_t b = from; b < r->max_blocks; b++) {
		kc_deferred_drop(r, seq, b);
		/* the daemon drops these holds with the close or truncate */
		kc_retired_drop(r, seq, b);
		if (!q->block_pages[b])
			continue;
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			kc_unmap_slot(r, seq, b, i);
		free(q->block_pages[b]);
		q->block_pages[b] = NULL;
	}
	kc_ro_forget(r, q, from);
	if (q->backed > from)
		q->backed = from;
}

static void seq_free(struct kvmm_region *r, uint32_t seq)
{
	struct kc_seq *q = &r->seqs[seq];

	kc_unmap_blocks(r, seq, 0);
	free(q->block_pages);
	free(q->deferred);
	kc_retired_forget(r, q);
	free(q->hashes);
	free(q->ro);
	memset(q, 0, sizeof(*q));
}

/* Unmap and free everything of a region locally (lock held). */
void kc_region_free(struct kvmm_region *r)
{
	struct kvmm_conn *c = r->conn;
	struct kvmm_region **pp;

	for (uint32_t s = 0; r->seqs && s < r->max_seqs; s++)
		if (r->seqs[s].open)
			seq_free(r, s);
	for (uint32_t l = 0; l < r->layers; l++) {
		if (r->k_base && r->k_base[l])
			c->backend->ops->free_range(c->backend, r->k_base[l],
						    r->range_size);
		if (r->v_base && r->v_base[l])
			c->backend->ops->free_range(c->backend, r->v_base[l],
						    r->range_size);
	}
	for (pp = &c->regions; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	free(r->k_base);
	free(r->v_base);
	free(r->seqs);
	free(r);
}

int kvmm_region_create(struct kvmm_conn *c, const struct kvmm_region_opts *opts,
		       struct kvmm_region **out)
{
	struct kvmm_region_create rc = { .size = sizeof(rc) };
	struct kvmm_region_create_reply rep = { 0 };
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_region_opts ro = { 0 }, *o = &ro;
	struct kvmm_region *r;
	uint64_t range;
	size_t n;
	int err;

	if (!c || c->admin || !opts || !out)
		return -EINVAL;
	/* an older caller's struct ends before salt: salt 0 */
	err = kc_opts_size(opts, opts->size, KVMM_REGION_OPTS_SIZE_VER0,
			   sizeof(ro), &n);
	if (err)
		return err;
	memcpy(&ro, opts, n);
	rc.layers = o->layers;
	rc.kv_heads = o->kv_heads;
	rc.head_dim = o->head_dim;
	rc.dtype_bytes = o->dtype_bytes;
	rc.max_seqs = o->max_seqs;
	rc.max_tokens = o->max_tokens;
	rc.salt = o->salt;
	err = kc_request(c, KVMM_CMD_REGION_CREATE, &rc, sizeof(rc), &rep,
			 sizeof(rep), NULL);
	if (err)
		return err;
	r = calloc(1, sizeof(*r));
	if (!r) {
		err = -ENOMEM;
		goto err_destroy;
	}
	r->conn = c;
	r->id = rep.region_id;
	r->layers = o->layers;
	r->kv_heads = o->kv_heads;
	r->head_dim = o->head_dim;
	r->dtype_bytes = o->dtype_bytes;
	r->salt = o->salt;
	r->max_seqs = o->max_seqs;
	r->max_tokens = o->max_tokens;
	r->tokens_per_block = rep.tokens_per_block;
	r->max_blocks = rep.max_blocks;
	r->pages_per_block = rep.pages_per_block;
	r->seq_stride = rep.seq_stride;
	r->range_size = rep.range_size;
	/* range_size too: one that wrapped past 2^64 would reserve a range
	 * far smaller than the sequences' addresses reach */
	if (r->pages_per_block != 2 * r->layers || !r->tokens_per_block ||
	    r->seq_stride != (uint64_t)r->max_blocks * c->page_size ||
	    __builtin_mul_overflow(r->seq_stride, (uint64_t)r->max_seqs,
				   &range) ||
	    r->range_size != range) {
		free(r);
		err = -EPROTO;
		goto err_destroy;
	}
	r->k_base = calloc(r->layers, sizeof(uint64_t));
	r->v_base = calloc(r->layers, sizeof(uint64_t));
	r->seqs = calloc(r->max_seqs, sizeof(*r->seqs));
	pthread_mutex_lock(&c->lock);
	r->next = c->regions;
	c->regions = r;
	if (!r->k_base || !r->v_base || !r->seqs) {
		err = -ENOMEM;
		goto err_free;
	}
	for (uint32_t l = 0; l < r->layers; l++) {
		err = c->backend->ops->reserve(c->backend, r->range_size,
					       &r->k_base[l]);
		if (!err)
			err = c->backend->ops->reserve(
				c->backend, r->range_size, &r->v_base[l]);
		if (err)
			goto err_free;
	}
	pthread_mutex_unlock(&c->lock);
	*out = r;
	return 0;

err_free:
	kc_region_free(r);
	pthread_mutex_unlock(&c->lock);
err_destroy:
	ref.region_id = rep.region_id;
	kc_request(c, KVMM_CMD_REGION_DESTROY, &ref, sizeof(ref), NULL, 0,
		   NULL);
	return err;
}

int kvmm_region_destroy(struct kvmm_region *r)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_conn *c;
	int err;

	err = kc_region_usable(r);
	if (err)
		return err;
	c = r->conn;
	ref.region_id = r->id;
	pthread_mutex_lock(&c->sock_lock);
	pthread_mutex_lock(&c->lock);
	kc_region_free(r);
	pthread_mutex_unlock(&c->lock);
	err = kc_request_locked(c, KVMM_CMD_REGION_DESTROY, &ref, sizeof(ref),
				NULL, 0, NULL, NULL, 0, NULL);
	pthread_mutex_unlock(&c->sock_lock);
	return err;
}

uint32_t kvmm_region_tokens_per_block(const struct kvmm_region *r)
{
	return r ? r->tokens_per_block : 0;
}

int kvmm_seq_open(struct kvmm_region *r, uint32_t *seq)
{
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kvmm_seq_open_reply rep = { 0 };
	struct kvmm_conn *c;
	struct kc_seq *q;
	int err;

	if (!r || !seq)
		return -EINVAL;
	c = r->conn;
	ref.region_id = r->id;
	err = kc_request(c, KVMM_CMD_SEQ_OPEN, &ref, sizeof(ref), &rep,
			 sizeof(rep), NULL);
	if (err)
		return err;
	if (rep.seq_id >= r->max_seqs)
		return -EPROTO;
	pthread_mutex_lock(&c->lock);
	q = &r->seqs[rep.seq_id];
	q->block_pages = calloc(r->max_blocks, sizeof(*q->block_pages));
	if (q->block_pages) {
		q->open = true;
		q->gen = rep.seq_gen;
		q->len = 0;
		q->backed = 0;
	}
	pthread_mutex_unlock(&c->lock);
	if (!q->block_pages) {
		ref.seq_id = rep.seq_id;
		kc_request(c, KVMM_CMD_SEQ_CLOSE, &ref, sizeof(ref), NULL, 0,
			   NULL);
		return -ENOMEM;
	}
	*seq = rep.seq_id;
	return 0;
}

int kc_seq_get(struct kvmm_region *r, uint32_t seq, struct kc_seq **q)
{
	if (!r || seq >= r->max_seqs || !r->seqs[seq].open)
		return -EINVAL;
	*q = &r->seqs[seq];
	return 0;
}

/*
 * One block's pages asked for by the engine (its page ids, whether it is
 * read-only) or unshared: the same lookup and the same errnos for each.
 */
int kc_seq_get_mapped(struct kvmm_region *r, uint32_t seq, uint32_t b,
		      struct kc_seq **q)
{
	int err = kc_seq_get(r, seq, q);

	if (!err && b >= r->max_blocks)
		err = -EINVAL;
	if (!err && !kc_block_mapped(r, *q, b))
		err = -ENODATA;
	return err;
}

/*
 * Map the pages of one reply block, imported already (lock held), without
 * access yet: kc_map_blocks() opens them.
 */
static int map_block(struct kvmm_region *r, uint32_t seq, uint32_t b,
		     const uint32_t *ids)
{
	struct kvmm_conn *c = r->conn;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t *slots = q->block_pages[b];
	int err;

	if (!slots) {
		slots = malloc(r->pages_per_block * sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		for (uint32_t i = 0; i < r->pages_per_block; i++)
			slots[i] = KC_NO_PAGE;
		q->block_pages[b] = slots;
	}
	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		uint32_t id = ids[i] & ~KVMM_PAGE_HELD;
		struct kc_page *p;

		if (id >= c->nr_pages)
			return -EPROTO;
		p = &c->pages[id];
		if (ids[i] & KVMM_PAGE_HELD) {
			if (slots[i] == id)
				continue; /* mapped here already */
			if (!p->refs)
				return -EPROTO;
		} else {
			/* staged by this reply's kc_import as its fd came */
			if (!p->staged)
				return -EPROTO;
			p->staged = false;
		}
		if (slots[i] != KC_NO_PAGE) {
			/* the daemon took this block back (its revocation is
			 * still in our ring) and gave fresh pages: what was
			 * written here is gone.  The old page stays ours
			 * until the revocation is applied, as it stays the
			 * daemon's hold (retire.c). */
			kc_retire_slot(r, seq, b, i);
			if (b < q->replaced)
				q->replaced = b;
			c->st.pages_revoked++;
		}
		p->refs++;
		err = c->backend->ops->map(c->backend, kc_slot_va(r, seq, b, i),
					   p->handle);
		if (err) {
			kc_page_unref(c, id);
			return err;
		}
		slots[i] = id;
		c->st.pages_mapped++;
	}
	return 0;
}

/*
 * Access for every page mapped in blocks [first, first + n) of slot i:
 * read-only for a block q->ro marks (a cached block a prefix open shares:
 * the same pages every reader maps, immutable), read-write for the
 * sequence's own.  One call per run of consecutive mapped blocks of the
 * same access (a slot's blocks are consecutive pages of one range):
 * fewer calls, one mprotect per run on the host backend (0.26 against
 * 0.66 us a page).  On an H200 cuMemSetAccess costs about 30 us a freshly
 * mapped page however the pages are grouped (bench/vmm-cuda-timing), so
 * there it saves nothing.  Setting it again on a page mapped before is
 * harmless.  Where a run's call fails, each page is tried alone and a
 * page that cannot be opened is unmapped (lock held).
 */
int kc_open_access(struct kvmm_region *r, uint32_t seq, uint32_t first,
		   uint32_t n, uint32_t i)
{
	struct kvmm_conn *c = r->conn;
	struct vmm_backend *be = c->backend;
	struct kc_seq *q = &r->seqs[seq];
	uint32_t end = first + n;
	int err = 0;

	for (uint32_t b = first; b < end;) {
		uint32_t e = b;
		int prot;

		while (e < end && q->block_pages[e] &&
		       q->block_pages[e][i] != KC_NO_PAGE &&
		       kc_block_ro(q, e) == kc_block_ro(q, b))
			e++;
		if (e == b) {
			b++;
			continue;
		}
		prot = kc_block_ro(q, b) ? VMM_PROT_READ : VMM_PROT_RW;
		if (be->ops->set_access(be, kc_slot_va(r, seq, b, i),
					(size_t)(e - b) * c->page_size, prot)) {
			for (uint32_t k = b; k < e; k++) {
				int r2 = be->ops->set_access(
					be, kc_slot_va(r, seq, k, i),
					c->page_size, prot);

				if (r2) {
					kc_unmap_slot(r, seq, k, i);
					c->st.pages_mapped--;
					err = err ? err : r2;
				}
			}
		}
		b = e;
	}
	return err;
}

int kc_map_blocks(struct kvmm_region *r, uint32_t seq, uint32_t first,
		  uint32_t n, const uint32_t *ids, const bool *ro)
{
	int err, err2;
	uint32_t k;

	/* before any page opens: never writable for want of a flag */
	err = kc_ro_set(r, &r->seqs[seq], first, n, ro);
	if (err)
		return err;
	for (k = 0; !err && k < n; k++)
		err = map_block(r, seq, first + k,
				ids + (size_t)k * r->pages_per_block);
	/* what did get mapped, up to and with a failed block's first pages */
	for (uint32_t i = 0; i < r->pages_per_block; i++) {
		err2 = kc_open_access(r, seq, first, k, i);
		if (!err)
			err = err2;
	}
	if (err) {
		struct kvmm_conn *c = r->conn;
		struct kc_seq *q = &r->seqs[seq];
		uint32_t bad = first;

		/* As if mapping had stopped at the first page that failed:
		 * nothing from that page's block on stays mapped. */
		while (bad < first + k && kc_block_mapped(r, q, bad))
			bad++;
		for (uint32_t b = bad; b < first + k; b++)
			for (uint32_t i = 0;
			     q->block_pages[b] && i < r->pages_per_block; i++)
				if (q->block_pages[b][i] != KC_NO_PAGE) {
					kc_unmap_slot(r, seq, b, i);
					c->st.pages_mapped--;
				}
	}
	return err;
}

bool kc_block_mapped(struct kvmm_region *r, struct kc_seq *q, uint32_t b)
{
	uint32_t *s = q->block_pages[b];

	if (!s)
		return false;
	for (uint32_t i = 0; i < r->pages_per_block; i++)
		if (s[i] == KC_NO_PAGE)
			return false;
	return true;
}

static int shrink(struct kvmm_region *r, uint32_t seq, uint32_t new_len,
		  uint16_t cmd)
{
	struct kvmm_conn *c;
	struct kvmm_seq_extend ex = { .size = sizeof(ex) };
	struct kvmm_region_ref ref = { .size = sizeof(ref) };
	struct kc_seq *q;
	int err;

	err = kc_region_usable(r);
	if (err)
		return err;
	c = r->conn;
	/* sock_lock first, and no thread waiting for an extend's reply of
	 * it without the socket: no fetch for this sequence may be in
	 * flight while its pages are dropped on both sides. */
	pthread_mutex_lock(&c->sock_lock);
	kc_seq_wait_collect(r, seq);
	pthread_mutex_lock(&c->lock);
	err = kc_seq_get(r, seq, &q);
	if (!err && cmd == KVMM_CMD_SEQ_TRUNCATE && new_len > q->len)
		err = -EINVAL;
	if (err) {
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&c->sock_lock);
		return err;
	}
	if (cmd == KVMM_CMD_SEQ_CLOSE) {
		seq_free(r, seq);
	} else {
		kc_unmap_blocks(r, seq, kc_blocks_for(r, new_len));
		kc_seq_hashes_trim(q, new_len / r->tokens_per_block);
		q->len = new_len;
	}
	/* blocks go back: the map-ahead thread held off by a shortage may
	 * map ahead again */
	kc_mapahead_room(c);
	pthread_mutex_unlock(&c->lock);
	if (cmd == KVMM_CMD_SEQ_CLOSE) {
		ref.region_id = r->id;
		ref.seq_id = seq;
		err = kc_request_locked(c, cmd, &ref, sizeof(ref), NULL, 0,
					NULL, NULL, 0, NULL);
	} else {
		ex.region_id = r->id;
		ex.seq_id = seq;
		ex.new_len = new_len;
		err = kc_request_locked(c, cmd, &ex, sizeof(ex), NULL, 0, NULL,
					NULL, 0, NULL);
		pthread_mutex_lock(&c->lock);
		if (!err && !kc_seq_get(r, seq, &q))
			kc_revoke_truncated(r, seq, kc_blocks_for(r, new_len));
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&c->sock_lock);
	return err;
}

int kvmm_seq_truncate(struct kvmm_region *r, uint32_t seq, uint32_t new_len)
{
	return shrink(r, seq, new_len, KVMM_CMD_SEQ_TRUNCATE);
}

int kvmm_seq_close(struct kvmm_region *r, uint32_t seq)
{
	return shrink(r, seq, 0, KVMM_CMD_SEQ_CLOSE);
}

int64_t kvmm_seq_len(struct kvmm_region *r, uint32_t seq)
{
	struct kc_seq *q;
	int64_t len;

	len = kc_region_usable(r);
	if (len)
		return len;
	pthread_mutex_lock(&r->conn->lock);
	len = kc_seq_get(r, seq, &q);
	if (!len)
		len = q->len;
	pthread_mutex_unlock(&r->conn->lock);
	return len;
}

uint64_t kvmm_seq_k_ptr(struct kvmm_region *r, uint32_t seq, uint32_t layer)
{
	if (!r || seq >= r->max_seqs || layer >= r->layers ||
	    kc_inherited(r->conn))
		return 0;
	return r->k_base[layer] + seq * r->seq_stride;
}

uint64_t kvmm_seq_v_ptr(struct kvmm_region *r, uint32_t seq, uint32_t layer)
{
	if (!r || seq >= r->max_seqs || layer >= r->layers ||
	    kc_inherited(r->conn))
		return 0;
	return r->v_base[layer] + seq * r->seq_stride;
}

int kvmm_seq_block_pages(struct kvmm_region *r, uint32_t seq, uint32_t block,
			 uint32_t *ids, uint32_t n)
{
	struct kc_seq *q;
	int err;

	if (!r || !ids)
		return -EINVAL;
	if (kc_inherited(r->conn))
		return -ECHILD;
	pthread_mutex_lock(&r->conn->lock);
	err = kc_seq_get_mapped(r, seq, block, &q);
	if (!err) {
		if (n > r->pages_per_block)
			n = r->pages_per_block;
		memcpy(ids, q->block_pages[block], n * sizeof(*ids));
		err = n;
	}
	pthread_mutex_unlock(&r->conn->lock);
	return err;
}
