// SPDX-License-Identifier: MIT
/*
 * The delay test knobs (test_knob.h): one reader for the cache's, the
 * migration engine's, the NVMe tier's and the policy state's, so that
 * each says the same thing the same way.
 */
#include "kvmm/kvmmd/test_knob.h"

#include <stdlib.h>

#include "vmm/vmm.h"

uint32_t kd_test_delay_us(const char *name, const char *who, const char *what)
{
	const char *v = getenv(name);
	long ms = v ? atol(v) : 0;

	if (ms <= 0)
		return 0;
	vmm_log(VMM_LOG_WARN, "%s: %s=%ld: %s delayed (tests only)", who, name,
		ms, what);
	return (uint32_t)ms * 1000u;
}
