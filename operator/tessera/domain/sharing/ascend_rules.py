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
    return (RuleError("spec.ascend.mode", refused, node.name),) if refused else ()
