// SPDX-License-Identifier: MIT
/*
 * The operator view (`kvmmctl trace` core): with a loader running and a
 * client process done, tel_trace_run(--once --json) reads the pinned maps
 * from a separate telemetry handle and reports the per-tier hit rates, the
 * top blocks and the histograms of the known workload; it leaves the
 * daemon's event ring alone; with no loader it fails with ENOENT.
 * Skips (77) without root or BPF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebpf/trace_view.h"
#include "tests/ebpf-common.h"
#include "tests/lib/bpf_test.h"

static char *run_trace(const char *pin, bool json, int *err)
{
	struct tel_trace_opts o = { .size = sizeof(o) };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	t_assert(f);
	o.pin_root = pin;
	o.once = true;
	o.json = json;
	o.top = 3;
	o.out = f;
	*err = tel_trace_run(&o);
	fclose(f);
	return buf;
}

int main(void)
{
	struct bpf_test b;
	char *out;
	struct ebpf_sink_counts sc = { 0 };
	struct tel_sink sink = { .event = ebpf_sink_event, .arg = &sc };
	struct tel *t;
	int err;

	bpf_test_init(&b, "trace");
	out = run_trace(b.pin, true, &err);
	t_assert_eq(err, -ENOENT); /* nothing pinned yet */
	free(out);

	t = bpf_test_open(&b);
	tel_set_sink(t, &sink);
	ebpf_drive_process(NULL, 0);

	out = run_trace(b.pin, true, &err);
	t_ok(err);
	printf("%s", out);
	t_assert(strstr(out, "\"source\":\"bpf\""));
	t_assert(strstr(out, "\"blocks\":1003,\"accesses\":1009,"));
	t_assert(strstr(out,
			"\"gpu\":{\"accesses\":1005,\"hit_rate\":0.996036}"));
	t_assert(strstr(out, "\"host\":{\"accesses\":2,"));
	t_assert(strstr(out, "\"miss\":{\"accesses\":1,"));
	t_assert(strstr(out, "\"top_blocks\":[{\"hash\":\"0x1111000000000001\","
			     "\"count\":5,"));
	t_assert(strstr(out, "{\"hash\":\"0x2222000000000002\",\"count\":3,"));
	t_assert(strstr(out, "\"kind\":\"attention\",\"tier\":\"gpu\","
			     "\"dst_tier\":\"gpu\",\"segments\":3,\"count\":2,"
			     "\"sum_ns\":10000,"));
	t_assert(strstr(out, "\"p50_ns\":8191,\"p99_ns\":8191,"
			     "\"buckets\":{\"12\":2}}"));
	t_assert(strstr(out,
			"\"kind\":\"restore\",\"tier\":\"host\","
			"\"dst_tier\":\"gpu\",\"segments\":0,\"count\":3,"));
	t_assert(strstr(out, "\"evict\":1}"));
	free(out);

	out = run_trace(b.pin, false, &err); /* the text view, for the log */
	t_ok(err);
	printf("%s", out);
	t_assert(strstr(out, "top blocks:\n  0x1111000000000001 count 5"));
	/* an access record's seq is region << 32 | seq: split (a client's
	 * region 16 read as seq 68719476736) */
	t_assert(strstr(out, "last miss region 0 seq 4\n"));
	free(out);

	/* The reader left the ring to the daemon. */
	t_ok(tel_poll(t));
	t_assert_eq(sc.ring_events, EBPF_NR_RING_EVENTS);
	tel_close(t);
	printf("ok: trace view matches the workload\n");
	return 0;
}
