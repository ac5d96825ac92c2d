// SPDX-License-Identifier: MIT
/*
 * The text that scrapes share.  Building it is the endpoint's one real
 * cost to the loop (over a millisecond for 255 tenants' rows, ~240 KB;
 * with several block sizes cached, their tenants' rows of each size add to
 * it, metrics_sizes.c), so it is bounded however the scrapes come: a text
 * built less than KD_METRICS_REUSE_MS ago answers every GET and HEAD (a
 * Prometheus scrapes every 15 s or so: a second's age is nothing to it,
 * and it is not worth rebuilding whenever the state changes, since under
 * load it changes with every command); a HEAD never builds; builds run
 * only from one timer, so at most one per loop turn serves every GET
 * waiting, and the next waits until the loop has run KD_METRICS_BUILD_GAP
 * times as long as this one took (1% of the loop at most).  Cache-Control:
 * no-cache asks for a text built after the request (tests use it to see
 * what they just did).  A scrape whose Accept-Encoding takes gzip (a
 * Prometheus's does) gets the text compressed, made once per built text at
 * the first such scrape and counted against the 1% like a build
 * (metrics_gzip.c): the loop then copies a tenth of the bytes into each
 * socket.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "kvmm/kvmmd/abi_play.h"
#include "kvmm/kvmmd/cache.h"
#include "kvmm/kvmmd/metrics_gzip.h"
#include "kvmm/kvmmd/metrics_http_priv.h"
#include "kvmm/kvmmd/metrics_text.h"

void kd_mtext_put(struct kd_mtext *t)
{
	if (t && !--t->refs) {
		free(t->data);
		free(t->gz);
		free(t);
	}
}

/*
 * Give text its gzip, once: the first scrape that takes gzip pays for it
 * (about a tenth of a build for the same text), and the next build waits
 * KD_METRICS_BUILD_GAP times as long again, as it does for a build, so
 * compressing stays within the endpoint's 1% of the loop.  A failure
 * leaves the text plain for good.
 */
void kd_mtext_gzip(struct kd_metrics *m, struct kd_mtext *t)
{
	uint64_t t0, cost;

	if (t->gz || t->gz_failed)
		return;
	t0 = kd_now_ns();
	if (kd_gzip(t->data, t->len, &t->gz, &t->gz_len)) {
		t->gz = NULL;
		t->gz_failed = true;
		return;
	}
	cost = kd_now_ns() - t0;
	if (m->next_build_ns < t0 + cost * (1 + KD_METRICS_BUILD_GAP))
		m->next_build_ns = t0 + cost * (1 + KD_METRICS_BUILD_GAP);
	m->gzips++;
	vmm_log(VMM_LOG_DEBUG,
		"metrics: gzip %llu: %zu bytes to %zu in %llu us", m->gzips,
		t->len, t->gz_len, (unsigned long long)cost / 1000);
}

/*
 * Build the exposition as of now into m->text: 0 or -errno.  Only
 * kd_metrics_on_build() calls this, so there is at most one build per
 * loop turn, and it sets when the next may come: KD_METRICS_BUILD_GAP
 * times this build's cost later, so a flood of scrapes, however it comes,
 * has the loop for at most 1% of the time (a build of 255 tenants' rows
 * is ~240 KB and over a millisecond; Documentation/admin.md).
 */
static int metrics_build(struct kd_metrics *m)
{
	struct kd_daemon *d = m->d;
	struct kvmm_tier_stats_reply ts;
	struct kd_metrics_size sz[KD_CACHE_SIZES] = { 0 };
	struct kvmm_tenants_reply *size_tn[KD_CACHE_SIZES] = { 0 };
	struct kvmm_status_reply st;
	struct kd_metrics_src src = {
		.st = &st,
		.abi_major = KVMM_ABI_MAJOR,
		.abi_minor = kd_abi_minor(),
	};
	/* what kvmmctl metrics shows of the daemon it talks to: under
	 * KVMMD_TEST_ABI_MINOR the one a test plays (abi_play.h) */
	uint16_t minor = kd_abi_minor();
	uint64_t t0 = kd_now_ns(), cost, gap;
	struct kvmm_tenants_reply *tn = NULL;
	struct kd_mtext *t;
	char *text = NULL;
	size_t len = 0, tn_len;
	FILE *f;
	int err;

	kd_status(d, &st);
	st.size = (uint32_t)kd_abi_reply_size(KD_ABI_ADMIN_STATUS, minor);
	/* as a client reads the shorter reply into a zeroed buffer (the
	 * strings' families go by their being set) */
	memset((char *)&st + st.size, 0, sizeof(st) - st.size);
	if (!kd_cache_tier_stats(d, &ts)) {
		kd_abi_tier_stats(&ts, minor);
		memset((char *)&ts + ts.size, 0, sizeof(ts) - ts.size);
		src.ts = &ts;
	}
	/* each size's figures since 1.21 */
	for (uint32_t i = 0; minor >= 21 && i < KD_CACHE_SIZES; i++)
		if (!kd_cache_size_stats(d, i, &sz[src.nr_sizes].pages,
					 &sz[src.nr_sizes].ts)) {
			struct kvmm_tier_stats_reply *t = &sz[src.nr_sizes].ts;

			kd_abi_tier_stats(t, minor);
			memset((char *)t + t->size, 0, sizeof(*t) - t->size);
			src.nr_sizes++;
		}
	src.sizes = sz;
	/* the tenants since 1.10 (ADMIN_TENANTS) */
	if (minor >= 10 && !kd_tenants_reply(d, 0, &tn, &tn_len)) {
		kd_abi_tenants(tn, &tn_len, minor);
		src.tn = tn;
	}
	/* each size's tenants, for the kvmm_size_tenant_* families: only
	 * with several sizes (one size's are the sums), since 1.22 */
	for (uint32_t i = 0;
	     minor >= 22 && src.tn && src.nr_sizes > 1 && i < src.nr_sizes; i++)
		if (!kd_tenants_reply(d, sz[i].pages, &size_tn[i], &tn_len))
			sz[i].tn = size_tn[i];
	f = open_memstream(&text, &len);
	if (!f) {
		err = -errno;
		goto out;
	}
	err = kd_metrics_write(f, &src);
	if (fclose(f) && !err)
		err = -EIO;
	if (err)
		goto out;
	t = calloc(1, sizeof(*t));
	if (!t) {
		err = -ENOMEM;
		goto out;
	}
	t->refs = 1; /* the cache's */
	t->built_ns = t0;
	t->len = len;
	t->data = text;
	text = NULL;
	kd_mtext_put(m->text);
	m->text = t;
out:
	free(text);
	free(tn);
	for (uint32_t i = 0; i < KD_CACHE_SIZES; i++)
		free(size_tn[i]);
	cost = kd_now_ns() - t0;
	gap = cost * KD_METRICS_BUILD_GAP;
	if (gap > KD_METRICS_REUSE_MS * 1000000ull)
		gap = KD_METRICS_REUSE_MS * 1000000ull;
	m->next_build_ns = t0 + cost + gap;
	m->builds++;
	/* what the scrape cost the loop (Documentation/admin.md); the
	 * count lets tests check how many scrapes one build served */
	vmm_log(VMM_LOG_DEBUG,
		"metrics: build %llu: %zu bytes built in %llu us", m->builds,
		len, (unsigned long long)cost / 1000);
	return err;
}

/* The build timer: one build answers every connection waiting for it. */
void kd_metrics_on_build(struct kd_loop *loop, struct kd_timer *timer)
{
	struct kd_metrics *m = timer->data;
	struct kd_mconn *c, *next;
	int err;

	for (c = m->conns; c && c->state != KD_MC_WAIT; c = c->next)
		;
	if (!c)
		return; /* they all hung up */
	err = metrics_build(m);
	for (c = m->conns; c; c = next) {
		next = c->next; /* kd_mconn_reply() may free c, nothing else */
		if (c->state != KD_MC_WAIT)
			continue;
		if (err)
			kd_mconn_reply(c, 500, NULL, false);
		else
			kd_mconn_reply(c, 200, m->text, false);
	}
}

/*
 * GET or HEAD /metrics.  A text built less than KD_METRICS_REUSE_MS ago
 * answers at once, unless the request asked for a fresh one
 * (Cache-Control: no-cache).  Otherwise a HEAD is answered without a
 * length and a GET waits (WAIT) for the next build, which
 * kd_metrics_on_build() runs as soon as the 1% rule allows: within a loop
 * turn when the endpoint is quiet, and for every GET waiting then at
 * once.
 */
void kd_mconn_reply_metrics(struct kd_mconn *c, bool head_only, bool fresh)
{
	struct kd_metrics *m = c->m;
	struct kd_loop *loop = &m->d->loop;
	uint64_t now = kd_now_ns();

	if (m->text && !fresh &&
	    now - m->text->built_ns < KD_METRICS_REUSE_MS * 1000000ull) {
		kd_mconn_reply(c, 200, m->text, head_only);
		return;
	}
	if (head_only) {
		kd_mconn_reply(c, 200, NULL, true);
		return;
	}
	/* no events but a hang-up or an error, which close it */
	c->state = KD_MC_WAIT;
	if (kd_loop_mod(loop, &c->file, 0)) {
		kd_mconn_close(c);
		return;
	}
	kd_mconn_deadline(c, KD_METRICS_WRITE_MS);
	if (!m->build.armed)
		kd_timer_arm(loop, &m->build,
			     now > m->next_build_ns ? now : m->next_build_ns);
}
