/* SPDX-License-Identifier: MIT */
/*
 * vmm — the virtual/physical memory layer shared by kvmmd and libkvmm.
 *
 * A backend owns three kinds of object:
 *   - virtual ranges, reserved in this process's address space and backed by
 *     nothing until pages are mapped into them;
 *   - physical pages of a fixed size (the backend's granularity), each
 *     exportable as a file descriptor so another process can import exactly
 *     that page and nothing else;
 *   - mappings of a page at a page-aligned address inside a reserved range.
 *
 * Two backends implement struct vmm_ops:
 *   host  memfd pages mapped MAP_SHARED into PROT_NONE reservations; the
 *         embedded default, works everywhere, same semantics as cuda.
 *   cuda  CUDA Driver API VMM (cuMemAddressReserve, cuMemCreate with POSIX
 *         fd handles, cuMemMap, ...), libcuda loaded with dlopen.
 *
 * Every call returns 0 or a negative errno.  Driver error codes are turned
 * into errno values in one place per backend and logged with their raw value.
 *
 * Addresses are uint64_t so the same type carries a host pointer and a
 * CUdeviceptr.  A page handle (vmm_handle_t) is backend-private: on the
 * host backend the memfd of a page it created with a generation above it,
 * or, for an imported page, a tagged reference to the one mapping it keeps
 * instead of an fd (see vmm/host.c); a CUmemGenericAllocationHandle on
 * cuda.
 *
 * Both backends keep the same bookkeeping (vmm/track.c) and so reject bad
 * arguments with the same errno before anything reaches the kernel or the
 * driver:
 *   -EINVAL  va or size not a multiple of the page size, size 0, offset or
 *            length outside a page, unknown prot, free_range of a va/size
 *            that is not exactly one reservation;
 *   -EFAULT  va (or part of [va, va+size)) outside every reserved range;
 *   -EBUSY   map over an address that already has a page, free_range of a
 *            range that still has pages mapped;
 *   -ENOENT  unmap or set_access where no page is mapped;
 *   -EBADF   a page handle this backend did not create or import, or one
 *            already released; an fd that is not a page of this backend.
 *
 * A mapped page is not accessible until set_access (as with cuMemMap +
 * cuMemSetAccess); vmm_map_page() does both.  A mapping keeps the physical
 * page alive on its own: a page may be released while still mapped.
 */
#ifndef KVMM_VMM_H
#define KVMM_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t vmm_handle_t;

struct vmm_backend;

struct vmm_backend_usage {
	/* handles created or imported, not yet released (cuda: a handle
	 * imported twice counts twice) */
	uint64_t pages;
	uint64_t ranges; /* reserved ranges not yet freed */
	uint64_t mappings; /* pages mapped now */
};

enum vmm_backend_kind {
	VMM_BACKEND_HOST = 0,
	VMM_BACKEND_CUDA = 1,
	VMM_BACKEND_AUTO = 2, /* cuda when a driver and GPU answer, else host */
};

/* Access rights for vmm_ops.set_access. */
#define VMM_PROT_NONE 0
#define VMM_PROT_READ 1
#define VMM_PROT_RW 3

struct vmm_config {
	enum vmm_backend_kind kind;
	/* host: a multiple of 4 KiB, 0 = 64 KiB; cuda: 0 = the granularity,
	 * else a multiple of it that is a power of two */
	size_t page_size;
	int cuda_device; /* ordinal, used when gpu_uuid is empty */
	char gpu_uuid[64]; /* "GPU-xxxxxxxx-..." selects a device by UUID */
	const char *libcuda_path; /* NULL = "libcuda.so.1" */
};

/* Identifiers of the operations, used by the fault injector and in logs. */
enum vmm_op {
	VMM_OP_GRANULARITY,
	VMM_OP_RESERVE,
	VMM_OP_FREE_RANGE,
	VMM_OP_PAGE_CREATE,
	VMM_OP_PAGE_RELEASE,
	VMM_OP_PAGE_EXPORT,
	VMM_OP_PAGE_IMPORT,
	VMM_OP_MAP,
	VMM_OP_UNMAP,
	VMM_OP_SET_ACCESS,
	VMM_OP_COPY_TO_HOST,
	VMM_OP_COPY_FROM_HOST,
	VMM_OP_PAGE_FD,
	VMM_OP_PAGE_ZERO,
	VMM_OP_PAGE_FD_READONLY,
	VMM_OP_PAGE_COPY,
	VMM_OP_COUNT,
};

const char *vmm_op_string(enum vmm_op op);

struct vmm_ops {
	const char *name;
	/* Page size every page of this backend has. */
	int (*granularity)(struct vmm_backend *b, size_t *page_size);
	/* Reserve size bytes (multiple of the page size) of address space. */
	int (*reserve)(struct vmm_backend *b, size_t size, uint64_t *va);
	int (*free_range)(struct vmm_backend *b, uint64_t va, size_t size);
	/* A new physical page, contents unspecified. */
	int (*page_create)(struct vmm_backend *b, vmm_handle_t *page);
	/* Drop this process's reference; the memory goes when no process
	 * holds a handle or a mapping any more. */
	int (*page_release)(struct vmm_backend *b, vmm_handle_t page);
	/* A new O_CLOEXEC fd for the page; the caller owns and closes it.
	 * Host: -EOPNOTSUPP for an imported page (it keeps no fd). */
	int (*page_export)(struct vmm_backend *b, vmm_handle_t page, int *fd);
	/* A handle for the page behind fd; fd stays owned by the caller, and
	 * the handle holds no fd of its own (host: one mapping instead). */
	int (*page_import)(struct vmm_backend *b, int fd, vmm_handle_t *page);
	/* Map one page at va (page aligned, inside a reserved range), then
	 * vmm_ops.set_access decides who may touch it. */
	int (*map)(struct vmm_backend *b, uint64_t va, vmm_handle_t page);
	/* Unmap the page at va; the range stays reserved. */
	int (*unmap)(struct vmm_backend *b, uint64_t va);
	int (*set_access)(struct vmm_backend *b, uint64_t va, size_t size,
			  int prot);
	/* Copy bytes between a page and ordinary host memory, whether or not
	 * the page is mapped in this process. */
	int (*copy_to_host)(struct vmm_backend *b, void *dst, vmm_handle_t page,
			    size_t offset, size_t len);
	int (*copy_from_host)(struct vmm_backend *b, vmm_handle_t page,
			      size_t offset, const void *src, size_t len);
	void (*destroy)(struct vmm_backend *b);

	/* Optional (NULL when a backend lacks them; check before calling). */

	/* The fd the backend itself keeps open for the page until
	 * page_release (host: the memfd that is the handle).  SCM_RIGHTS
	 * gives a receiver of this fd exactly what page_export's would (the
	 * same open file; the export is a dup of it), so a pool may hand
	 * this one out instead of holding a second fd per page.  The caller
	 * must not close it.  NULL or -EOPNOTSUPP: the handle is not an fd
	 * (cuda), use page_export; host: -EOPNOTSUPP for an imported page,
	 * which has no fd at all. */
	int (*page_fd)(struct vmm_backend *b, vmm_handle_t page, int *fd);
	/* Pages, ranges and mappings this backend holds now (leak checks). */
	int (*usage)(struct vmm_backend *b, struct vmm_backend_usage *u);
	/* Copies between a mapped, accessible address of this process and
	 * host memory, queued on the backend's stream (cuda: one stream per
	 * backend, host memory should be registered for real overlap; host:
	 * a plain memcpy, complete on return).  vmm_ops.synchronize waits for
	 * everything queued; -EINPROGRESS when it could not wait (cuda: the
	 * context could not be entered, also after retries), so the copies
	 * may still be in flight and their memory must not be reused. */
	int (*copy_va_to_host_async)(struct vmm_backend *b, void *dst,
				     uint64_t va, size_t len);
	int (*copy_host_to_va_async)(struct vmm_backend *b, uint64_t va,
				     const void *src, size_t len);
	int (*synchronize)(struct vmm_backend *b);
	/* Pin / unpin host memory used with the async copies (host: no-op). */
	int (*host_register)(struct vmm_backend *b, void *ptr, size_t len);
	int (*host_unregister)(struct vmm_backend *b, void *ptr);
	/* Zero every byte of a page that no process maps (host: the memfd's
	 * memory is given back and reads as zeros; cuda: a memset through
	 * the scratch range, complete on return; host: -EOPNOTSUPP for an
	 * imported page, or where holes cannot be punched).  The pool scrubs
	 * a page with it before the page changes owner (vmm_pool_alloc_for()),
	 * writing zeros through copy_from_host where it is -EOPNOTSUPP. */
	int (*page_zero)(struct vmm_backend *b, vmm_handle_t page);
	/* A new O_CLOEXEC fd of a created page through which the page can
	 * only be read: a process given it cannot map the page writable,
	 * now or later, so the pool hands it to processes that may only
	 * read the page (kvmmd: a cached block a prefix open shares).  The
	 * caller owns and closes it (the pool keeps it while the page is
	 * allocated: vmm_pool_page_fd_readonly()).  Host: a new open file description of
	 * the memfd, O_RDONLY, so mmap(PROT_WRITE, MAP_SHARED) and
	 * mprotect(PROT_WRITE) of a mapping of it fail with EACCES;
	 * -EOPNOTSUPP for an imported page, or where /proc/self/fd cannot
	 * be reopened (probed at open).  NULL (cuda): the backend cannot
	 * restrict a receiver, an importer of a CUDA shareable handle sets
	 * its own access with cuMemSetAccess. */
	int (*page_fd_readonly)(struct vmm_backend *b, vmm_handle_t page,
				int *fd);
	/* Copy every byte of page src into page dst, whether or not either
	 * is mapped in this process, complete on return (kvmmd: a shared
	 * cached block copied for one sequence, SEQ_UNSHARE).  Host:
	 * copy_file_range between the two memfds (pread/pwrite where the
	 * kernel cannot); -EOPNOTSUPP for an imported page.  Cuda: both
	 * pages mapped into the scratch range, cuMemcpyDtoD.  Callers go
	 * through vmm_page_copy(), which bounces through host memory where
	 * this is NULL or -EOPNOTSUPP. */
	int (*page_copy)(struct vmm_backend *b, vmm_handle_t dst,
			 vmm_handle_t src);
};

struct vmm_backend {
	const struct vmm_ops *ops;
	enum vmm_backend_kind kind;
	size_t page_size;
	char device_name[128]; /* "host" or the GPU's name and UUID */
	/* The GPU's PCI address as cuDeviceGetPCIBusId gives it
	 * ("0000:3B:00.0"), so host memory can go on its NUMA node; "" for the
	 * host backend or when the driver does not say. */
	char pci_bus_id[32];
	/* The GPU's UUID as cuDeviceGetUuid gives it, so a client can open
	 * the same device whatever its ordinals are (kvmm_hello_reply);
	 * all zero for the host backend. */
	uint8_t gpu_uuid[16];
	void *priv;
};

/*
 * Open a backend.  kind AUTO tries cuda and falls back to host, logging one
 * line that says why.  Returns 0 and sets *out, or -errno.
 */
int vmm_backend_open(const struct vmm_config *cfg, struct vmm_backend **out);
void vmm_backend_close(struct vmm_backend *b);
const char *vmm_backend_kind_string(enum vmm_backend_kind kind);

int vmm_host_open(const struct vmm_config *cfg, struct vmm_backend **out);
/* -ENODEV (and one log line saying why) when libcuda cannot be loaded or no
 * device answers; -ENOTSUP when built without cuda.h. */
int vmm_cuda_open(const struct vmm_config *cfg, struct vmm_backend **out);

/* map + set_access in one call; on failure nothing stays mapped. */
int vmm_map_page(struct vmm_backend *b, uint64_t va, vmm_handle_t page,
		 int prot);
/* vmm_ops.page_copy, or where the backend has none (or says -EOPNOTSUPP
 * for these pages) copy_to_host then copy_from_host through a bounce
 * buffer of one page.  dst and src must differ. */
int vmm_page_copy(struct vmm_backend *b, vmm_handle_t dst, vmm_handle_t src);
/* The backend's usage counters (all zero when it does not track them). */
void vmm_backend_get_usage(struct vmm_backend *b, struct vmm_backend_usage *u);

/* The one place a CUresult becomes an errno: logs call, the raw code and
 * its cuGetErrorName (when libcuda is loaded) at ERR level unless it is 0.
 * Exposed for tests. */
int vmm_cuda_result_to_errno(int result, const char *call);

/*
 * Fault injection: wraps a backend so that the nth call (1-based) of op
 * returns err (a negative errno) instead of reaching the backend; every
 * other call passes through.  nth = 0 disarms.  Used by tests to drive
 * every unwind path without a GPU.
 *
 * Arming resets op's call count, so nth counts from the arming.  The
 * wrapper owns inner once vmm_fault_wrap succeeds: closing the wrapper
 * closes inner.  Optional ops are passed through (and counted under no op),
 * except page_fd, page_zero, page_fd_readonly and page_copy, counted and
 * injectable as VMM_OP_PAGE_FD, VMM_OP_PAGE_ZERO, VMM_OP_PAGE_FD_READONLY
 * and VMM_OP_PAGE_COPY (-EOPNOTSUPP, -ENOTSUP, -EOPNOTSUPP, -EOPNOTSUPP
 * when inner has none).
 */
int vmm_fault_wrap(struct vmm_backend *inner, struct vmm_backend **out);
void vmm_fault_arm(struct vmm_backend *wrapped, enum vmm_op op,
		   unsigned int nth, int err);
/* The same for count calls in a row from the nth (count 0 disarms). */
void vmm_fault_arm_count(struct vmm_backend *wrapped, enum vmm_op op,
			 unsigned int nth, unsigned int count, int err);
/* Calls of op seen by the wrapper so far (injected failures included). */
unsigned int vmm_fault_calls(struct vmm_backend *wrapped, enum vmm_op op);

/*
 * Physical page pool on top of a backend.  Pages are created once (the slow
 * call) and recycled through a free list.  Each page has an id (its index),
 * a handle, one fd for handing the page to clients (the backend's own,
 * vmm_ops.page_fd, where the handle is an fd; else exported once at
 * creation and owned by the pool), a state and a count of processes that
 * have it mapped.  The pool is not thread-safe: the daemon drives it from
 * its event loop.
 */

/* Fds one created pool page may keep open in the pool's process: the
 * page's own (host: the memfd, the handle, also what clients get; cuda:
 * the exported fd, the handle is not an fd), and where the backend makes
 * read-only fds (host), the one vmm_pool_page_fd_readonly() keeps while
 * the page is allocated.  A full pool of N pages holds up to N times this;
 * size RLIMIT_NOFILE from it (vmm_nofile_raise). */
unsigned int vmm_pool_fds_per_page(const struct vmm_backend *b);
enum vmm_page_state {
	VMM_PAGE_UNUSED = 0, /* slot never created, or released */
	VMM_PAGE_FREE, /* created, on the free list */
	VMM_PAGE_ALLOCATED, /* handed to an owner (sequence, tier copy) */
	VMM_PAGE_REVOKING, /* owner gave it up; waiting for unmaps */
};

const char *vmm_page_state_string(enum vmm_page_state state);

struct vmm_pool_stats {
	uint64_t page_size;
	uint64_t capacity; /* max pages (the --gpu-mem budget) */
	uint64_t created; /* pages that exist now (free + in use) */
	uint64_t free; /* on the free list */
	uint64_t allocated; /* ALLOCATED + REVOKING */
	uint64_t revoking; /* REVOKING: freed, some process still maps it */
	uint64_t mapped; /* pages with at least one process mapping */
	uint64_t peak_allocated;
	uint64_t create_calls;
	uint64_t failures; /* backend calls that failed */
	/* pages zeroed before they went to a new owner, and scrubs that
	 * failed (that allocation failed; the page stayed free) */
	uint64_t scrubbed;
	uint64_t scrub_failures;
	/* pages swapped for new ones because a process of another trust
	 * domain got their fd, and swaps that failed (that allocation
	 * failed; the page stayed free as it was) */
	uint64_t renewed;
	uint64_t renew_failures;
	/* read-only fds kept now (vmm_pool_page_fd_readonly(): one at most
	 * per allocated page), opened so far, and closed under an fd
	 * shortage (reopened at their page's next read-only hand-out) */
	uint64_t ro_fds;
	uint64_t ro_fd_opens;
	uint64_t ro_fd_drops;
	/* the most kept at once (vmm_pool_set_ro_fd_cap(); the capacity by
	 * default, 0 where the backend makes none), and the fds opened past
	 * it for one batch alone (closed by vmm_pool_readonly_sent()) */
	uint64_t ro_fd_cap;
	uint64_t ro_fd_unkept_opens;
};

struct vmm_pool;

int vmm_pool_create(struct vmm_backend *b, uint64_t capacity_pages,
		    struct vmm_pool **out);
/* Releases every page; pages still allocated are counted as leaks and
 * logged. */
void vmm_pool_destroy(struct vmm_pool *pool);
/* Create n more pages now (fewer if the capacity is reached) onto the free
 * list, so later allocations are fast.  On an error the pages created so
 * far stay in the pool. */
int vmm_pool_prefill(struct vmm_pool *pool, uint64_t n);
/* A page for a new owner: from the free list, else created; -ENOMEM when
 * the capacity is reached. */
int vmm_pool_alloc(struct vmm_pool *pool, uint32_t *page_id);
/* The same for owner in trust domain `domain` (owner: any value but
 * UINT64_MAX; domain: below UINT64_MAX - 1; kvmmd: KD_OWNER_*() for both,
 * the domain being the cache scope's): a free page whose fd went to a
 * process of another domain is swapped for a new page (no process outside
 * the domain can still reach the memory it gets), else one last allocated
 * for another owner is zeroed, so owners never see each other's bytes
 * (vmm_pool_alloc() does neither and changes no owner).  -errno of the
 * swap or the scrub when it fails. */
int vmm_pool_alloc_for(struct vmm_pool *pool, uint64_t owner, uint64_t domain,
		       uint32_t *page_id);
/* The owner gives the page back: FREE at once when no process maps it,
 * otherwise REVOKING until the last vmm_pool_unmapped(). */
int vmm_pool_free(struct vmm_pool *pool, uint32_t page_id);
/* Count a process mapping / unmapping the page (the daemon's view). */
int vmm_pool_mapped(struct vmm_pool *pool, uint32_t page_id);
int vmm_pool_unmapped(struct vmm_pool *pool, uint32_t page_id);
/* The pool's fd for the page, to be given to a process of trust domain
 * `domain` (recorded: vmm_pool_alloc_for() renews the page before a
 * process of another domain gets its memory).  Owned by the pool or the
 * backend, valid until the page is freed: pass it as is or dup it, never
 * close it.  -EINVAL for an unknown page or domain. */
int vmm_pool_page_fd(struct vmm_pool *pool, uint32_t page_id, uint64_t domain);
/* The same page for a process that may only read it: *fd gets an fd that
 * cannot map the page writable (vmm_ops.page_fd_readonly).  The pool
 * opens it at the page's first such call and keeps it while the page is
 * allocated (vmm_pool_free() closes it), so the same fd comes back each
 * time: pass it as is, never close it.  It stays valid until the page is
 * freed, or until vmm_pool_readonly_sent() ends the batch it was handed
 * out in, after which an fd shortage in the pool may close it (then it is
 * reopened at the next call).  With the cap's worth kept
 * (vmm_pool_set_ro_fd_cap()), another page's comes opened for the batch
 * alone and vmm_pool_readonly_sent() closes it.  The domain is recorded as by
 * vmm_pool_page_fd().  -EOPNOTSUPP where the backend cannot (cuda: an
 * importer sets its own access; the caller then sends vmm_pool_page_fd()'s
 * fd, which any receiver can map writable), -EINVAL for an unknown page or
 * domain or a page not allocated, else the backend's -errno (-EMFILE when
 * none is left even after the kept fds of other batches were closed). */
int vmm_pool_page_fd_readonly(struct vmm_pool *pool, uint32_t page_id,
			      uint64_t domain, int *fd);
/* The read-only fds handed out since the last call are sent (or will not
 * be): from now on an fd shortage may close them, and those opened past
 * the cap for this batch alone are closed now. */
void vmm_pool_readonly_sent(struct vmm_pool *pool);
/* Keep at most cap read-only fds (default: one per page of the capacity):
 * past it vmm_pool_page_fd_readonly() opens one for the batch alone, which
 * vmm_pool_readonly_sent() closes.  Bounds the fds the pool takes from the
 * rest of its process when RLIMIT_NOFILE is short (kvmmd, daemon.c).
 * Clamped to the capacity; 0 where the backend makes no read-only fd. */
void vmm_pool_set_ro_fd_cap(struct vmm_pool *pool, uint64_t cap);
vmm_handle_t vmm_pool_page_handle(struct vmm_pool *pool, uint32_t page_id);
enum vmm_page_state vmm_pool_page_state(struct vmm_pool *pool,
					uint32_t page_id);
unsigned int vmm_pool_page_mappers(struct vmm_pool *pool, uint32_t page_id);
void vmm_pool_get_stats(struct vmm_pool *pool, struct vmm_pool_stats *st);
struct vmm_backend *vmm_pool_backend(struct vmm_pool *pool);

/*
 * RLIMIT_NOFILE for a process that will hold about need fds (the daemon's
 * pool, a client mapping many pages).  When the soft limit is below need:
 * if the hard limit is below need too, try hard = soft = min(need,
 * fs.nr_open) (needs CAP_SYS_RESOURCE; -EPERM otherwise); else, or when
 * that is refused, soft = hard.  Never lowers a limit.  Only programs call
 * this (kvmmd, kvmm-replay): libkvmm never changes its process's limits.
 * Returns 0 when need fds fit now, -EMFILE when they still do not (r says
 * what the limits are and why), or -errno from getrlimit.
 */
struct vmm_nofile {
	uint64_t old_soft, old_hard; /* before */
	uint64_t soft, hard; /* now */
	uint64_t nr_open; /* /proc/sys/fs/nr_open (1048576 if unreadable) */
	int hard_err; /* 0, or why raising the hard limit failed (-EPERM) */
};
int vmm_nofile_raise(uint64_t need, struct vmm_nofile *r);

/*
 * Grow this process's fd table now so that fd numbers up to upto (capped
 * below RLIMIT_NOFILE) need no growth later.  The kernel grows the table
 * when it hands out a number past its end, and in a process with several
 * threads (every CUDA process: the driver starts its own) each growth
 * waits for an RCU grace period, 20-30 ms on the H200 machine measured,
 * inside whatever call took the fd: a recvmsg bringing a reply's page
 * fds, a page creation.  Growing it once, early, takes that wait out of
 * the calls that matter.  The table never shrinks.  0 or -errno.
 */
int vmm_fd_table_reserve(uint64_t upto);

/* Logging shared by vmm/, the daemon and the library. */
enum vmm_log_level {
	VMM_LOG_ERR = 0,
	VMM_LOG_WARN,
	VMM_LOG_INFO,
	VMM_LOG_DEBUG,
};
void vmm_log_set_level(enum vmm_log_level level);
void vmm_log(enum vmm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Lines to fd instead of stderr (a daemon's --log-file; the caller keeps
 * fd open), back with STDERR_FILENO; this also ends vmm_log_to_syslog. */
void vmm_log_to_fd(int fd);
/* Lines to syslog, facility daemon, as ident[pid], instead of stderr. */
void vmm_log_to_syslog(const char *ident);
/* With on, a copy of each line on stderr too while the lines go to a file
 * or syslog (a daemon's start, whose failure its starter should read). */
void vmm_log_stderr_too(bool on);

#endif
