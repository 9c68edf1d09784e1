"""Who holds which GPU on a DRA node (issue 28): claims read against the node's ResourceSlices,
and why the map is not trusted when it cannot say everything."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from builders.dra import board_gpu as gpu
from builders.dra import board_mig as mig
from tessera.api import constants as c
from tessera.api.v1alpha1.common import DrainSpec
from tessera.domain.dra.naming import DRIVER
from tessera.domain.dra.slices import slice_pools
from tessera.domain.rollout import scope
from tessera.domain.rollout.dra import claims as cl
from tessera.domain.rollout.holders import Holders
from tessera.domain.rollout.views import DesiredNode, DraNode, Layout, NodeView, PodView

READ = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)
NODE = "dra-1"


def slice_of(devices: list[dict[str, Any]], count: int = 1) -> dict[str, Any]:
    pool = {"name": NODE, "generation": 1, "resourceSliceCount": count}
    return {"spec": {"driver": DRIVER, "pool": pool, "nodeName": NODE, "devices": devices}}


# GPUs 0-1 split in two, 2-3 whole: as NVIDIA's driver publishes static MIG (dra.md §5.5)
DEVICES = [mig(0, 0), mig(0, 4), mig(1, 0), mig(1, 4), gpu(2), gpu(3)]
POOL = slice_pools([slice_of(DEVICES)])[NODE]


def claim(
    name: str, devices: list[str], reserved: list[str], *, pool: str = NODE, allocated: bool = True
) -> dict[str, Any]:
    results = [{"driver": DRIVER, "pool": pool, "device": d, "request": "gpu"} for d in devices]
    status: dict[str, Any] = {
        "reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    }
    if allocated:
        status["allocation"] = {"devices": {"results": results}}
    return {"metadata": {"namespace": "ml", "name": name}, "status": status}


def pod(name: str, *claim_names: str) -> PodView:
    return PodView("ml", name, NODE, uid=name, claims=claim_names, requests_accelerator=True)


def held(pods: list[PodView], raw: list[dict[str, Any]], **kw: Any) -> Holders | str:
    pool, count = kw.get("pool", POOL), kw.get("count", 4)
    return cl.held(NODE, pods, cl.claims(raw), pool, count, READ)


def test_devices_map_to_gpu_indices_by_pci_bus_order() -> None:
    index = cl.indices(NODE, POOL, 4)
    assert index == {
        "gpu-0-mig-3g40gb-9-0": 0,
        "gpu-0-mig-3g40gb-9-4": 0,
        "gpu-1-mig-3g40gb-9-0": 1,
        "gpu-1-mig-3g40gb-9-4": 1,
        "gpu-2": 2,
        "gpu-3": 3,
    }


def test_each_pod_holds_the_gpus_of_its_claims_devices() -> None:
    raw = [
        claim("c-a", ["gpu-0-mig-3g40gb-9-4"], ["a"]),
        claim("c-b", ["gpu-1-mig-3g40gb-9-0", "gpu-3"], ["b"]),
        claim("c-c", ["gpu-2"], ["c"]),
        claim("elsewhere", ["gpu-2"], ["x"], pool="dra-2"),  # another node's gpu-2
    ]
    found = held([pod("a", "c-a"), pod("b", "c-b"), pod("c", "c-c"), pod("d")], raw)
    assert found == Holders(READ, {"ml/a": (0,), "ml/b": (1, 3), "ml/c": (2,)})


def test_a_claim_shared_by_two_pods_places_both() -> None:
    raw = [claim("shared", ["gpu-2"], ["a", "b"])]
    assert held([pod("a", "shared"), pod("b", "shared")], raw) == Holders(
        READ, {"ml/a": (2,), "ml/b": (2,)}
    )


WHY = [
    pytest.param(
        [pod("a", "c-a")],
        [claim("c-a", ["gpu-7"], ["a"])],
        {},
        "claim ml/c-a holds device gpu-7, which no ResourceSlice of dra-1 lists",
        id="device-unknown-to-the-slices",
    ),
    pytest.param(
        [pod("a")],
        [claim("orphan", ["gpu-9"], [])],
        {},
        "claim ml/orphan holds device gpu-9, which no ResourceSlice of dra-1 lists",
        id="any-claim-on-the-node-counts",
    ),
    pytest.param(
        [pod("a", "c-a")],
        [claim("c-a", ["gpu-2"], [])],
        {},
        "pod ml/a uses claim ml/c-a, which is not reserved for it yet",
        id="pod-not-yet-reserved",
    ),
    pytest.param(
        [pod("a", "c-a")],
        [claim("c-a", [], [], allocated=False)],
        {},
        "pod ml/a uses claim ml/c-a, which is not allocated yet",
        id="claim-not-allocated",
    ),
    pytest.param(
        [pod("a", "c-a")],
        [],
        {},
        "pod ml/a uses claim ml/c-a, which was not listed",
        id="claim-not-listed",
    ),
    pytest.param(
        [pod("a")],
        [],
        {"count": 5},
        "the ResourceSlices of dra-1 name 4 GPU(s) by PCI bus, the node has 5",
        id="a-gpu-unpublished",
    ),
    pytest.param(
        [pod("a")],
        [],
        {"pool": slice_pools([slice_of(DEVICES, count=2)])[NODE]},
        "dra-1 publishes no complete ResourceSlice pool",
        id="pool-incomplete",
    ),
    pytest.param(
        [pod("a")], [], {"pool": None}, "dra-1 publishes no complete ResourceSlice pool", id="none"
    ),
]


@pytest.mark.parametrize(("pods", "raw", "kw", "why"), WHY)
def test_the_map_is_not_trusted_and_says_why(
    pods: list[PodView], raw: list[dict[str, Any]], kw: dict[str, Any], why: str
) -> None:
    assert held(pods, raw, **kw) == why


def test_a_device_without_a_pci_bus_is_unknown() -> None:
    bare = {"name": "gpu-4", "attributes": {"type": {"string": "gpu"}}}
    pool = slice_pools([slice_of([*DEVICES, bare])])[NODE]
    assert "gpu-4" not in pool.buses
    found = held([pod("a", "c-a")], [claim("c-a", ["gpu-4"], ["a"])], pool=pool)
    assert found == "claim ml/c-a holds device gpu-4, which no ResourceSlice of dra-1 lists"


# -- the scope of a DRA node's change, from its claims ----------------------------------------------

WHOLE: Layout = ((),) * 4
TWO: Layout = ((("3g.40gb", 2),),) * 2 + ((),) * 2  # GPUs 0-1 split, 2-3 whole


def dra_node(rec: Holders | str, layout: Layout | None = WHOLE) -> NodeView:
    base = NodeView(NODE, dra=DraNode({"gpu": 4}), layout=layout)
    if isinstance(rec, str):
        return replace(base, holders_error=rec)
    return replace(base, holders=rec)


def target(layout: Layout | None = TWO) -> DesiredNode:
    return DesiredNode("new", expected_devices={"3g.40gb": 4, "gpu": 2}, layout=layout)


EARLY = READ - timedelta(minutes=10)
ON = [replace(pod(f"p{i}", f"c{i}"), created=EARLY) for i in range(4)]
MAP = Holders(READ, {f"ml/p{i}": (i,) for i in range(4)})


@dataclass(frozen=True)
class DraCase:
    node: NodeView
    want: tuple[int, ...] | None
    whole: str = ""
    target: DesiredNode = field(default_factory=target)


DRA_SCOPES = {
    "only GPUs 0-1 change; no agent is needed": DraCase(dra_node(MAP), (0, 1)),
    "the claims cannot say": DraCase(
        dra_node("pod ml/p2 uses claim ml/c2, which is not reserved for it yet"),
        None,
        "pod ml/p2 uses claim ml/c2, which is not reserved for it yet",
    ),
    "a pod the map does not place": DraCase(
        dra_node(Holders(READ, {"ml/p0": (0,)})), None, "pod ml/p1 is not in the GPU holders"
    ),
    "what the node runs is not known": DraCase(
        dra_node(MAP, layout=None), None, "the layout dra-1 runs now is not known"
    ),
    "every GPU changes": DraCase(
        dra_node(MAP), None, "every GPU changes", target(((("3g.40gb", 2),),) * 4)
    ),
    "a change that takes whole nodes says nothing": DraCase(dra_node(MAP), None, "", target(None)),
}


@pytest.mark.parametrize("case", DRA_SCOPES.values(), ids=DRA_SCOPES.keys())
def test_dra_scope(case: DraCase) -> None:
    got = scope.decide(case.node, case.target, ON, DrainSpec())
    assert got.gpus == case.want
    assert got.whole.startswith(case.whole) and bool(got.whole) == bool(case.whole)


def test_on_a_dra_node_only_the_pods_on_changed_gpus_leave() -> None:
    left = scope.leaving(dra_node(MAP), scope.Scope((0, 1)), ON, DrainSpec())
    assert [p.name for p in left] == ["p0", "p1"]


def test_with_holders_fills_dra_nodes_only_and_says_why_not() -> None:
    labelled = replace(dra_node(MAP), holders=None, labels={c.GPU_COUNT_LABEL: "4"})
    unlabelled = replace(dra_node(MAP), name="dra-2", holders=None)
    plain = NodeView("gpu-9")
    raw = [claim(f"c{i}", [f"gpu-{i}"] if i > 1 else [], [f"p{i}"]) for i in range(4)]
    out = cl.with_holders([labelled, unlabelled, plain], ON, cl.claims(raw), {NODE: POOL}, READ)
    assert out[0].holders == Holders(READ, {"ml/p2": (2,), "ml/p3": (3,)})
    assert out[1].holders is None
    assert out[1].holders_error == f"dra-2 has no {c.GPU_COUNT_LABEL} label"
    assert out[2] == plain
