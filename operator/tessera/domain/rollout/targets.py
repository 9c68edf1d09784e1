"""Comparing a node with a target layout: does it match, what to write, what the agent says.

A node matches only when three things agree: its labels say the target, the
agent reports ``success`` for it, and its allocatable shows the layout's
resources (on a DRA node: its ResourceSlices publish the layout's devices). The label alone
proves nothing (the agent may not have acted), and ``success`` alone may be the agent's
verdict on the *previous* layout. A DRA node whose driver publishes no complete pool is
neither verified nor drifted: it waits for the driver (``waiting_for_driver``), and one
whose driver is absent is never started (``driver_present``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from tessera.api import constants
from tessera.domain.dra.naming import DRIVER
from tessera.domain.rollout.state import TargetSpec
from tessera.domain.rollout.views import DesiredNode, NodeView, counts_text

SUCCESS, FAILED = "success", "failed"


def target_of(desired: DesiredNode) -> TargetSpec:
    alloc = None if desired.expected_allocatable is None else dict(desired.expected_allocatable)
    devices = None if desired.expected_devices is None else dict(desired.expected_devices)
    labels = dict(desired.labels)
    return TargetSpec(desired.target, labels, desired.watch_label, alloc, devices, desired.plugin)


def labels_match(target: TargetSpec, node: NodeView) -> bool:
    return all(node.labels.get(k) == v for k, v in target.labels.items())


def agent_state(target: TargetSpec, node: NodeView) -> str | None:
    return node.labels.get(target.watch) if target.watch else SUCCESS


def agent_unheard(target: TargetSpec, node: NodeView) -> bool:
    """A vGPU node whose Device Manager has not reported yet: at start-up it applies its
    default config and then sets the state label (docs/facts/vgpu.md §Labels and states), so
    a layout requested before that could be answered by its verdict on the default."""
    return target.watch == constants.VGPU_CONFIG_STATE_LABEL and target.watch not in node.labels


# The sandbox device plugin names a vGPU resource after the driver's mdev type name:
# ``NVIDIA <type>`` on current drivers, ``GRID <type>`` on older ones (docs/facts/vgpu.md).
VGPU_NAMES = ("nvidia.com/NVIDIA_", "nvidia.com/GRID_")


def alloc_diff(target: TargetSpec, node: NodeView) -> str:
    """The first allocatable mismatch as a sentence, or ``""``.

    A vGPU resource may show under either driver's name: a count matches when one name has
    it and the other has none (a fresh node shows neither before its first layout)."""
    for key, want in sorted(_wanted(target.alloc or {}).items()):
        names = _names(key)  # key is names[0]
        have = [node.allocatable.get(n, 0) for n in names]
        if not any(h == want and sum(have) == want for h in have):
            also = "".join(
                f" (or as {n}, which is {h})" for n, h in zip(names[1:], have[1:], strict=True)
            )
            return f"allocatable {key} is {have[0]}, want {want}{also}"
    return ""


def _names(key: str) -> tuple[str, ...]:
    """``key`` and its other driver's name, the current one first."""
    for prefix in VGPU_NAMES:
        if key.startswith(prefix):
            kind = key[len(prefix) :]
            return tuple(p + kind for p in VGPU_NAMES)
    return (key,)


def _wanted(alloc: Mapping[str, int]) -> dict[str, int]:
    """The expected counts with both names of a vGPU type folded into one."""
    out: dict[str, int] = {}
    for key, want in alloc.items():
        first = _names(key)[0]
        out[first] = out.get(first, 0) + want
    return out


def devices_diff(target: TargetSpec, node: NodeView) -> str:
    """DRA nodes: what the node's ResourceSlices publish against the target, or ``""``."""
    if target.devices is None:
        return ""
    want = {k: n for k, n in target.devices.items() if n}
    have = node.dra.devices if node.dra is not None else None
    if have is not None and {k: n for k, n in have.items() if n} == want:
        return ""
    return (
        f"node {node.name}: ResourceSlices of driver {DRIVER} publish {counts_text(have)}, "
        f"want {counts_text(want)}"
    )


def verified(target: TargetSpec, node: NodeView) -> bool:
    return (
        labels_match(target, node)
        and agent_state(target, node) == SUCCESS
        and not alloc_diff(target, node)
        and not devices_diff(target, node)
    )


def unpublished(target: TargetSpec, node: NodeView) -> bool:
    """A DRA target whose node has no complete pool of the driver: nothing to compare yet."""
    return target.devices is not None and (node.dra is None or node.dra.devices is None)


def driver_present(target: TargetSpec, node: NodeView) -> bool:
    """A DRA node whose driver runs: its pool is complete, or a ready plugin pod of the
    target's DaemonSet runs there (a device-plugin target: always)."""
    if not unpublished(target, node):
        return True
    pods = node.dra.plugin_pods(target.plugin) if node.dra and target.plugin else ()
    return any(p.ready and not p.terminating for p in pods)


def waiting_for_driver(target: TargetSpec, node: NodeView) -> bool:
    """Labels and agent say the target, but the driver publishes no complete pool to check
    the devices against (no plugin, a restart, an upgrade): not drift, nothing to roll."""
    return (
        unpublished(target, node)
        and labels_match(target, node)
        and agent_state(target, node) == SUCCESS
        and not alloc_diff(target, node)
    )


def labels_to_write(target: TargetSpec, node: NodeView) -> dict[str, str | None]:
    """The label patch that requests ``target``; empty when the node already carries it.

    When the request changes the config label, the agent's *terminal* verdict
    (success/failed) about the previous value is removed in the same patch, so
    a stale ``success`` can never verify the new layout. ``pending`` and
    ``rebooting`` are left alone: the agent is mid-flight and owns them.
    """
    if labels_match(target, node):
        return {}
    patch: dict[str, str | None] = dict(target.labels)
    if target.watch and node.labels.get(target.watch) in (SUCCESS, FAILED):
        patch[target.watch] = None
    return patch


def snapshot(desired: DesiredNode, node: NodeView) -> TargetSpec | None:
    """The node's current layout, as the target to roll back to; ``None`` when it has none.

    Only a layout the agent confirmed is worth returning to, and only one that
    can be written back (a label that was absent cannot be "re-applied").
    """
    labels = {k: node.labels.get(k) for k in desired.labels}
    if not labels or any(v is None for v in labels.values()):
        return None
    if desired.watch_label and node.labels.get(desired.watch_label) != SUCCESS:
        return None
    if desired.expected_devices is not None:  # DRA: what the slices publish now, if they do
        have = node.dra.devices if node.dra is not None else None
        if have is None:
            return None
        return TargetSpec(
            f"previous-{_digest(labels)}",
            labels,
            desired.watch_label,
            None,
            dict(have),
            desired.plugin,
        )
    keys = set(desired.expected_allocatable or {}) | {
        k for k in node.allocatable if k.startswith(constants.ACCELERATOR_RESOURCE_PREFIXES)
    }
    alloc = {k: node.allocatable.get(k, 0) for k in sorted(keys)}
    return TargetSpec(f"previous-{_digest(labels)}", labels, desired.watch_label, alloc)


def _digest(labels: Mapping[str, str | None]) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:8]


def plan_hash(owner: str, desired: Mapping[str, DesiredNode]) -> str:
    """Identifies the change, not its progress: it stays the same while nodes roll.

    Built from the owner and the set of targets (invalid ones included), so an
    approved plan stays approved until the spec asks for something different,
    and a node joining with an already-approved layout needs no new approval.
    """
    targets = sorted({(d.target, d.invalid) for d in desired.values()})
    blob = json.dumps([owner, targets], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def at_target(node: NodeView, d: DesiredNode) -> bool:
    """The node already runs the layout it should (or does as far as anyone can tell while
    its DRA driver publishes nothing): nothing to roll, no pods to look at."""
    target = target_of(d)
    return verified(target, node) or waiting_for_driver(target, node)
