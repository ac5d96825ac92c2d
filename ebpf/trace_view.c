// SPDX-License-Identifier: MIT
/*
 * `kvmmctl trace`: reads the pinned telemetry maps through the same
 * telemetry API the daemon uses (TEL_MODE_PINNED, so it never takes the
 * daemon's ring-buffer events or touches its pins) and prints
 *   - accesses per tier found and the hit rate of each tier (share of all
 *     accesses; in live mode also over the last interval),
 *   - the top blocks by access count with their reuse gap estimate
 *     (by uid: each uid's entries apart, and each uid's blocks and
 *     accesses),
 *   - every latency histogram row: count, mean, p50, p99 and its buckets.
 * In live mode each refresh first checks that the pins still name the
 * maps it opened: it follows a restarted kvmmd to its new maps and ends
 * (non-zero) when the pins are gone, never showing a dead daemon's
 * frozen numbers.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ebpf/telemetry.h"
#include "ebpf/trace_view.h"

struct top_blocks {
	unsigned int n, max;
	struct {
		__u64 hash; /* __u64 so %llx fits on every ABI */
		__u32 uid, gid; /* by uid: the entry's ids (else 0) */
		struct kvmm_block_stats s;
	} * v;
};

/* Whether block a goes before b in the list: more accesses first, then
 * the lower hash, then (by uid) the lower uid and gid. */
static bool top_before(__u64 ca, __u64 ha, __u64 ida, __u64 cb, __u64 hb,
		       __u64 idb)
{
	if (ca != cb)
		return ca > cb;
	if (ha != hb)
		return ha < hb;
	return ida < idb;
}

/* Keep the `max` most accessed blocks, in top_before() order. */
static void top_add(struct top_blocks *tb, uint64_t hash, __u32 uid, __u32 gid,
		    const struct kvmm_block_stats *s)
{
	__u64 ids = (__u64)uid << 32 | gid;
	unsigned int i;

	for (i = tb->n; i > 0; i--) {
		if (top_before(tb->v[i - 1].s.count, tb->v[i - 1].hash,
			       (__u64)tb->v[i - 1].uid << 32 | tb->v[i - 1].gid,
			       s->count, hash, ids))
			break;
	}
	if (i >= tb->max)
		return;
	if (tb->n < tb->max)
		tb->n++;
	memmove(&tb->v[i + 1], &tb->v[i], (tb->n - 1 - i) * sizeof(tb->v[0]));
	tb->v[i].hash = hash;
	tb->v[i].uid = uid;
	tb->v[i].gid = gid;
	tb->v[i].s = *s;
}

/* A block of the snapshot (every uid's entries of a hash added up). */
static int collect_top(void *arg, uint64_t hash,
		       const struct kvmm_block_stats *s)
{
	top_add(arg, hash, 0, 0, s);
	return 0;
}

/*
 * By uid: the map's entries as they are (tel_bpf_entry_foreach()), each
 * a candidate for the top list, and the blocks and accesses of each uid
 * (the uid of kvmmd's own records, KVMM_TEL_ID_NAMED, included).
 */
struct uid_row {
	__u32 uid;
	__u64 blocks, accesses;
};

struct by_uid {
	struct top_blocks *tb;
	struct uid_row *rows; /* one per entry while walking, then per uid */
	size_t n, cap;
};

static int collect_entry(void *arg, const struct kvmm_block_key *k,
			 const struct kvmm_block_stats *s)
{
	struct by_uid *bu = arg;

	top_add(bu->tb, k->hash, k->uid, k->gid, s);
	if (bu->n == bu->cap) {
		size_t cap = bu->cap ? 2 * bu->cap : 1024;
		void *p = realloc(bu->rows, cap * sizeof(*bu->rows));

		if (!p)
			return -ENOMEM;
		bu->rows = p;
		bu->cap = cap;
	}
	bu->rows[bu->n++] = (struct uid_row){ .uid = k->uid,
					      .blocks = 1,
					      .accesses = s->count };
	return 0;
}

static int uid_cmp(const void *a, const void *b)
{
	const struct uid_row *x = a, *y = b;

	return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/* The entries' rows into one row per uid, by uid. */
static void uid_rows_fold(struct by_uid *bu)
{
	size_t i, n = 0;

	if (!bu->n)
		return;
	qsort(bu->rows, bu->n, sizeof(*bu->rows), uid_cmp);
	for (i = 1; i < bu->n; i++) {
		if (bu->rows[i].uid == bu->rows[n].uid) {
			bu->rows[n].blocks += bu->rows[i].blocks;
			bu->rows[n].accesses += bu->rows[i].accesses;
		} else {
			bu->rows[++n] = bu->rows[i];
		}
	}
	bu->n = n + 1;
}

struct hist_print {
	FILE *out;
	bool json;
	unsigned int n;
};

static int print_hist(void *arg, const struct kvmm_hist_key *k,
		      const struct kvmm_hist *h)
{
	struct hist_print *hp = arg;
	double mean = h->count ? (double)h->sum_ns / (double)h->count : 0;
	unsigned int b, first = 1;

	if (hp->json) {
		fprintf(hp->out,
			"%s{\"kind\":\"%s\",\"tier\":\"%s\",\"dst_tier\":\"%s\","
			"\"segments\":%u,\"count\":%llu,\"sum_ns\":%llu"
			",\"sum_bytes\":%llu,\"mean_ns\":%.1f,"
			"\"p50_ns\":%llu,\"p99_ns\":%llu"
			",\"buckets\":{",
			hp->n ? "," : "", tel_event_string(k->kind),
			tel_tier_string(k->tier), tel_tier_string(k->dst_tier),
			k->segments, h->count, h->sum_ns, h->sum_bytes, mean,
			(unsigned long long)tel_hist_percentile(h, 50),
			(unsigned long long)tel_hist_percentile(h, 99));
		for (b = 0; b < KVMM_TEL_HIST_BUCKETS; b++) {
			if (!h->buckets[b])
				continue;
			fprintf(hp->out, "%s\"%u\":%llu", first ? "" : ",", b,
				h->buckets[b]);
			first = 0;
		}
		fprintf(hp->out, "}}");
	} else {
		fprintf(hp->out,
			"  %-9s %-6s->%-6s segs %-3u n %-8llu"
			" mean %10.0f ns  p50 <%-10llu p99 <%llu"
			"\n    ",
			tel_event_string(k->kind), tel_tier_string(k->tier),
			tel_tier_string(k->dst_tier), k->segments, h->count,
			mean, (unsigned long long)tel_hist_percentile(h, 50),
			(unsigned long long)tel_hist_percentile(h, 99));
		for (b = 0; b < KVMM_TEL_HIST_BUCKETS; b++)
			if (h->buckets[b])
				fprintf(hp->out, " 2^%u:%llu", b,
					h->buckets[b]);
		fprintf(hp->out, "\n");
	}
	hp->n++;
	return 0;
}

/* The uid as the text view names it: kvmmd's own records by name. */
static const char *uid_label(__u32 uid, char *buf, size_t len)
{
	if (uid == KVMM_TEL_ID_NAMED)
		return "kvmmd";
	snprintf(buf, len, "%u", uid);
	return buf;
}

int tel_trace_print(struct tel *t, FILE *out, bool json, bool by_uid,
		    unsigned int top, double interval_s,
		    const void *prev_counters)
{
	const struct kvmm_counters *prev = prev_counters;
	struct hist_print hp = { .out = out, .json = json };
	struct top_blocks tb = { .max = top };
	struct by_uid bu = { .tb = &tb };
	struct kvmm_counters c;
	uint64_t dsum = 0;
	unsigned int i;
	char ub[16];
	int err;

	tel_counters(t, &c);
	tb.v = calloc(top + 1, sizeof(*tb.v));
	if (!tb.v)
		return -ENOMEM;
	if (by_uid) {
		err = tel_bpf_entry_foreach(t, collect_entry, &bu);
		if (err) {
			free(bu.rows);
			free(tb.v);
			return err;
		}
		uid_rows_fold(&bu);
	} else {
		tel_block_foreach(t, collect_top, &tb);
	}
	if (prev)
		dsum = c.accesses - prev->accesses;

	if (json) {
		fprintf(out,
			"{\"source\":\"%s\",\"pin_dir\":\"%s\",\"blocks\":%zu,"
			"\"accesses\":%llu,\"tiers\":{",
			tel_source_string(tel_source(t)), tel_pin_dir(t),
			tel_block_count(t), c.accesses);
		for (i = 0; i < KVMM_TEL_NR_TIERS; i++)
			fprintf(out,
				"%s\"%s\":{\"accesses\":%llu"
				",\"hit_rate\":%.6f}",
				i ? "," : "", tel_tier_string(i),
				c.tier_accesses[i],
				c.accesses ? (double)c.tier_accesses[i] /
						     (double)c.accesses :
					     0.0);
		fprintf(out, "},\"events\":{");
		for (i = 0; i < KVMM_TEL_NR_EVENTS; i++)
			fprintf(out, "%s\"%s\":%llu", i ? "," : "",
				tel_event_string(i), c.events[i]);
		fprintf(out,
			"},\"dropped\":{\"access\":%llu"
			",\"blocks\":%llu,\"hist\":%llu"
			",\"events\":%llu},\"top_blocks\":[",
			c.access_dropped, c.blocks_dropped, c.hist_dropped,
			c.events_dropped);
		for (i = 0; i < tb.n; i++) {
			fprintf(out, "%s{\"hash\":\"0x%016llx\"", i ? "," : "",
				tb.v[i].hash);
			if (by_uid)
				fprintf(out, ",\"uid\":%u,\"gid\":%u",
					tb.v[i].uid, tb.v[i].gid);
			fprintf(out,
				",\"count\":%llu,\"ewma_gap_ns\":%llu"
				",\"last_ns\":%llu,\"last_seq\":%llu"
				",\"last_tier\":\"%s\"}",
				tb.v[i].s.count, tb.v[i].s.ewma_gap_ns,
				tb.v[i].s.last_ns, tb.v[i].s.last_seq,
				tel_tier_string(tb.v[i].s.last_tier));
		}
		if (by_uid) {
			fprintf(out, "],\"uids\":[");
			for (i = 0; i < bu.n; i++)
				fprintf(out,
					"%s{\"uid\":%u,\"blocks\":%llu"
					",\"accesses\":%llu}",
					i ? "," : "", bu.rows[i].uid,
					bu.rows[i].blocks, bu.rows[i].accesses);
		}
		fprintf(out, "],\"histograms\":[");
		tel_hist_foreach(t, print_hist, &hp);
		fprintf(out, "]}\n");
	} else {
		fprintf(out,
			"kvmm telemetry (%s, %s): %zu blocks, %llu"
			" accesses\n",
			tel_source_string(tel_source(t)), tel_pin_dir(t),
			tel_block_count(t), c.accesses);
		fprintf(out, "tier     accesses     hit rate%s\n",
			prev ? "  (last interval, /s)" : "");
		for (i = 0; i < KVMM_TEL_NR_TIERS; i++) {
			fprintf(out, "  %-6s %-12llu %6.2f%%",
				tel_tier_string(i), c.tier_accesses[i],
				c.accesses ?
					100.0 * (double)c.tier_accesses[i] /
						(double)c.accesses :
					0.0);
			if (prev && dsum)
				fprintf(out, "  %6.2f%%  %.0f/s",
					100.0 *
						(double)(c.tier_accesses[i] -
							 prev->tier_accesses[i]) /
						(double)dsum,
					(double)(c.tier_accesses[i] -
						 prev->tier_accesses[i]) /
						interval_s);
			fprintf(out, "\n");
		}
		fprintf(out,
			"dropped: access %llu blocks %llu"
			" hist %llu events %llu\n",
			c.access_dropped, c.blocks_dropped, c.hist_dropped,
			c.events_dropped);
		if (by_uid) {
			fprintf(out, "by uid:\n  %-10s %-12s %s\n", "uid",
				"blocks", "accesses");
			for (i = 0; i < bu.n; i++)
				fprintf(out, "  %-10s %-12llu %llu\n",
					uid_label(bu.rows[i].uid, ub,
						  sizeof(ub)),
					bu.rows[i].blocks, bu.rows[i].accesses);
		}
		fprintf(out, "top blocks:\n");
		for (i = 0; i < tb.n; i++) {
			fprintf(out, "  0x%016llx ", tb.v[i].hash);
			if (by_uid)
				fprintf(out, "uid %-10s ",
					uid_label(tb.v[i].uid, ub, sizeof(ub)));
			/* last_seq is the access record's region << 32 |
			 * seq: printed whole it read as a huge sequence */
			fprintf(out,
				"count %-8llu gap %10.3f ms  last %s region %llu seq %llu\n",
				tb.v[i].s.count,
				(double)tb.v[i].s.ewma_gap_ns / 1e6,
				tel_tier_string(tb.v[i].s.last_tier),
				tb.v[i].s.last_seq >> 32,
				tb.v[i].s.last_seq & 0xffffffffull);
		}
		fprintf(out, "latency histograms (log2 ns buckets):\n");
		tel_hist_foreach(t, print_hist, &hp);
	}
	fflush(out);
	free(bu.rows);
	free(tb.v);
	return 0;
}

/*
 * Open the pins under o's root; 0 or -errno (said on stderr).  The
 * view's lines start "kvmmctl: trace:", as every other kvmmctl error
 * does (kvmmctl is its one caller; they started "trace:").
 */
static int open_pins(const struct tel_trace_opts *o, struct tel **t)
{
	struct tel_opts to = { .size = sizeof(to), .mode = TEL_MODE_PINNED };
	int err;

	to.pin_root = o->pin_root;
	err = tel_open(&to, t);
	if (err)
		fprintf(stderr,
			"kvmmctl: trace: cannot read the telemetry maps under "
			"%s: %s\n",
			o->pin_root ? o->pin_root : TEL_DEFAULT_PIN_ROOT,
			strerror(-err));
	return err;
}

/*
 * Whether the maps t reads are still the pinned ones, checked before each
 * refresh: a kvmmd that stopped took its pins along (its maps, which we
 * still hold, stop moving) and one that restarted pinned new maps.  The
 * first ends the trace, the second reopens *t (*reopened: the counters
 * start again, so the last interval has no rates).  0 or -errno.
 */
static int check_pins(const struct tel_trace_opts *o, struct tel **t,
		      bool *reopened)
{
	char dir[PATH_MAX];
	int err = tel_pinned_check(*t);

	*reopened = false;
	if (!err)
		return 0;
	snprintf(dir, sizeof(dir), "%s", tel_pin_dir(*t));
	if (err != -ESTALE) {
		fprintf(stderr,
			"kvmmctl: trace: the pinned maps in %s are gone (%s): kvmmd "
			"stopped or ended its BPF telemetry\n",
			dir, strerror(-err));
		return err;
	}
	tel_close(*t);
	*t = NULL;
	err = open_pins(o, t);
	if (err)
		return err;
	fprintf(stderr,
		"kvmmctl: trace: other maps are pinned in %s now (kvmmd restarted): "
		"reading those, counted from their start\n",
		dir);
	*reopened = true;
	return 0;
}

int tel_trace_run(const struct tel_trace_opts *opts)
{
	struct tel_trace_opts o = { .size = sizeof(o) };
	struct kvmm_counters prev;
	bool have_prev = false, reopened;
	unsigned int n = 0;
	struct tel *t;
	int err;

	if (opts) {
		if (opts->size > sizeof(o) || opts->size < sizeof(size_t))
			return -EINVAL;
		memcpy(&o, opts, opts->size);
	}
	if (!o.out)
		o.out = stdout;
	if (!o.interval_ms)
		o.interval_ms = 1000;
	if (!o.top)
		o.top = 10;
	err = open_pins(&o, &t);
	if (err)
		return err;
	for (;;) {
		err = tel_poll(t);
		if (err) {
			fprintf(stderr, "kvmmctl: trace: reading maps: %s\n",
				strerror(-err));
			break;
		}
		err = tel_trace_print(t, o.out, o.json, o.by_uid, o.top,
				      o.interval_ms / 1000.0,
				      have_prev ? &prev : NULL);
		if (err || o.once || (o.iterations && ++n >= o.iterations))
			break;
		tel_counters(t, &prev);
		have_prev = true;
		nanosleep(
			&(struct timespec){ o.interval_ms / 1000,
					    (o.interval_ms % 1000) * 1000000L },
			NULL);
		err = check_pins(&o, &t, &reopened);
		if (err)
			break;
		if (reopened)
			have_prev = false;
	}
	tel_close(t);
	return err;
}
