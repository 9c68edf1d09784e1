"""``tessera plan --prune``: which objects are deleted, and what deleting a TenantQuota does."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from preview_builders import (
    T0,
    converged,
    deleted,
    gpu_nodes,
    namespace,
    npg,
    pool_world,
    resource_quota,
    sharing_applied,
    sharing_policy,
    tenant_quota,
    whole_gpu_nodes,
    world,
)

from builders import LAYOUT_A, LAYOUT_B
from tessera.cli.main import main
from tessera.domain import preview
from tessera.domain.base import selectors

# -- which objects are pruned --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("named", "prune", "expected"),
    [
        (["inf", "nb", "t"], True, []),
        (["inf", "nb"], True, ["TenantQuota/t"]),
        (["t"], True, ["NodePoolGeometry/inf", "SharingPolicy/nb"]),
        ([], True, ["NodePoolGeometry/inf", "SharingPolicy/nb", "TenantQuota/t"]),
        (["t"], False, []),  # without --prune nothing is deleted
    ],
)
def test_prune_deletes_exactly_the_live_objects_no_manifest_names(
    named: list[str], prune: bool, expected: list[str]
) -> None:
    pool = npg("inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), pool)
    items = [*nodes, cm, pool]
    policy = sharing_policy("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 2})
    tenant = tenant_quota("t", "t")
    live = sharing_applied([*items, *whole_gpu_nodes("nb", 1)], policy)
    by_name = {"inf": pool, "nb": policy, "t": tenant}
    result = preview.preview(world(*live, tenant), [by_name[n] for n in named], T0, prune=prune)
    assert preview.as_json(result)["deleted"] == expected
    assert [f"{o.kind}/{o.name}" for o in result.objects if o.action == "delete"] == expected
    assert [o.name for o in result.objects if o.action != "delete"] == sorted(
        named, key=lambda n: list(by_name).index(n)
    )
    assert result.changed == bool(expected)  # the CLI's exit code 2 vs 0


def test_kept_objects_plan_the_same_hash_with_and_without_prune() -> None:
    items, _, _, _ = pool_world()
    change = npg("inf", LAYOUT_B)
    plain = preview.preview(world(*items, tenant_quota("t", "t")), [change], T0)
    pruned = preview.preview(world(*items, tenant_quota("t", "t")), [change], T0, prune=True)
    [kept] = [o for o in pruned.objects if o.name == "inf"]
    assert kept.plan_hash and kept.plan_hash == plain.objects[0].plan_hash
    assert kept.changes == plain.objects[0].changes
    assert pruned.configs == plain.configs


# -- TenantQuota: its ResourceQuotas go ------------------------------------------------------------


def test_tenant_deletion_removes_exactly_its_quotas_and_the_total() -> None:
    items = [
        namespace("a-1", team="a"),
        namespace("a-2", team="a"),
        namespace("shared", team="a"),
        namespace("b-1", team="b"),
        resource_quota("a-1", "a", used=1, nvidia_gpu=2),
        resource_quota("a-2", "a", nvidia_gpu=2),
        resource_quota("b-1", "b", nvidia_gpu=1),
        tenant_quota("a", "a", total=3),
    ]
    wide = tenant_quota("b", "a", "b", gpus=1)  # contests a's namespaces while a exists
    result = preview.preview(world(*items, wide), [wide], T0, prune=True)
    obj = deleted(result, "a")
    assert obj.deletion is not None
    assert [(q.namespace, q.name, dict(q.hard)) for q in obj.deletion.quotas] == [
        ("a-1", "tessera-a", {"nvidia.com/gpu": 2}),
        ("a-2", "tessera-a", {"nvidia.com/gpu": 2}),
    ]
    assert obj.deletion.quotas[0].used == {"nvidia.com/gpu": 1}
    assert obj.writes == (
        "delete ResourceQuota a-1/tessera-a (requests.nvidia.com/gpu=2, 1 used): "
        "tenantquota/a is deleted",
        "delete ResourceQuota a-2/tessera-a (requests.nvidia.com/gpu=2): tenantquota/a is deleted",
    )
    assert obj.deletion.unenforced == {"nvidia.com/gpu": 3}
    assert "the tenant-wide total (nvidia.com/gpu=3) is no longer enforced" in obj.deletion.effects
    # b no longer contests a's namespaces: its own plan now creates quotas there
    [kept] = [o for o in result.objects if o.name == "b"]
    assert any(w.startswith("create ResourceQuota a-1/tessera-b") for w in kept.writes)
    text = preview.render(result)
    assert "TenantQuota/a: delete (2 ResourceQuota(s))" in text
    assert "  namespace(s) a-1, a-2 keep no Tessera limit" in text


def test_json_carries_the_deletion_structure() -> None:
    items = [
        namespace("a-1", team="a"),
        resource_quota("a-1", "a", nvidia_gpu=2),
        tenant_quota("a", "a"),
    ]
    doc = preview.as_json(preview.preview(world(*items), [], T0, prune=True))
    [obj] = doc["objects"]
    assert obj["action"] == "delete" and doc["changed"] and doc["deleted"] == ["TenantQuota/a"]
    assert list(obj["deletion"]["quotas"]) == [
        {"namespace": "a-1", "name": "tessera-a", "hard": {"nvidia.com/gpu": 2}, "used": {}}
    ]
    assert yaml.safe_dump(doc)  # plain data all the way down


def test_an_object_already_being_deleted_says_so() -> None:
    tenant = tenant_quota("a", "a")
    tenant["metadata"]["deletionTimestamp"] = "2026-08-01T09:00:00Z"
    [obj] = preview.preview(world(namespace("a-1", team="a"), tenant), [], T0, prune=True).objects
    assert obj.deletion is not None
    assert obj.deletion.effects[0].startswith("already being deleted (since 2026-08-01T09:00:00Z)")


# -- -l: prune only what carries the application's labels ----------------------------------------


def _labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app.kubernetes.io/instance=gpu-platform", ["TenantQuota/ours"]),
        ("app.kubernetes.io/instance", ["TenantQuota/ours", "TenantQuota/theirs"]),
        ("app.kubernetes.io/instance notin (gpu-platform)", ["TenantQuota/mine", "TenantQuota/theirs"]),
        ("!app.kubernetes.io/instance", ["TenantQuota/mine"]),
    ],
)  # fmt: skip
def test_a_selector_narrows_what_prune_deletes(selector: str, expected: list[str]) -> None:
    key = "app.kubernetes.io/instance"
    ours = _labelled(tenant_quota("ours", "a"), **{key: "gpu-platform"})
    theirs = _labelled(tenant_quota("theirs", "b"), **{key: "research"})
    mine = tenant_quota("mine", "c")  # created by hand, outside any application
    result = preview.preview(
        world(ours, theirs, mine), [], T0, prune=True, prune_selector=selectors.parse(selector)
    )
    assert preview.as_json(result)["deleted"] == expected


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-l", "app=x"], "give --prune too"),
        (["--prune", "-l", "app=x=y"], "cannot read selector term 'app=x=y'"),
    ],
)
def test_the_cli_refuses_a_selector_it_cannot_use(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-f", "-", *args]) == 1
    assert says in capsys.readouterr().err
