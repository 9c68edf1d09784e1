"""SharingPolicy and TenantQuota previews: in place vs drained, capacity, overcommitment."""

from __future__ import annotations

from typing import Any

from preview_builders import T0, converged, gpu_nodes, namespace, npg, pod, sharing_applied, world

from builders import LAYOUT_A, LAYOUT_B, NodeWrapper, SharingPolicyWrapper, TenantQuotaWrapper
from devcluster import fleet
from tessera.api import constants as c
from tessera.domain import preview
from tessera.domain.preview import Raw

_RES = {"nvidia_gpu": "nvidia.com/gpu", "nvidia_mig3g": "nvidia.com/mig-3g.40gb"}
WHOLE = {c.MIG_STRATEGY_LABEL: "none"}


def _sp(name: str, pool: str, backend: str, **section: Any) -> dict[str, Any]:
    return SharingPolicyWrapper(name).pool(pool).backend(backend).spec(**section).obj()


def _whole_gpu_nodes(pool: str, count: int) -> list[Raw]:
    specs = fleet.pool(pool, "A30-24GB", count, 4)
    return [NodeWrapper.simulated(s).labels(WHOLE).obj() for s in specs]


def test_first_time_slicing_config_is_in_place_and_diffs_the_device_plugin_map() -> None:
    policy = _sp("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 4})
    result = preview.preview(world(*_whole_gpu_nodes("nb", 2)), [policy], T0)
    [obj] = result.objects
    assert [(ch.node, ch.disruptive) for ch in obj.changes] == [("nb-0", False), ("nb-1", False)]
    assert obj.changes[0].before == "default"
    assert obj.changes[0].after.endswith("time-slicing (nvidia.com/gpu x4)")
    assert any(
        "device-plugin-configs" in d.where and "replicas: 4" in d.diff for d in result.configs
    )
    assert result.capacity["nvidia.com/gpu"] == (8, 32)


def test_first_mps_config_drains_because_the_compute_mode_changes() -> None:
    policy = _sp("nb", "nb", "MPS", mps={"replicas": 4})
    [obj] = preview.preview(world(*_whole_gpu_nodes("nb", 1)), [policy], T0).objects
    assert [ch.disruptive for ch in obj.changes] == [True]
    assert obj.plan_hash


def test_applied_policy_is_no_change_and_a_backend_switch_drains_its_pods() -> None:
    timeslice = _sp("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 2})
    fresh = [*_whole_gpu_nodes("nb", 2), namespace("ml"), pod("nb-job", "nb-0")]
    assert preview.preview(world(*fresh), [timeslice], T0).objects[0].changes  # to apply
    items = sharing_applied(fresh, timeslice)
    same = preview.preview(world(*items), [timeslice], T0)
    assert not same.changed, preview.render(same)
    mps = _sp("nb", "nb", "MPS", mps={"replicas": 4})
    result = preview.preview(world(*items), [mps], T0)
    [obj] = result.objects
    assert obj.action == "update"
    assert all(ch.disruptive for ch in obj.changes)
    assert obj.changes[0].evicts == ("ml/nb-job",)
    assert obj.pods_to_evict == 1 and obj.plan_hash
    assert "time-slicing -> mps" in obj.changes[0].note
    assert "[drain]" in preview.render(result)


def test_replicas_change_is_in_place() -> None:
    items = sharing_applied(
        _whole_gpu_nodes("nb", 1), _sp("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 2})
    )
    items[0]["status"]["allocatable"]["nvidia.com/gpu"] = "8"  # what the plugin advertises: 4 x 2
    result = preview.preview(
        world(*items), [_sp("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 4})], T0
    )
    [obj] = result.objects
    assert [ch.disruptive for ch in obj.changes] == [False]
    assert result.capacity["nvidia.com/gpu"] == (8, 16)


def _tenant(total: int | None = None, **hard: int) -> dict[str, Any]:
    tenant = TenantQuotaWrapper("t").namespaces(**{"tessera.io/tenant": "t"})
    tenant.hard({_RES[k]: v for k, v in hard.items()})
    return (tenant.total({"nvidia.com/mig-3g.40gb": total}) if total is not None else tenant).obj()


def test_geometry_change_makes_a_tenant_overcommitted() -> None:
    old = npg("inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), old)
    tenant = _tenant(total=16, nvidia_mig3g=8)
    items = [*nodes, cm, old, tenant, namespace("t-1", **{"tessera.io/tenant": "t"})]
    result = preview.preview(world(*items), [npg("inf", LAYOUT_B)], T0)
    [impact] = result.tenants
    assert (impact.tenant, impact.before, impact.after) == ("t", False, True)
    assert "promise 16 > capacity 0" in impact.message
    assert "tenantquota/t becomes Overcommitted" in preview.render(result)


def test_tenant_quota_change_lists_its_resourcequota_writes() -> None:
    items = [namespace("t-1", **{"tessera.io/tenant": "t"}), *gpu_nodes("inf", 1)]
    result = preview.preview(world(*items), [_tenant(nvidia_gpu=2)], T0)
    [obj] = result.objects
    assert obj.action == "create" and obj.nodes_total == 1
    assert obj.writes and obj.writes[0].startswith("create ResourceQuota t-1/tessera-t")
    assert "requests.nvidia.com/gpu=2" in obj.writes[0]
    assert result.changed


def test_a_backend_switch_with_nowhere_for_the_pods_to_go_is_a_warning_line() -> None:
    timeslice = _sp("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 2})  # 8 GPUs a node
    full = [pod(f"nb-{i}", "nb-1") for i in range(8)]
    fresh = [*_whole_gpu_nodes("nb", 2), namespace("ml"), pod("nb-job", "nb-0"), *full]
    items = sharing_applied(fresh, timeslice)
    for item in items:
        if item["kind"] == "Node":  # as KWOK reports them
            item["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    result = preview.preview(world(*items), [_sp("nb", "nb", "MPS", mps={"replicas": 4})], T0)
    [obj] = result.objects
    line = "InsufficientCapacity: 1 pod(s) would have nowhere to run: nvidia.com/gpu short by 1"
    assert f"{line} (ml/nb-job)" in obj.problems
    assert f"  ! {line}" in preview.render(result)
    assert result.changed and not result.conflicts  # exit 2: a warning on the pace
