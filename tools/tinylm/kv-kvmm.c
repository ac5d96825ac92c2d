/* SPDX-License-Identifier: MIT */
/*
 * KV cache in a kvmm region.  Placeholder until libkvmm lands: asking for
 * it is a clear error, never a silent fallback to private memory.
 */
#include <errno.h>
#include <stdio.h>

#include "tinylm.h"

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, struct tlm_kv **out, char *err,
		       size_t errlen);

int tlm_kv_kvmm_create(const struct tlm_model *m, int max_seqs, int max_tokens,
		       const char *socket_path, struct tlm_kv **out, char *err,
		       size_t errlen)
{
	snprintf(err, errlen,
		 "--kv kvmm: this build has no kvmm client library yet");
	return -ENOTSUP;
}
