/* SPDX-License-Identifier: MIT */
#ifndef KVMM_KVMMD_PATHS_H
#define KVMM_KVMMD_PATHS_H

#include "kvmm/kvmmd/kvmmd.h"

/*
 * Every path option made absolute against the current directory, for a
 * kvmmd about to daemonize (which moves to /).  0, or -ENAMETOOLONG /
 * -errno with one line on stderr naming the option.
 */
int kd_config_paths_absolute(struct kd_config *cfg);

#endif
