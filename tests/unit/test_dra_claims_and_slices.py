"""``domain.rollout.dra.observe``, ``domain.dra.slices``: ResourceSlices and claims as a rollout reads them.

Which pods a drain evicts (claims holding the node's ``gpu.nvidia.com`` devices), what a
node publishes (its pool's highest, complete generation), what it must publish once its
layout is live (the per-GPU resolution the device plugin's check uses), and the room the
check before a cordon finds for DRA pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from builders.views import gpu_pod
from tessera.api.v1alpha1.common import DrainSpec
from tessera.api.v1alpha1.nodepoolgeometry import MigLayout
from tessera.domain.cluster import objects as cluster
from tessera.domain.dra.slices import slice_pools
from tessera.domain.geometry import catalog
from tessera.domain.rollout import selection
from tessera.domain.rollout.capacity import Ledger, room
from tessera.domain.rollout.dra import observe as dra_rollout
from tessera.domain.rollout.views import UNPUBLISHED, NodeView, PluginPod, PodView

Raw = dict[str, Any]


def device(name: str, kind: str, profile: str = "", qualified: bool = False) -> Raw:
    prefix = "gpu.nvidia.com/" if qualified else ""
    attrs: Raw = {f"{prefix}type": {"string": kind}}
    if profile:
        attrs[f"{prefix}profile"] = {"string": profile}
    return {"name": name, "attributes": attrs}


def rslice(pool: str, gen: int, devices: list[Raw], *, count: int = 1, driver: str = "") -> Raw:
    spec = {
        "driver": driver or "gpu.nvidia.com",
        "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
        "nodeName": pool,
        "devices": devices,
    }
    return {"metadata": {"name": f"{pool}-{gen}-{len(devices)}"}, "spec": spec}


MIG1 = device("gpu-0-mig-1g10gb-19-0", "mig", "1g.10gb")
MIG2 = device("gpu-0-mig-1g10gb-19-1", "mig", "1g.10gb")
BIG = device("gpu-1-mig-3g40gb-9-4", "mig", "3g.40gb")
WHOLE = device("gpu-2", "gpu")


@dataclass
class SliceCase:
    slices: list[Raw]
    want: dict[str, int] | None
    kinds: dict[str, str] = field(default_factory=dict)


SLICES = {
    "whole GPUs and MIG devices by profile": SliceCase(
        [rslice("n1", 1, [MIG1, MIG2, BIG, WHOLE])], {"1g.10gb": 2, "3g.40gb": 1, "gpu": 1}
    ),
    "the highest generation only (an old one still listed)": SliceCase(
        [rslice("n1", 1, [WHOLE]), rslice("n1", 2, [MIG1])], {"1g.10gb": 1}
    ),
    "an incomplete pool publishes nothing to verify against": SliceCase(
        [rslice("n1", 3, [MIG1], count=2)], None, {"gpu-0-mig-1g10gb-19-0": "1g.10gb"}
    ),
    "a complete pool of two slices": SliceCase(
        [rslice("n1", 3, [MIG1], count=2), rslice("n1", 3, [BIG], count=2)],
        {"1g.10gb": 1, "3g.40gb": 1},
    ),
    "qualified attribute names read alike": SliceCase(
        [rslice("n1", 1, [device("gpu-0", "gpu", qualified=True)])], {"gpu": 1}
    ),
    "another driver's slices and other device types are ignored": SliceCase(
        [
            rslice("n1", 1, [WHOLE, device("gpu-vfio-0", "vfio")]),
            rslice("n1", 9, [WHOLE], driver="compute-domain.nvidia.com"),
        ],
        {"gpu": 1},
    ),
}


@pytest.mark.parametrize("case", SLICES.values(), ids=list(SLICES))
def test_what_a_node_publishes(case: SliceCase) -> None:
    pool = slice_pools(case.slices)["n1"]
    assert pool.devices == case.want
    if case.kinds:
        assert pool.kinds == case.kinds


H100 = catalog.resolve("NVIDIA-H100-80GB-HBM3")


@pytest.mark.parametrize(
    ("layouts", "want"),
    [
        ((), {"gpu": 2}),
        ((MigLayout(profiles={"1g.10gb": 7}),), {"1g.10gb": 14}),
        ((MigLayout(devices="0", profiles={"3g.40gb": 2}),), {"3g.40gb": 2, "gpu": 1}),
        ((MigLayout(profiles={"1g.10gb+me": 1, "3g.40gb": 1}),), {"1g.10gb+me": 2, "3g.40gb": 2}),
    ],
)
def test_what_a_node_must_publish_once_its_layout_is_live(
    layouts: tuple[MigLayout, ...], want: dict[str, int]
) -> None:
    assert dra_rollout.expected_devices(H100, 2, layouts or (MigLayout(profiles={}),)) == want


def raw_pod(name: str, node: str, claims: list[str], *, template: bool = True) -> Raw:
    spec: Raw = {"nodeName": node, "containers": [{"name": "c"}]}
    status: Raw = {"phase": "Running"}
    if template:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": c} for c in claims]
    else:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": c} for c in claims]
    owners = [{"kind": "ReplicaSet", "name": "rs", "controller": True}]
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": name, "ownerReferences": owners},
        "spec": spec,
        "status": status,
    }


def claim(name: str, *results: tuple[str, str, str]) -> Raw:
    devices = {
        "results": [{"request": "r", "driver": d, "pool": p, "device": x} for d, p, x in results]
    }
    status = {"allocation": {"devices": devices}} if results else {}
    return {"metadata": {"name": name, "namespace": "ml"}, "status": status}


NVIDIA = "gpu.nvidia.com"
POOLS = slice_pools([rslice("n1", 1, [MIG1, MIG2, WHOLE])])


@dataclass
class PodCase:
    pod: Raw
    claims: list[Raw]
    gpu: bool
    requests: dict[str, int] = field(default_factory=dict)


PODS = {
    "a claim on a MIG device of the node's pool: a GPU pod": PodCase(
        raw_pod("a", "n1", ["a-gpu"]),
        [claim("a-gpu", (NVIDIA, "n1", "gpu-0-mig-1g10gb-19-0"))],
        True,
        {"mig-1g.10gb.tessera.io": 1},
    ),
    "a claim named in the spec (no template) counts too": PodCase(
        raw_pod("b", "n1", ["shared"], template=False),
        [claim("shared", (NVIDIA, "n1", "gpu-2"))],
        True,
        {"gpu.tessera.io": 1},
    ),
    "two devices in one claim": PodCase(
        raw_pod("c", "n1", ["c-gpu"]),
        [
            claim(
                "c-gpu",
                (NVIDIA, "n1", "gpu-0-mig-1g10gb-19-0"),
                (NVIDIA, "n1", "gpu-0-mig-1g10gb-19-1"),
            )
        ],
        True,
        {"mig-1g.10gb.tessera.io": 2},
    ),
    "another driver's device: not a GPU pod": PodCase(
        raw_pod("d", "n1", ["d-nic"]), [claim("d-nic", ("nic.example.com", "n1", "eth0"))], False
    ),
    "a device of another node's pool: not this node's GPU": PodCase(
        raw_pod("e", "n1", ["e-gpu"]), [claim("e-gpu", (NVIDIA, "n2", "gpu-0"))], False
    ),
    "a claim not allocated (yet): nothing held": PodCase(
        raw_pod("f", "n1", ["f-gpu"]), [claim("f-gpu")], False
    ),
    "a device no slice lists: held, of unknown kind": PodCase(
        raw_pod("g", "n1", ["g-gpu"]),
        [claim("g-gpu", (NVIDIA, "n1", "gpu-0-mig-2g20gb-14-0"))],
        True,
        {UNPUBLISHED: 1},
    ),
}


@pytest.mark.parametrize("case", PODS.values(), ids=list(PODS))
def test_which_pods_hold_the_nodes_gpus(case: PodCase) -> None:
    view = cluster.pod_view(case.pod)
    (marked,) = dra_rollout.with_claims([view], dra_rollout.allocations(case.claims), POOLS)
    assert marked.requests_accelerator is case.gpu
    assert dict(marked.requests) == case.requests
    assert bool(selection.selected([marked], DrainSpec())) is case.gpu  # what the drain evicts


def plugin(name: str, node: str, owner: str, **meta: Any) -> Raw:
    return {
        "metadata": {
            "name": name,
            "namespace": "dra",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "DaemonSet", "name": owner}],
            **meta,
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_the_plugin_pods_of_the_pools_daemonset_by_node() -> None:
    pods = [
        plugin("p-1", "n1", "kubelet-plugin"),
        plugin("p-0", "n1", "kubelet-plugin", deletionTimestamp="2026-01-01T00:00:00Z"),
        plugin("other", "n1", "someone-else"),
        plugin("p-2", "n2", "kubelet-plugin"),
    ]
    found = dra_rollout.plugin_pods(pods, "kubelet-plugin")
    assert found == {
        "n1": (
            PluginPod("dra", "p-0", "uid-p-0", terminating=True),
            PluginPod("dra", "p-1", "uid-p-1"),
        ),
        "n2": (PluginPod("dra", "p-2", "uid-p-2"),),
    }


def test_a_dra_pod_needs_a_free_device_of_its_kind_elsewhere() -> None:
    """The room check counts published devices by kind, less what claims hold."""
    pools = slice_pools(
        [rslice("n1", 1, [MIG1]), rslice("n2", 1, [MIG2, WHOLE]), rslice("n3", 1, [BIG])]
    )
    held = {("ml", "a-gpu"): ((NVIDIA, "n1", MIG1["name"]),)}
    leaving = dra_rollout.with_claims([gpu_pod("a", "n1", claims=("a-gpu",))], held, pools)
    views = [dra_rollout.room_view(NodeView(n), pools[n]) for n in ("n1", "n2", "n3")]
    assert Ledger(room(views, leaving), {"n1"}).fit("n1", leaving) == ""

    busy = {**held, ("ml", "b-gpu"): ((NVIDIA, "n2", MIG2["name"]),)}
    pods: list[PodView] = [
        *leaving,
        *dra_rollout.with_claims([gpu_pod("b", "n2", claims=("b-gpu",))], busy, pools),
    ]
    why = Ledger(room(views, pods), {"n1"}).fit("n1", leaving)
    assert why == "1 pod(s) would have nowhere to run: mig-1g.10gb.tessera.io short by 1 (ml/a)"


def test_a_device_of_unknown_kind_is_never_assumed_to_fit() -> None:
    pools = slice_pools([rslice("n2", 1, [MIG2, WHOLE, BIG])])
    held = {("ml", "a-gpu"): ((NVIDIA, "n1", "gone"),)}
    leaving = dra_rollout.with_claims([gpu_pod("a", "n1", claims=("a-gpu",))], held, pools)
    views = [NodeView("n1"), dra_rollout.room_view(NodeView("n2"), pools["n2"])]
    why = Ledger(room(views, leaving), {"n1"}).fit("n1", leaving)
    assert why.startswith(f"1 pod(s) would have nowhere to run: {UNPUBLISHED} short by 1")
