"""The capacity ledger (issue 30): per pool and resource, what the geometry and sharing mode
provide, the lower of old and new on nodes a rollout changes, and the tenants' promises."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from builders import LAYOUT_A, LAYOUT_B, NodeWrapper
from devcluster import fleet
from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.cluster import capacity, pools
from tessera.domain.dra import naming
from tessera.domain.quota.ledger import CapacityLedger, NodeOffer, build, counted
from tessera.domain.quota.reporting import overcommitted

H100 = "H100-80GB"
MIG_1G = "nvidia.com/mig-1g.10gb"
MIG_2G = "nvidia.com/mig-2g.20gb"
MIG_3G = "nvidia.com/mig-3g.40gb"
MIG_7G = "nvidia.com/mig-7g.80gb"
GPU = "nvidia.com/gpu"
WHOLE_7G: Mapping[str, Any] = {"mig": {"layouts": [{"profiles": {"7g.80gb": 1}}]}}
TIMESLICE = {
    "version": "v1",
    "sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"resources": [{"name": GPU, "replicas": 3}]}}}
DEV_1G = "mig-1g.10gb.tessera.io.deviceclass.resource.k8s.io/devices"


@pytest.mark.parametrize(
    ("offer", "want"),
    [
        pytest.param(NodeOffer("n", "p", {MIG_1G: 7}), {MIG_1G: 7}, id="settled-counts-now"),
        pytest.param(
            NodeOffer("n", "p", {MIG_7G: 1}, {MIG_1G: 7}), {}, id="7g-to-7x1g-counts-neither"
        ),
        pytest.param(
            NodeOffer("n", "p", {MIG_1G: 2, MIG_3G: 1}, {MIG_1G: 7}),
            {MIG_1G: 2},
            id="kept-profile-counts-the-lower",
        ),
        pytest.param(
            NodeOffer("n", "p", {GPU: 32}, {GPU: 8}), {GPU: 8}, id="replicas-lowered-counts-new"
        ),
        pytest.param(NodeOffer("n", "p", {GPU: 0, MIG_1G: 1}), {MIG_1G: 1}, id="zeros-dropped"),
    ],
)
def test_a_node_counts_the_lower_of_old_and_new(offer: NodeOffer, want: dict[str, int]) -> None:
    assert counted(offer) == want


def test_the_ledger_sums_per_pool_and_names_the_changing_nodes() -> None:
    ledger = build(
        [
            NodeOffer("a-0", "a", {MIG_1G: 7}),
            NodeOffer("a-1", "a", {MIG_7G: 1}, {MIG_1G: 7}),
            NodeOffer("b-0", "b", {MIG_1G: 2, MIG_3G: 1}),
            NodeOffer("x", "", {GPU: 8}),
        ]
    )
    assert ledger.pools == {"": {GPU: 8}, "a": {MIG_1G: 7}, "b": {MIG_1G: 2, MIG_3G: 1}}
    assert ledger.changing == {"a": ("a-1",)}
    assert ledger.available(MIG_1G) == 9 and ledger.available(MIG_7G) == 0
    assert ledger.where(MIG_1G) == {"a": 7, "b": 2}
    assert ledger.totals() == {GPU: 8, MIG_1G: 9, MIG_3G: 1}


def test_overcommitted_names_pool_resource_promised_and_available() -> None:
    ledger = CapacityLedger({"a": {MIG_1G: 7}, "b": {MIG_1G: 2}})
    commitments = {"t1": {MIG_1G: 6}, "t2": {MIG_1G: 4}}
    kind, status, reason, message = overcommitted("t1", commitments, ledger.totals(), ledger)
    assert (kind, status, reason) == ("Overcommitted", "True", "TotalsExceedCapacity")
    assert (
        message == f"{MIG_1G}: tenants t1 (6), t2 (4) promise 10 > capacity 9 (pools: a (7), b (2))"
    )
    fits = overcommitted("t1", {"t1": {MIG_1G: 9}}, ledger.totals(), ledger)
    assert fits[1:3] == ("False", "WithinCapacity")


def test_a_resource_no_pool_offers_is_overcommitted_at_zero() -> None:
    ledger = CapacityLedger({"a": {MIG_1G: 7}})
    message = overcommitted("t", {"t": {MIG_7G: 1}}, ledger.totals(), ledger)[3]
    assert message == f"{MIG_7G}: tenants t (1) promise 1 > capacity 0"


# -- offers read from the cluster, by sharing mode ------------------------------------------------


def geometry(layout: Mapping[str, Any], pool: str = "p") -> NodePoolGeometrySpec:
    return NodePoolGeometrySpec.model_validate(
        {"nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}}, **layout}
    )


def node(
    name: str,
    advertised: Mapping[str, int],
    *,
    runs: NodePoolGeometrySpec | None = None,
    pool: str = "p",
    gpus: int = 1,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A simulated H100 node of ``pool`` advertising ``advertised``; ``runs``: the MIG manager
    reports success for that geometry's config (else for no Tessera config)."""
    built = NodeWrapper.simulated(fleet.NodeSpec(name, H100, gpus, pool=pool))
    built.advertise(advertised).ready()
    obj = built.obj()
    meta = obj["metadata"]
    if runs is not None:
        target = pools.target_for(pool, runs, meta["labels"], {})
        meta["labels"] |= {**target.desired.labels, c.MIG_CONFIG_STATE_LABEL: "success"}
    meta["labels"] |= dict(labels or {})
    meta["annotations"] = dict(annotations or {})
    return obj


def ledger_of(
    nodes: list[dict[str, Any]],
    geometries: Mapping[str, NodePoolGeometrySpec],
    sharing: Mapping[str, Any] | None = None,
    **dra: Any,
) -> CapacityLedger:
    data = {k: yaml.safe_dump(v) for k, v in (sharing or {}).items()}
    return capacity.ledger(nodes, geometries, data, **dra)


def test_mig_profiles_count_as_advertised_on_nodes_at_their_target() -> None:
    spec = geometry(LAYOUT_A)
    nodes = [node(f"p-{i}", {MIG_1G: 2, MIG_2G: 1, MIG_3G: 1}, runs=spec) for i in range(3)]
    assert ledger_of(nodes, {"p": spec}).pools == {"p": {MIG_1G: 6, MIG_2G: 3, MIG_3G: 3}}


def test_a_7g_to_7x1g_rollout_counts_the_lower_on_the_changing_nodes_only() -> None:
    old, new = geometry(WHOLE_7G), geometry(LAYOUT_B)
    done = node("p-0", {MIG_1G: 7}, runs=new)
    waiting = node("p-1", {MIG_7G: 1}, runs=old)
    draining = node("p-2", {MIG_7G: 1}, runs=old)
    ledger = ledger_of([done, waiting, draining], {"p": new})
    assert ledger.pools == {"p": {MIG_1G: 7}}  # neither the 7g going nor the 1g to come
    assert ledger.changing == {"p": ("p-1", "p-2")}


def test_a_node_being_reconfigured_offers_nothing_until_it_is_done() -> None:
    new = geometry(LAYOUT_B)
    pending = node("p-0", {}, runs=new)
    pending["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] = "pending"
    assert ledger_of([pending], {"p": new}).pools == {"p": {}}


@pytest.mark.parametrize(
    ("config", "advertised", "want"),
    [
        pytest.param(TIMESLICE, {GPU: 32}, {GPU: 32}, id="time-slicing-replicas"),
        pytest.param(MPS, {GPU: 24}, {GPU: 24}, id="mps-replicas"),
    ],
)
def test_replicas_count_as_the_device_plugin_advertises_them(
    config: Mapping[str, Any], advertised: dict[str, int], want: dict[str, int]
) -> None:
    spec = geometry({})  # whole GPUs
    shared = {c.DEVICE_PLUGIN_CONFIG_LABEL: "shared"}
    nodes = [node("p-0", advertised, runs=spec, gpus=8, labels=shared)]
    assert ledger_of(nodes, {"p": spec}, {"shared": config}).pools == {"p": want}


def test_a_changing_node_under_replicas_counts_its_target_times_replicas() -> None:
    """From whole GPUs time-sliced 4 ways to 7 x 1g.10gb, still time-sliced: the replicas
    of the MIG devices to come are not counted (the config replicates nvidia.com/gpu only)."""
    old, new = geometry({}), geometry(LAYOUT_B)
    shared = {c.DEVICE_PLUGIN_CONFIG_LABEL: "shared"}
    nodes = [node("p-0", {GPU: 4}, runs=old, labels=shared)]
    assert ledger_of(nodes, {"p": new}, {"shared": TIMESLICE}).pools == {"p": {}}
    back = [node("p-0", {GPU: 2}, runs=new, labels=shared)]  # to whole GPUs: 1 x 4 replicas
    assert ledger_of(back, {"p": old}, {"shared": TIMESLICE}).pools == {"p": {GPU: 2}}
    same = [node("p-0", {GPU: 4}, runs=old, labels=shared)]
    assert ledger_of(same, {"p": old}, {"shared": TIMESLICE}).pools == {"p": {GPU: 4}}


def test_hami_memory_and_cores_come_from_what_its_plugin_registered() -> None:
    gpus = [{"id": f"g{i}", "count": 10, "devmem": 81920, "devcore": 100} for i in range(2)]
    npus = [{"id": "n0", "count": 4, "devmem": 21527, "devcore": 100}]
    annotations = {
        c.HAMI_NVIDIA_REGISTER_ANNOTATION: json.dumps(gpus),
        c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend310P": json.dumps(npus),
    }
    nodes = [node("h-0", {GPU: 20}, pool="", gpus=2, annotations=annotations)]
    assert ledger_of(nodes, {}).pools == {
        "": {
            "huawei.com/Ascend310P-core": 100,
            "huawei.com/Ascend310P-memory": 21527,
            GPU: 20,
            capacity.GPUCORES: 200,
            capacity.GPUMEM: 163840,
        }
    }


def test_an_unreadable_hami_register_offers_no_memory() -> None:
    annotations = {c.HAMI_NVIDIA_REGISTER_ANNOTATION: "not json"}
    nodes = [node("h-0", {GPU: 10}, pool="", annotations=annotations)]
    assert ledger_of(nodes, {}).pools == {"": {GPU: 10}}


def test_vnpu_templates_count_as_advertised() -> None:
    vnpus = {"huawei.com/Ascend310P-vir02": 6, "huawei.com/Ascend310P-vir04": 2}
    nodes = [node("a-0", vnpus, pool="")]
    assert ledger_of(nodes, {}).pools == {"": vnpus}


def slice_of(node_name: str, profiles: list[str]) -> dict[str, Any]:
    devices = [
        {"name": f"mig-{i}", "attributes": {"type": {"string": "mig"}, "profile": {"string": p}}}
        for i, p in enumerate(profiles)
    ]
    return {
        "metadata": {"name": f"{node_name}-slice"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def test_dra_devices_count_per_class_the_tenants_name() -> None:
    classes = [
        device_class("mig-1g.10gb.tessera.io", naming.selector("1g.10gb")),
        device_class("custom.example.com", "device.attributes['x'].y == 1"),
    ]
    unread = "custom.example.com.deviceclass.resource.k8s.io/devices"
    missing = "gone.example.com.deviceclass.resource.k8s.io/devices"
    kinds = capacity.class_kinds([DEV_1G, unread, missing], classes)
    assert kinds == {DEV_1G: "1g.10gb", unread: None, missing: ""}
    nodes = [node("d-0", {}, pool="")]
    slices = [slice_of("d-0", ["1g.10gb"] * 3 + ["2g.20gb"])]
    assert ledger_of(nodes, {}, kinds=kinds, slices=slices).pools == {"": {DEV_1G: 3}}
