"""DRA pools in a preview: DeviceClass creates/updates/deletes and the ResourceSlice devices
each pool's nodes will hold, predicted per GPU from the geometry."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import pytest
from preview_builders import T0, gpu_nodes, namespace, world

from builders import LAYOUT_A, LAYOUT_B, TenantQuotaWrapper
from builders.dra import DeviceClassWrapper, ResourceSliceWrapper, dra_policy, dra_pool
from tessera.domain import dra, preview
from tessera.domain.preview import Preview

MIG1 = "mig-1g.10gb.tessera.io"
DEV1 = f"{MIG1}.deviceclass.resource.k8s.io/devices"


def _owned(cls: dra.DesiredClass) -> dict[str, Any]:
    """A class as Tessera's controller left it."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", **cls.manifest()}


def _classes(p: Preview) -> list[tuple[str, str]]:
    return [(x.action, x.name) for x in p.device_classes]


def test_a_new_dra_pool_creates_its_classes_and_predicts_devices_per_gpu() -> None:
    pool = dra_pool("inf").layout(LAYOUT_B).obj()
    result = preview.preview(world(*gpu_nodes("inf", 2)), [pool], T0)
    assert _classes(result) == [("create", MIG1)]
    [obj] = result.objects
    # 2 nodes x 8 H100 x 7 1g.10gb, the same per-GPU resolution as device-plugin capacity
    assert obj.devices == {MIG1: (0, 112)} and obj.nodes_total == 2
    assert obj.capacity_before == obj.capacity_after == {}  # no extended resources on DRA nodes
    assert result.capacity[DEV1] == (0, 112)
    assert "nvidia.com/mig-1g.10gb" not in result.capacity
    text = preview.render(result)
    assert f"+ create {MIG1} (MIG 1g.10gb, exclusive; declared by NodePoolGeometry/inf)" in text
    assert f"{MIG1}: 0 -> 112 devices on 2 node(s)" in text
    assert result.changed


def test_whole_gpus_and_mixed_layouts_predict_each_profile() -> None:
    whole = dra_pool("w").obj()
    mixed = dra_pool("m").layout(LAYOUT_A).obj()
    cluster = world(*gpu_nodes("w", 1), *gpu_nodes("m", 1))
    result = preview.preview(cluster, [whole, mixed], T0)
    by_pool = {o.name: o.devices for o in result.objects}
    assert by_pool["w"] == {"gpu.tessera.io": (0, 8)}
    assert by_pool["m"] == {
        MIG1: (0, 16),
        "mig-2g.20gb.tessera.io": (0, 8),
        "mig-3g.40gb.tessera.io": (0, 8),
    }


def test_converged_classes_and_slices_are_no_change() -> None:
    pool = dra_pool("inf").layout(LAYOUT_B).obj()
    nodes = gpu_nodes("inf", 1)
    desired = dra.desired_classes({"inf": dra.PoolInput(_spec(pool), 8)}, {})
    slice_ = ResourceSliceWrapper("inf-0")
    for gpu in range(8):
        for start in range(7):
            slice_.mig(gpu, "1g.10gb", start)
    live = [_owned(x) for x in desired.classes.values()]
    result = preview.preview(world(*nodes, *live, slice_.obj()), [pool], T0)
    assert result.device_classes == ()
    assert result.objects[0].devices == {MIG1: (56, 56)}
    assert DEV1 not in result.capacity  # unchanged capacity is not listed


def test_a_layout_change_updates_devices_and_deletes_the_class_no_one_declares() -> None:
    old = dra_pool("inf").layout(LAYOUT_B).obj()
    new = dra_pool("inf").layout({"mig": {"layouts": [{"profiles": {"3g.40gb": 2}}]}}).obj()
    desired = dra.desired_classes({"inf": dra.PoolInput(_spec(old), 8)}, {})
    live = [_owned(x) for x in desired.classes.values()]
    slice_ = ResourceSliceWrapper("inf-0").mig(0, "1g.10gb").mig(0, "1g.10gb", 1)
    result = preview.preview(world(*gpu_nodes("inf", 1), old, *live, slice_.obj()), [new], T0)
    assert _classes(result) == [("delete", MIG1), ("create", "mig-3g.40gb.tessera.io")]
    assert result.objects[0].devices == {MIG1: (2, 0), "mig-3g.40gb.tessera.io": (0, 16)}
    assert result.capacity[DEV1] == (2, 0)
    assert f"- delete {MIG1}" in preview.render(result)


def test_a_sharing_policy_on_a_dra_pool_adds_its_config_class() -> None:
    pool = dra_pool("inf", time_slicing=True).obj()
    policy = dra_policy("ts", "inf", "TimeSlicing", timeSlicing={"interval": "Long"}).obj()
    result = preview.preview(world(*gpu_nodes("inf", 1)), [pool, policy], T0)
    assert _classes(result) == [
        ("create", "gpu.tessera.io"),
        ("create", "ts.gpu.sharing.tessera.io"),
    ]
    assert "TimeSlicing" in result.device_classes[1].says


def test_a_refused_sharing_config_is_a_problem_on_the_policy() -> None:
    pool = dra_pool("inf").obj()  # the driver's TimeSlicingSettings gate is off
    policy = dra_policy("ts", "inf", "TimeSlicing", timeSlicing={"interval": "Long"}).obj()
    result = preview.preview(world(*gpu_nodes("inf", 1)), [pool, policy], T0)
    assert _classes(result) == [("create", "gpu.tessera.io")]
    [sp] = [o for o in result.objects if o.kind == "SharingPolicy"]
    assert any("timeSlicing" in p or "TimeSlicing" in p for p in sp.problems), sp.problems


def test_a_class_name_someone_else_owns_is_a_conflict_exit_1() -> None:
    pool = dra_pool("inf").layout(LAYOUT_B).obj()
    theirs = DeviceClassWrapper(MIG1).obj()
    result = preview.preview(world(*gpu_nodes("inf", 1), theirs), [pool], T0)
    assert result.device_classes == ()
    [conflict] = result.conflicts
    assert MIG1 in conflict and "NodePoolGeometry/inf" in conflict and "Conflict" in conflict


@pytest.mark.parametrize("prune", [True, False])
def test_pruning_the_last_dra_pool_deletes_its_classes(prune: bool) -> None:
    old = dra_pool("inf").layout(LAYOUT_B).obj()
    desired = dra.desired_classes({"inf": dra.PoolInput(_spec(old), 8)}, {})
    live = [_owned(x) for x in desired.classes.values()]
    other = dra_pool("other").obj()
    result = preview.preview(world(*gpu_nodes("inf", 1), old, *live), [other], T0, prune=prune)
    deleted = [n for a, n in _classes(result) if a == "delete"]
    assert deleted == ([MIG1] if prune else [])


def test_a_cluster_without_dra_reads_nothing_and_says_nothing() -> None:
    result = preview.preview(world(*gpu_nodes("inf", 1)), [], T0)
    assert result.device_classes == () and not result.changed and result.capacity == {}


def _spec(manifest: dict[str, Any]) -> Any:
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec

    return NodePoolGeometrySpec.model_validate(manifest["spec"])


def test_a_snapshot_keeps_classes_and_slices_and_plans_the_same() -> None:
    from tessera.domain.preview import snapshot

    pool = dra_pool("inf").layout(LAYOUT_B).obj()
    theirs = DeviceClassWrapper(MIG1).obj()
    slice_ = ResourceSliceWrapper("inf-0").mig(0, "1g.10gb").obj()
    slice_["spec"]["devices"][0]["capacity"] = {"memory": {"value": "10Gi"}}
    live = world(*gpu_nodes("inf", 1), theirs, slice_)
    saved = world(*(snapshot.minimal(o) for o in live.items()))
    assert saved.device_classes == (theirs,)
    [kept] = saved.slices
    assert kept["spec"]["devices"] == [{"name": "gpu-0-mig-1g10gb-19-0", "attributes": ANY}]
    assert preview.preview(saved, [pool], T0) == preview.preview(live, [pool], T0)


def test_a_node_the_layout_does_not_fit_keeps_what_it_publishes() -> None:
    too_big = {"mig": {"layouts": [{"profiles": {"7g.80gb": 2}}]}}  # one 7g per H100
    pool = dra_pool("inf").layout(too_big).obj()
    slice_ = ResourceSliceWrapper("inf-0").gpu(0).gpu(1).obj()
    result = preview.preview(world(*gpu_nodes("inf", 1), slice_), [pool], T0)
    assert result.objects[0].devices == {"gpu.tessera.io": (2, 2)}
    assert result.objects[0].problems  # the geometry preview says why


def test_a_tenant_quota_in_dra_units_is_planned_and_compared_with_predicted_devices() -> None:
    pool = dra_pool("inf").layout(LAYOUT_B).obj()  # 1 node x 8 x 7 = 56 devices of MIG1
    quota = (
        TenantQuotaWrapper("team-a")
        .namespaces(team="a")
        .hard({"count/resourceclaims.resource.k8s.io": 10})
    )
    tenant = quota.total({DEV1: 100}).obj()
    cluster = world(*gpu_nodes("inf", 1), namespace("a-1", team="a"))
    result = preview.preview(cluster, [pool, tenant], T0)
    [tq] = [o for o in result.objects if o.kind == "TenantQuota"]
    assert any(
        f"{DEV1}=" in w and "count/resourceclaims.resource.k8s.io=10" in w for w in tq.writes
    )
    assert not any(f"requests.{DEV1}" in w for w in tq.writes)
    [impact] = result.tenants
    assert (
        impact.after and f"{DEV1}: tenants team-a (100) promise 100 > capacity 56" in impact.message
    )
    fits = preview.preview(cluster, [pool, quota.total({DEV1: 56}).obj()], T0)
    assert fits.tenants == ()


def test_a_pool_whose_spec_does_not_parse_keeps_its_classes_as_the_operator_does() -> None:
    """The operator holds the classes of a declarer whose spec does not parse
    (``dra.holding``): the plan must not show them deleted."""
    old = dra_pool("inf").layout(LAYOUT_B).obj()
    desired = dra.desired_classes({"inf": dra.PoolInput(_spec(old), 8)}, {})
    live = [_owned(x) for x in desired.classes.values()]
    broken = dra_pool("inf").layout({"mig": {"layouts": [{"profiles": {"1g.10gb": 99}}]}}).obj()
    other = dra_pool("other").obj()
    result = preview.preview(world(*gpu_nodes("inf", 1), broken, *live), [other], T0)
    assert ("delete", MIG1) not in _classes(result)
    assert _classes(result) == [("create", "gpu.tessera.io")]
