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

/*
 * Whether err (an errno, either sign) that opening or writing a path
 * option's file gave is the operator's to mend, the path itself being
 * wrong (a directory, a missing or non-directory parent, a symlink loop,
 * no permission, a read-only file system, too long): the start is
 * refused with exit 2.  Any other (EMFILE, ENOMEM, EIO, ...) may pass
 * with the same options later: exit 1.
 */
bool kd_path_err_is_operators(int err);
/*
 * The lines of a start refused by the file of a path option (option
 * "--pid-file", its path, the errno either sign) on stderr, by the rule
 * above: "kvmmd: OPTION PATH: REASON" and "kvmmd: cannot start: an option
 * is wrong (above)", exit status 2; or "kvmmd: cannot start: OPTION PATH:
 * REASON", 1.  The exit status is returned.
 */
int kd_path_refused(const char *option, const char *path, int err);

#endif
