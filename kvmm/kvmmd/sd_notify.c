// SPDX-License-Identifier: MIT
/*
 * The systemd readiness protocol (sd_notify(3)) without libsystemd: under
 * a Type=notify unit systemd passes $NOTIFY_SOCKET, a datagram socket
 * (a path, or an abstract name written with a leading '@'), and waits for
 * "READY=1" before it calls the service started, so units ordered after
 * kvmmd (engines) start only once the control socket accepts.  Without
 * $NOTIFY_SOCKET every call is a no-op.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kvmm/kvmmd/sd_notify.h"

int kd_sd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n, len;
	ssize_t sent;
	int fd, err = 0;

	if (!path || !path[0])
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	len = offsetof(struct sockaddr_un, sun_path) + n;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		      (struct sockaddr *)&sa, (socklen_t)len);
	if (sent < 0)
		err = -errno;
	else if ((size_t)sent != strlen(state))
		err = -EIO;
	close(fd);
	return err;
}
