// SPDX-License-Identifier: MIT
/*
 * Cache scopes (see scope.h): the mode names, the key's origin (and its
 * one change, to a late NVMe file's), and the renaming of the hashes in
 * the four requests that carry them, a region's salt (salt.h) mixed in
 * first.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "ebpf/telemetry.h"

#include "kvmm/kvmmd/options.h"
#include "kvmm/kvmmd/kvmmd.h"
#include "kvmm/kvmmd/salt.h"
#include "kvmm/kvmmd/scope.h"
#include "kvmm/kvmmd/telemetry.h"
#include "kvmm/kvmmd/tier_nvme.h"

static const char *const mode_names[] = {
	[KD_SCOPE_SHARED] = "shared",
	[KD_SCOPE_UID] = "uid",
	[KD_SCOPE_GID] = "gid",
};

const char *kd_scope_string(uint32_t mode)
{
	if (mode < sizeof(mode_names) / sizeof(mode_names[0]))
		return mode_names[mode];
	return "unknown";
}

int kd_scope_parse(const char *val, uint32_t *mode)
{
	return kd_parse_name("--cache-scope", mode_names,
			     sizeof(mode_names) / sizeof(mode_names[0]), val,
			     mode);
}

static bool key_is_zero(const uint8_t *key)
{
	for (size_t i = 0; i < KD_SIPHASH_KEY_BYTES; i++)
		if (key[i])
			return false;
	return true;
}

/* The key pk's file was written under, if it was written in mode. */
static const uint8_t *file_key(const struct tier_nvme_peek *pk, uint32_t mode)
{
	if (pk->scope != mode || key_is_zero(pk->scope_key))
		return NULL;
	return pk->scope_key;
}

int kd_scope_init(struct kd_daemon *d)
{
	struct kd_scope *sc = &d->scope;
	struct tier_nvme_peek pk;

	memset(sc, 0, sizeof(*sc));
	sc->mode = d->cfg.cache_scope;
	if (sc->mode == KD_SCOPE_SHARED) {
		vmm_log(VMM_LOG_INFO, "cache scope: shared");
		return 0;
	}
	/* the blocks a stop left on NVMe are named under that file's key */
	if (d->cfg.nvme_path[0] && d->cfg.host_mem &&
	    !tier_nvme_peek(d->cfg.nvme_path, &pk) && file_key(&pk, sc->mode)) {
		memcpy(sc->key, pk.scope_key, sizeof(sc->key));
		vmm_log(VMM_LOG_INFO,
			"cache scope: %s, with the key of the NVMe tier's file %s",
			kd_scope_string(sc->mode), d->cfg.nvme_path);
		return 0;
	}
	do {
		if (getrandom(sc->key, sizeof(sc->key), 0) !=
		    (ssize_t)sizeof(sc->key)) {
			int err = -errno;

			vmm_log(VMM_LOG_ERR, "cache scope: no random key: %s",
				strerror(-err));
			return err;
		}
	} while (key_is_zero(sc->key)); /* zero means "no key" on disk */
	vmm_log(VMM_LOG_INFO, "cache scope: %s, with a new key",
		kd_scope_string(sc->mode));
	return 0;
}

bool kd_scope_adopt(struct kd_daemon *d, const struct tier_nvme_peek *pk,
		    uint64_t blocks_held)
{
	struct kd_scope *sc = &d->scope;
	const uint8_t *key = file_key(pk, sc->mode);

	if (sc->mode == KD_SCOPE_SHARED || !key ||
	    !memcmp(key, sc->key, sizeof(sc->key)))
		return false; /* no key to take, or already ours */
	if (sc->names_given || blocks_held) {
		/* a name given out under the start's key would then name
		 * nothing, or another block: the file's blocks go instead */
		vmm_log(VMM_LOG_WARN,
			"cache scope: %s: the NVMe tier's file %s, claimed after the start, holds blocks cached under another key; this run's key has named %llu hashes and the cache holds %llu blocks (names already given out), so it keeps its key and the file is formatted anew",
			kd_scope_string(sc->mode), d->cfg.nvme_path,
			(unsigned long long)sc->names_given,
			(unsigned long long)blocks_held);
		return false;
	}
	/* telemetry's BPF poll thread renames with the key: joined, and
	 * its next poll reads every entry again under the new one */
	kd_telemetry_rename_again(d);
	memcpy(sc->key, key, sizeof(sc->key));
	vmm_log(VMM_LOG_INFO,
		"cache scope: %s, now with the key of the NVMe tier's file %s, claimed after the start: nothing was named under the start's key yet, so the file's blocks are recovered",
		kd_scope_string(sc->mode), d->cfg.nvme_path);
	return true;
}

uint32_t kd_scope_id(const struct kd_scope *sc, const struct kd_session *s)
{
	switch (sc->mode) {
	case KD_SCOPE_UID:
		return s->uid;
	case KD_SCOPE_GID:
		return s->gid;
	default:
		return 0;
	}
}

uint64_t kd_scope_hash(const struct kd_scope *sc, uint32_t id, uint64_t hash)
{
	uint8_t msg[12];
	uint32_t u = htole32(id);
	uint64_t h = htole64(hash), r;

	if (sc->mode == KD_SCOPE_SHARED || !hash)
		return hash;
	memcpy(msg, &u, sizeof(u));
	memcpy(msg + sizeof(u), &h, sizeof(h));
	r = kd_siphash24(sc->key, msg, sizeof(msg));
	return r ? r : 1;
}

/* The cache's name for hash from s, in a region of this salt. */
static uint64_t scope_name(const struct kd_session *s, uint64_t salt,
			   uint64_t hash)
{
	struct kd_scope *sc = &s->d->scope;

	if (sc->mode != KD_SCOPE_SHARED && hash)
		sc->names_given++; /* see kd_scope_adopt() */
	return kd_scope_hash(sc, kd_scope_id(sc, s), kd_salt_hash(salt, hash));
}

/* Rename n hashes stored (maybe unaligned) from p on. */
static void rename_at(const struct kd_session *s, uint64_t salt, char *p,
		      size_t n)
{
	for (size_t i = 0; i < n; i++, p += sizeof(uint64_t)) {
		uint64_t h;

		memcpy(&h, p, sizeof(h));
		h = scope_name(s, salt, h);
		memcpy(p, &h, sizeof(h));
	}
}

/* The hashes from offset off to the end of the payload (at most max). */
static void rename_tail(const struct kd_session *s, uint64_t salt, char *p,
			size_t len, size_t off, size_t max)
{
	size_t n;

	if (len < off)
		return;
	n = (len - off) / sizeof(uint64_t);
	rename_at(s, salt, p + off, n < max ? n : max);
}

/*
 * The salt of s's region whose id lies at offset off of the payload: 0
 * for a payload too short to hold it or a region that is not s's (the
 * handler refuses the request: -EINVAL, -ENOENT, -EPERM).
 */
static uint64_t region_salt(struct kd_session *s, const char *p, size_t len,
			    size_t off)
{
	struct kd_region *r;
	uint32_t id;

	if (len < off + sizeof(id))
		return 0;
	memcpy(&id, p + off, sizeof(id));
	return kd_region_lookup(s, id, &r) ? 0 : r->salt;
}

_Static_assert(offsetof(struct kvmm_prefix_query, region_id) ==
			       offsetof(struct kvmm_prefix_open, region_id) &&
		       offsetof(struct kvmm_prefix_query, hashes) ==
			       offsetof(struct kvmm_prefix_open, hashes),
	       "PREFIX_QUERY is renamed as PREFIX_OPEN");

void kd_scope_request(struct kd_session *s, uint16_t cmd, void *p, size_t len)
{
	char *b = p;
	uint64_t salt;

	switch (cmd) {
	case KVMM_CMD_BLOCK_PUBLISH:
		salt = region_salt(s, b, len,
				   offsetof(struct kvmm_block_publish,
					    region_id));
		if (s->d->scope.mode == KD_SCOPE_SHARED && !salt)
			return;
		/* parent_hash, then hashes[] */
		rename_tail(s, salt, b, len,
			    offsetof(struct kvmm_block_publish, parent_hash),
			    1);
		rename_tail(s, salt, b, len,
			    offsetof(struct kvmm_block_publish, hashes),
			    SIZE_MAX);
		break;
	case KVMM_CMD_PREFIX_OPEN:
	case KVMM_CMD_PREFIX_QUERY:
		/* one layout: a query names its blocks as an open does */
		salt = region_salt(s, b, len,
				   offsetof(struct kvmm_prefix_open,
					    region_id));
		if (s->d->scope.mode == KD_SCOPE_SHARED && !salt)
			return;
		rename_tail(s, salt, b, len,
			    offsetof(struct kvmm_prefix_open, hashes),
			    SIZE_MAX);
		break;
	}
}

void kd_scope_message(struct kd_session *s, void *msg, size_t len)
{
	struct kvmm_msg_hdr h;

	if (len < sizeof(h))
		return;
	memcpy(&h, msg, sizeof(h));
	kd_scope_request(s, h.cmd, (char *)msg + sizeof(h), len - sizeof(h));
}

uint32_t kd_scope_pin_names(const struct kd_session *s, uint64_t hash,
			    uint64_t *names)
{
	uint64_t salts[KD_MAX_REGIONS_PER_SESSION];
	uint32_t n = 0, k = 0;

	/* the list is newest first: the salts oldest first, each once */
	for (const struct kd_region *r = s->regions;
	     r && n < KD_MAX_REGIONS_PER_SESSION; r = r->next)
		salts[n++] = r->salt;
	if (!n)
		salts[n++] = 0;
	while (n--) {
		uint64_t name = scope_name(s, salts[n], hash);
		uint32_t j;

		for (j = 0; j < k && names[j] != name; j++)
			;
		if (j == k)
			names[k++] = name;
	}
	return k;
}

bool kd_scope_tel_rename(void *arg, const struct tel_origin *o, uint64_t *hash)
{
	struct kd_daemon *d = arg;
	const struct kd_session *s;
	uint32_t id;

	/* the daemon's own reports name blocks as the cache does: its
	 * telemetry region, its BPF records (KVMM_ACCESS_NAMED) */
	if (d->scope.mode == KD_SCOPE_SHARED || o->src == KD_TEL_LOCAL_ID ||
	    (o->src == TEL_SRC_BPF && o->uid == KVMM_TEL_ID_NAMED))
		return true;
	/* a session's region: that session's scope, whatever its pid says
	 * (0 in another pid namespace; a pid two sessions share) */
	if (o->src != TEL_SRC_BPF) {
		s = kd_session_by_id(d, (uint32_t)o->src);
		if (!s)
			return false;
		id = kd_scope_id(&d->scope, s);
		/* on the loop (a shm poll runs there): its totals outlive
		 * the region under this name, so the key is spoken for */
		d->scope.names_given++;
	} else {
		/* the kernel keeps a BPF entry per hash, uid and gid: the
		 * ids are the entry's, whoever's session it was */
		id = d->scope.mode == KD_SCOPE_GID ? o->gid : o->uid;
	}
	*hash = kd_scope_hash(&d->scope, id, *hash);
	return true;
}
