// SPDX-License-Identifier: MIT
/*
 * Quarantine ("zombies"): the page holds of sessions that ended while
 * their process may still map the pages (cut off, or EOF without BYE from
 * a process that lives on), kept until the process exits.
 *
 * One zombie per process: a session of a pid that has one adds its holds
 * to it (a page both hold counts once), so a process that drops
 * connection after connection costs the daemon one record, its distinct
 * pages and at most one pidfd, however often it hangs up (each session
 * used to stay quarantined on its own with its own pidfd: one live
 * process took every fd kvmmd had).  The zombie is one holder of each of
 * its pages in the pool's count.
 *
 * Each zombie waits for its process's exit on a pidfd while its uid has
 * fewer than KD_ZOMBIE_PIDFDS_PER_UID such zombies and all uids fewer
 * than KD_MAX_ZOMBIE_PIDFDS (kvmmd's fd budget counts them, daemon.c);
 * past that (or when pidfd_open failed: a kernel before 5.3, seccomp) it
 * keeps no fd and is looked at every KD_ZOMBIE_POLL_MS with kill(pid, 0)
 * and /proc/PID/stat.  The pid is then still taken while the process
 * lives (a zombie exists only for a process that lived when its session
 * ended); a pid that no process has, or that a process with another start
 * time has, is one whose process exited.  A pid reused where the start
 * time cannot be read keeps the pages longer, never frees them early; a
 * session of the process that reused it gets its own zombie, under its
 * own uid, never the old one's (zombie_of()).  So many
 * engine processes of one uid all get quarantined; those beyond the caps
 * get their pages back up to KD_ZOMBIE_POLL_MS later.
 *
 * What bounds the records: a uid (not an admin one) with
 * --quarantine-per-uid of them (KD_ZOMBIES_PER_UID, 256, by default)
 * gets no session for a process that has none (session.c refuses it,
 * KD_REFUSED_QUARANTINE), so its records are at most that many + its
 * live sessions, each of which may add one.  Merging
 * records of several processes instead would not do: a record must know
 * every pid whose exit it waits for.
 *
 * Charges: a quarantined page that a block owns (a cached block's) is
 * charged to the block's owner; one that no block owns is charged to one
 * zombie's uid, once, for as long as any zombie holds it: the zombie that
 * held it first, and when that one goes, another that still holds it.
 * d->zombie_holds[] counts the zombies holding each page (the distinct
 * pages are pages_quarantined) and marks the pages one of them pays for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/kvmmd.h"

#define HOLDERS(v) ((v) & ~KD_ZPAGE_CHARGED)

static void zlist_add(struct kd_daemon *d, struct kd_zombie *z)
{
	z->prev = NULL;
	z->next = d->zombies;
	if (d->zombies)
		d->zombies->prev = z;
	d->zombies = z;
}

static void zlist_del(struct kd_daemon *d, struct kd_zombie *z)
{
	if (z->prev)
		z->prev->next = z->next;
	else
		d->zombies = z->next;
	if (z->next)
		z->next->prev = z->prev;
	z->prev = z->next = NULL;
}

/* The index of page in z->pages[], or -1. */
static int64_t zombie_find(const struct kd_zombie *z, uint32_t page)
{
	uint64_t lo = 0, hi = z->nr_pages;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (z->pages[mid] == page)
			return (int64_t)mid;
		if (z->pages[mid] < page)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static void charge(struct kd_zombie *z, uint64_t i)
{
	z->charged[i] = true;
	z->nr_charged++;
	z->quota->used_pages++;
	z->d->zombie_holds[z->pages[i]] |= KD_ZPAGE_CHARGED;
}

/* Page (no block owns it) to the first zombie but skip that holds it. */
static void charge_another(struct kd_daemon *d, uint32_t page,
			   const struct kd_zombie *skip)
{
	for (struct kd_zombie *z = d->zombies; z; z = z->next) {
		int64_t i = z == skip ? -1 : zombie_find(z, page);

		if (i >= 0) {
			charge(z, (uint64_t)i);
			return;
		}
	}
}

/*
 * When process pid started: /proc/PID/stat field 22, clock ticks since
 * boot; 0 when it cannot be read.  comm (field 2) may hold spaces and
 * ')': the fields after it start after its last ')'.
 */
uint64_t kd_pid_start_time(pid_t pid)
{
	char path[32], buf[1024], *p;
	uint64_t start;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %" SCNu64,
		   &start) != 1)
		return 0;
	return start;
}

/*
 * A zombie (state Z) still counts as living: a thread-group leader that
 * called pthread_exit() shows Z while the other threads run and map the
 * pages; an exited process its parent has not reaped keeps them longer.
 */
bool kd_pid_exited(pid_t pid, uint64_t start_time)
{
	uint64_t start;

	/* EPERM: a process of another uid has it */
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	start = kd_pid_start_time(pid);
	return start_time && start && start != start_time;
}

static bool pidfd_gone(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 1;
}

/* The process exited (or the daemon stops): the holds go, and the charges
 * with them, or to another zombie that still holds the page. */
static void zombie_free(struct kd_zombie *z)
{
	struct kd_daemon *d = z->d;

	if (z->pidfd >= 0) {
		kd_loop_del(&d->loop, &z->pid_file);
		close(z->pidfd);
		d->nr_zombie_pidfds--;
		z->quota->zombie_pidfds--;
	}
	for (uint64_t i = 0; i < z->nr_pages; i++) {
		uint32_t p = z->pages[i];

		d->zombie_holds[p]--;
		if (z->charged[i]) {
			z->quota->used_pages--;
			d->zombie_holds[p] &= ~KD_ZPAGE_CHARGED;
			if (HOLDERS(d->zombie_holds[p]))
				charge_another(d, p, z);
		}
		if (!HOLDERS(d->zombie_holds[p]))
			d->pages_quarantined--;
		vmm_pool_unmapped(d->pool, p);
	}
	zlist_del(d, z);
	d->nr_zombies--;
	z->quota->zombies--;
	kd_quota_maybe_free(d, z->quota);
	free(z->pages);
	free(z->charged);
	free(z);
	/* pages nobody else held are free now (a parked command's?) */
	kd_cache_pages_back(d);
}

static void on_process_exit(struct kd_loop *loop, int fd, uint32_t events,
			    void *data)
{
	struct kd_zombie *z = data;

	vmm_log(VMM_LOG_DEBUG, "pid %d exited: %llu quarantined pages released",
		(int)z->pid, (unsigned long long)z->nr_pages);
	zombie_free(z);
}

static void zombie_poll_arm(struct kd_daemon *d)
{
	if (d->zombie_poll.armed)
		return;
	d->zombie_poll.data = d;
	kd_timer_arm(&d->loop, &d->zombie_poll,
		     kd_now_ns() + KD_ZOMBIE_POLL_MS * 1000000ull);
}

/* The zombies without a pidfd whose pid no process has any more. */
static void on_zombie_poll(struct kd_loop *loop, struct kd_timer *t)
{
	struct kd_daemon *d = t->data;
	struct kd_zombie *z, *next;
	bool left = false;

	for (z = d->zombies; z; z = next) {
		next = z->next;
		if (z->pidfd >= 0)
			continue;
		if (kd_pid_exited(z->pid, z->start_time)) {
			vmm_log(VMM_LOG_DEBUG,
				"pid %d is gone: %llu quarantined pages released",
				(int)z->pid, (unsigned long long)z->nr_pages);
			zombie_free(z);
		} else {
			left = true;
		}
	}
	if (left)
		zombie_poll_arm(d);
}

/* Wait on the pidfd (its ownership passes to z), or, over the caps or
 * without one, poll.  Polling is always possible: nothing here fails. */
static void zombie_watch(struct kd_zombie *z, int *pidfd)
{
	struct kd_daemon *d = z->d;

	if (*pidfd >= 0 && d->nr_zombie_pidfds < KD_MAX_ZOMBIE_PIDFDS &&
	    z->quota->zombie_pidfds < KD_ZOMBIE_PIDFDS_PER_UID &&
	    kd_loop_add(&d->loop, &z->pid_file, *pidfd, EPOLLIN,
			on_process_exit, z) == 0) {
		z->pidfd = *pidfd;
		*pidfd = -1;
		d->nr_zombie_pidfds++;
		z->quota->zombie_pidfds++;
		return;
	}
	d->zombie_poll.fn = on_zombie_poll;
	zombie_poll_arm(d);
}

/*
 * The zombie of s's process, or NULL.  One of s's pid may be another
 * process's that exited and whose pid s's process got before the loop
 * saw it go (a readable pidfd; without one, another start time): that
 * one is done and freed here, or it would take in s's holds, charged to
 * its uid, and keep them as long as s's process lives.  A polled one of
 * another uid (or start time unknown on one side) may be s's process's
 * after a setuid(), or another's whose pid was reused within the start
 * time's clock tick: s's holds go to a zombie of their own, and that one
 * keeps its pages until the pid is free (longer, never too early).
 */
static struct kd_zombie *zombie_of(struct kd_session *s)
{
	struct kd_daemon *d = s->d;
	struct kd_zombie *z, *next;

	for (z = d->zombies; z; z = next) {
		next = z->next;
		if (z->pid != s->pid)
			continue;
		if (z->pidfd >= 0 ? pidfd_gone(z->pidfd) :
				    kd_pid_exited(z->pid, z->start_time)) {
			zombie_free(z);
			continue;
		}
		if (z->pidfd >= 0 ||
		    (z->uid == s->uid && z->start_time == s->start_time))
			return z;
	}
	return NULL;
}

static struct kd_zombie *zombie_new(struct kd_session *s)
{
	struct kd_daemon *d = s->d;
	struct kd_zombie *z = calloc(1, sizeof(*z));

	if (!z)
		return NULL;
	z->d = d;
	z->id = s->id;
	z->pid = s->pid;
	z->uid = s->uid;
	z->gid = s->gid;
	memcpy(z->name, s->name, sizeof(z->name));
	z->start_time = s->start_time;
	z->pidfd = -1;
	z->pid_file.fd = -1;
	z->quota = s->quota;
	z->quota->zombies++;
	zlist_add(d, z);
	d->nr_zombies++;
	return z;
}

/*
 * z's pages and s's held ones, merged: a page both hold loses s's hold
 * (z is already one holder); one new to z is charged to it when no block
 * owns it and no zombie pays for it yet.  -ENOMEM changes nothing.
 */
static int zombie_merge(struct kd_zombie *z, struct kd_session *s)
{
	struct kd_daemon *d = z->d;
	uint64_t max = z->nr_pages + s->pages_held, n = 0, i = 0;
	uint32_t *pages = malloc(max * sizeof(*pages));
	bool *charged = malloc(max * sizeof(*charged));

	if (!pages || !charged) {
		free(pages);
		free(charged);
		return -ENOMEM;
	}
	for (uint64_t p = 0; p < d->capacity && s->pages_held; p++) {
		if (!s->held[p])
			continue;
		s->held[p] = 0;
		s->pages_held--;
		while (i < z->nr_pages && z->pages[i] < p) {
			pages[n] = z->pages[i];
			charged[n++] = z->charged[i++];
		}
		if (i < z->nr_pages && z->pages[i] == p) {
			vmm_pool_unmapped(d->pool, p); /* cannot free it */
			continue;
		}
		pages[n] = p;
		charged[n++] = false;
		if (!HOLDERS(d->zombie_holds[p]++))
			d->pages_quarantined++;
	}
	while (i < z->nr_pages) {
		pages[n] = z->pages[i];
		charged[n++] = z->charged[i++];
	}
	free(z->pages);
	free(z->charged);
	z->pages = pages;
	z->charged = charged;
	z->nr_pages = n;
	for (i = 0; i < n; i++)
		if (!charged[i] &&
		    !(d->zombie_holds[pages[i]] & KD_ZPAGE_CHARGED) &&
		    vmm_pool_page_state(d->pool, pages[i]) !=
			    VMM_PAGE_ALLOCATED)
			charge(z, i);
	return 0;
}

void kd_zombie_quarantine(struct kd_session *s, bool cut_off)
{
	struct kd_daemon *d = s->d;
	uint64_t held = s->pages_held;
	struct kd_zombie *z;

	if (!d->zombie_holds) {
		d->zombie_holds = calloc(d->capacity, sizeof(*d->zombie_holds));
		if (!d->zombie_holds)
			goto err_keep;
	}
	z = zombie_of(s);
	if (!z) {
		z = zombie_new(s);
		if (!z)
			goto err_keep;
	}
	if (zombie_merge(z, s)) {
		if (!z->nr_pages)
			zombie_free(z);
		goto err_keep;
	}
	z->sessions++;
	/* s's process lives: a zombie polled so far can wait on s's pidfd */
	if (z->pidfd < 0)
		zombie_watch(z, &s->pidfd);
	vmm_log(cut_off ? VMM_LOG_WARN : VMM_LOG_DEBUG,
		"session %u: %llu pages quarantined until pid %d exits (%llu in all for it, %u sessions)",
		s->id, (unsigned long long)held, (int)s->pid,
		(unsigned long long)z->nr_pages, z->sessions);
	return;

err_keep:
	/* the process may still map them: never to another owner */
	vmm_log(VMM_LOG_ERR,
		"session %u: no memory to quarantine %llu pages of pid %d: kept out of use",
		s->id, (unsigned long long)held, (int)s->pid);
	memset(s->held, 0, d->capacity * sizeof(*s->held));
	s->pages_held = 0;
}

void kd_zombies_charge(struct kd_daemon *d, const uint32_t *pages, uint32_t n)
{
	for (uint32_t i = 0; i < n && d->zombies; i++) {
		uint32_t v = d->zombie_holds[pages[i]];

		if (!HOLDERS(v) || (v & KD_ZPAGE_CHARGED) ||
		    vmm_pool_page_state(d->pool, pages[i]) != VMM_PAGE_REVOKING)
			continue;
		charge_another(d, pages[i], NULL);
	}
}

bool kd_zombie_room(struct kd_daemon *d, const struct kd_quota *q, pid_t pid)
{
	uint64_t start = 0;

	if (q->zombies < d->cfg.quarantine_per_uid)
		return true;
	for (const struct kd_zombie *z = d->zombies; z; z = z->next) {
		if (z->pid != pid || z->quota != q)
			continue;
		/* a polled one may be an exited process's whose pid was
		 * reused (zombie_of() gives that one no sessions) */
		if (z->pidfd < 0 && z->start_time && !start)
			start = kd_pid_start_time(pid);
		if (z->pidfd >= 0 || !z->start_time || start == z->start_time)
			return true;
	}
	return false;
}

void kd_zombie_info(const struct kd_zombie *z, struct kvmm_session_info *i)
{
	memset(i, 0, sizeof(*i));
	i->size = sizeof(*i);
	i->session_id = z->id;
	i->pid = z->pid;
	i->uid = z->uid;
	i->gid = z->gid;
	i->flags = KVMM_SESSION_F_QUARANTINED;
	memcpy(i->name, z->name, sizeof(i->name));
	i->pages_held = z->nr_pages;
	i->quota_pages = z->quota->limit_pages;
}

void kd_zombies_free_all(struct kd_daemon *d)
{
	while (d->zombies)
		zombie_free(d->zombies);
	kd_timer_cancel(&d->loop, &d->zombie_poll);
	free(d->zombie_holds);
	d->zombie_holds = NULL;
}
