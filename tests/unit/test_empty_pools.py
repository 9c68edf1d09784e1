"""A pool that selects no node: Stalled (NoNodes), its layout still checked against named models."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import empty_pools

FITS = {"mig": {"layouts": [{"profiles": {"3g.40gb": 2}}]}}
TOO_BIG = {"mig": {"layouts": [{"profiles": {"3g.40gb": 3}}]}}  # 3 x 3g exceeds any GPU
VNPU_OK = {"vnpu": {"layouts": [{"templates": {"vir02": 2}}]}}
VNPU_BAD = {"vnpu": {"layouts": [{"templates": {"vir02": 4}}]}}


def spec(labels: dict[str, str], layout: dict[str, Any], **expr: list[str]) -> NodePoolGeometrySpec:
    expressions = [{"key": k, "operator": "In", "values": v} for k, v in expr.items()]
    selector = {"matchLabels": labels, "matchExpressions": expressions}
    return NodePoolGeometrySpec.model_validate({"nodeSelector": selector, **layout})


H100 = {c.POOL_LABEL: "h100", c.GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}


@pytest.mark.parametrize(
    ("case", "pool", "reason", "says"),
    [
        # no model named: only the selector can be wrong
        (
            "typo",
            spec({c.POOL_LABEL: "h100-inferenc"}, FITS),
            "NoNodes",
            "tessera.io/pool=h100-inferenc",
        ),
        # a profile no catalog model has (stored before the CRD refused it): the spec first
        (
            "no model has it",
            spec({c.POOL_LABEL: "nobody-yet"}, {"mig": {"layouts": [{"profiles": {"1g.7gb": 1}}]}}),
            "InvalidSpec",
            "spec.mig.layouts[0].profiles: no GPU model in Tessera's catalog has one of these MIG "
            "profiles (tessera geometry models lists each model's): 1g.7gb (did you mean 1g.6gb?)",
        ),
        # a model is named and the layout fits it
        ("fits H100", spec(H100, FITS), "NoNodes", "matches no node"),
        # a model is named and the layout is impossible on it: refused before any node exists
        ("too big", spec(H100, TOO_BIG), "InvalidGeometryForModel", "H100-80GB"),
        # the model named by an In expression counts too
        (
            "In",
            spec({}, TOO_BIG, **{c.GPU_PRODUCT_LABEL: ["NVIDIA-A100-SXM4-40GB"]}),
            "InvalidGeometryForModel",
            "A100-40GB",
        ),
        # a product no catalog knows is named: a node of it could never be partitioned
        (
            "unknown",
            spec({c.GPU_PRODUCT_LABEL: "NVIDIA-H101"}, FITS),
            "InvalidGeometryForModel",
            "H101",
        ),
        # the named GPU count is used: devices 6 does not exist on a 4-GPU node, which is fine
        (
            "count",
            spec(
                {**H100, c.GPU_COUNT_LABEL: "4"},
                {"mig": {"layouts": [{"devices": 6, "profiles": {"3g.40gb": 3}}]}},
            ),
            "NoNodes",
            "matches no node",
        ),
        # Ascend: the chip named by the device plugin's label
        (
            "vnpu fits",
            spec({c.NPU_CHIP_NAME_LABEL: "310P3"}, VNPU_OK),
            "NoNodes",
            "matches no node",
        ),
        (
            "vnpu bad",
            spec({c.NPU_CHIP_NAME_LABEL: "310P3"}, VNPU_BAD),
            "InvalidGeometryForModel",
            "310P3",
        ),
    ],
)
def test_an_empty_pool_is_never_green(
    case: str, pool: NodePoolGeometrySpec, reason: str, says: str
) -> None:
    verdict = empty_pools.verdict("p", pool)
    assert (verdict.state, verdict.reason) == ("stalled", reason), (case, verdict.message)
    assert says in verdict.message, (case, verdict.message)
    assert "matches no node" in verdict.message, case
