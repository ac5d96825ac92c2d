/* SPDX-License-Identifier: MIT */
/*
 * Workload generator: multi-turn conversations over a few shared system
 * prompts, every token a pure function of (seed, what it is), so any
 * process can regenerate any conversation without a file.  Token ids are
 * drawn from [1, vocab); 0 is never used so a zeroed buffer is visible.
 *
 * Conversation c uses system prompt c % system_prompts.  Turn k's prompt is
 * system + (user_0 + answer_0) + ... + user_k; answers are what the model
 * generated, so they are known only by running it.
 */
#include "tinylm.h"

void tlm_workload_default(struct tlm_workload_params *p)
{
	p->seed = 1;
	p->conversations = 8;
	p->turns = 3;
	p->system_prompts = 2;
	p->system_tokens = 192;
	p->user_tokens = 24;
	p->gen_tokens = 16;
	p->vocab = 2048;
	p->repeat_every = 0;
}

int tlm_workload_max_tokens(const struct tlm_workload_params *p)
{
	return p->system_tokens + p->turns * (p->user_tokens + p->gen_tokens);
}

static void fill_tokens(uint64_t seed, int *out, int n, int vocab)
{
	uint64_t st = seed;
	for (int i = 0; i < n; i++)
		out[i] = 1 + (int)(tlm_mix64(&st) % (uint64_t)(vocab - 1));
}

void tlm_workload_system(const struct tlm_workload_params *p, int c, int *out)
{
	int which = c % (p->system_prompts > 0 ? p->system_prompts : 1);
	fill_tokens(p->seed * 0x100000001b3ull ^ (0x5157ull << 32) ^
			    (uint64_t)which,
		    out, p->system_tokens, p->vocab);
}

/*
 * Turns are numbered across conversations (c * turns + k), so the repeats
 * fall on every turn index and every client alike.
 */
bool tlm_workload_repeated(const struct tlm_workload_params *p, int c, int k)
{
	return p->repeat_every > 0 &&
	       ((long)c * p->turns + k) % p->repeat_every ==
		       p->repeat_every - 1;
}

void tlm_workload_user(const struct tlm_workload_params *p, int c, int k,
		       int *out)
{
	fill_tokens(p->seed * 0x100000001b3ull ^ (0x55ull << 56) ^
			    ((uint64_t)c << 20) ^ (uint64_t)k,
		    out, p->user_tokens, p->vocab);
}
