/* SPDX-License-Identifier: MIT */
/*
 * What most libkvmm client tests begin with: connect, create a region and
 * open one sequence in it, failing the test if any of these fails.
 */
#ifndef KVMM_TESTS_CLIENT_SEQ_H
#define KVMM_TESTS_CLIENT_SEQ_H

#include <stdint.h>

#include "kvmm/kvmm.h"
#include "tests/lib/test.h"

/* Connect with co (*c), create region ro (*r), open sequence *s in it. */
static inline void cs_open(const struct kvmm_connect_opts *co,
			   const struct kvmm_region_opts *ro,
			   struct kvmm_conn **c, struct kvmm_region **r,
			   uint32_t *s)
{
	t_ok(kvmm_connect(co, c));
	t_ok(kvmm_region_create(*c, ro, r));
	t_ok(kvmm_seq_open(*r, s));
}

#endif
