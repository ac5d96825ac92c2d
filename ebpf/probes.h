/* SPDX-License-Identifier: MIT */
/*
 * USDT probe sites of libkvmm and kvmmd (provider "kvmm").
 *
 * A probe site is a single nop plus an ELF note (.note.stapsdt) that says
 * where the arguments live; nothing is paid while no tracer is attached.
 * When ebpf/telemetry_bpf.c (or bpftrace, perf) attaches, the kernel turns the
 * nop into a breakpoint and bumps the probe's semaphore, so call sites can
 * skip computing arguments that cost something:
 *
 *	if (KVMM_PROBE_ENABLED(access)) {
 *		fill recs[] for the step;
 *		kvmm_probe_access(step, recs, n);
 *	}
 *
 * Block accesses are batched: one probe per decode/prefill step with a
 * pointer to an array of struct kvmm_access_rec and its length, never one
 * probe per token or per sequence.  Probes and arguments:
 *
 *	kvmm:access	(u64 step, struct kvmm_access_rec *recs, u32 n)
 *	kvmm:kernel	(u32 kind, u64 latency_ns, u32 segments, u64 tokens)
 *			tokens = context length after the pass
 *			kind = KVMM_TEL_ATTENTION or KVMM_TEL_PREFILL
 *	kvmm:extend	(u64 region << 32 | seq, u64 tokens, u32 blocks,
 *			 u64 latency_ns)
 *	kvmm:restore	(u64 hash, u32 tier, u64 bytes, u64 latency_ns)
 *	kvmm:recompute	(u64 hash, u64 position, u32 tokens, u64 latency_ns)
 *	kvmm:revoke	(u64 session, u64 hash, u64 latency_ns)
 *	kvmm:migrate	(u64 hash, u32 from, u32 to, u64 bytes, u64 latency_ns)
 *	kvmm:evict	(u64 hash, u32 tier, u64 bytes)
 *
 * Tiers are enum kvmm_tel_tier, times CLOCK_MONOTONIC nanoseconds.  Each
 * semaphore is a weak hidden symbol, so every object that includes this
 * header shares one per binary or shared library.  Without <sys/sdt.h>
 * (HAVE_SDT=0) every probe compiles to nothing and KVMM_PROBE_ENABLED() is
 * a constant 0.
 */
#ifndef KVMM_EBPF_PROBES_H
#define KVMM_EBPF_PROBES_H

#include <stdint.h>

#include "ebpf/kvmm_telemetry.h"

#ifndef HAVE_SDT
#define HAVE_SDT 0
#endif

#if HAVE_SDT
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#define KVMM_PROBE_SEMAPHORE(name)                                           \
	__extension__ unsigned short kvmm_##name##_semaphore __attribute__(( \
		weak, visibility("hidden"), unused, section(".probes")))

KVMM_PROBE_SEMAPHORE(access);
KVMM_PROBE_SEMAPHORE(kernel);
KVMM_PROBE_SEMAPHORE(extend);
KVMM_PROBE_SEMAPHORE(restore);
KVMM_PROBE_SEMAPHORE(recompute);
KVMM_PROBE_SEMAPHORE(revoke);
KVMM_PROBE_SEMAPHORE(migrate);
KVMM_PROBE_SEMAPHORE(evict);

/* True while some tracer is attached to the probe (read once per site). */
#define KVMM_PROBE_ENABLED(name)                                               \
	__builtin_expect(*(volatile unsigned short *)&kvmm_##name##_semaphore, \
			 0)
#define KVMM_PROBE3(n, a, b, c) STAP_PROBE3(kvmm, n, a, b, c)
#define KVMM_PROBE4(n, a, b, c, d) STAP_PROBE4(kvmm, n, a, b, c, d)
#define KVMM_PROBE5(n, a, b, c, d, e) STAP_PROBE5(kvmm, n, a, b, c, d, e)
#else
#define KVMM_PROBE_ENABLED(name) 0
#define KVMM_PROBE3(n, a, b, c) \
	do {                    \
	} while (0)
#define KVMM_PROBE4(n, a, b, c, d) KVMM_PROBE3(n, a, b, c)
#define KVMM_PROBE5(n, a, b, c, d, e) KVMM_PROBE3(n, a, b, c)
#endif

#define KVMM_PROBE_INLINE static inline __attribute__((always_inline, unused))

KVMM_PROBE_INLINE void
kvmm_probe_access(uint64_t step, const struct kvmm_access_rec *recs, uint32_t n)
{
	KVMM_PROBE3(access, step, recs, n);
	(void)step, (void)recs, (void)n;
}

KVMM_PROBE_INLINE void kvmm_probe_kernel(uint32_t kind, uint64_t latency_ns,
					 uint32_t segments, uint64_t tokens)
{
	KVMM_PROBE4(kernel, kind, latency_ns, segments, tokens);
	(void)kind, (void)latency_ns, (void)segments, (void)tokens;
}

KVMM_PROBE_INLINE void kvmm_probe_extend(uint64_t seq, uint64_t tokens,
					 uint32_t blocks, uint64_t latency_ns)
{
	KVMM_PROBE4(extend, seq, tokens, blocks, latency_ns);
	(void)seq, (void)tokens, (void)blocks, (void)latency_ns;
}

KVMM_PROBE_INLINE void kvmm_probe_restore(uint64_t hash, uint32_t tier,
					  uint64_t bytes, uint64_t latency_ns)
{
	KVMM_PROBE4(restore, hash, tier, bytes, latency_ns);
	(void)hash, (void)tier, (void)bytes, (void)latency_ns;
}

KVMM_PROBE_INLINE void kvmm_probe_recompute(uint64_t hash, uint64_t position,
					    uint32_t tokens,
					    uint64_t latency_ns)
{
	KVMM_PROBE4(recompute, hash, position, tokens, latency_ns);
	(void)hash, (void)position, (void)tokens, (void)latency_ns;
}

KVMM_PROBE_INLINE void kvmm_probe_revoke(uint64_t session, uint64_t hash,
					 uint64_t latency_ns)
{
	KVMM_PROBE3(revoke, session, hash, latency_ns);
	(void)session, (void)hash, (void)latency_ns;
}

KVMM_PROBE_INLINE void kvmm_probe_migrate(uint64_t hash, uint32_t from,
					  uint32_t to, uint64_t bytes,
					  uint64_t latency_ns)
{
	KVMM_PROBE5(migrate, hash, from, to, bytes, latency_ns);
	(void)hash, (void)from, (void)to, (void)bytes, (void)latency_ns;
}

KVMM_PROBE_INLINE void kvmm_probe_evict(uint64_t hash, uint32_t tier,
					uint64_t bytes)
{
	KVMM_PROBE3(evict, hash, tier, bytes);
	(void)hash, (void)tier, (void)bytes;
}

#endif
