# SPDX-License-Identifier: MIT
"""What the calls return: Stats (kvmm_get_stats()), PinInfo, PrefixResult
and Readiness, frozen dataclasses."""

import dataclasses
import typing

from .constants import _BACKEND_NAMES

if typing.TYPE_CHECKING:  # PrefixResult.seq's annotation
    from .region import Sequence  # noqa: F401


def _backend_name(kind):
    return _BACKEND_NAMES.get(kind, "unknown")


@dataclasses.dataclass(frozen=True)
class Stats:
    """struct kvmm_stats (kvmm_get_stats()).  .backend is the backend's
    name ("host", "cuda"), as Connection.backend; .backend_id the C
    field's number (BACKEND_HOST, BACKEND_CUDA)."""
    session_id: int
    backend: str
    page_size: int
    extends: int
    extend_waits: int
    pages_imported: int
    pages_mapped: int
    pages_revoked: int
    map_ahead_blocks: int
    cmds_ring: int
    cmds_socket: int
    pages_held: int
    blocks_lent: int
    extends_lent: int
    map_ahead_backoffs: int
    blocks_lent_on_request: int
    blocks_unshared: int
    backend_id: int = dataclasses.field(default=0, repr=False,
                                        compare=False)

    @property
    def backend_name(self):
        """The same as .backend (it was the name of a number)."""
        return self.backend

    def as_dict(self):
        """The C fields, in C order (backend as its name)."""
        d = dataclasses.asdict(self)
        del d["backend_id"]
        return d


@dataclasses.dataclass(frozen=True)
class PinInfo:
    """The out fields of struct kvmm_pin_opts after kvmm_block_pin()."""
    tier: int  # 0 GPU, 1 host, 2 NVMe
    pins: int  # this connection's pins now
    pin_quota: int
    expires_ns: int  # TTL pins: the daemon's CLOCK_MONOTONIC, else 0


@dataclasses.dataclass(frozen=True)
class PrefixResult:
    """What Region.open_prefix() opened: the sequence and its cached
    prefix length in blocks.  With plan=True also the per-block actions
    (kvmm_block_action_string() names, and their codes) and the counts
    of struct kvmm_prefix_opts; None without."""
    seq: "Sequence"
    nr_blocks: int
    actions: list = None
    action_codes: list = None
    shared: int = None
    reloaded_host: int = None
    reloaded_nvme: int = None
    recompute: int = None


@dataclasses.dataclass(frozen=True)
class Readiness:
    """What Region.wait_ready() found below upto_block: the blocks whose
    reload failed (to recompute, ascending) and, for a poll, how many
    still load (0 after a wait)."""
    failed: list
    pending: int
