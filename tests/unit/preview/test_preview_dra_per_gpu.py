"""``tessera plan`` on a DRA pool (issue 28): who holds which GPU comes from the ResourceClaims
read with the pods, against the node's ResourceSlices, as the operator reads them
(``rollout.dra.claims``): the plan names the GPUs that change and the pods that move and stay,
or the whole node and why the claims cannot say."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from preview_builders import T0, converged, gpu_nodes, namespace, world

from builders import PodWrapper
from builders.dra import ResourceSliceWrapper, allocated_claim, board_gpu, dra_pool
from tessera.domain import preview
from tessera.domain.preview import snapshot
from tessera.domain.preview.results import GpuChange
from tessera.domain.rollout.state import ts

WHOLE: dict[str, Any] = {"mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
HALF = {
    "mig": {
        "layouts": [
            {"devices": "all", "profiles": {}},
            {"devices": "0-3", "profiles": {"3g.40gb": 2}},
        ]
    }
}
Raw = dict[str, Any]


def replica(i: int) -> Raw:
    """``ml/p<i>``, holding GPU i through its claim ``c<i>`` (no extended resource)."""
    built = PodWrapper(f"p{i}").namespace("ml").labels({"app": "serving"}).owner()
    raw = built.node("inf-0").phase("Running").obj()
    raw["metadata"].update(uid=f"p{i}", creationTimestamp=ts(T0 - timedelta(minutes=10)))
    raw["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"c{i}"}]
    return raw


def dra_world(claims: list[Raw] | None = None, pods: range = range(8)) -> list[Raw]:
    """One 8-GPU H100 node of a DRA pool converged on whole GPUs, its slice, ``p<i>`` on
    GPU i (the slice lists the GPUs out of bus order: index is by PCI bus, not by name)."""
    nodes, cm = converged(gpu_nodes("inf", 1), dra_pool("inf").layout(WHOLE).obj())
    published = ResourceSliceWrapper("inf-0").obj()
    published["spec"]["devices"] = [board_gpu(i) for i in (3, 1, 0, 2, 7, 5, 4, 6)]
    if claims is None:
        claims = [allocated_claim(f"c{i}", "inf-0", [f"gpu-{i}"], [f"p{i}"]) for i in pods]
    live = dra_pool("inf").layout(WHOLE).obj()
    return [*nodes, cm, live, published, namespace("ml"), *map(replica, pods), *claims]


def change_of(items: list[Raw]) -> preview.NodeChange:
    result = preview.preview(world(*items), [dra_pool("inf").layout(HALF).obj()], T0)
    [obj] = result.objects
    [change] = obj.changes
    return change


def test_the_claims_say_who_holds_which_gpu_and_only_those_pods_move() -> None:
    change = change_of(dra_world())
    assert change.scope == "GPUs 0-3 change (0-3: whole GPU -> 2x3g.40gb); 4 pods move, 4 stay"
    assert change.gpus == tuple(GpuChange(i, "whole GPU", "2x3g.40gb") for i in range(4))
    assert change.evicts == ("ml/p0", "ml/p1", "ml/p2", "ml/p3")
    assert change.stays == ("ml/p4", "ml/p5", "ml/p6", "ml/p7")


WHY = [
    pytest.param(
        [allocated_claim(f"c{i}", "inf-0", [f"gpu-{i}"], [f"p{i}"]) for i in range(1, 8)],
        "pod ml/p0 uses claim ml/c0, which was not listed",
        7,  # p0 holds nothing the operator can see: its drain leaves it, as the plan says
        id="claim-not-listed",
    ),
    pytest.param(
        [
            allocated_claim("c0", "inf-0", ["gpu-0"], []),
            *(allocated_claim(f"c{i}", "inf-0", [f"gpu-{i}"], [f"p{i}"]) for i in range(1, 8)),
        ],
        "pod ml/p0 uses claim ml/c0, which is not reserved for it yet",
        8,
        id="not-reserved-yet",
    ),
    pytest.param(
        [
            allocated_claim("c0", "inf-0", ["gpu-9"], ["p0"]),
            *(allocated_claim(f"c{i}", "inf-0", [f"gpu-{i}"], [f"p{i}"]) for i in range(1, 8)),
        ],
        "claim ml/c0 holds device gpu-9, which no ResourceSlice of inf-0 lists",
        8,
        id="device-unknown-to-the-slices",
    ),
]


@pytest.mark.parametrize("claims, why, move", WHY)
def test_where_the_claims_cannot_say_the_whole_node_goes_and_the_plan_says_why(
    claims: list[Raw], why: str, move: int
) -> None:
    change = change_of(dra_world(claims))
    assert change.scope == f"whole node: {why}; {move} pods move"
    assert change.gpus == () and change.stays == ()
    assert set(change.evicts) == {f"ml/p{i}" for i in range(8 - move, 8)}


def test_a_snapshot_keeps_the_claims_and_the_pods_use_of_them() -> None:
    items = dra_world()
    kept = [snapshot.minimal(raw) for raw in items]
    assert change_of(kept) == change_of(items)
    assert change_of(kept).stays == ("ml/p4", "ml/p5", "ml/p6", "ml/p7")
