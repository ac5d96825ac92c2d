/* SPDX-License-Identifier: MIT */
/*
 * kvmm-replay --daemon: replay a trace through a running kvmmd (see
 * daemon_driver.c).  Same result structure as pol_replay_run().
 */
#ifndef KVMM_TOOLS_REPLAY_DAEMON_DRIVER_H
#define KVMM_TOOLS_REPLAY_DAEMON_DRIVER_H

#include "kvmm/policy/replay.h"

/* 0 or -errno; -ECANCELED: kvmmd runs another policy (or restore mode
 * for --msa) than the replay's, and the line that says so was printed. */
int kr_daemon_run(const char *socket_path, const struct pol_trace *t,
		  const struct pol_replay_opts *o,
		  struct pol_replay_result *res);

#endif
