"""Who holds which GPU on a node: the GPU node agent's record, and how it is read.

The agent (``tessera agent gpus``, one per GPU node) asks the kubelet's PodResources API
which device IDs each container holds, maps them to GPU indices with ``nvidia-smi -L``
(``tessera.domain.geometry.nvidiasmi``) and publishes the result on its Node as one
compact JSON annotation, ``tessera.io/gpu-holders``:

    {"v": 1, "read": "2026-12-07T07:00:00Z", "pods": {"serving/llm-0-abc": [0, 1]}}

``read`` is when the kubelet was asked; ``pods`` maps ``namespace/name`` to the sorted GPU
indices its containers hold (device-plugin resources only: the PodResources API names pods,
not their uids, so a pod is matched by name and by being older than the read).
``unmapped`` lists pods holding a device ID that ``nvidia-smi`` does not name: they are
taken to hold every GPU. A node with more holders than ``MAX_PODS`` publishes
``"overflow": true`` and no pods, and its rollout drains the whole node. The record is
bounded so that ten thousand nodes' worth stays small in every cache.

The rollout trusts a record only for pods it covers (``Holders.gpus_of``): a pod that
requests a device and is missing, or was created at or after ``read``, makes the record
stale for that node, and the node falls back to a whole-node drain (``Holders.stale_for``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tessera.domain.rollout.state import ts

VERSION = 1
MAX_PODS = 256
MAX_INDEX = 15  # the API's device range (tessera.api.v1alpha1.devices)


class HoldersError(ValueError):
    """The annotation exists but is not a record this version can trust."""


@dataclass(frozen=True)
class Holders:
    read: datetime
    pods: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    unmapped: tuple[str, ...] = ()
    overflow: bool = False

    def gpus_of(self, pod: str) -> tuple[int, ...] | None:
        """The GPU indices ``pod`` (``namespace/name``) holds; None when the record does not
        say (an unmapped pod, or one the record does not list)."""
        if self.overflow or pod in self.unmapped:
            return None
        return self.pods.get(pod)


def encode(holders: Holders) -> str:
    """Compact, key-sorted JSON: equal records give byte-equal annotations (no spurious writes)."""
    out: dict[str, Any] = {"v": VERSION, "read": ts(holders.read)}
    if holders.overflow:
        out["overflow"] = True
    else:
        out["pods"] = {k: list(v) for k, v in sorted(holders.pods.items())}
        if holders.unmapped:
            out["unmapped"] = sorted(holders.unmapped)
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def bounded(read: datetime, pods: Mapping[str, Iterable[int]], unmapped: Iterable[str]) -> Holders:
    """The record the agent publishes: sorted indices, ``overflow`` past ``MAX_PODS`` holders."""
    held = {k: tuple(sorted(set(v))) for k, v in pods.items()}
    loose = tuple(sorted(set(unmapped)))
    if len(held) + len(loose) > MAX_PODS:
        return Holders(read, overflow=True)
    return Holders(read, held, loose)


def decode(raw: str | None) -> Holders | None:
    """The record in ``raw``; None when absent; ``HoldersError`` for anything untrustworthy."""
    if raw is None or raw == "":
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise HoldersError(f"not JSON: {err}") from err
    if not isinstance(data, dict):
        raise HoldersError("not a JSON object")
    if data.get("v") != VERSION:
        raise HoldersError(f"unsupported version {data.get('v')!r}")
    read = _time(data.get("read"))
    if data.get("overflow") is True:
        return Holders(read, overflow=True)
    pods, unmapped = data.get("pods", {}), data.get("unmapped", [])
    if not isinstance(pods, dict) or len(pods) > MAX_PODS:
        raise HoldersError(f"pods must be an object of at most {MAX_PODS} entries")
    out: dict[str, tuple[int, ...]] = {}
    for key, gpus in pods.items():
        if not (
            isinstance(gpus, list)
            and all(type(i) is int and 0 <= i <= MAX_INDEX for i in gpus)
            and "/" in key
        ):
            raise HoldersError(f"pods[{key!r}] must list GPU indices 0-{MAX_INDEX}")
        out[key] = tuple(sorted(set(gpus)))
    if not isinstance(unmapped, list) or not all(isinstance(p, str) for p in unmapped):
        raise HoldersError("unmapped must list pods")
    return Holders(read, out, tuple(sorted(unmapped)))


def _time(raw: Any) -> datetime:
    if not isinstance(raw, str):
        raise HoldersError(f"read {raw!r} is not a string")
    try:
        return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as err:
        raise HoldersError(f"read {raw!r} is not RFC 3339 UTC") from err
