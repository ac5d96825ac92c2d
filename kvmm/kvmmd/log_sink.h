/* SPDX-License-Identifier: MIT */
/*
 * Where kvmmd's log goes: stderr in the foreground, --log-file PATH when
 * given (reopened on SIGHUP), else syslog once kvmmd daemonizes (log_sink.c).
 */
#ifndef KVMM_KVMMD_LOG_SINK_H
#define KVMM_KVMMD_LOG_SINK_H

#include "kvmm/kvmmd/kvmmd.h"

/* kvmmd's option number for --log-file (no short option) */
#define KD_OPT_LOG_FILE 0x20c

/*
 * Before daemonizing: open cfg->log_file (appending, made if missing) or
 * turn to syslog when kvmmd will leave the terminal, the lines still
 * copied to stderr until kd_log_ready().  0, or -errno with the lines of
 * a refused start on stderr naming the file (kd_path_err_is_operators():
 * exit 2, else 1).
 */
int kd_log_start(const struct kd_config *cfg);
/*
 * Once the socket accepts: the log alone gets the lines (stderr becomes
 * the log file too, or /dev/null for a daemon without one; a daemon's
 * stdin and stdout /dev/null), and SIGHUP reopens the log file (a daemon
 * without one ignores it).
 */
void kd_log_ready(const struct kd_config *cfg);

#endif
