// SPDX-License-Identifier: MIT
/*
 * timeout: 60
 * A demotion made while demotions wait in line for a host slot waits
 * behind them, even when the copies that give the slots back were reaped
 * in the same batch as the restore whose settle made it (no migration in
 * flight any more): a real kvmmd whose restore jobs each wait 400 ms,
 * contents 0 and 1 on NVMe, 6 blocks of content 2 on the host tier (its
 * 8 slots: 6 for the policy, 2 staging), content 3 on the GPU.
 *   - a PREFIX_OPEN of content 0 is pending: 2 NVMe restores run (both
 *     staging slots taken), 6 wait for a staging slot;
 *   - a publish of a new block pushes a GPU block down: no host slot
 *     free, so its demotion waits in line (demotions_queued 1), and
 *     while restores wait for staging slots they get every slot given
 *     back first, so it stays there;
 *   - the loop thread is frozen (ptrace) until the running restores
 *     ended (the workers' knob lines say so): they are reaped in one batch, so each restore's settle
 *     demotes a GPU block with nothing in flight and the line not yet
 *     pumped.  kvmmd 0.1.0 failed such a demotion with -ENOSPC (as if no
 *     slot would ever come back) and the block was gone, counted as no
 *     drop: one block fewer cached per restore of the batch.  Now it
 *     waits in line and the pump gives it a slot;
 *   - the open gets its 8 blocks byte-identical, every block is still
 *     cached (as many over all tiers as before plus the published one,
 *     none dropped), content 3 (the GPU victims) opens whole.
 * Skips (77) where the test may not ptrace its own daemon.
 */
#include <sys/ptrace.h>

#include "tests/cache-restore-common.h"
#include "tests/lib/wait.h"

#define DELAY_MS 400

/* Stop kvmmd's loop thread (its main thread) alone: its migration
 * workers go on.  Skips when ptrace is not permitted here. */
static void freeze_loop(struct cr_env *env)
{
	pid_t pid = env->d.pid;
	int st;

	if (ptrace(PTRACE_SEIZE, pid, NULL, NULL)) {
		int err = errno;

		cr_stop(env);
		t_skip("ptrace(PTRACE_SEIZE) of kvmmd: %s", strerror(err));
	}
	t_ok(ptrace(PTRACE_INTERRUPT, pid, NULL, NULL));
	t_assert_eq(waitpid(pid, &st, __WALL), pid);
	t_assert(WIFSTOPPED(st));
	t_assert_eq(st >> 16, PTRACE_EVENT_STOP);
}

static void thaw_loop(struct cr_env *env)
{
	t_ok(ptrace(PTRACE_DETACH, env->d.pid, NULL, NULL));
}

/* The restore jobs kvmmd's workers said they took and completed under
 * KVMMD_TEST_RESTORE_DELAY_MS, from one read of its log. */
static void restore_jobs(const struct cr_env *env, unsigned int *taken,
			 unsigned int *done)
{
	static const char line[] = "migrate: test knob: a restore of ";
	static char log[1 << 20];
	char word[16];
	const char *p;
	unsigned int n;

	*taken = *done = 0;
	t_assert(td_read_log(&env->d, log, sizeof(log)) >= 0);
	for (p = log; (p = strstr(p, line)); p++) {
		if (sscanf(p + strlen(line), "%u jobs %15[a-z]", &n, word) != 2)
			continue;
		if (!strcmp(word, "taken"))
			*taken += n;
		else if (!strcmp(word, "done"))
			*done += n;
	}
}

int main(void)
{
	struct kvmm_tier_stats_reply ts0, ts;
	struct kvmm_prefix_open_reply rep;
	struct kvmm_status_reply st;
	uint32_t ids[CR_NB * CC_PPB];
	uint64_t h[CR_NB], h4;
	unsigned int done0, taken, done;
	struct cr_env env;
	struct cc c, m;

	cr_start(&env, 40, DELAY_MS);
	cr_fill_tiers(&env, &ts0);

	/* the open: restores 1 and 2 run, 3 to 8 wait for staging */
	restore_jobs(&env, &taken, &done0);
	for (int b = 0; b < CR_NB; b++)
		h[b] = cr_hash(0, b);
	cc_connect(&c, env.d.sock);
	cc_region(&c);
	cc_prefix_send(&c, h, CR_NB);
	cc_connect(&m, env.d.sock);
	cr_wait_pending(&m, 1);
	cc_tier_stats(&m, &ts);
	t_assert_eq(ts.migrations_in_flight, 2);

	/* a GPU block pushed down: it waits in line for a host slot */
	h4 = cr_hash(4, 0);
	t_assert_eq(cc_publish_content(env.d.sock, &h4, 1, 204, NULL), 0);
	t_ok(td_status(&env.d, &st));
	t_assert_eq(st.demotions_queued, 1);
	cc_tier_stats(&m, &ts);
	t_assert(ts.migrations_in_flight >= 2); /* the 2 restores, still */
	cc_disconnect(&m);

	/*
	 * Every running copy ends while the loop cannot reap it: the
	 * workers say so in the log, which they write themselves.  With the
	 * loop stopped no job is queued; one queued before is taken at once
	 * by an idle worker, and each taken is done DELAY_MS later.
	 */
	freeze_loop(&env);
	t_wait_until(20000, restore_jobs(&env, &taken, &done),
		     done == taken && done >= done0 + 2,
		     "kvmmd's workers took %u restore jobs, completed %u (%u "
		     "before the open)",
		     taken, done, done0);
	thaw_loop(&env);
	printf("%u restore jobs of the open completed by the thaw\n",
	       done - done0);

	/* the open completes, byte-identical */
	cc_prefix_recv(&c, &rep, ids);
	t_assert_eq(rep.nr_blocks, CR_NB);
	t_assert_eq(rep.from_nvme, CR_NB);
	cc_check(&c, ids, CR_NB, 200);
	cc_seq_close(&c, rep.seq_id, ids, CR_NB * CC_PPB);
	cc_disconnect(&c);

	/* nothing lost: every block cached somewhere, none dropped */
	cc_settled_stats(env.d.sock, &ts);
	printf("after the batch: %llu + 1 blocks cached before, %llu now, %llu slot waits\n",
	       (unsigned long long)cr_cached(&ts0),
	       (unsigned long long)cr_cached(&ts),
	       (unsigned long long)(ts.slot_waits - ts0.slot_waits));
	t_assert_eq(cr_drops(&ts), 0);
	t_assert_eq(ts.migrations_failed, 0);
	t_assert_eq(cr_cached(&ts), cr_cached(&ts0) + 1);
	t_assert(ts.slot_waits > ts0.slot_waits);
	t_ok(td_status(&env.d, &st));
	t_assert_eq(st.demotions_queued, 0);
	t_assert_eq(st.pages_allocated, ts.tiers[0].used_blocks * CC_PPB);

	/* the GPU victims are all there */
	cr_check_content(env.d.sock, 3);
	cr_stop(&env);
	printf("demotions behind a batch-reaped line ok\n");
	return 0;
}
