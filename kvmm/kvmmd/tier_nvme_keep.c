// SPDX-License-Identifier: MIT
/*
 * NVMe tier: what open does with the superblock it finds, once
 * tier_nvme_open() (tier_nvme.c) has sized the file, cut its slots and
 * set up the ring.  The blocks are kept when the superblock is valid and
 * names this stride, payload size, cache scope and partition: the restart
 * scan (tier_nvme_recover.c) recovers them, a grown or shrunk tier writes
 * its new slot count, drop marks nothing on disk lies below retire
 * (tier_nvme_mark.c).  Anything else is formatted anew, with a line that
 * says why.  Cutting a shrunk file's tail is left to the caller, after
 * the blocks past the new end were counted here.
 */
#include "tier_nvme_priv.h"

#include "vmm/vmm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#if HAVE_LIBURING

/* A smaller --nvme-size than the last run's: a typo on a restart drops
 * cached blocks, which an operator should see (WARN when it did). */
static void log_shrink(struct tier_nvme *t, const char *path,
		       uint32_t old_slots)
{
	uint32_t lost = nvme_count_past_end(t, old_slots);

	vmm_log(lost ? VMM_LOG_WARN : VMM_LOG_INFO,
		"tier_nvme: %s: shrank from %u to %u slots: %u cached blocks past the new end are lost",
		path, old_slots, t->nslots, lost);
}

int nvme_open_superblock(struct tier_nvme *t,
			 const struct tier_nvme_config *cfg, const char *part)
{
	struct nvme_superblock sb;
	const struct nvme_superblock *had;
	struct nvme_marks *marks;
	uint64_t layout = cfg->layout_id;
	const char *why = "";
	char pending_text[112] = "";
	bool keep;
	int r;

	marks = calloc(1, sizeof(*marks));
	if (!marks)
		return -ENOMEM;
	if (t->part_index && !layout) {
		/* partition 0's tier is not open: its superblock says */
		r = nvme_part0_layout(t, cfg->path, part, &layout);
		if (r)
			goto out;
	}
	memset(&sb, 0, sizeof(sb));
	r = cfg->reformat ? -ENODATA : nvme_sb_read(t, &sb, marks);
	/* damaged drop marks (-EBADMSG) still name the partition */
	had = r == 0 || r == -EBADMSG ? &sb : NULL;
	if (r == -EBADMSG && nvme_sb_valid(&sb))
		/* a drop's mark we cannot read: its blocks must not come
		 * back, and which they are is lost with it */
		vmm_log(VMM_LOG_WARN,
			"tier_nvme: %s%s: its drop marks are damaged: formatting it anew",
			cfg->path, part);
	/* the file's blocks are kept if they fit and are named as ours */
	keep = r == 0 && nvme_sb_valid(&sb) && sb.stride == t->stride &&
	       sb.payload_bytes == t->payload_bytes;
	if (r == 0 && nvme_sb_valid(&sb) && !keep && !sb.payload_bytes)
		/* nvme_part0_layout() wrote it, partition 0 not open then */
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s%s: it holds no slot yet, only the partitions' layout: formatting it",
			cfg->path, part);
	else if (r == 0 && nvme_sb_valid(&sb) && !keep)
		/* a change of model, or of the list of block sizes */
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s%s: its blocks have %llu bytes, the tier's %llu: formatting it anew",
			cfg->path, part, (unsigned long long)sb.payload_bytes,
			(unsigned long long)t->payload_bytes);
	if (keep && !nvme_sb_same_scope(&sb, t->scope, t->scope_key)) {
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s%s: its blocks were cached under another cache scope or key: formatting it anew",
			cfg->path, part);
		keep = false;
	}
	if (r == 0 && nvme_sb_valid(&sb) &&
	    !nvme_same_partition(t, &sb, layout, &why)) {
		/* whatever its block size: a partition's superblock where
		 * another layout's is expected (or the other way round)
		 * never says what the slots there hold */
		vmm_log(VMM_LOG_INFO, "tier_nvme: %s%s: %s: formatting it anew",
			cfg->path, part, why);
		keep = false;
	}
	if (keep) {
		uint32_t cleared, retired;
		bool pending;

		t->format_id = sb.format_id;
		t->layout_id = sb.layout_id;
		/* before the scan, which leaves out the slots they drop */
		t->marks = *marks;
		/* a grown tier: what lies past the old end is stale */
		t->known_slots = sb.slot_count < t->nslots ?
					 (uint32_t)sb.slot_count :
					 t->nslots;
		r = nvme_recover(t, cfg->path, part, &cleared);
		nvme_free_stack_rebuild(t);
		if (r)
			goto out;
		/* writes from now on above every mark, even where the
		 * scan found none of the generations below them */
		nvme_marks_raise_generation(t);
		/* the marks the scan found nothing below, after it */
		retired = nvme_marks_retire(t, cfg->path, part);
		/* a drop answered while the tier was out: its marks, above
		 * every header the scan saw (it left out those it covers) */
		pending = nvme_marks_add_pending(t);
		if (sb.slot_count != t->nslots) {
			/* after the stale headers' clearing was synced; the
			 * retired marks go with it (tests fail it on purpose:
			 * KVMMD_TEST_NVME_RESIZE_FAIL, nothing written) */
			r = t->faults.resize_sb ? -EIO : nvme_sb_write(t);
			if (r) {
				/* the old superblock stays: its slot count,
				 * its marks; the next open scans the same
				 * slots again, the cleared ones read zero */
				vmm_log(VMM_LOG_ERR,
					"tier_nvme: %s%s: writing the superblock with %u slots (it says %llu): %s; the open fails",
					cfg->path, part, t->nslots,
					(unsigned long long)sb.slot_count,
					strerror(-r));
				goto out;
			}
			if (sb.slot_count < t->nslots)
				vmm_log(VMM_LOG_INFO,
					"tier_nvme: %s: grew from %llu to %u slots (%u stale slot headers past the old end cleared)",
					cfg->path,
					(unsigned long long)sb.slot_count,
					t->nslots, cleared);
			else
				log_shrink(t, cfg->path,
					   (uint32_t)sb.slot_count);
		} else if (pending) {
			/* tests: KVMMD_TEST_NVME_RETIRE_FAIL=superblock fails
			 * this write too (the open's own marks) */
			r = t->faults.retire_sb ? -EIO : nvme_sb_write(t);
			if (r) {
				/*
				 * Durable before any block the drop spared is
				 * handed out, or not at all: served in this run
				 * and written over, the covered slots' headers
				 * could still be found by a restart whose
				 * superblock has no mark.  The open fails
				 * (nothing was recovered into any cache yet),
				 * and the caller tries again later, the drop
				 * still pending.
				 */
				vmm_log(VMM_LOG_ERR,
					"tier_nvme: %s%s: writing the drop marks of a drop answered while the tier was out: %s; the open fails, so that none of the %llu blocks it covers comes back",
					cfg->path, part, strerror(-r),
					(unsigned long long)
						t->st.pending_dropped_slots);
				goto out;
			}
		} else if (retired) {
			/* tests: KVMMD_TEST_NVME_RETIRE_FAIL=superblock */
			r = t->faults.retire_sb ? -EIO : nvme_sb_write(t);
			if (r) {
				/* on disk they stay, covering nothing: the
				 * next superblock write (a drop's) forgets
				 * them */
				vmm_log(VMM_LOG_WARN,
					"tier_nvme: %s%s: writing the superblock without %u retired drop marks: %s",
					cfg->path, part, retired, strerror(-r));
				retired = 0;
				r = 0;
			}
		}
		if (pending)
			snprintf(
				pending_text, sizeof(pending_text),
				", %llu of them by a drop answered while the tier was out, its marks written now",
				(unsigned long long)t->st.pending_dropped_slots);
		if (retired)
			vmm_log(VMM_LOG_INFO,
				"tier_nvme: %s%s: %u drop marks retired: no header below them left on disk (%u kept)",
				cfg->path, part, retired,
				t->marks.n + (t->marks.drop_all != 0));
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s%s: recovered %llu of %u slots (%llu damaged headers; %llu dropped by an operator's drop mark, left out%s)",
			cfg->path, part,
			(unsigned long long)t->st.recovered_slots, t->nslots,
			(unsigned long long)t->st.header_failures,
			(unsigned long long)t->st.drop_marked_slots,
			pending_text);
	} else {
		if (getrandom(&t->format_id, sizeof(t->format_id), 0) !=
		    sizeof(t->format_id))
			t->format_id = (uint64_t)time(NULL) ^
				       ((uint64_t)getpid() << 32);
		/* partition 0 names a new layout, unless the file was
		 * cut so already (its blocks' size, or the cache scope,
		 * changed; or nvme_part0_layout() wrote it); the others
		 * keep partition 0's */
		if (t->part_count)
			t->layout_id = t->part_index ?
					       layout :
					       nvme_part0_format_layout(t, had);
		r = nvme_sb_write(t);
		if (r) {
			vmm_log(VMM_LOG_ERR,
				"tier_nvme: writing the superblock of %s%s: %s",
				cfg->path, part, strerror(-r));
			goto out;
		}
		vmm_log(VMM_LOG_INFO,
			"tier_nvme: %s%s: formatted %u slots of %llu bytes",
			cfg->path, part, t->nslots,
			(unsigned long long)t->stride);
	}
out:
	free(marks);
	return r;
}

#endif /* HAVE_LIBURING */
