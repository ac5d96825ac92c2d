/* SPDX-License-Identifier: MIT */
/*
 * libkvmm internals, shared by its files:
 *
 *   conn.c      connect and HELLO, socket requests, goodbye, statistics
 *   info.c      kvmm_get_daemon_info(): what the HELLO reply said
 *   region.c    regions and sequences: the reserved ranges, open, close
 *   extend.c    kvmm_seq_extend() and the fetch of pages past the mapped
 *               blocks (the engine's and the map-ahead thread's)
 *   import.c    the pages a reply brings, imported as their fds arrive
 *   mapahead.c  the map-ahead thread and its backoff
 *   lend.c      blocks mapped ahead given back to an extend short of them
 *   prefix.c    publishing blocks and opening a sequence on a prefix
 *   readonly.c  cached blocks mapped read-only
 *   unshare.c   copy-on-write of a shared block (SEQ_UNSHARE)
 *   pin.c       BLOCK_PIN / BLOCK_UNPIN
 *   access.c    the step-level access probe
 *   revoke.c    revocations and step boundaries
 *   defer.c     pages the map-ahead thread got for blocks still mapped
 *   retire.c    pages the engine's extend unmapped, kept until revoked
 *   fork.c      connections a process inherited through fork()
 *   ring.c      the ring client: submissions and completions
 *   hash.c      kvmm_hash_*: block identity in the public API
 *   wire.c      message and ring layout helpers, shared with kvmmd
 *
 * Locks, always taken in this order:
 *   sock_lock  one socket request/reply at a time; also held while the
 *              pages of a reply are mapped and while revocations are
 *              applied, so a revocation never overtakes the mapping of the
 *              pages it names;
 *   lock       regions, sequences, the page import cache, statistics;
 *   ring_lock  the submission/completion rings.
 * kvmm_seq_k_ptr() and friends take no lock: bases never change.
 */
#ifndef KVMM_LIB_CLIENT_H
#define KVMM_LIB_CLIENT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvmm/kvmm.h"
#include "kvmm/lib/wire.h"
#include "kvmm/uapi.h"
#include "vmm/vmm.h"

#define KC_NO_PAGE UINT32_MAX

/* One imported page: mapped refs times in this process. */
struct kvmm_tel_shm;
struct kvmm_access_rec;
struct kc_retired;

struct kc_page {
	vmm_handle_t handle;
	/* mappings in this process, plus one per slot of a deferred block
	 * (defer.c); 0: neither (imported only when staged) */
	uint32_t refs;
	/* imported from the reply being received, not mapped yet
	 * (import.c); only while sock_lock is held for that reply */
	bool staged;
};

struct kc_seq {
	bool open;
	uint32_t gen; /* the daemon's seq_gen of this opening, 0 = unknown */
	uint32_t len;
	uint32_t backed; /* blocks [0, backed) are mapped */
	/* kc_fetch(): the first block a reply mapped a different page into
	 * than the one mapped there (UINT32_MAX: none) */
	uint32_t replaced;
	/* kc_fetch(): a thread waits for the reply of its extend, parked
	 * for pool pages, without the socket (ABI 1.17); the daemon answers
	 * -EBUSY to socket commands naming the sequence until it has
	 * collected it (kc_seq_wait_collect(); lock) */
	bool collecting;
	/* lend.c gives its blocks ahead back (set by the sock_lock holder):
	 * a ring extend of it waits for the end (lend_cond); lock */
	bool lending;
	/* seq_extend(): ring extends of it sent and not answered yet, which
	 * lend.c waits out before it reads the length; lock */
	uint32_t ring_extends;
	uint32_t **block_pages; /* max_blocks; NULL or pages_per_block ids */
	/* readonly.c: which blocks are mapped read-only (a prefix open's
	 * shared or reloaded cached blocks: immutable, the same pages as in
	 * every other reader); NULL (none) or max_blocks flags */
	bool *ro;
	/* defer.c: pages the map-ahead thread got for blocks whose
	 * revocation is still pending, mapped when it is applied; NULL
	 * (none yet) or max_blocks entries, each NULL or pages_per_block
	 * ids holding a ref each */
	uint32_t **deferred;
	uint32_t nr_deferred; /* blocks in deferred[] */
	/* retire.c: pages the engine's extend unmapped for fresh ones
	 * while their revocation was still in our ring, each keeping a ref
	 * until it is applied; NULL (none yet) or max_blocks entries */
	struct kc_retired **retired;
	/* Content hashes of blocks [0, nr_hashes) seen in prefix opens and
	 * publishes (0 = unknown), for the step access probe (access.c). */
	uint64_t *hashes;
	uint32_t nr_hashes;
};

struct kvmm_region {
	struct kvmm_conn *conn;
	struct kvmm_region *next;
	uint32_t id;
	uint32_t layers, max_seqs, max_tokens;
	uint32_t kv_heads, head_dim, dtype_bytes; /* kvmm_region_hash_seed() */
	uint64_t salt; /* access.c names its blocks with it */
	uint32_t tokens_per_block, max_blocks, pages_per_block;
	uint64_t seq_stride, range_size;
	uint64_t *k_base, *v_base; /* per layer */
	struct kc_seq *seqs;
};

struct kvmm_conn {
	int sock;
	bool admin;
	/* each request's send and reply within this many ms (0: no
	 * bound; kc_connect_admin_timed()); timed_out once one ran past
	 * it, the socket shut down.  Read under sock_lock. */
	unsigned int timeout_ms;
	bool timed_out;
	/* fork.c: who connected, and the fork count then */
	pid_t owner_pid;
	unsigned int fork_generation;
	uint32_t next_id;
	/* kvmmd's reply; its abi_minor the older of kvmmd's and the one
	 * announced (KVMM_TEST_HELLO_MINOR, conn.c) */
	struct kvmm_hello_reply hello;
	struct vmm_backend *backend;
	size_t page_size;

	/* rings */
	void *ring_mem;
	size_t ring_size;
	struct kr_rings r;
	int sq_efd, cq_efd, rv_efd;
	/* ours; rq_head also read without a lock (relaxed atomics) */
	uint32_t sq_tail, cq_head, rq_head;
	/* lend.c: the requests for blocks ahead in the revocation ring
	 * before this index are answered (the map-ahead thread answers
	 * those behind revocations it may not apply); sock_lock and lock */
	uint32_t rq_given;
	/* telemetry fallback counters in the ring memfd, NULL if none */
	struct kvmm_tel_shm *tel;
	uint64_t tel_step; /* kvmm_step_end() calls; relaxed atomics */
	struct kvmm_access_rec *tel_recs; /* step batch, lock held */
	uint32_t tel_recs_cap;
	uint64_t next_user_data;
	uint32_t spin_us;

	pthread_mutex_t sock_lock, lock, ring_lock;
	/* sock_lock: a reply could not be followed to its end (a malformed
	 * or missing KVMM_CMD_FDS message): what comes next on the socket
	 * is no reply to anything we ask, so every request fails -EPROTO */
	bool broken;
	struct kvmm_region *regions;
	struct kc_page *pages; /* indexed by page id, pages_total */
	uint64_t nr_pages;

	/* deferred blocks of every sequence (lock; read without it as a
	 * hint by the step boundaries) */
	uint32_t nr_deferred;

	/* map-ahead thread */
	uint32_t map_ahead;
	pthread_t ma_thread;
	bool ma_started, ma_stop, ma_kick;
	/* it sleeps in epoll_wait() on ma_epfd: ma_wake_efd (a kick, a stop)
	 * and, edge-triggered, rv_efd (kvmmd posted into the revocation
	 * ring: a request for blocks ahead it answers, lend.c) */
	int ma_epfd, ma_wake_efd;
	/* the thread answers kvmmd's requests for blocks ahead (false: a
	 * HELLO test knob plays an older libkvmm, which answers only at its
	 * boundaries, conn.c) */
	bool give_watch;
	/* test knob (conn.c): at most this many blocks given on request */
	uint32_t give_max;
	/* after a shortage nothing is mapped ahead before ma_hold_until
	 * (CLOCK_MONOTONIC ns; 0: no hold), ma_backoff_ms after the last
	 * (0: none since room was shown); lock (mapahead.c) */
	uint64_t ma_hold_until;
	uint32_t ma_backoff_ms;
	/* broadcast (with lock) when a sequence stops lending, and when a
	 * ring extend of one that lends is answered (lend.c) */
	pthread_cond_t lend_cond;
	/* broadcast (with lock) when a sequence stops collecting */
	pthread_cond_t collect_cond;

	struct kvmm_stats st;
};

/*
 * Takes a reply's fds message by message as they arrive (the reply
 * message, then each KVMM_CMD_FDS continuation, KVMM_MSG_MAX_FDS at most
 * each), so that a reply of any size needs room for one message's fds.
 * body() sees the reply body (status 0) before any fd; fds() gets each
 * message's fds in order and owns them: it closes every one, on error
 * too.  Once either returns an error neither is called again; the rest
 * of the reply is still received (its fds closed) and the request
 * returns that error.  body may be NULL.
 */
struct kc_fd_sink {
	int (*body)(struct kc_fd_sink *s, const void *body, size_t len);
	int (*fds)(struct kc_fd_sink *s, int *fds, unsigned int n);
};

/* Socket request; caller holds sock_lock.  The body goes to reply (a body
 * longer than reply_cap is -EPROTO), *reply_len its length; fds to sink
 * (none allowed when sink is NULL: -EPROTO).  A reply whose fds the kernel
 * cut short (the fd table is full: RLIMIT_NOFILE) is -EMFILE.  Unless the
 * connection is broken, the whole reply has been read when this returns. */
int kc_request_sink(struct kvmm_conn *c, uint16_t cmd, const void *req,
		    size_t req_len, void *reply, size_t reply_cap,
		    size_t *reply_len, struct kc_fd_sink *sink);
/* Socket request; caller holds sock_lock.  reply gets up to reply_cap
 * bytes of the body (*reply_len the full length), fds up to max_fds. */
int kc_request_locked(struct kvmm_conn *c, uint16_t cmd, const void *req,
		      size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len, int *fds, unsigned int max_fds,
		      unsigned int *nfds);
int kc_request(struct kvmm_conn *c, uint16_t cmd, const void *req,
	       size_t req_len, void *reply, size_t reply_cap,
	       size_t *reply_len);
/*
 * sock_lock held: wait until no thread waits for the reply of an extend of
 * r's sequence seq without the socket (kc_seq.collecting), so a command
 * naming it is not -EBUSY.  sock_lock is dropped while waiting.
 */
void kc_seq_wait_collect(struct kvmm_region *r, uint32_t seq);
/* kc_request() of a command naming r's sequence seq, after that wait. */
int kc_seq_request(struct kvmm_region *r, uint32_t seq, uint16_t cmd,
		   const void *req, size_t req_len, void *reply,
		   size_t reply_cap, size_t *reply_len);

/* Ring: submit n entries and wait for their n completions (in order of
 * submission, matched by user_data). */
int kc_ring_submit_wait(struct kvmm_conn *c, struct kvmm_sqe *sqes,
			struct kvmm_cqe *cqes, uint32_t n);
int kc_ring_cmd(struct kvmm_conn *c, uint16_t cmd, uint32_t region,
		uint32_t seq, uint64_t arg0, uint64_t *value);
bool kc_revocations_pending(struct kvmm_conn *c);
/*
 * revoke.c: a truncate of seq to first_block blocks was answered 0 (lock
 * and sock_lock held): the entries in the ring that name its blocks from
 * there on, in this opening, take nothing when applied.  kvmmd marked
 * those places gone and dropped their holds at the truncate
 * (kd_revoke_unmapped()), so the pool could hand the same page to the
 * same place again, and the entry applied later took that new mapping:
 * the block unmapped here while kvmmd's sequence still held it, the
 * length cut, the next extend -ENODATA (tests/daemon-fuzz phase 4 with
 * revocations; tests/daemon-revoke-truncate-reuse.c).  Every entry kvmmd
 * posted before it ran the truncate is in the ring once its reply is
 * read, and none posted since names those blocks: they have no pages
 * until our next extend, which waits for sock_lock.  A daemon that names
 * no opening (seq_gen 0) kept the holds until the ack, so no page came
 * back, and its entries are matched by page anywhere: left alone.
 */
void kc_revoke_truncated(struct kvmm_region *r, uint32_t seq,
			 uint32_t first_block);
/*
 * The ring's notify word (ABI 1.16; kc_can_notify() false before it, and
 * on an admin connection): a thread that waits for a deferred reply
 * without the socket reads it (kc_notify_seen()), asks over the socket,
 * and when the answer is "not yet" sleeps until the word moves from what
 * it read (kc_notify_wait(): 0, or -ECONNRESET when the daemon hung up).
 */
bool kc_can_notify(struct kvmm_conn *c);
/* ... and a SEQ_EXTEND may ask for KVMM_SEQ_EXTEND_COLLECT (ABI 1.17) */
bool kc_can_collect_extend(struct kvmm_conn *c);
uint32_t kc_notify_seen(struct kvmm_conn *c);
int kc_notify_wait(struct kvmm_conn *c, uint32_t seen);

/* A connection without rings or a backend, for kvmmctl. */
int kc_connect_admin(const char *socket_path, struct kvmm_conn **out);
/*
 * The same, each wait for kvmmd bounded by timeout_ms (0: none, as
 * kc_connect_admin()): the connect (a full listen backlog), the HELLO
 * and every later request's send and reply (conn.c).  A wait past it
 * fails with -ETIMEDOUT and shuts the connection down; every later
 * request on it fails with -ETIMEDOUT.
 */
int kc_connect_admin_timed(const char *socket_path, unsigned int timeout_ms,
			   struct kvmm_conn **out);
/* Why kvmmd refused a connection whose HELLO failed with err (abi.md's
 * HELLO: -EUSERS, -EBUSY, -ENOMEM, -ETOOMANYREFS), NULL when err is no
 * such answer. */
const char *kc_hello_refusal(int err);
const char *kc_default_socket(void);

/*
 * test_knob.c: the KVMM_TEST_* environment, checked before a connection
 * opens (0, or -EINVAL after one ERR line a bad variable), and the
 * knobs' values: the minor HELLO announces (KVMM_ABI_MINOR unset), the
 * most blocks given on one request (UINT32_MAX unset).  Tests only.
 */
int kc_test_knobs_check(void);
uint16_t kc_test_hello_minor(void);
uint32_t kc_test_give_max(void);
uint32_t kc_test_mapahead_delay_ms(void);

/*
 * extend.c: fetch pages for blocks up to want (sock_lock held).  From the
 * engine's own extend (background false) fresh pages for blocks revoked
 * since the last boundary replace the old ones at once and the length is
 * cut before them.  From the map-ahead thread (background true) nothing
 * below what is mapped changes: such blocks are deferred (defer.c) to the
 * next boundary, as the revocation they answer is.
 */
int kc_fetch(struct kvmm_region *r, uint32_t seq, uint32_t new_len,
	     uint32_t want, bool background);
uint64_t kc_slot_va(struct kvmm_region *r, uint32_t seq, uint32_t block,
		    uint32_t i);
/* Drop one ref of page id, releasing its handle at the last; lock held. */
void kc_page_unref(struct kvmm_conn *c, uint32_t id);
/* Access for the mapped pages of blocks [first, first + n) of slot i:
 * read-only for the blocks q->ro marks, read-write for the others; a page
 * that cannot be opened is unmapped.  lock held. */
int kc_open_access(struct kvmm_region *r, uint32_t seq, uint32_t first,
		   uint32_t n, uint32_t i);
/* Unmap one page slot; lock held. */
void kc_unmap_slot(struct kvmm_region *r, uint32_t seq, uint32_t block,
		   uint32_t i);
void kc_unmap_blocks(struct kvmm_region *r, uint32_t seq, uint32_t from);
void kc_region_free(struct kvmm_region *r);
/* Map blocks [first, first + n) from a reply, ids[] pages_per_block per
 * block: ids with KVMM_PAGE_HELD from the import cache, the others staged
 * by the reply's kc_import.  Block first + k is mapped read-only when
 * ro[k] (a cached block a prefix open shares), read-write otherwise (ro
 * NULL: every block is the sequence's own, as an extend's are).  On an
 * error the blocks before the first that failed stay mapped and nothing
 * from it on does.  lock held. */
int kc_map_blocks(struct kvmm_region *r, uint32_t seq, uint32_t first,
		  uint32_t n, const uint32_t *ids, const bool *ro);
bool kc_block_mapped(struct kvmm_region *r, struct kc_seq *q, uint32_t b);
/* -EINVAL unless seq is an open sequence of r. */
int kc_seq_get(struct kvmm_region *r, uint32_t seq, struct kc_seq **q);
/* kc_seq_get(), and block b of it mapped whole: -EINVAL for a bad
 * sequence or a block past the region's, -ENODATA for one not backed.
 * lock held. */
int kc_seq_get_mapped(struct kvmm_region *r, uint32_t seq, uint32_t b,
		      struct kc_seq **q);

/*
 * import.c: the pages a SEQ_EXTEND or PREFIX_OPEN reply brings new,
 * imported into c->pages[] (staged) as each message's fds arrive.  The
 * caller's check() validates the reply body and points ids at its page
 * ids (nr_ids of them, nr_fds announced by the body).  Run the request
 * with kc_import_request() (sock_lock held), map with kc_map_blocks(),
 * then kc_import_end() (lock held) releases every page this reply staged
 * and nothing mapped: on success none, on any error all of them.
 */
struct kc_import {
	struct kc_fd_sink sink;
	struct kvmm_conn *c;
	int (*check)(struct kc_import *im, const void *body, size_t len);
	void *arg; /* for check() */
	bool body_ok; /* check() accepted the body: what it says happened */
	const uint32_t *ids;
	uint32_t nr_ids, nr_fds;
	uint32_t nr_new; /* ids without KVMM_PAGE_HELD */
	uint32_t next; /* ids[] index where the next new page is looked for */
	uint32_t imported; /* new ids staged, in order */
};
void kc_import_init(struct kc_import *im, struct kvmm_conn *c,
		    int (*check)(struct kc_import *im, const void *body,
				 size_t len),
		    void *arg);
int kc_import_request(struct kc_import *im, uint16_t cmd, const void *req,
		      size_t req_len, void *reply, size_t reply_cap,
		      size_t *reply_len);
int kc_import_collect(struct kc_import *im, uint16_t cmd,
		      const struct kvmm_region_ref *ref, uint32_t seen,
		      void *reply, size_t reply_cap, size_t *reply_len);
void kc_import_end(struct kc_import *im);
/*
 * extend.c: the checks every reply in SEQ_EXTEND's form (SEQ_EXTEND,
 * SEQ_UNSHARE) must pass, for a check() to start with: r's block size,
 * blocks within r's max_blocks, the body exactly as long as its page ids.
 * 0 (im takes the ids and the fd count) or -EPROTO.  A check() that
 * refuses the body after this returns its own error: the body is not
 * accepted (body_ok stays false) and nothing was imported, so what im
 * took is not used.
 */
int kc_extend_reply_check(struct kc_import *im, const struct kvmm_region *r,
			  const void *body, size_t len);

/* access.c: remember hashes of blocks [first, first + n) of an open
 * sequence (lock held; best effort, telemetry only); forget blocks from
 * `from` on; free them with the sequence. */
void kc_seq_hashes_set(struct kvmm_region *r, struct kc_seq *q, uint32_t first,
		       uint32_t n, const uint64_t *hashes);
void kc_seq_hashes_trim(struct kc_seq *q, uint32_t from);
/* The sequence's contents end before block b (its pages from b on are
 * gone or not its own): backed and len no further, the names of the
 * blocks from b on forgotten.  lock held. */
void kc_seq_end_before(struct kvmm_region *r, struct kc_seq *q, uint32_t b);
/* Fire kvmm:access (and the shm counters) for the open sequences' known
 * blocks; called by kvmm_step_end() when some reader wants it. */
void kc_step_access(struct kvmm_conn *c);

/*
 * defer.c (lock held): does this reply block put other pages where block b
 * is mapped (a revocation of b is pending)?  Keep its pages aside, one ref
 * each; drop the pages kept for b; drop the kept page a revocation entry
 * names (true when it was one); map every kept block once the revocations
 * are applied (sock_lock held too), cutting the length before the first.
 */
bool kc_block_replaces(struct kvmm_region *r, struct kc_seq *q, uint32_t b,
		       const uint32_t *ids);
int kc_defer_block(struct kvmm_region *r, uint32_t seq, uint32_t b,
		   const uint32_t *ids);
void kc_deferred_drop(struct kvmm_region *r, uint32_t seq, uint32_t b);
bool kc_deferred_revoke(struct kvmm_region *r, uint32_t seq, uint32_t b,
			uint32_t page_id);
void kc_deferred_apply(struct kvmm_conn *c);

/*
 * retire.c (lock held): unmap slot i of block b, its page keeping the
 * mapping's ref until the revocation entry naming that place is applied
 * (kc_retired_revoke(), true when the entry named a kept page) or block b
 * is truncated or closed (kc_retired_drop()), as the daemon keeps its
 * hold until then; kc_retired_forget() frees the lists without touching
 * a page (seq_free() dropped them, or a forked child forgets them).
 */
void kc_retire_slot(struct kvmm_region *r, uint32_t seq, uint32_t b,
		    uint32_t i);
bool kc_retired_revoke(struct kvmm_region *r, uint32_t seq, uint32_t b,
		       uint32_t page_id);
void kc_retired_drop(struct kvmm_region *r, uint32_t seq, uint32_t b);
void kc_retired_forget(struct kvmm_region *r, struct kc_seq *q);

/*
 * fork.c: record the connecting process (kvmm_connect); was c inherited
 * through fork() (every call then returns -ECHILD, before any lock)?  The
 * _or_cloned form also compares the pid (a system call).  An inherited
 * connection is dropped with kc_conn_drop_inherited(): the child's copies
 * of its memory and fds only.
 */
void kc_fork_track(struct kvmm_conn *c);
bool kc_inherited(const struct kvmm_conn *c);
bool kc_inherited_or_cloned(const struct kvmm_conn *c);
/* What every call on a region checks first: -EINVAL for no region,
 * -ECHILD in a child that inherited r's connection across fork(), 0. */
static inline int kc_region_usable(const struct kvmm_region *r)
{
	if (!r)
		return -EINVAL;
	return kc_inherited(r->conn) ? -ECHILD : 0;
}
void kc_conn_drop_inherited(struct kvmm_conn *c);
/* Unmap c's ring and close its fds (conn.c). */
void kc_conn_release_fds(struct kvmm_conn *c);

/*
 * readonly.c (lock held): mark blocks [first, first + n) read-only (ro
 * NULL: all writable) before they are opened, 0 or -ENOMEM; forget the
 * marks from block `from` on (unmapped); make a mapped read-only block
 * writable, its pages the sequence's own now (an early open's reload that
 * failed: the engine recomputes it in place).  kc_extend_readonly() says
 * whether extending seq to new_len would have the engine write into a
 * read-only block (its length ends inside one): that block is unshared
 * first (unshare.c; -EROFS from a daemon before 1.20, or its error),
 * else 0.
 */
int kc_ro_set(struct kvmm_region *r, struct kc_seq *q, uint32_t first,
	      uint32_t n, const bool *ro);
void kc_ro_forget(struct kvmm_region *r, struct kc_seq *q, uint32_t from);
void kc_ro_release(struct kvmm_region *r, uint32_t seq, uint32_t b);
int kc_extend_readonly(struct kvmm_region *r, uint32_t seq, uint32_t new_len);
static inline bool kc_block_ro(const struct kc_seq *q, uint32_t b)
{
	return q->ro && q->ro[b];
}

/*
 * unshare.c: does the daemon have SEQ_UNSHARE (ABI 1.20)?  kc_unshare()
 * (sock_lock held, lock not): make block b of seq the sequence's own,
 * kvmmd copying the shared pages into fresh ones mapped read-write in
 * their place; 0 at once for a block mapped read-write already.
 */
bool kc_can_unshare(const struct kvmm_conn *c);
int kc_unshare(struct kvmm_region *r, uint32_t seq, uint32_t b);

/* mapahead.c */
int kc_mapahead_start(struct kvmm_conn *c);
/* The blocks q should have backed: its length's and c->map_ahead more,
 * at most the region's (lock held). */
uint32_t kc_mapahead_want(const struct kvmm_conn *c,
			  const struct kvmm_region *r, const struct kc_seq *q);
void kc_mapahead_stop(struct kvmm_conn *c);
void kc_mapahead_kick(struct kvmm_conn *c);
/*
 * lock held: the uid's quota, the pool or its block tables were short
 * (kc_mapahead_hold(): map nothing ahead for a backoff, doubling from
 * KC_MA_BACKOFF_MIN_MS to KC_MA_BACKOFF_MAX_MS while shortages go on);
 * there is room again (kc_mapahead_room(): this process closed or
 * truncated a sequence, or an extend got its blocks ahead: map ahead
 * again at once).
 */
#define KC_MA_BACKOFF_MIN_MS 100
#define KC_MA_BACKOFF_MAX_MS 2000
void kc_mapahead_hold(struct kvmm_conn *c);
void kc_mapahead_room(struct kvmm_conn *c);
/* An extend's error that says the uid's quota, the pool or the uid's
 * block tables were short (not -E2BIG: no lending makes a request
 * smaller). */
static inline bool kc_short_of_blocks(int err)
{
	return err == -EDQUOT || err == -ENOMEM || err == -ENOBUFS;
}

/*
 * lend.c (sock_lock held, from the engine's extend of xr's sequence xseq
 * to need blocks): give kvmmd back the blocks mapped ahead of the
 * process's other sequences, the most first, until the blocks xseq lacks
 * are covered; how many were given.
 */
uint32_t kc_lend(struct kvmm_region *xr, uint32_t xseq, uint32_t need);
/*
 * lend.c (sock_lock held): an unshare short of blocks (unshare.c) needs
 * one block: the blocks mapped ahead of any sequence, the unshared one's
 * too (its copy is within its length), until one is covered; how many
 * were given.
 */
uint32_t kc_lend_block(struct kvmm_region *r);
/*
 * lend.c (sock_lock held, lock not): kvmmd asked for the blocks mapped
 * ahead (a KVMM_RQE_F_GIVE_AHEAD entry, ABI 1.19: an extend of another
 * process of our uid is short): the same truncates, of any sequence,
 * until `pages` pages are covered, naming the request `cookie` (ABI
 * 1.20; 0: none); how many blocks were given.  kc_give_ack(): tell
 * kvmmd the request `cookie` is answered (KVMM_RQE_F_GIVE_ACK).
 */
uint32_t kc_give_ahead(struct kvmm_conn *c, uint64_t pages, uint64_t cookie);
void kc_give_ack(struct kvmm_conn *c, uint64_t cookie, uint32_t given);
/*
 * lend.c, the map-ahead thread: are requests for blocks ahead in the
 * revocation ring that nobody answered (lock held)?  Answer them, with
 * no lock held: without a boundary, since giving blocks ahead touches
 * nothing below a length (revocations stay for the boundary).
 */
bool kc_give_pending(struct kvmm_conn *c);
void kc_give_ahead_ring(struct kvmm_conn *c);

static inline uint32_t kc_blocks_for(const struct kvmm_region *r, uint32_t len)
{
	return (len + r->tokens_per_block - 1) / r->tokens_per_block;
}

#endif
