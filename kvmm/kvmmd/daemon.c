// SPDX-License-Identifier: MIT
/*
 * Daemon start and stop: opens the memory backend, raises RLIMIT_NOFILE
 * for a full pool and every session, opens the page pool, creates the
 * listening socket (directory created, mode from the config, stale socket
 * replaced only when nobody answers on it), turns SIGTERM and SIGINT into
 * a loop stop through a signalfd, and on stop ends every session,
 * releases every page and removes the socket.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/metrics_http.h"
#include "kvmm/kvmmd/options.h"
#include "kvmm/kvmmd/test_knob.h"
#include "kvmm/policy/hmap.h"
#include "kvmm/policy/policy.h"

void kd_config_defaults(struct kd_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s",
		 "/run/kvmm/kvmm.sock");
	cfg->backend = VMM_BACKEND_AUTO;
	cfg->log_level = VMM_LOG_INFO;
	cfg->revoke_timeout_ms = 2000;
	cfg->lend_wait_ms = 1000;
	cfg->spin_us = 50;
	cfg->socket_mode = 0660;
	cfg->cpu = -1;
	cfg->cache_policy = POL_ASYM;
	cfg->host_numa_node = -1;
	cfg->socket_group = (gid_t)-1;
	cfg->max_sessions = KD_MAX_SESSIONS;
	cfg->max_sessions_per_uid = KD_SESSIONS_PER_UID;
	cfg->quarantine_per_uid = KD_ZOMBIES_PER_UID;
	cfg->hello_timeout_ms = KD_HELLO_TIMEOUT_MS;
}

/*
 * Quotas: one entry per uid in use, in a hash table.  Entries do not move
 * (blocks and sessions point at theirs) and go when nothing keeps them, so
 * uids that connect and leave never fill the table; a fixed table of 64
 * that kept every uid ever seen once left later uids without an entry,
 * and so without any limit or count.
 */
static uint64_t quota_key(uint32_t uid)
{
	return pol_mix64(uid); /* the table picks buckets by the low bits */
}

struct kd_quota *kd_quota_find(const struct kd_daemon *d, uint32_t uid)
{
	uint64_t key = quota_key(uid);

	for (struct kd_hnode *n = kd_htab_first(&d->quotas, key); n;
	     n = n->next) {
		struct kd_quota *q = (struct kd_quota *)n;

		if (n->key == key && q->uid == uid)
			return q;
	}
	return NULL;
}

struct kd_quota *kd_quota_for(struct kd_daemon *d, uint32_t uid)
{
	struct kd_quota *q = kd_quota_find(d, uid);

	if (q)
		return q;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->uid = uid;
	q->node.key = quota_key(uid);
	kd_htab_add(&d->quotas, &q->node);
	return q;
}

void kd_quota_maybe_free(struct kd_daemon *d, struct kd_quota *q)
{
	if (q->sessions || q->zombies || q->used_pages || q->limit_pages)
		return;
	kd_htab_del(&d->quotas, &q->node);
	free(q);
}

static int quota_limit(struct kd_daemon *d, uint32_t uid, uint64_t pages)
{
	struct kd_quota *q = kd_quota_for(d, uid);

	if (!q)
		return -ENOMEM;
	q->limit_pages = pages;
	kd_quota_maybe_free(d, q); /* unlimited and unused: no entry */
	return 0;
}

int kd_quota_set(struct kd_daemon *d, uint32_t uid, uint64_t pages)
{
	int err = quota_limit(d, uid, pages);

	if (err)
		return err;
	vmm_log(VMM_LOG_INFO, "quota: uid %u limited to %llu pages%s", uid,
		(unsigned long long)pages, pages ? "" : " (unlimited)");
	return 0;
}

/* At stop, once no session or block is left: the entries of limits. */
static void quotas_free_all(struct kd_daemon *d)
{
	if (!d->quotas.b)
		return;
	for (uint64_t i = 0; i <= d->quotas.mask; i++) {
		while (d->quotas.b[i]) {
			struct kd_quota *q = (struct kd_quota *)d->quotas.b[i];

			kd_htab_del(&d->quotas, &q->node);
			free(q);
		}
	}
	kd_htab_fini(&d->quotas);
}

static void on_signal(struct kd_loop *loop, int fd, uint32_t events, void *data)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	vmm_log(VMM_LOG_INFO, "signal %u: shutting down", si.ssi_signo);
	loop->stop = true;
}

/* Ring polling across all live sessions: the loop's spin hook. */
static bool poll_rings(void *data)
{
	struct kd_daemon *d = data;
	bool work = false;
	struct kd_session *s, *next;

	for (s = d->sessions; s; s = next) {
		next = s->next;
		if (s->ring && kd_ring_poll(s))
			work = true;
		if (s->doomed)
			kd_session_end(s, true, s->doom_why);
	}
	return work;
}

static bool prepare_sleep(void *data, bool arm)
{
	struct kd_daemon *d = data;
	struct kd_session *s;
	bool pending = false;

	for (s = d->sessions; s; s = s->next)
		if (s->ring)
			kd_ring_need_wakeup(s, arm);
	if (!arm)
		return false;
	kr_full_barrier();
	for (s = d->sessions; s; s = s->next)
		if (s->ring && kd_ring_pending(s))
			pending = true;
	return pending;
}

/* The most pages a pool holds: page indexes are 24 bits. */
#define KD_MAX_POOL_PAGES 0xffffffu

/* Fds besides the pool's and the sessions': the listening socket, signalfd,
 * epoll, timers, the tiers' files, io_uring and eventfds, telemetry's BPF
 * objects, stdio. */
#define KD_FIXED_FDS 256

/*
 * What kvmmd's own fds may take besides the pool's: every session it
 * admits (--max-sessions, 1024 by default) with its socket, pidfd, ring
 * memfd and eventfds (KD_SESSION_FDS each), the pidfds of quarantined
 * processes (KD_MAX_ZOMBIE_PIDFDS: zombie.c keeps them after their
 * sessions end, so they do not shrink with the sessions), and the fixed
 * ones.  It was sized for 1024 sessions whatever the option said (7424
 * fds), so a limit below pages + 7424 kept no read-only fd at all.
 */
static uint64_t reserved_fds(const struct kd_daemon *d)
{
	return (uint64_t)d->cfg.max_sessions * KD_SESSION_FDS +
	       KD_MAX_ZOMBIE_PIDFDS + KD_FIXED_FDS;
}

/* The soft RLIMIT_NOFILE (UINT64_MAX for none), 0 when it cannot be read. */
static uint64_t nofile_soft(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}

/*
 * Size RLIMIT_NOFILE for a full pool, every session and the pidfds of
 * quarantined processes (zombie.c) before the pool exists (so its own
 * warning stays quiet when this worked): one line says what was done, or
 * what is missing and how to get it.
 */
static void raise_nofile(struct kd_daemon *d)
{
	/* host: a page's memfd and the read-only fd kept for its readers
	 * while it is allocated (kd_session_reply_pages()); cuda: one */
	unsigned int per_page = vmm_pool_fds_per_page(d->backend);
	uint64_t pool_fds = d->capacity * per_page;
	uint64_t need = pool_fds + reserved_fds(d);
	struct vmm_nofile r;
	int err = vmm_nofile_raise(need, &r);

	/* Every created page holds an fd: grow the fd table for all of them
	 * now, once, rather than page creation by page creation, each growth
	 * waiting for an RCU grace period in a process with threads (the
	 * CUDA driver's): vmm_fd_table_reserve(). */
	vmm_fd_table_reserve(need);

	if (err && err != -EMFILE) {
		vmm_log(VMM_LOG_WARN, "fds: RLIMIT_NOFILE: %s", strerror(-err));
		return;
	}
	if (!err && r.soft == r.old_soft && r.hard == r.old_hard) {
		vmm_log(VMM_LOG_INFO,
			"fds: need about %llu (%llu pages, %u fds each, %u sessions); RLIMIT_NOFILE %llu (hard %llu) is enough",
			(unsigned long long)need,
			(unsigned long long)d->capacity, per_page,
			d->cfg.max_sessions, (unsigned long long)r.soft,
			(unsigned long long)r.hard);
		return;
	}
	if (!err) {
		vmm_log(VMM_LOG_INFO,
			"fds: need about %llu (%llu pages, %u fds each, %u sessions); RLIMIT_NOFILE raised from %llu (hard %llu) to %llu (hard %llu)",
			(unsigned long long)need,
			(unsigned long long)d->capacity, per_page,
			d->cfg.max_sessions, (unsigned long long)r.old_soft,
			(unsigned long long)r.old_hard,
			(unsigned long long)r.soft, (unsigned long long)r.hard);
		return;
	}
	vmm_log(VMM_LOG_WARN,
		"fds: need about %llu (%llu pages, %u fds each, %u sessions) but RLIMIT_NOFILE is %llu (hard %llu; was %llu), %llu short%s%s%s: start kvmmd with LimitNOFILE=%llu (systemd) or after ulimit -n %llu%s",
		(unsigned long long)need, (unsigned long long)d->capacity,
		per_page, d->cfg.max_sessions, (unsigned long long)r.soft,
		(unsigned long long)r.hard, (unsigned long long)r.old_soft,
		(unsigned long long)(need - r.soft),
		r.hard_err ? "; raising the hard limit: " : "",
		r.hard_err ? strerror(-r.hard_err) : "",
		r.hard_err == -EPERM ? " (needs CAP_SYS_RESOURCE)" : "",
		(unsigned long long)need, (unsigned long long)need,
		need > r.nr_open ? ", and sysctl fs.nr_open above it" : "");
}

/*
 * The read-only page fds the pool may keep (vmm_pool_set_ro_fd_cap()), from
 * the soft RLIMIT_NOFILE (d->nofile_soft): what is left of it after the
 * pool's own fds (one a page of the capacity) and reserved_fds().  That
 * is the capacity (no cap) exactly when raise_nofile() got what it asked
 * for.  Below it, one message's worth of fds less (KVMM_MSG_MAX_FDS), for
 * those a reply opens past the cap and closes once sent.  So kept fds
 * never take the fds an accept(), a pidfd, a ring or a tier file needs.
 */
static void cap_ro_fds(struct kd_daemon *d)
{
	uint64_t own = d->capacity + reserved_fds(d), room;

	room = d->nofile_soft > own ? d->nofile_soft - own : 0;
	if (room < d->capacity)
		room = room > KVMM_MSG_MAX_FDS ? room - KVMM_MSG_MAX_FDS : 0;
	vmm_pool_set_ro_fd_cap(d->pool, room);
}

/*
 * An operator may change a running kvmmd's limit (prlimit --pid): read it
 * again, at most once a second (one getrlimit), from the places that use
 * the cap: a reply that hands out read-only fds and the status (which the
 * metrics read too).  A lower cap keeps the fds above it until their
 * pages are freed (vmm_pool_free() closes them; new ones are not kept
 * meanwhile), so none is closed while a reply uses it; a higher one keeps
 * more from the next hand-out on.  (It was read only at start, and a
 * lowered limit was seen through EMFILE alone: every kept fd closed.)
 */
void kd_nofile_check(struct kd_daemon *d)
{
	uint64_t now = kd_now_ns(), soft, old_soft, old_cap;
	struct vmm_pool_stats ps;

	if (!d->pool || now - d->nofile_checked_ns < 1000000000ull)
		return;
	d->nofile_checked_ns = now;
	soft = nofile_soft();
	if (!soft || soft == d->nofile_soft)
		return;
	vmm_pool_get_stats(d->pool, &ps);
	old_cap = ps.ro_fd_cap;
	old_soft = d->nofile_soft;
	d->nofile_soft = soft;
	cap_ro_fds(d);
	vmm_pool_get_stats(d->pool, &ps);
	vmm_log(VMM_LOG_INFO,
		"fds: RLIMIT_NOFILE now %llu (was %llu): read-only page fds kept for at most %llu of %llu pages (was %llu)",
		(unsigned long long)soft, (unsigned long long)old_soft,
		(unsigned long long)ps.ro_fd_cap,
		(unsigned long long)d->capacity, (unsigned long long)old_cap);
}

/*
 * --cache-block-pages against the pool and the host tier, now that the
 * page size is known: a block larger than the pool is never cached
 * (refused), and a host tier smaller than one block is none at all (the
 * cache found "no slot would fit" and went on without a word: now a
 * WARN line says so at start).  Without the option the block size comes
 * with the first region: only a --host-mem below the smallest block (2
 * pages) is known to be none at start.  0 or -EINVAL.
 */
static int check_block_size(struct kd_daemon *d)
{
	const struct kd_config *cfg = &d->cfg;
	uint64_t block = (uint64_t)cfg->cache_block_pages * d->page_size;
	char where[300];

	for (uint32_t i = 0; i < cfg->nr_cache_block_sizes; i++) {
		if (cfg->cache_block_sizes[i] <= d->capacity)
			continue;
		vmm_log(VMM_LOG_ERR,
			"%s--cache-block-pages %u: a block is larger than the pool (%llu pages of %zu bytes; --gpu-mem)",
			kd_config_where(cfg, KD_ORIGIN_CACHE_BLOCK_PAGES, where,
					sizeof(where)),
			cfg->cache_block_sizes[i],
			(unsigned long long)d->capacity, d->page_size);
		d->bad_option = true;
		return -EINVAL;
	}
	/* with --nvme-path, a refusal: blocks reach the NVMe tier only
	 * through host slots, so that tier was silently off too (and an
	 * empty file left behind); named sizes each in their share (their
	 * weight over the weights' sum, equal unless given), every size's
	 * partition being written through its own share's slots */
	if (cfg->nvme_path[0] && cfg->host_mem && !block &&
	    cfg->host_mem < 2ull * d->page_size) {
		vmm_log(VMM_LOG_ERR,
			"%s--host-mem %llu holds no block (the smallest, 2 pages, %llu bytes): the NVMe tier (--nvme-path %s) needs a host tier of at least one block",
			kd_config_where(cfg, KD_ORIGIN_HOST_MEM, where,
					sizeof(where)),
			(unsigned long long)cfg->host_mem, 2ull * d->page_size,
			cfg->nvme_path);
		d->bad_option = true;
		return -EINVAL;
	}
	for (uint32_t i = 0; block && i < (cfg->nr_cache_block_sizes ?: 1);
	     i++) {
		uint64_t share = kd_cache_host_share(cfg, i);
		uint64_t size = cfg->nr_cache_block_sizes ?
					cfg->cache_block_sizes[i] :
					cfg->cache_block_pages;
		uint64_t bytes = size * d->page_size;
		char what[160];

		if (!cfg->host_mem || share >= bytes)
			continue;
		if (cfg->nr_cache_block_sizes > 1)
			snprintf(
				what, sizeof(what),
				"--cache-block-pages %llu in its share, %u/%u: %llu bytes, a block %llu bytes",
				(unsigned long long)size,
				kd_cache_weight(cfg, i),
				kd_cache_weights_sum(cfg),
				(unsigned long long)share,
				(unsigned long long)bytes);
		else
			snprintf(what, sizeof(what),
				 "--cache-block-pages %llu, %llu bytes",
				 (unsigned long long)size,
				 (unsigned long long)bytes);
		if (cfg->nvme_path[0]) {
			vmm_log(VMM_LOG_ERR,
				"%s--host-mem %llu holds no block (%s): the NVMe tier (--nvme-path %s) needs a host tier of at least one block%s",
				kd_config_where(cfg, KD_ORIGIN_HOST_MEM, where,
						sizeof(where)),
				(unsigned long long)cfg->host_mem, what,
				cfg->nvme_path,
				cfg->nr_cache_block_sizes > 1 ?
					" for each size" :
					"");
			d->bad_option = true;
			return -EINVAL;
		}
		/* a WARN, not a refusal: a node may run so on purpose (a
		 * host limit given for it is dropped,
		 * tests/cache-tenant-limit.c) */
		if (cfg->nr_cache_block_sizes > 1)
			vmm_log(VMM_LOG_WARN,
				"%s--host-mem %llu holds no block (%s): no host tier for that size, the cache keeps its blocks on the GPU only",
				kd_config_where(cfg, KD_ORIGIN_HOST_MEM, where,
						sizeof(where)),
				(unsigned long long)cfg->host_mem, what);
		else
			vmm_log(VMM_LOG_WARN,
				"%s--host-mem %llu holds no block of --cache-block-pages %u (%llu bytes): no host tier, the cache keeps blocks on the GPU only",
				kd_config_where(cfg, KD_ORIGIN_HOST_MEM, where,
						sizeof(where)),
				(unsigned long long)cfg->host_mem,
				cfg->cache_block_pages,
				(unsigned long long)bytes);
	}
	if (!cfg->cache_block_pages && cfg->host_mem &&
	    cfg->host_mem < 2ull * d->page_size)
		vmm_log(VMM_LOG_WARN,
			"%s--host-mem %llu is smaller than the smallest block (2 pages, %zu bytes): no host tier, the cache keeps blocks on the GPU only",
			kd_config_where(cfg, KD_ORIGIN_HOST_MEM, where,
					sizeof(where)),
			(unsigned long long)cfg->host_mem, 2 * d->page_size);
	return 0;
}

int kd_daemon_start(struct kd_daemon *d, const struct kd_config *cfg)
{
	struct vmm_config vc = { 0 };
	struct vmm_pool_stats ps;
	char where[300], ro_cap[80] = "";
	sigset_t mask;
	int err;

	memset(d, 0, sizeof(*d));
	d->cfg = *cfg;
	d->listen_fd = d->signal_fd = -1;
	d->next_session_id = 1;
	d->next_region_id = 1;
	d->next_cookie = 1;
	d->start_ns = kd_now_ns();
	d->uid = geteuid();
	vmm_log_set_level(cfg->log_level);
	/* a test knob's bad value or misspelt name: the test that set it
	 * would run without the delay or fault it relies on */
	err = kd_test_knobs_check();
	if (err) {
		d->bad_option = true;
		return err;
	}

	/* Block the stop signals before anything can start a thread: the
	 * CUDA driver starts its own in cuInit (vmm_backend_open), and a
	 * thread inherits the mask it is born with.  A SIGTERM that lands on
	 * a thread that does not block it takes its default action and kills
	 * the daemon on the spot, without the orderly stop the signalfd
	 * below gives (seen on an H200: kvmmd died of SIGTERM, status 143). */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (cfg->cpu >= 0) {
		cpu_set_t set;

		/* Like io_uring's SQPOLL thread: a polling loop wants a core
		 * of its own, not one it shares with the engines. */
		CPU_ZERO(&set);
		CPU_SET(cfg->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0)
			vmm_log(VMM_LOG_WARN, "--cpu %d: %s", cfg->cpu,
				strerror(errno));
	}
	err = kd_loop_init(&d->loop);
	if (err)
		return err;
	d->loop.spin_ns = (uint64_t)cfg->spin_us * 1000;
	d->loop.poll = poll_rings;
	d->loop.prepare_sleep = prepare_sleep;
	d->loop.hook_data = d;

	vc.kind = cfg->backend;
	vc.page_size = cfg->page_size;
	vc.cuda_device = cfg->cuda_device;
	snprintf(vc.gpu_uuid, sizeof(vc.gpu_uuid), "%s", cfg->gpu_uuid);
	err = vmm_backend_open(&vc, &d->backend);
	if (err) {
		vmm_log(VMM_LOG_ERR, "backend %s: %s",
			vmm_backend_kind_string(cfg->backend), strerror(-err));
		goto err_loop;
	}
	d->page_size = d->backend->page_size;
	if (!d->page_size) {
		err = d->backend->ops->granularity(d->backend, &d->page_size);
		if (err)
			goto err_backend;
	}
	/* Quotas were given in bytes: now the page size is known. */
	err = kd_htab_init(&d->quotas, 64);
	if (err)
		goto err_backend;
	for (uint32_t i = 0; i < cfg->nr_quotas; i++) {
		const struct kd_quota_opt *o = &cfg->quotas[i];

		err = quota_limit(d, o->uid,
				  (o->bytes + d->page_size - 1) / d->page_size);
		if (err)
			goto err_quotas;
	}
	/* --tenant-limit: rows of their own from the start (the policy
	 * gets them when it is made) */
	for (uint32_t i = 0; i < d->cfg.nr_tenant_limits; i++) {
		const struct kd_tenant_limit *l = &d->cfg.tenant_limits[i];

		err = kd_tenant_set_limit(d, l->id, l->blocks);
		if (err) {
			vmm_log(VMM_LOG_ERR, "--tenant-limit %u: %s", l->id,
				strerror(-err));
			goto err_quotas;
		}
	}
	d->capacity = cfg->gpu_mem ? cfg->gpu_mem / d->page_size : 4096;
	if (!d->capacity) {
		vmm_log(VMM_LOG_ERR,
			"%s--gpu-mem %llu is smaller than a page (%zu)",
			kd_config_where(cfg, KD_ORIGIN_GPU_MEM, where,
					sizeof(where)),
			(unsigned long long)cfg->gpu_mem, d->page_size);
		d->bad_option = true;
		err = -EINVAL;
		goto err_quotas;
	}
	if (d->capacity > KD_MAX_POOL_PAGES) {
		err = -EINVAL;
		vmm_log(VMM_LOG_ERR,
			"%s--gpu-mem %llu: %llu pages of %zu bytes, more than a pool holds (%u pages: at most %llu bytes)",
			kd_config_where(cfg, KD_ORIGIN_GPU_MEM, where,
					sizeof(where)),
			(unsigned long long)cfg->gpu_mem,
			(unsigned long long)d->capacity, d->page_size,
			KD_MAX_POOL_PAGES,
			(unsigned long long)KD_MAX_POOL_PAGES * d->page_size);
		d->bad_option = true;
		goto err_quotas;
	}
	err = check_block_size(d);
	if (err)
		goto err_quotas;
	raise_nofile(d);
	err = vmm_pool_create(d->backend, d->capacity, &d->pool);
	if (err) {
		vmm_log(VMM_LOG_ERR, "page pool: %s", strerror(-err));
		goto err_quotas;
	}
	d->nofile_soft = nofile_soft();
	d->nofile_checked_ns = kd_now_ns();
	cap_ro_fds(d);
	err = kd_scope_init(d);
	if (err)
		goto err_pool;
	err = kd_cache_init(d);
	if (err)
		goto err_pool;

	d->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->signal_fd < 0) {
		err = -errno;
		goto err_pool;
	}
	err = kd_loop_add(&d->loop, &d->signal_file, d->signal_fd, EPOLLIN,
			  on_signal, d);
	if (err)
		goto err_signal;
	err = kd_telemetry_start(d);
	if (err)
		goto err_signal;
	/* before the control socket exists: a bad address fails the start
	 * with nothing to undo there, and the socket still means ready */
	err = kd_metrics_start(d);
	if (err)
		goto err_telemetry;
	err = kd_session_listen(d);
	if (err)
		goto err_metrics;
	vmm_pool_get_stats(d->pool, &ps);
	if (vmm_pool_fds_per_page(d->backend) > 1 && ps.ro_fd_cap < d->capacity)
		snprintf(
			ro_cap, sizeof(ro_cap),
			" (read-only fds kept for %llu of them: RLIMIT_NOFILE)",
			(unsigned long long)ps.ro_fd_cap);
	vmm_log(VMM_LOG_INFO,
		"kvmmd %s: backend %s (%s), page %zu bytes, %llu pages%s, socket %s",
		KVMM_VERSION, vmm_backend_kind_string(d->backend->kind),
		d->backend->device_name, d->page_size,
		(unsigned long long)d->capacity, ro_cap, cfg->socket_path);
	return 0;

err_metrics:
	kd_metrics_stop(d);
err_telemetry:
	kd_telemetry_stop(d);
err_signal:
	close(d->signal_fd);
	d->signal_fd = -1;
err_pool:
	kd_cache_unmake_nvme(d); /* a refused start leaves no file it made */
	kd_cache_fini(d);
	vmm_pool_destroy(d->pool);
	d->pool = NULL;
err_quotas:
	quotas_free_all(d);
err_backend:
	vmm_backend_close(d->backend);
	d->backend = NULL;
err_loop:
	kd_loop_fini(&d->loop);
	return err;
}

void kd_daemon_stop_refused(struct kd_daemon *d)
{
	kd_cache_unmake_nvme(d);
	kd_daemon_stop(d);
}

int kd_daemon_run(struct kd_daemon *d)
{
	return kd_loop_run(&d->loop);
}

void kd_daemon_stop(struct kd_daemon *d)
{
	struct vmm_pool_stats st;

	kd_metrics_stop(d);
	kd_session_free_all(d);
	kd_cache_stop_nvme(d); /* an empty file it made goes */
	kd_cache_fini(d);
	quotas_free_all(d); /* no block or session points at them now */
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		unlink(d->cfg.socket_path);
		d->listen_fd = -1;
	}
	if (d->signal_fd >= 0)
		close(d->signal_fd);
	d->signal_fd = -1;
	kd_telemetry_stop(d);
	if (d->pool) {
		vmm_pool_get_stats(d->pool, &st);
		vmm_log(VMM_LOG_INFO,
			"stopped: %llu pages allocated at exit, %llu created",
			(unsigned long long)st.allocated,
			(unsigned long long)st.created);
		vmm_pool_destroy(d->pool);
		d->pool = NULL;
	}
	if (d->backend)
		vmm_backend_close(d->backend);
	d->backend = NULL;
	kd_loop_fini(&d->loop);
}
