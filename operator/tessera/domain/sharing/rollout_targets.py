"""The rollout engine's view of a sharing change: which nodes roll, to what, how to verify.

Disruptive changes are held by ``planning`` until the cordon/drain/verify
rollout (``tessera.domain.rollout``) has drained the node; this module is the
bridge. A node's target is what the engine writes at Applying and checks at
Verifying:

* device-plugin configs: the ``nvidia.com/device-plugin.config`` label (its key
  is written to the ConfigMap before any label, whatever the rollout's state)
  and the allocatable the plugin will advertise (``status.advertised``);
* HAMi: the engine cannot see a ConfigMap entry, and HAMi-core and HAMi-MIG can
  both run on the default device-plugin key, so Tessera marks the node with
  ``HAMI_MODE_LABEL``. Without it a mode switch MIG <-> TimeSlicing would look
  "already verified" and never be drained. Leaving HAMi removes the label.
* vCANN-RT (``tessera.domain.sharing.vcannrt``): the device-share request label and
  ``huawei.com/scheduler.chip1softsharedev.enable``, verified by the Ascend agent's
  ``tessera.io/npu.device-share.state`` and, once on, the 100 units per NPU Huawei's device
  plugin advertises; leaving the mode writes ``off`` and waits for the agent the same way.
* Ascend (HAMi's ``hami-vnpu-core`` soft slicing on or off): no device-plugin
  label applies to an NPU node, and its policy's key stays the same across a
  flip, so the same label carries the Ascend mode (``ASCEND_MODES``). With the
  key as target, a node rolled out once looked verified at every later flip and
  waited for a drain that never came.

A node is *cleared* (planning may write its disruptive change) once its
rollout has drained it, and also when no policy governs it any more: a
released node returns to the default config at once, since no policy's
rollout settings are left to govern a drain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tessera.api import constants as c
from tessera.domain.rollout import DesiredNode, NodeView, Phase
from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import vcannrt
from tessera.domain.sharing.assignment import Assignment
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult
from tessera.domain.sharing.status import advertised

HAMI_MODE_LABEL = "tessera.io/hami-mode"
DEVICE_SHARE_WATCH = c.NPU_DEVICE_SHARE_STATE_LABEL  # the Ascend agent's device-share answer
ASCEND_MODES = {True: "hami-vnpu-core", False: "vnpu-template"}  # by soft slicing
OWNER_PREFIX = "SharingPolicy/"
_DRAINED = (Phase.APPLYING, Phase.VERIFYING, Phase.UNCORDONING)


def owner_id(policy: str) -> str:
    """The owner written into the rollout state on the Node."""
    return f"{OWNER_PREFIX}{policy}"


def desired_node(result: PolicyResult, node: NodeFacts) -> DesiredNode:
    """What ``node`` should look like under ``result``, as the rollout engine checks it."""
    if node.vendor == "ascend":
        share = vcannrt.wanted(result, node)
        if share == "on":  # vCANN-RT: the agent switches device-share on, HAMi has no part
            on = vcannrt.labels("on")
            if HAMI_MODE_LABEL in node.labels:
                on[HAMI_MODE_LABEL] = None
            alloc_on = vcannrt.allocatable("on", node)
            return DesiredNode("ascend-device-share-on", on, DEVICE_SHARE_WATCH, alloc_on)
        fields = result.ascend_fields or {}
        mode = ASCEND_MODES[bool(fields.get("hami-vnpu-core"))]
        alloc = advertised(result, node)
        if share == "off":  # leaving vCANN-RT: switched off, read back by the agent
            off = {HAMI_MODE_LABEL: mode, **vcannrt.labels("off")}
            target = f"ascend-device-share-off-{mode}-{hami.digest(fields)}"
            return DesiredNode(target, off, DEVICE_SHARE_WATCH, alloc or None)
        return DesiredNode(
            f"ascend-{mode}-{hami.digest(fields)}", {HAMI_MODE_LABEL: mode}, None, alloc or None
        )
    if result.hami_fields is not None:
        mode = str(result.hami_fields.get("operatingmode", "hami-core"))
        target = f"hami-{mode}-{hami.digest(result.hami_fields)}"
        return DesiredNode(target, {HAMI_MODE_LABEL: mode})
    labels: dict[str, str | None] = {c.DEVICE_PLUGIN_CONFIG_LABEL: result.key or ""}
    if HAMI_MODE_LABEL in node.labels:  # leaving HAMi; absent otherwise so rollback can work
        labels[HAMI_MODE_LABEL] = None
    alloc = advertised(result, node)
    return DesiredNode(result.key or result.backend, labels, None, alloc or None)


def cleared(assignment: Assignment, nodes: Iterable[NodeView]) -> frozenset[str]:
    """Nodes whose disruptive change planning may write now.

    Drained by the rollout of the policy that governs them (a rollback in
    progress is not: it is restoring the previous config), or governed by no
    policy and not held by a conflict.
    """
    out = set()
    for node in nodes:
        owner = assignment.owner.get(node.name)
        if owner is None:
            if node.name not in assignment.held:
                out.add(node.name)
            continue
        s = node.state
        if (
            s is not None
            and s.owner == owner_id(owner)
            and s.phase in _DRAINED
            and s.rollback_of is None
            and not s.rolled_back
        ):
            out.add(node.name)
    return frozenset(out)


def stale_mode_labels(assignment: Assignment, nodes: Mapping[str, NodeFacts]) -> tuple[str, ...]:
    """Released nodes that still carry ``HAMI_MODE_LABEL``: remove it with the release."""
    return tuple(
        sorted(
            name
            for name, node in nodes.items()
            if HAMI_MODE_LABEL in node.labels
            and name not in assignment.owner
            and name not in assignment.held
        )
    )


def stale_device_share(assignment: Assignment, nodes: Mapping[str, NodeFacts]) -> tuple[str, ...]:
    """Released nodes still asking device-share ``on``: switched ``off`` with the release, at
    once like any released node (no policy's rollout settings are left to govern a drain)."""
    return tuple(
        sorted(
            name
            for name, node in nodes.items()
            if node.labels.get(c.NPU_DEVICE_SHARE_LABEL) == "on"
            and name not in assignment.owner
            and name not in assignment.held
        )
    )
