/* SPDX-License-Identifier: MIT */
/*
 * Physical page pool.  Creating a page is the slow backend call (~200 us
 * for a 2 MiB cuMemCreate), so pages are created once, each with one fd
 * the daemon hands to clients, and recycled through a LIFO free list (the
 * most recently freed page is the one most likely still warm).
 *
 * The fd is the backend's own where the handle is an fd (host: the memfd,
 * vmm_ops.page_fd), since SCM_RIGHTS duplicates it into the receiver
 * anyway; else one exported at creation, which the pool owns and closes
 * (cuda: cuMemExportToShareableHandle, once per page).  Either way a page
 * costs this process one fd (VMM_POOL_FDS_PER_PAGE).
 *
 * Page states (metadata out of band, one struct per page id):
 *
 *   UNUSED --create--> FREE --alloc--> ALLOCATED --free, no mappers--> FREE
 *                                          |  ^
 *                                free with |  | (never: a revoked page
 *                                 mappers  v  |  is not handed out again)
 *                                      REVOKING --last unmapped--> FREE
 *
 * The mappers count is the daemon's view of how many client processes have
 * the page mapped; the page is reused only when that falls to zero, which
 * is what makes revocation safe.  Page ids are dense: ids 0..created-1 are
 * the created pages.  Not thread-safe: the daemon's event loop owns it.
 *
 * Owners.  A page remembers who it was last allocated for
 * (vmm_pool_alloc_for(): kvmmd passes the client's uid, or for a
 * restore the cache scope whose block it will hold) and is zeroed
 * (vmm_ops.page_zero) before it goes to a different owner, so that one
 * tenant never reads what another left in its pages.  A page never
 * allocated holds what the backend gave (host: zeros; cuda: the driver
 * clears memory before a process gets it) and needs no scrub.  The
 * allocation looks at the few most recently freed pages for one of the
 * same owner (or a clean one) before it pays for a scrub.
 *
 * Trust domains.  A scrub protects the next owner only from processes
 * that really unmapped the page: one that kept the page's fd or a mapping
 * of it (a client lying about its unmaps) reads whatever the next owner
 * writes into the same memory.  So a page also remembers the trust
 * domains whose processes got its fd (vmm_pool_page_fd(); kvmmd: the
 * cache scope's uid or gid), and a page seen by a domain other than its
 * next owner's is *renewed* instead: a new page (page_create, a new fd)
 * takes its id and the old one is released.  The pool's memory is then
 * the new page's; the old one lives on only in processes that still hold
 * it, with what they could already read.  Ids, states and the free list
 * do not change, so nothing above the pool sees the swap.
 *
 * Readers.  A process that may only read a page (kvmmd: a cached block a
 * prefix open shares) gets a read-only fd of it where the backend can
 * make one (vmm_pool_page_fd_readonly(); host: a read-only open file
 * description of the memfd).  The cuda backend cannot: an importer sets
 * its own access.  The pool opens that fd at the page's first read-only
 * hand-out and keeps it while the page stays allocated: opening one
 * through /proc/self/fd costs 4-9 us, more than the rest of a page's
 * hand-out, and a popular cached prefix hands the same pages out again
 * and again.  A page therefore costs up to two fds
 * (vmm_pool_fds_per_page()).
 *
 * Why a kept read-only fd cannot outlive what it may show: it is of the
 * same memfd as the page's own fd, so it reaches exactly the memory a
 * holder of the page's fd reaches, and it is handed only to the page's
 * readers, whose domain note_seen() records as for the page's own fd.  It
 * is closed when the page is freed (vmm_pool_free(): before it is scrubbed
 * for or handed to its next owner, so a reused page starts without one
 * and its next reader gets a fd opened then), and with the page when it
 * is renewed or the pool is destroyed (release_page()).  Readers share the
 * one open file description: its offset and status flags (F_SETFL cannot
 * change its access mode), which nothing here uses, since every mapping
 * and copy goes through mmap or the page's own fd.  Under an fd shortage
 * (-EMFILE, -ENFILE: RLIMIT_NOFILE could not be raised for two fds a
 * page) the kept fds are dropped, but those handed out since the caller's
 * last vmm_pool_readonly_sent(), and the open or creation is tried again,
 * rather than failing a reply or a page for fds that are only a cache.
 *
 * Headroom.  Kept fds never crowd out the fds the rest of the process
 * needs (kvmmd: accepted sockets, pidfds, ring memfds and eventfds, tier
 * files): the pool keeps at most ro_fd_cap of them (vmm_pool_set_ro_fd_cap();
 * kvmmd sizes it from the RLIMIT_NOFILE it obtained, daemon.c).  Past the
 * cap a read-only hand-out opens an fd for that batch alone (unkept),
 * closed by vmm_pool_readonly_sent() once the caller has sent it: what
 * every hand-out did before fds were kept, correct and a few us slower.
 * The kept ones are not evicted for newer pages: under a cap every
 * hand-out past it costs one open either way, and an LRU swap would add a
 * close and churn the fds readers of the kept pages still get.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "vmm/vmm.h"

/* 2^24 pages: 32 TiB of 2 MiB pages, far above any node; bounds the
 * metadata allocation a bad --gpu-mem could ask for. */
#define POOL_MAX_PAGES (1u << 24)

struct pool_page {
	vmm_handle_t handle;
	int fd; /* what clients get: the backend's, or exported (fd_owned) */
	bool fd_owned; /* exported at creation: the pool closes it */
	enum vmm_page_state state;
	unsigned int mappers;
	uint64_t owner; /* last vmm_pool_alloc_for() owner, or OWNER_NONE */
	/* the domain whose processes got the fd since the page was created,
	 * OWNER_NONE (none yet) or SEEN_MIXED (more than one) */
	uint64_t seen;
	/* the kept read-only fd (vmm_pool_page_fd_readonly()), -1 when none,
	 * and the batch it was last handed out in (pool->ro_batch) */
	int ro_fd;
	uint64_t ro_batch;
};

/* never allocated for an owner: nothing of anyone's in it */
#define OWNER_NONE UINT64_MAX
/* fds given to processes of more than one domain */
#define SEEN_MIXED (UINT64_MAX - 1)
/* free pages vmm_pool_alloc_for() looks at for one it need not scrub */
#define OWNER_SCAN 16

struct vmm_pool {
	struct vmm_backend *backend;
	struct pool_page *pages; /* capacity entries */
	uint32_t *free_ids; /* stack of FREE page ids */
	uint32_t nr_free;
	/* read-only fds handed out in this batch are not dropped under fd
	 * pressure: the caller has not sent them yet */
	uint64_t ro_batch;
	/* fds opened for this batch alone (past ro_fd_cap), closed when it
	 * is sent: unkept[0..nr_unkept) of room_unkept */
	int *unkept;
	uint32_t nr_unkept, room_unkept;
	bool cap_logged; /* the cap's first refusal was logged */
	struct vmm_pool_stats st;
};

const char *vmm_page_state_string(enum vmm_page_state state)
{
	switch (state) {
	case VMM_PAGE_UNUSED:
		return "unused";
	case VMM_PAGE_FREE:
		return "free";
	case VMM_PAGE_ALLOCATED:
		return "allocated";
	case VMM_PAGE_REVOKING:
		return "revoking";
	}
	return "unknown";
}

int vmm_pool_create(struct vmm_backend *b, uint64_t capacity_pages,
		    struct vmm_pool **out)
{
	struct vmm_pool *pool;

	if (!b || !out || capacity_pages == 0 ||
	    capacity_pages > POOL_MAX_PAGES)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->pages = calloc(capacity_pages, sizeof(*pool->pages));
	pool->free_ids = calloc(capacity_pages, sizeof(*pool->free_ids));
	if (!pool->pages || !pool->free_ids) {
		free(pool->pages);
		free(pool->free_ids);
		free(pool);
		return -ENOMEM;
	}
	{
		/* Say so now rather than fail with -EMFILE half way through
		 * the budget.  Programs raise the limit before creating the
		 * pool (kvmmd: vmm_nofile_raise with its sessions' fds on top),
		 * so this fires only when they could not. */
		uint64_t need = capacity_pages * vmm_pool_fds_per_page(b);
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) &&
		    rl.rlim_cur != RLIM_INFINITY && need + 64 > rl.rlim_cur)
			vmm_log(VMM_LOG_WARN,
				"vmm pool: %llu pages need about %llu fds but RLIMIT_NOFILE is %llu (hard %llu); raise it before filling the pool",
				(unsigned long long)capacity_pages,
				(unsigned long long)need + 64,
				(unsigned long long)rl.rlim_cur,
				(unsigned long long)rl.rlim_max);
	}
	pool->backend = b;
	pool->st.page_size = b->page_size;
	pool->st.capacity = capacity_pages;
	pool->st.ro_fd_cap = b->ops->page_fd_readonly ? capacity_pages : 0;
	*out = pool;
	return 0;
}

unsigned int vmm_pool_fds_per_page(const struct vmm_backend *b)
{
	return b->ops->page_fd_readonly ? 2 : 1;
}

void vmm_pool_set_ro_fd_cap(struct vmm_pool *pool, uint64_t cap)
{
	if (!pool->backend->ops->page_fd_readonly)
		cap = 0; /* none is ever made */
	else if (cap > pool->st.capacity)
		cap = pool->st.capacity; /* one a page at most anyway */
	pool->st.ro_fd_cap = cap;
}

/* Close the fds opened for the batch alone (past the cap). */
static void close_unkept(struct vmm_pool *pool)
{
	while (pool->nr_unkept)
		close(pool->unkept[--pool->nr_unkept]);
}

/* Close the page's kept read-only fd, if it has one. */
static void drop_ro_fd(struct vmm_pool *pool, struct pool_page *p)
{
	if (p->ro_fd < 0)
		return;
	close(p->ro_fd);
	p->ro_fd = -1;
	pool->st.ro_fds--;
}

/*
 * Short of fds: close every kept read-only fd but those handed out in the
 * current batch (the caller is about to send them).  They are a cache,
 * reopened at their page's next read-only hand-out.  How many went.
 */
static uint64_t drop_ro_fds(struct vmm_pool *pool)
{
	uint64_t dropped = 0;

	for (uint64_t id = 0; pool->st.ro_fds && id < pool->st.created; id++) {
		struct pool_page *p = &pool->pages[id];

		if (p->ro_fd < 0 || p->ro_batch == pool->ro_batch)
			continue;
		drop_ro_fd(pool, p);
		dropped++;
	}
	pool->st.ro_fd_drops += dropped;
	if (dropped)
		vmm_log(VMM_LOG_WARN,
			"vmm pool: short of fds: %llu kept read-only page fds closed (RLIMIT_NOFILE below 2 fds a page)",
			(unsigned long long)dropped);
	return dropped;
}

static bool fd_shortage(int err)
{
	return err == -EMFILE || err == -ENFILE;
}

/* Give a page's fds and handle back to the backend.  The release is
 * retried once: a transient failure (-EINTR, -ENOMEM for metadata) must
 * not leak device memory; 0, or the second failure's -errno (counted). */
static int release_page(struct vmm_pool *pool, struct pool_page *p)
{
	struct vmm_backend *b = pool->backend;
	int err;

	drop_ro_fd(pool, p);
	if (p->fd_owned)
		close(p->fd);
	p->fd_owned = false;
	err = b->ops->page_release(b, p->handle);
	if (err)
		err = b->ops->page_release(b, p->handle);
	if (err)
		pool->st.failures++;
	return err;
}

void vmm_pool_destroy(struct vmm_pool *pool)
{
	uint64_t leaked = 0;

	if (!pool)
		return;
	for (uint64_t id = 0; id < pool->st.created; id++) {
		struct pool_page *p = &pool->pages[id];

		if (p->state == VMM_PAGE_UNUSED)
			continue;
		if (p->state != VMM_PAGE_FREE)
			leaked++;
		/* a second failure is logged and the page is lost */
		if (release_page(pool, p))
			vmm_log(VMM_LOG_WARN,
				"vmm pool: release of page %llu failed",
				(unsigned long long)id);
	}
	if (leaked)
		vmm_log(VMM_LOG_WARN,
			"vmm pool: destroyed with %llu pages still allocated",
			(unsigned long long)leaked);
	close_unkept(pool);
	free(pool->unkept);
	free(pool->pages);
	free(pool->free_ids);
	free(pool);
}

/* The fd clients get for a new page: the backend's own when it has one,
 * else a fresh export the pool owns. */
static int pool_page_fd(struct vmm_backend *b, struct pool_page *p)
{
	int err = -EOPNOTSUPP;

	if (b->ops->page_fd)
		err = b->ops->page_fd(b, p->handle, &p->fd);
	p->fd_owned = false;
	if (err != -EOPNOTSUPP)
		return err;
	err = b->ops->page_export(b, p->handle, &p->fd);
	p->fd_owned = !err;
	return err;
}

/* A new backend page with the fd clients get, into p's handle, fd and
 * fd_owned (no read-only fd yet): one create call counted, a failure in
 * failures, and nothing of it left behind.  Short of fds, it is tried
 * again once the kept read-only fds are closed. */
static int make_page(struct vmm_pool *pool, struct pool_page *p)
{
	struct vmm_backend *b = pool->backend;
	int err;

	p->ro_fd = -1;
	for (int tries = 0; tries < 2; tries++) {
		pool->st.create_calls++;
		err = b->ops->page_create(b, &p->handle);
		if (!err) {
			err = pool_page_fd(b, p);
			if (err)
				release_page(pool, p);
		}
		if (!err || !fd_shortage(err) || !drop_ro_fds(pool))
			break;
	}
	if (err)
		pool->st.failures++;
	return err;
}

static int pool_create_page(struct vmm_pool *pool, uint32_t *id)
{
	struct pool_page *p;
	int err;

	if (pool->st.created >= pool->st.capacity)
		return -ENOMEM;
	p = &pool->pages[pool->st.created];
	err = make_page(pool, p);
	if (err) {
		memset(p, 0, sizeof(*p));
		p->ro_fd = -1;
		return err;
	}
	p->state = VMM_PAGE_FREE;
	p->mappers = 0;
	p->owner = OWNER_NONE;
	p->seen = OWNER_NONE;
	*id = (uint32_t)pool->st.created++;
	return 0;
}

static void push_free(struct vmm_pool *pool, uint32_t id)
{
	pool->pages[id].state = VMM_PAGE_FREE;
	pool->free_ids[pool->nr_free++] = id;
	pool->st.free = pool->nr_free;
}

int vmm_pool_prefill(struct vmm_pool *pool, uint64_t n)
{
	while (n-- && pool->st.created < pool->st.capacity) {
		uint32_t id;
		int err = pool_create_page(pool, &id);

		if (err)
			return err;
		push_free(pool, id);
	}
	return 0;
}

int vmm_pool_alloc(struct vmm_pool *pool, uint32_t *page_id)
{
	uint32_t id;
	int err;

	if (pool->nr_free) {
		id = pool->free_ids[--pool->nr_free];
		pool->st.free = pool->nr_free;
	} else {
		err = pool_create_page(pool, &id);
		if (err)
			return err;
	}
	pool->pages[id].state = VMM_PAGE_ALLOCATED;
	pool->st.allocated++;
	if (pool->st.allocated > pool->st.peak_allocated)
		pool->st.peak_allocated = pool->st.allocated;
	*page_id = id;
	return 0;
}

/* Zero a page for its next owner: the backend's page_zero, else zeros
 * written through copy_from_host. */
static int scrub(struct vmm_pool *pool, struct pool_page *p)
{
	static const char zeros[65536];
	struct vmm_backend *b = pool->backend;
	int err = 0;

	if (b->ops->page_zero) {
		err = b->ops->page_zero(b, p->handle);
		if (err != -ENOTSUP && err != -EOPNOTSUPP)
			return err;
		err = 0;
	}
	for (size_t off = 0; !err && off < b->page_size; off += sizeof(zeros)) {
		size_t n = b->page_size - off;

		err = b->ops->copy_from_host(b, p->handle, off, zeros,
					     n < sizeof(zeros) ? n :
								 sizeof(zeros));
	}
	return err;
}

/*
 * Swap a free page for a new one under the same id: created first, so a
 * failure (device memory or fds short) leaves the page as it was, still
 * free and still the old domains'.  The old page is released; a process
 * that kept it keeps it, and the pool no longer counts it.
 */
static int renew(struct vmm_pool *pool, struct pool_page *p)
{
	struct pool_page fresh = { .fd = -1, .ro_fd = -1 };
	int err = make_page(pool, &fresh);

	if (err)
		return err;
	/* the new page takes the id whatever happens to the old one */
	err = release_page(pool, p);
	if (err)
		vmm_log(VMM_LOG_WARN,
			"vmm pool: release of a renewed page failed: %s",
			strerror(-err));
	p->handle = fresh.handle;
	p->fd = fresh.fd;
	p->fd_owned = fresh.fd_owned;
	p->ro_fd = -1; /* the old page's went with it (release_page) */
	p->owner = OWNER_NONE;
	p->seen = OWNER_NONE;
	return 0;
}

/* Whether a free page may go to owner in domain as it is: nobody outside
 * the domain got its fd, and nothing of another owner's is in it. */
static bool needs_renewal(const struct pool_page *p, uint64_t domain)
{
	return p->seen != OWNER_NONE && p->seen != domain;
}

static bool needs_scrub(const struct pool_page *p, uint64_t owner)
{
	return p->owner != OWNER_NONE && p->owner != owner;
}

int vmm_pool_alloc_for(struct vmm_pool *pool, uint64_t owner, uint64_t domain,
		       uint32_t *page_id)
{
	struct pool_page *p;
	uint32_t id;
	int err;

	if (owner == OWNER_NONE || domain >= SEEN_MIXED)
		return -EINVAL;
	if (!pool->nr_free)
		goto fresh;
	/* one of the last freed that needs neither goes first */
	for (uint32_t i = 0; i < OWNER_SCAN && i < pool->nr_free; i++) {
		uint32_t *slot = &pool->free_ids[pool->nr_free - 1 - i];
		const struct pool_page *c = &pool->pages[*slot];

		if (!needs_renewal(c, domain) && !needs_scrub(c, owner)) {
			id = *slot;
			*slot = pool->free_ids[pool->nr_free - 1];
			pool->free_ids[pool->nr_free - 1] = id;
			break;
		}
	}
	id = pool->free_ids[pool->nr_free - 1];
	p = &pool->pages[id];
	if (needs_renewal(p, domain)) {
		err = renew(pool, p);
		if (err) {
			/* stays on the free list as it was */
			pool->st.renew_failures++;
			return err;
		}
		pool->st.renewed++;
	} else if (needs_scrub(p, owner)) {
		err = scrub(pool, p);
		if (err) {
			/* stays on the free list, still the last owner's */
			pool->st.scrub_failures++;
			return err;
		}
		pool->st.scrubbed++;
	}
	pool->nr_free--;
	pool->st.free = pool->nr_free;
	goto take;
fresh:
	err = pool_create_page(pool, &id);
	if (err)
		return err;
	p = &pool->pages[id];
take:
	p->owner = owner;
	p->state = VMM_PAGE_ALLOCATED;
	pool->st.allocated++;
	if (pool->st.allocated > pool->st.peak_allocated)
		pool->st.peak_allocated = pool->st.allocated;
	*page_id = id;
	return 0;
}

static struct pool_page *lookup(struct vmm_pool *pool, uint32_t id)
{
	if (!pool || id >= pool->st.created ||
	    pool->pages[id].state == VMM_PAGE_UNUSED)
		return NULL;
	return &pool->pages[id];
}

int vmm_pool_free(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	if (!p || p->state != VMM_PAGE_ALLOCATED)
		return -EINVAL;
	/* its readers got theirs; the next owner's start with a new one */
	drop_ro_fd(pool, p);
	if (p->mappers) {
		p->state = VMM_PAGE_REVOKING;
		pool->st.revoking++;
		return 0;
	}
	pool->st.allocated--;
	push_free(pool, page_id);
	return 0;
}

int vmm_pool_mapped(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	/* A REVOKING page is on its way out: nobody may map it again. */
	if (!p || p->state != VMM_PAGE_ALLOCATED)
		return -EINVAL;
	if (p->mappers == ~0u)
		return -EOVERFLOW;
	if (p->mappers++ == 0)
		pool->st.mapped++;
	return 0;
}

int vmm_pool_unmapped(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	if (!p || p->mappers == 0)
		return -EINVAL;
	if (--p->mappers)
		return 0;
	pool->st.mapped--;
	if (p->state == VMM_PAGE_REVOKING) {
		pool->st.revoking--;
		pool->st.allocated--;
		push_free(pool, page_id);
	}
	return 0;
}

/* A process of domain got a way to the page's memory (its fd, or a
 * read-only one): the page has been seen by that domain, or by several. */
static void note_seen(struct pool_page *p, uint64_t domain)
{
	if (p->seen == OWNER_NONE)
		p->seen = domain;
	else if (p->seen != domain)
		p->seen = SEEN_MIXED;
}

int vmm_pool_page_fd(struct vmm_pool *pool, uint32_t page_id, uint64_t domain)
{
	struct pool_page *p = lookup(pool, page_id);

	if (!p || domain >= SEEN_MIXED)
		return -EINVAL;
	note_seen(p, domain);
	return p->fd;
}

/* Open the page's read-only fd into *fd: tried again once the kept fds of
 * other batches are closed when the process is short of fds. */
static int open_readonly(struct vmm_pool *pool, struct pool_page *p, int *fd)
{
	struct vmm_backend *b = pool->backend;
	int err = b->ops->page_fd_readonly(b, p->handle, fd);

	if (fd_shortage(err) && drop_ro_fds(pool))
		err = b->ops->page_fd_readonly(b, p->handle, fd);
	if (err && err != -EOPNOTSUPP)
		pool->st.failures++;
	return err;
}

/* Past the cap: an fd for this batch alone, closed when it is sent. */
static int open_unkept(struct vmm_pool *pool, struct pool_page *p, int *fd)
{
	int err;

	if (pool->nr_unkept == pool->room_unkept) {
		uint32_t room = pool->room_unkept ? 2 * pool->room_unkept : 64;
		int *grown = realloc(pool->unkept, room * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		pool->unkept = grown;
		pool->room_unkept = room;
	}
	err = open_readonly(pool, p, fd);
	if (err)
		return err;
	pool->unkept[pool->nr_unkept++] = *fd;
	pool->st.ro_fd_unkept_opens++;
	if (!pool->cap_logged) {
		pool->cap_logged = true;
		vmm_log(VMM_LOG_INFO,
			"vmm pool: %llu read-only page fds kept, the cap (RLIMIT_NOFILE); readers of other pages get one opened per reply",
			(unsigned long long)pool->st.ro_fd_cap);
	}
	return 0;
}

int vmm_pool_page_fd_readonly(struct vmm_pool *pool, uint32_t page_id,
			      uint64_t domain, int *fd)
{
	struct vmm_backend *b = pool->backend;
	struct pool_page *p = lookup(pool, page_id);
	int err;

	if (!p || domain >= SEEN_MIXED)
		return -EINVAL;
	if (!b->ops->page_fd_readonly)
		return -EOPNOTSUPP;
	/* a page freed is not handed out (REVOKING), nor a FREE one */
	if (p->state != VMM_PAGE_ALLOCATED)
		return -EINVAL;
	if (p->ro_fd >= 0) {
		*fd = p->ro_fd;
	} else if (pool->st.ro_fds >= pool->st.ro_fd_cap) {
		err = open_unkept(pool, p, fd);
		if (err)
			return err;
	} else {
		err = open_readonly(pool, p, &p->ro_fd);
		if (err) {
			p->ro_fd = -1;
			return err;
		}
		pool->st.ro_fds++;
		pool->st.ro_fd_opens++;
		*fd = p->ro_fd;
	}
	p->ro_batch = pool->ro_batch;
	/* the receiver reads the page's memory: a domain it reached, as
	 * with vmm_pool_page_fd() (a reader of another domain would read
	 * what the next owner writes unless the page is renewed) */
	note_seen(p, domain);
	return 0;
}

void vmm_pool_readonly_sent(struct vmm_pool *pool)
{
	close_unkept(pool);
	pool->ro_batch++;
}

vmm_handle_t vmm_pool_page_handle(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	return p ? p->handle : 0;
}

enum vmm_page_state vmm_pool_page_state(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	return p ? p->state : VMM_PAGE_UNUSED;
}

unsigned int vmm_pool_page_mappers(struct vmm_pool *pool, uint32_t page_id)
{
	struct pool_page *p = lookup(pool, page_id);

	return p ? p->mappers : 0;
}

void vmm_pool_get_stats(struct vmm_pool *pool, struct vmm_pool_stats *st)
{
	*st = pool->st;
}

struct vmm_backend *vmm_pool_backend(struct vmm_pool *pool)
{
	return pool->backend;
}
