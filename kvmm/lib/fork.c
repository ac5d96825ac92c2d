// SPDX-License-Identifier: MIT
/*
 * libkvmm connections a process inherited through fork().
 *
 * A child of fork() gets copies of its parent's connections: the same
 * socket and ring memory (one session, the parent's), but none of the
 * parent's threads (no map-ahead thread; locks and condition variables as
 * those threads left them).  Whatever the child sends speaks for the
 * parent's session and races the parent on the socket and the rings: a
 * worker's kvmm_disconnect() used to hang (pthread_cond_destroy() waits
 * for the map-ahead thread, which is not in the child), break the
 * parent's session (-EPROTO, its region destroyed under it) and say BYE
 * for it, which spared its pages the quarantine a later cut-off owes
 * them.  So every call on an inherited connection returns -ECHILD before
 * it touches any lock, and kvmm_disconnect() only drops the child's
 * copies (kc_conn_drop_inherited()).
 *
 * A connection is inherited when a fork() happened in the process line
 * since it connected: a counter bumped in every child (pthread_atfork)
 * says so without a getpid() system call on each ring round trip; the
 * pid is compared too where a call can afford it (a child of a raw
 * clone() runs no fork handler).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvmm/lib/client.h"

/* forks of this process line since it started: a child gets its
 * parent's count plus one */
static unsigned int fork_generation;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void count_fork_in_child(void)
{
	__atomic_add_fetch(&fork_generation, 1, __ATOMIC_RELAXED);
}

static void install_fork_handler(void)
{
	/* ENOMEM leaves the pid check of kvmm_disconnect() */
	pthread_atfork(NULL, NULL, count_fork_in_child);
}

void kc_fork_track(struct kvmm_conn *c)
{
	pthread_once(&fork_handler_once, install_fork_handler);
	c->owner_pid = getpid();
	c->fork_generation =
		__atomic_load_n(&fork_generation, __ATOMIC_RELAXED);
}

bool kc_inherited(const struct kvmm_conn *c)
{
	return c->fork_generation !=
	       __atomic_load_n(&fork_generation, __ATOMIC_RELAXED);
}

bool kc_inherited_or_cloned(const struct kvmm_conn *c)
{
	return kc_inherited(c) || c->owner_pid != getpid();
}

/* A sequence's bookkeeping, without unmapping or releasing a page. */
static void seq_forget(struct kvmm_region *r, struct kc_seq *q)
{
	for (uint32_t b = 0; b < r->max_blocks; b++) {
		if (q->block_pages)
			free(q->block_pages[b]);
		if (q->deferred)
			free(q->deferred[b]);
	}
	free(q->block_pages);
	free(q->deferred);
	kc_retired_forget(r, q);
	free(q->hashes);
}

/*
 * The host backend's ranges are plain reservations of this address space,
 * with the parent's pages mapped MAP_SHARED into them: the child's copies
 * go, so a stray pointer of the child faults instead of writing the
 * parent's KV.  A cuda range is left alone: a forked child cannot call the
 * driver, and its copy of the reservation maps nothing here.
 */
static void region_forget(struct kvmm_conn *c, struct kvmm_region *r)
{
	bool host = c->backend && c->backend->kind == VMM_BACKEND_HOST;

	for (uint32_t s = 0; r->seqs && s < r->max_seqs; s++)
		seq_forget(r, &r->seqs[s]);
	for (uint32_t l = 0; host && l < r->layers; l++) {
		if (r->k_base && r->k_base[l])
			munmap((void *)(uintptr_t)r->k_base[l], r->range_size);
		if (r->v_base && r->v_base[l])
			munmap((void *)(uintptr_t)r->v_base[l], r->range_size);
	}
	free(r->k_base);
	free(r->v_base);
	free(r->seqs);
	free(r);
}

void kc_conn_drop_inherited(struct kvmm_conn *c)
{
	while (c->regions) {
		struct kvmm_region *r = c->regions;

		c->regions = r->next;
		region_forget(c, r);
	}
	/* our copies of the fds and of the ring: the parent's stay open */
	kc_conn_release_fds(c);
	/*
	 * Not the backend: cuda's cannot be called in a forked child, and
	 * the host backend's imported pages are PROT_NONE anchors it keeps
	 * (vmm/host.c), nothing this process can touch: it stays
	 * allocated.  The locks and the condition variable are not
	 * destroyed, only freed with the connection: another thread of the
	 * parent may have held or waited on them at the fork.
	 */
	free(c->pages);
	free(c->tel_recs);
	free(c);
}
