/* SPDX-License-Identifier: MIT */
/*
 * systemd readiness notification (sd_notify(3) protocol, no libsystemd).
 */
#ifndef KVMM_KVMMD_SD_NOTIFY_H
#define KVMM_KVMMD_SD_NOTIFY_H

/*
 * Send state ("READY=1\nSTATUS=...") to $NOTIFY_SOCKET: 0 when sent or
 * when there is no $NOTIFY_SOCKET, else -errno (the caller logs it; the
 * daemon runs on either way).
 */
int kd_sd_notify(const char *state);

#endif
