// SPDX-License-Identifier: MIT
/*
 * tests/daemon-fuzz: the facts a phase's checks want seen at least once
 * (the parent's tenant limits moved a block, its revocations took one,
 * the uid's processes lent blocks under --quota, each block size's
 * blocks went to NVMe and came back and the parent's drops of it
 * dropped some, a read-only block was copied and a write into one
 * faulted), asked while the clients run.
 *
 * A phase's share of KVMM_FUZZ_SECONDS is a slice of time, and what
 * happens in it is luck: phase 5 gets 2 s of the default 10, and under
 * load 4-20 the parent's drops of one size came 14 times in a loop of
 * its runs with nothing to drop, failing the check after the phase.  So
 * fz_run_clients() asks fz_facts_seen() once the phase's time is up and
 * lets the clients and the parent's churn go on until every fact is
 * seen, for at most FZ_OVERTIME_MS more; the checks after the phase
 * stay as they were, so a phase that still saw nothing fails them with
 * the values.  On a quiet machine every fact comes well inside the
 * slice and the phase takes the time it always did.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "tests/daemon-fuzz/fuzz.h"
#include "tests/lib/daemon.h"

/* Append one missing fact (printf-style) to why, "; " between them. */
static void __attribute__((format(printf, 3, 4)))
fz_missing(char *why, size_t len, const char *fmt, ...)
{
	size_t used = strlen(why);
	va_list ap;

	if (used + 3 >= len)
		return;
	if (used) {
		strcpy(why + used, "; ");
		used += 2;
	}
	va_start(ap, fmt);
	vsnprintf(why + used, len - used, fmt, ap);
	va_end(ap);
}

/* Copies of read-only blocks and faulting writes into them, in the
 * phases of this run so far (main()'s check is over the whole run). */
static void fz_cow_facts(const struct fz_phase *ph, char *why, size_t len)
{
	uint64_t copies = 0, faults = 0;

	for (int i = 0; i < ph->num; i++) {
		copies += ph->run_cnt[i].unshared;
		faults += ph->run_cnt[i].ro_faults;
	}
	if (!copies || !faults)
		fz_missing(
			why, len,
			"phases 1-%d: %llu read-only blocks copied, %llu writes into them faulted",
			ph->num, (unsigned long long)copies,
			(unsigned long long)faults);
}

/* Each size's: blocks checked, moved to NVMe, read back from it, and
 * (with the parent's drops) dropped by a drop of that size. */
static void fz_size_facts(const struct fz_phase *ph, char *why, size_t len)
{
	for (int sz = 0; sz < ph->nr_sizes; sz++) {
		const struct fz_drop_counts *dr = &ph->cnt->size_drops[sz];
		uint64_t dropped =
			dr->dropped[0] + dr->dropped[1] + dr->dropped[2];
		struct kvmm_tier_stats_reply ts;

		fz_size_stats(ph->sock, sz, &ts);
		if (ph->cnt->checked_size[sz] && ts.tiers[2].demotions_in &&
		    ts.tiers[2].promotions_out && (!ph->drop_churn || dropped))
			continue;
		fz_missing(
			why, len,
			"blocks of %u pages: %llu checked, %llu moved to NVMe, %llu read back, %llu dropped by the parent",
			fz_ppb(sz),
			(unsigned long long)ph->cnt->checked_size[sz],
			(unsigned long long)ts.tiers[2].demotions_in,
			(unsigned long long)ts.tiers[2].promotions_out,
			(unsigned long long)dropped);
	}
}

bool fz_facts_seen(const struct fz_phase *ph, const struct td_daemon *d,
		   char *why, size_t len)
{
	why[0] = '\0';
	if (ph->limit_churn) {
		uint64_t moves = fz_limit_moves(ph);

		if (!ph->limit_sets || !moves)
			fz_missing(why, len,
				   "tenant limits: %llu set, %llu blocks moved",
				   (unsigned long long)ph->limit_sets,
				   (unsigned long long)moves);
	}
	if (ph->revokes && !ph->cnt->revokes)
		fz_missing(why, len, "no revocation taken (%llu refused)",
			   (unsigned long long)ph->cnt->revokes_refused);
	if (ph->quota) {
		struct kvmm_status_reply st;

		t_ok(td_status(d, &st));
		if (!st.lend_requests || !st.lend_blocks)
			fz_missing(
				why, len,
				"no lending under --quota (%llu requests, %llu blocks)",
				(unsigned long long)st.lend_requests,
				(unsigned long long)st.lend_blocks);
	}
	if (ph->nr_sizes > 1)
		fz_size_facts(ph, why, len);
	if (ph->run_cnt)
		fz_cow_facts(ph, why, len);
	return !why[0];
}
