// SPDX-License-Identifier: MIT
/*
 * NVMe tier on-disk format: building and checking the 4 KiB slot header
 * (magic, format id, slot index, identity, payload CRC32C, header CRC32C)
 * and the superblock at offset 0.  See tier_nvme.h for the layout.  The
 * superblock moves with plain pread/pwrite (once per open); slot headers
 * move with their payloads through the batch engine.
 */
#include "tier_nvme_priv.h"

#include "crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if HAVE_LIBURING

uint32_t nvme_header_crc(const struct tier_nvme_slot_header *h)
{
	struct tier_nvme_slot_header c = *h;

	c.header_crc = 0;
	return tier_crc32c(0, &c, sizeof(c));
}

/* Header checks that need no payload: everything but payload_crc. */
bool nvme_header_valid(const struct tier_nvme *t,
		       const struct tier_nvme_slot_header *h, uint32_t slot)
{
	return h->magic == TIER_NVME_SLOT_MAGIC &&
	       h->version == TIER_NVME_VERSION &&
	       h->header_bytes == TIER_NVME_HEADER_BYTES &&
	       h->format_id == t->format_id && h->slot == slot &&
	       h->length <= t->payload_bytes &&
	       h->header_crc == nvme_header_crc(h);
}

void nvme_header_fill(const struct tier_nvme *t, void *hb,
		      const struct tier_nvme_io *io, uint64_t generation,
		      uint32_t payload_crc, bool tenant_known)
{
	struct tier_nvme_slot_header h = {
		.magic = TIER_NVME_SLOT_MAGIC,
		.version = TIER_NVME_VERSION,
		.header_bytes = TIER_NVME_HEADER_BYTES,
		.format_id = t->format_id,
		.slot = io->slot,
		.hash = io->hash,
		.length = io->length,
		.generation = generation,
		.layout_id = io->layout_id,
		.payload_crc = payload_crc,
		.tenant = tenant_known ? io->tenant : 0,
		.flags = tenant_known ? TIER_NVME_HDR_TENANT : 0,
	};

	h.header_crc = nvme_header_crc(&h);
	memset(hb, 0, TIER_NVME_HEADER_BYTES);
	memcpy(hb, &h, sizeof(h));
}

/* The tenants' marks of the superblock block buf says sb has: 0, or
 * -EBADMSG (more than fit, or their CRC is wrong). */
static int marks_parse(const struct nvme_superblock *sb, const void *buf,
		       struct nvme_marks *marks)
{
	size_t len = (size_t)sb->tenant_marks * sizeof(marks->m[0]);

	memset(marks, 0, sizeof(*marks));
	marks->drop_all = sb->drop_all;
	if (!sb->tenant_marks)
		return 0; /* a file of before the marks: zeros */
	if (sb->tenant_marks > TIER_NVME_TENANT_MARKS ||
	    tier_crc32c(0, (const char *)buf + NVME_MARKS_OFFSET, len) !=
		    sb->marks_crc)
		return -EBADMSG;
	memcpy(marks->m, (const char *)buf + NVME_MARKS_OFFSET, len);
	marks->n = sb->tenant_marks;
	return 0;
}

int nvme_sb_read(struct tier_nvme *t, struct nvme_superblock *sb,
		 struct nvme_marks *marks)
{
	void *buf;
	ssize_t n;
	int r = 0;

	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	n = pread(t->fd, buf, NVME_ALIGN, (off_t)t->part_base);
	if (n < 0)
		r = -errno;
	else if (n != NVME_ALIGN)
		r = -ENODATA;
	else
		memcpy(sb, buf, sizeof(*sb));
	if (!r && marks)
		r = marks_parse(sb, buf, marks);
	free(buf);
	return r;
}

int nvme_sb_block_write(int fd, const void *buf, off_t off)
{
	ssize_t n = pwrite(fd, buf, NVME_ALIGN, off);

	if (n < 0)
		return -errno;
	if (n != NVME_ALIGN)
		return -EIO;
	/* on the device before anything that relies on it is written */
	return fdatasync(fd) ? -errno : 0;
}

int nvme_sb_write(struct tier_nvme *t)
{
	struct nvme_superblock sb = {
		.magic = TIER_NVME_SB_MAGIC,
		.version = TIER_NVME_VERSION,
		.sb_bytes = sizeof(sb),
		.stride = t->stride,
		.payload_bytes = t->payload_bytes,
		.slot_count = t->nslots,
		.format_id = t->format_id,
		.scope = t->scope,
		.part_index = t->part_index,
		.part_count = t->part_count,
		.part_bytes = t->part_count ? t->part_bytes : 0,
		.layout_id = t->layout_id,
		.part_weights = t->part_weights,
	};
	size_t len;
	void *buf;
	int r = 0;

	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	memset(buf, 0, NVME_ALIGN);
	pthread_mutex_lock(&t->lock);
	sb.drop_all = t->marks.drop_all;
	sb.tenant_marks = t->marks.n;
	len = (size_t)t->marks.n * sizeof(t->marks.m[0]);
	memcpy((char *)buf + NVME_MARKS_OFFSET, t->marks.m, len);
	pthread_mutex_unlock(&t->lock);
	if (len)
		sb.marks_crc = tier_crc32c(
			0, (const char *)buf + NVME_MARKS_OFFSET, len);
	memcpy(sb.scope_key, t->scope_key, sizeof(sb.scope_key));
	sb.crc = tier_crc32c(0, &sb, sizeof(sb));
	memcpy(buf, &sb, sizeof(sb));
	r = nvme_sb_block_write(t->fd, buf, (off_t)t->part_base);
	free(buf);
	return r;
}

int tier_nvme_peek(const char *path, struct tier_nvme_peek *out)
{
	int r, fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	r = tier_nvme_peek_fd(fd, out);
	close(fd);
	return r;
}

int tier_nvme_peek_fd(int fd, struct tier_nvme_peek *out)
{
	return tier_nvme_peek_at(fd, 0, out);
}

int tier_nvme_peek_at(int fd, uint64_t offset, struct tier_nvme_peek *out)
{
	struct nvme_superblock sb;
	void *buf;
	ssize_t n;

	if (offset % NVME_ALIGN)
		return -EINVAL;
	/* aligned and whole: a claimed fd is O_DIRECT */
	if (posix_memalign(&buf, NVME_ALIGN, NVME_ALIGN))
		return -ENOMEM;
	n = pread(fd, buf, NVME_ALIGN, (off_t)offset);
	if (n >= (ssize_t)sizeof(sb))
		memcpy(&sb, buf, sizeof(sb));
	free(buf);
	if (n < (ssize_t)sizeof(sb) || !nvme_sb_valid(&sb) ||
	    sb.stride != TIER_NVME_HEADER_BYTES + sb.payload_bytes)
		return -ENODATA;
	out->drop_all = sb.drop_all;
	out->tenant_marks = sb.tenant_marks;
	out->payload_bytes = sb.payload_bytes;
	out->scope = sb.scope;
	out->part_count = sb.part_count;
	out->part_bytes = sb.part_bytes;
	out->part_index = sb.part_index;
	out->layout_id = sb.layout_id;
	out->part_weights = sb.part_weights;
	memcpy(out->scope_key, sb.scope_key, sizeof(out->scope_key));
	return 0;
}

bool nvme_sb_same_scope(const struct nvme_superblock *sb, uint32_t scope,
			const uint8_t key[16])
{
	return sb->scope == scope &&
	       !memcmp(sb->scope_key, key, sizeof(sb->scope_key));
}

bool nvme_sb_valid(const struct nvme_superblock *sb)
{
	struct nvme_superblock c = *sb;

	c.crc = 0;
	return sb->magic == TIER_NVME_SB_MAGIC &&
	       sb->version == TIER_NVME_VERSION &&
	       sb->sb_bytes == sizeof(*sb) &&
	       tier_crc32c(0, &c, sizeof(c)) == sb->crc;
}

#endif /* HAVE_LIBURING */
