# shellcheck shell=bash
# How many bytes kvmmd's --nvme-size must be for an NVMe tier of N slots
# of one block size, the one formula the bench scripts use (sourced,
# not run: bench/run.sh runs bench/*.sh alone).  The tier's file is a
# 4 KiB superblock, then per slot a 4 KiB header and the block's bytes
# (Documentation/tiers.md, "Design: the on-disk format"); kvmmd cuts
# floor((SIZE - 4096) / (4096 + BLOCK)) slots out of SIZE and says so
# at start (`tier_nvme: PATH: formatted N slots of S bytes`, S = 4096 +
# BLOCK; Documentation/admin.md, --nvme-size).
#   kvmm_nvme_size SLOTS BLOCK_BYTES   prints the size in bytes
kvmm_nvme_size() {
	echo $((4096 + $1 * (4096 + $2)))
}
