// SPDX-License-Identifier: MIT
/*
 * Two tenants' telemetry stays apart under --cache-scope uid with the
 * shared-memory source (no BPF needed; ebpf-scope-common.h has the
 * workload): each session's region is renamed by its session's uid as it
 * is read, before it meets the other's.  Needs root; skips otherwise.
 */
#include "tests/ebpf-scope-common.h"

int main(int argc, char **argv)
{
	struct kd_daemon d;
	struct kd_config cfg;
	char dir[64];

	scope_tenants(&d, &cfg, dir, sizeof(dir), TEL_MODE_SHM, "scope-shm",
		      argc, argv);
	scope_tenants_end(&d, dir);
	return 0;
}
