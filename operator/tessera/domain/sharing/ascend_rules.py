"""Rules of ``spec.ascend`` that depend on the node: its chip, from its label, and the mode.

The API server checks ``spec.ascend.chip`` against the mode (the CRD's CEL rule); where the
chip comes from the node (``node.kubernetes.io/npu.chip.name``, set by the Ascend device
plugin) it is checked here, from the same support matrix (``tessera.api.v1alpha1.
ascend_support``), and a node whose chip does not support the mode keeps what it runs while
the policy names the node, the chip, the mode and what the chip supports.
"""

from __future__ import annotations

from tessera.api import constants as c
from tessera.api.v1alpha1 import ascend_support
from tessera.api.v1alpha1.sharingpolicy import AscendSharing
from tessera.domain.base.rules import RuleError
from tessera.domain.geometry.ascend import chips
from tessera.domain.sharing import vcannrt
from tessera.domain.sharing.nodes import NodeFacts


def check(ascend: AscendSharing, node: NodeFacts) -> tuple[RuleError, ...]:
    """Why ``node`` cannot take ``ascend``'s mode; empty when it can (or its chip is not in
    the matrix: nothing is claimed about a chip the matrix has no row for)."""
    label = node.labels.get(c.NPU_CHIP_NAME_LABEL, "")
    if not label:
        return ()
    row = ascend_support.row_of(label)
    if ascend.chip is not None and row is not ascend_support.MATRIX[ascend.chip]:
        rule = (
            f"is {ascend.chip}, and the node's {c.NPU_CHIP_NAME_LABEL} says {label}: "
            "the policy selects a node of another chip"
        )
        return (RuleError("spec.ascend.chip", rule, node.name),)
    path = ascend_support.PATH_OF_MODE[ascend.effective_mode]
    refused = ascend_support.check(label, path)
    if refused:
        return (RuleError("spec.ascend.mode", refused, node.name),)
    if ascend.effective_mode == "MindCluster":
        return _mindcluster(node)
    if ascend.effective_mode == "VCannRT":
        return _vcannrt(node)
    return ()


def _hami_plugin(node: NodeFacts) -> str:
    """What shows HAMi's Ascend device plugin runs on ``node`` (``""``: nothing does)."""
    if node.labels.get(c.HAMI_ASCEND_NODE_LABEL) == c.HAMI_ASCEND_NODE_VALUE:
        return f"label {c.HAMI_ASCEND_NODE_LABEL}={c.HAMI_ASCEND_NODE_VALUE}"
    registered = sorted(
        k for k in node.annotations if k.startswith(c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX)
    )
    return f"annotation {registered[0]}" if registered else ""


def _beside_hami(node: NodeFacts, mode: str, flags: str) -> list[RuleError]:
    """A Conflict when HAMi's Ascend plugin runs on a node ``mode`` needs Huawei's device
    plugin alone on (run with ``flags``)."""
    hami = _hami_plugin(node)
    if not hami:
        return []
    rule = (
        f"{mode} and HAMi mode on the same node: HAMi's Ascend device plugin runs here "
        f"({hami}); {mode} needs Huawei's device plugin alone ({flags}): remove "
        f"{c.HAMI_ASCEND_NODE_LABEL}={c.HAMI_ASCEND_NODE_VALUE} "
        "or govern the node by a HAMi-mode policy"
    )
    return [RuleError("spec.ascend.mode", rule, node.name, reason="Conflict")]


def _preset_vnpus(node: NodeFacts, why: str) -> list[RuleError]:
    """The node held while it advertises preset vNPUs (``why`` the mode cannot use them)."""
    preset = sorted((k, n) for k, n in node.allocatable.items() if _static_vnpu(k) and n)
    if not preset:
        return []
    shown = ", ".join(f"{k}: {n}" for k, n in preset)
    rule = (
        f"the node advertises preset vNPUs ({shown}); {why}: roll its NodePoolGeometry to "
        "whole NPUs (templates: {}) first"
    )
    return [RuleError("spec.ascend.mode", rule, node.name)]


def _vcannrt(node: NodeFacts) -> tuple[RuleError, ...]:
    """A vCANN-RT node runs Huawei's device plugin sharing each NPU (``-shareDevCount=100``,
    which upstream does not allow with vNPUs), so HAMi's Ascend plugin there is a Conflict and
    preset vNPUs hold the node; a version the node publishes that vCANN-RT does not run on
    holds it too (docs/facts/ascend.md §vCANN-RT)."""
    out = _beside_hami(node, "vCANN-RT", "-shareDevCount=100 -softShareDevConfigDir")
    out += _preset_vnpus(
        node,
        "vCANN-RT shares whole NPUs and Huawei's device plugin shares no chip split into vNPUs",
    )
    wrong = vcannrt.prerequisites((node,)).wrong
    if wrong:
        rule = "vCANN-RT needs " + vcannrt.NEEDS + "; " + "; ".join(wrong)
        out.append(RuleError("spec.ascend.mode", rule, node.name))
    return tuple(out)


def _mindcluster(node: NodeFacts) -> tuple[RuleError, ...]:
    """A MindCluster node runs Huawei's device plugin creating a vNPU per pod: HAMi's Ascend
    plugin on the same node is a second plugin for the same NPUs (a Conflict), and preset vNPUs
    (driver templates a NodePoolGeometry split) cannot coexist with dynamic ones
    (docs/facts/ascend.md §MindCluster dynamic vNPU)."""
    out = _beside_hami(node, "MindCluster", "-volcanoType=true -presetVirtualDevice=false")
    out += _preset_vnpus(
        node,
        "MindCluster creates a vNPU per pod and static and dynamic vNPUs cannot coexist",
    )
    return tuple(out)


def _static_vnpu(resource: str) -> bool:
    """A static vNPU type (``huawei.com/Ascend310P-2c``): the device plugin advertises one per
    preset vNPU (docs/facts/ascend.md §Resource names)."""
    name = resource.removeprefix("huawei.com/")
    return name != resource and any(t.resource == name for ch in chips() for t in ch.templates)
