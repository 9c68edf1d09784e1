"""vCANN-RT mode (``spec.ascend.mode: VCannRT``): what each node must run, and what is unknown.

Facts: docs/facts/ascend.md §vCANN-RT. A node under the mode has every NPU in device-share
mode (Tessera's Ascend agent runs ``npu-smi set -t device-share`` and reads it back), the
label ``huawei.com/scheduler.chip1softsharedev.enable: "true"`` that Huawei's device plugin
and Volcano plugin select soft-sharing nodes by, and Huawei's device plugin advertising
``shareDevCount`` (100) units of ``huawei.com/Ascend910`` per NPU. A node leaving the mode
is switched off again (device-share ``off``, the node label ``"false"`` as upstream asks of
nodes that do not soft-share in a mixed cluster). Both moves change what running containers
share, and npu-smi refuses a change under a container that used the NPU, so both are
disruptive: the rollout drains the node first.

Two things Tessera cannot make green: the prerequisites (HDK 25.5.0, CANN 8.5.0 or 9.1.0,
MindCluster 26.0.0.0) are checked only where the node publishes them as labels, and
upstream marks vCANN-RT a reference practice, not for commercial products. Both are said
in the policy's conditions and Events, never hidden behind Ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tessera.api import constants as c
from tessera.domain.geometry import device_share
from tessera.domain.sharing.changes import Change
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult

MODE = "VCannRT"
WHOLE_RESOURCE = "huawei.com/Ascend910"

# Where a node may publish the versions vCANN-RT needs (set by whoever installs the stack,
# e.g. a node-feature-discovery rule); Huawei's components publish none of them as labels.
HDK_VERSION_LABEL = "tessera.io/ascend.hdk-version"
CANN_VERSION_LABEL = "tessera.io/ascend.cann-version"
MINDCLUSTER_VERSION_LABEL = "tessera.io/ascend.mindcluster-version"
REQUIRED: Mapping[str, tuple[str, tuple[str, ...]]] = {
    HDK_VERSION_LABEL: ("HDK", ("25.5.0",)),
    CANN_VERSION_LABEL: ("CANN", ("8.5.0", "9.1.0")),
    MINDCLUSTER_VERSION_LABEL: ("MindCluster", ("26.0.0.0",)),
}
NEEDS = "HDK 25.5.0, CANN 8.5.0 or 9.1.0, MindCluster 26.0.0.0"
REFERENCE_ONLY = (
    "vCANN-RT is a reference practice upstream (openEuler ubs-virt-enpu/vcann-rt): for "
    "reference only, not for commercial products; soft slicing by time slices gives no "
    "hardware isolation between the containers of one NPU"
)


def governs(result: PolicyResult | None) -> bool:
    return result is not None and result.ascend is not None and result.ascend.effective_mode == MODE


def wanted(result: PolicyResult | None, node: NodeFacts) -> device_share.Mode | None:
    """``on`` under the mode; ``off`` for a node that still has it on (leaving); else None."""
    if node.vendor != "ascend":
        return None
    if governs(result):
        return "on"
    return "off" if node.labels.get(c.NPU_DEVICE_SHARE_LABEL) == "on" else None


def now(node: NodeFacts) -> device_share.Mode:
    """What the node runs: ``on`` once its agent confirmed the request on."""
    on = (
        node.labels.get(c.NPU_DEVICE_SHARE_LABEL) == "on"
        and node.labels.get(c.NPU_DEVICE_SHARE_STATE_LABEL) == "success"
    )
    return "on" if on else "off"


def change(result: PolicyResult | None, node: NodeFacts) -> Change | None:
    """The device-share move of ``node``, always disruptive; None when there is none."""
    mode = wanted(result, node)
    if mode is None or mode == now(node):
        return None
    why = (
        "containers then share each NPU by AI-core percent and HBM, and npu-smi refuses the "
        "switch under a container that used the NPU"
        if mode == "on"
        else "the containers sharing each NPU lose it"
    )
    return Change("disruptive", f"device-share {now(node)} -> {mode} on node {node.name}: {why}")


def labels(mode: device_share.Mode) -> dict[str, str | None]:
    """The labels a rollout writes at Applying for ``mode``."""
    return {
        c.NPU_DEVICE_SHARE_LABEL: mode,
        c.SOFT_SHARE_NODE_LABEL: "true" if mode == "on" else "false",
    }


def npus(node: NodeFacts) -> int:
    """The node's physical NPUs (its ``tessera.io/npu.count``: allocatable is 100 per NPU
    once shared)."""
    raw = node.labels.get(c.NPU_COUNT_LABEL, "")
    return int(raw) if raw.isdigit() else node.npus


def allocatable(mode: device_share.Mode, node: NodeFacts) -> dict[str, int] | None:
    """What Huawei's device plugin advertises once ``on``; None (not checked) for ``off``."""
    if mode != "on" or not npus(node):
        return None
    return {WHOLE_RESOURCE: npus(node) * device_share.SHARE_DEV_COUNT}


@dataclass(frozen=True)
class Prerequisites:
    """What the governed nodes say of the versions vCANN-RT needs."""

    wrong: tuple[str, ...]  # "node n1: CANN 8.3.0 (needs 8.5.0 or 9.1.0)"
    unverified: tuple[str, ...]  # nodes publishing none or not all of the labels

    @property
    def message(self) -> str:
        parts = []
        if self.wrong:
            parts.append("; ".join(self.wrong))
        if self.unverified:
            shown = ", ".join(self.unverified[:5])
            more = f" and {len(self.unverified) - 5} more" if len(self.unverified) > 5 else ""
            labels_ = ", ".join(REQUIRED)
            parts.append(
                f"unverified on {shown}{more}: the node publishes no {labels_} label(s), "
                f"so Tessera cannot tell whether it runs {NEEDS}"
            )
        return "; ".join(parts)


def prerequisites(nodes: Iterable[NodeFacts]) -> Prerequisites:
    wrong: list[str] = []
    unverified: list[str] = []
    for node in sorted(nodes, key=lambda n: n.name):
        missing = False
        for label, (what, ok) in REQUIRED.items():
            value = node.labels.get(label)
            if value is None:
                missing = True
            elif value.removeprefix("v") not in ok:
                wrong.append(f"node {node.name}: {what} {value} (needs {' or '.join(ok)})")
        if missing:
            unverified.append(node.name)
    return Prerequisites(tuple(wrong), tuple(unverified))
