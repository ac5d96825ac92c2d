/* SPDX-License-Identifier: MIT */
/*
 * pol_replay_run() with no options is refused with -EINVAL: it read
 * o->prefill_servers before its NULL check (a crash).
 */
#include <errno.h>

#include "kvmm/policy/replay.h"
#include "tests/lib/test.h"

int main(void)
{
	struct pol_replay_result res;
	struct pol_trace t;
	char err[256];

	t_ok(pol_trace_parse("{\"timestamp\": 0, \"input_length\": 512, "
			     "\"hash_ids\": [1]}\n",
			     &t, err, sizeof(err)));
	t_assert_eq(pol_replay_run(&t, NULL, &res), -EINVAL);
	pol_trace_free(&t);
	return 0;
}
