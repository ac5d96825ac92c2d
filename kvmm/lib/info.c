// SPDX-License-Identifier: MIT
/*
 * kvmm_get_daemon_info(): what the daemon's HELLO reply said, kept in the
 * connection since kvmm_connect(), so that a client can check the
 * daemon's ABI minor (Documentation/abi.md lists what each one added)
 * without a round trip.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "kvmm/lib/client.h"

/* The public backend numbers are vmm's own: the daemon sends those. */
_Static_assert(KVMM_BACKEND_HOST == VMM_BACKEND_HOST, "KVMM_BACKEND_HOST");
_Static_assert(KVMM_BACKEND_CUDA == VMM_BACKEND_CUDA, "KVMM_BACKEND_CUDA");
_Static_assert(offsetof(struct kvmm_daemon_info, gpu_uuid) + 16 ==
		       KVMM_DAEMON_INFO_SIZE_VER0,
	       "the first published struct kvmm_daemon_info ends at gpu_uuid");

int kvmm_get_daemon_info(struct kvmm_conn *c, struct kvmm_daemon_info *info)
{
	struct kvmm_daemon_info local = { 0 };
	size_t n;

	/* an out struct: a newer caller's bytes past ours are left as they
	 * are, and size tells it where ours end */
	if (!c || !info || info->size < KVMM_DAEMON_INFO_SIZE_VER0)
		return -EINVAL;
	/* No round trip, but the session is the parent's: a child that read
	 * its quota or GPU here would act on a connection it cannot use, so
	 * it is refused like every other call (kvmm.h, fork). */
	if (kc_inherited(c))
		return -ECHILD;
	n = info->size < sizeof(local) ? info->size : sizeof(local);
	local.size = n;
	local.abi_major = c->hello.abi_major;
	local.abi_minor = c->hello.abi_minor;
	local.backend = c->hello.backend;
	local.revoke_timeout_ms = c->hello.revoke_timeout_ms;
	local.page_size = c->hello.page_size;
	local.pages_total = c->hello.pages_total;
	local.quota_pages = c->hello.quota_pages;
	memcpy(local.gpu_uuid, c->hello.gpu_uuid, sizeof(local.gpu_uuid));
	memcpy(info, &local, n);
	return 0;
}
