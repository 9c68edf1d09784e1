"""What a rollout sees of a DRA node: the devices its ResourceSlices publish, its plugin pod.

A pool with ``allocation: DRA`` is verified against the NVIDIA DRA driver's ResourceSlices
instead of allocatable, and the driver's kubelet plugin is restarted
after a MIG change, since it enumerates static MIG devices only when it starts. The
controller fills ``NodeView.dra`` for such pools; the engine only reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tessera.domain.dra.naming import DRIVER, SUFFIX


@dataclass(frozen=True)
class PluginPod:
    """The driver's kubelet-plugin pod on one node (the pool's DaemonSet's)."""

    namespace: str
    name: str
    uid: str
    terminating: bool = False
    ready: bool = True

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DraNode:
    """One node as the DRA driver publishes it.

    ``devices``: ``"gpu"`` or MIG profile → count, from the node's pool (pool name = node)
    of driver ``gpu.nvidia.com`` at its highest generation, when that generation is
    complete; ``None`` when there is no complete pool. ``plugins``: the kubelet-plugin
    pods of each DaemonSet (``<namespace>/<daemonSet>``) the controller looked for.
    """

    devices: Mapping[str, int] | None = None
    plugins: Mapping[str, tuple[PluginPod, ...]] = field(default_factory=dict)

    def plugin_pods(self, daemon_set: str) -> tuple[PluginPod, ...]:
        return self.plugins.get(daemon_set, ())


def counts_text(counts: Mapping[str, int] | None) -> str:
    """``{1g.10gb: 7, gpu: 1}``, or that the node has no complete pool."""
    if counts is None:
        return "no complete ResourceSlice pool"
    inner = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()) if n)
    return "{" + inner + "}"


UNPUBLISHED = f"{DRIVER} devices no ResourceSlice lists"
"""What the room check counts a held device as when no slice says its kind: no node offers
it, so a pod holding one is reported with nowhere to go rather than assumed to fit."""


def counted(resource: str) -> bool:
    """Whether the room check counts ``resource``: a DRA device (Tessera's DeviceClass of
    its kind, ``naming.geometry_class``) or ``UNPUBLISHED``; extended resources are
    ``capacity``'s own rule."""
    return resource.endswith(SUFFIX) or resource == UNPUBLISHED
