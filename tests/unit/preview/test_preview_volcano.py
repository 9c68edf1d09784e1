"""The Volcano part of ``tessera plan``: the operator's plan for Volcano's config, as diffs,
restarts, notes and errors (exit 1 where the operator would not write)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import yaml

from builders import NodeWrapper, SharingPolicyWrapper
from devcluster import fleet
from tessera.domain.preview import Cluster, preview
from tessera.domain.preview.schedulers import named

NOW = datetime(2026, 12, 2, tzinfo=UTC)
CONF = "tiers:\n- plugins:\n  - name: predicates\n  - name: proportion\n"
HAMI_310P3 = {
    "chipName": "310P3",
    "commonWord": "Ascend310P",
    "resourceName": "huawei.com/Ascend310P",
    "memoryAllocatable": 21527,
    "templates": [{"name": "vir01", "memory": 3072, "aiCore": 1, "aiCPU": 1}],
}


def _map(ns: str, name: str, key: str, data: Any) -> dict[str, Any]:
    text = data if isinstance(data, str) else yaml.safe_dump(data)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {key: text},
    }


def _deployment(ns: str, name: str, image: str) -> dict[str, Any]:
    spec = {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def _policy(name: str, **volcano: Any) -> dict[str, Any]:
    scheduler = {"name": "Volcano", "volcano": {"weight": 10, **volcano}}
    built = SharingPolicyWrapper(name).pool("npu").backend("Exclusive")
    return built.spec(ascend={"softSlicing": False}, scheduler=scheduler).obj()


def _cluster(conf: str | None = CONF, tag: str = "v1.16.0", *more: dict[str, Any]) -> Cluster:
    node = NodeWrapper.simulated(fleet.NodeSpec("npu-0", "Ascend310P3", 2, pool="npu")).obj()
    maps = [
        _map(
            "kube-system",
            "hami-scheduler-device",
            "device-config.yaml",
            {"vnpus": {"hamiVnpuCore": False, "configs": [HAMI_310P3]}},
        )
    ]
    if conf is not None:
        maps.append(
            _map("volcano-system", "volcano-scheduler-configmap", "volcano-scheduler.conf", conf)
        )
    items = [
        node,
        *maps,
        _deployment("volcano-system", "volcano-scheduler", f"volcanosh/vc-scheduler:{tag}"),
        _deployment("kube-system", "hami-scheduler", "projecthami/hami:v2.10.0"),
        *more,
    ]
    return Cluster.of(items)


def test_named_maps_and_deployments() -> None:
    maps, deployments = named([_policy("a")])
    assert maps == {
        ("kube-system", "hami-scheduler-device"),
        ("volcano-system", "volcano-scheduler-configmap"),
        ("volcano-system", "tessera-volcano-device-config"),
    }
    assert deployments == {
        ("kube-system", "hami-scheduler"),
        ("volcano-system", "volcano-scheduler"),
    }


def test_diffs_and_automatic_restart() -> None:
    p = preview(_cluster(), [_policy("a", restart="Automatic")], NOW)
    wheres = [d.where for d in p.configs]
    assert "volcano-system/volcano-scheduler-configmap/volcano-scheduler.conf" in wheres
    assert "volcano-system/tessera-volcano-device-config/device-config.yaml" in wheres
    policy = next(o for o in p.objects if o.name == "a")
    assert any(
        "restarts Volcano's Deployment volcano-system/volcano-scheduler" in w for w in policy.writes
    )
    assert not p.conflicts and p.changed


def test_missing_conf_is_an_error() -> None:
    p = preview(_cluster(conf=None), [_policy("a")], NOW)
    assert any(
        "WaitingForScheduler" in x and "volcano-scheduler-configmap" in x for x in p.conflicts
    )


def test_two_policies_disagreeing_is_an_error_on_both() -> None:
    p = preview(_cluster(), [_policy("a"), _policy("b", policy="spread")], NOW)
    assert [x.split(":")[0] for x in p.conflicts] == ["SharingPolicy/a", "SharingPolicy/b"]


def test_volcano_1_15_reading_the_wrapper_today_is_noted() -> None:
    pointed = CONF.replace(
        "  - name: proportion\n",
        "  - name: deviceshare\n    arguments:\n"
        "      deviceshare.KnownGeometriesCMName: hami-scheduler-device\n"
        "  - name: proportion\n",
    )
    p = preview(_cluster(pointed, "v1.15.0"), [_policy("a")], NOW)
    policy = next(o for o in p.objects if o.name == "a")
    assert any("now: Volcano v1.15.0 reads vnpus only as a list" in n for n in policy.problems)


def _edited_cluster(*more: dict[str, Any]) -> Cluster:
    """Tessera edited Volcano's conf for the live policy ``a`` (its marks, its map)."""
    from tessera.domain.schedulers.volcano import conf as v
    from tessera.domain.schedulers.volcano import plan as vp

    wanted = {v.ENABLE_VNPU: True, v.POLICY: "binpack", v.CM_NAME: "tessera-volcano-device-config"}
    conf = _map(
        "volcano-system",
        "volcano-scheduler-configmap",
        "volcano-scheduler.conf",
        v.edit(CONF, wanted),
    )
    previous = json.dumps(dict.fromkeys(wanted))
    conf["metadata"]["annotations"] = {vp.PREVIOUS_ANNOTATION: previous}
    conf["metadata"]["labels"] = {vp.EDITED_LABEL: "true"}
    geometries = _map(
        "volcano-system", "tessera-volcano-device-config", "device-config.yaml", "vnpus: []\n"
    )
    live = _policy("a")
    return _cluster(None, "v1.16.0", conf, geometries, live, *more)


def test_a_policy_switched_to_hami_previews_volcanos_release() -> None:
    switched = _policy("a")
    switched["spec"]["scheduler"] = {"name": "HAMi"}
    p = preview(_edited_cluster(), [switched], NOW)
    diffs = {d.where: d for d in p.configs}
    conf = diffs["volcano-system/volcano-scheduler-configmap/volcano-scheduler.conf"]
    assert "-      deviceshare.AscendHAMiVNPUEnable: true" in conf.diff
    assert "volcano-system/tessera-volcano-device-config/device-config.yaml" in diffs
    policy = next(o for o in p.objects if o.name == "a")
    assert any(
        "releases Volcano's volcano-system/volcano-scheduler-configmap" in w for w in policy.writes
    )
    assert p.changed


def test_a_pruned_policy_previews_volcanos_release() -> None:
    p = preview(_edited_cluster(), [], NOW, prune=True)
    policy = next(o for o in p.objects if o.name == "a")
    assert policy.action == "delete"
    assert any("releases Volcano's" in w for w in policy.writes)
    assert any(d.where.endswith("volcano-scheduler.conf") for d in p.configs)
