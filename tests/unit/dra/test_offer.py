"""A DRA pool's classes come from layouts valid on its nodes' GPU models, else it is refused."""

from __future__ import annotations

from typing import Any

import pytest
from dra_builders import policy, pool

from tessera.domain.dra import PoolInput, desired_classes, pool_input

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"


def layouts(*items: tuple[str, dict[str, int]]) -> dict[str, Any]:
    return {"mig": {"layouts": [{"devices": d, "profiles": p} for d, p in items]}}


def on(layout: dict[str, Any], *models: tuple[str, int]) -> PoolInput:
    found = pool(layout, max(n for _, n in models))
    return PoolInput(found.spec, found.gpus, models)


@pytest.mark.parametrize(
    ("found", "classes", "problem"),
    [
        # a profile the model lacks: the pool is refused, no class of it written
        pytest.param(
            on(layouts(("all", {"1g.5gb": 7})), (H100, 8)),
            [],
            ("spec.mig.layouts[0]", "H100-80GB"),
            id="profile-the-model-lacks",
        ),
        # more instances than a GPU holds
        pytest.param(
            on(layouts(("all", {"4g.40gb": 1, "3g.40gb": 2})), (H100, 8)),
            [],
            ("spec.mig.layouts[0]", "H100-80GB"),
            id="over-full-layout",
        ),
        # the second layout names a profile the model lacks: it is the one named
        pytest.param(
            on(layouts(("0-1", {"1g.10gb": 7}), ("2-3", {"1g.5gb": 7})), (H100, 4)),
            [],
            ("spec.mig.layouts[1]", "H100-80GB"),
            id="second-layout-names-the-index",
        ),
        # valid on some nodes: the classes of those, the others are the pool's own problem
        pytest.param(
            on(layouts(("all", {"1g.5gb": 7})), (H100, 8), (A100, 8)),
            ["mig-1g.5gb.tessera.io"],
            None,
            id="valid-on-one-model",
        ),
        # placements decide: GPUs 4-7 stay whole
        pytest.param(
            on(layouts(("0-3", {"1g.10gb": 7})), (H100, 8)),
            ["gpu.tessera.io", "mig-1g.10gb.tessera.io"],
            None,
            id="valid-unnamed-gpus-whole",
        ),
        # no node known: the spec alone decides, as before
        pytest.param(
            pool(layouts(("all", {"1g.5gb": 7})), None),
            ["mig-1g.5gb.tessera.io"],
            None,
            id="no-node-known",
        ),
    ],
)
def test_pool_classes_on_its_models(
    found: PoolInput, classes: list[str], problem: tuple[str, str] | None
) -> None:
    desired = desired_classes({"p": found}, {"s": policy("p", "Exclusive")})
    assert sorted(n for n in desired.classes if not n.startswith("s.")) == classes
    refused = desired.problems.get("NodePoolGeometry/p")
    if problem is None:
        assert refused is None
        return
    assert refused is not None
    assert refused[0].reason == "InvalidGeometryForModel"
    assert refused[0].field == problem[0]
    assert problem[1] in refused[0].message
    assert desired.declared["NodePoolGeometry/p"] == ()
    assert "NodePoolGeometry/p" in desired.held
    # its policy's classes are held too, naming the pool
    assert desired.declared["SharingPolicy/s"] == ()
    assert desired.problems["SharingPolicy/s"][0].field == "spec.poolRef"
    assert not desired.classes


def test_pool_input_reads_the_nodes_its_selector_matches() -> None:
    spec = pool(layouts(("all", {"1g.10gb": 7}))).spec
    assert spec.node_selector is not None
    mine = dict(spec.node_selector.match_labels or {})
    nodes = [
        {**mine, "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "8"},
        {**mine, "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "4"},
        {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.count": "16"},  # another pool's
        {**mine, "nvidia.com/gpu.count": "2"},  # no product label yet
    ]
    found = pool_input(spec, nodes)
    assert found.gpus == 8
    assert found.models == ((H100, 4), (H100, 8))
    assert pool_input(pool(None, allocation="DevicePlugin").spec, nodes) == PoolInput(
        pool(None, allocation="DevicePlugin").spec
    )
