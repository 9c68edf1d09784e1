"""``tessera plan snapshot`` keeps only what planning reads: no env, no last-applied copies,
and a plan from the reduced objects equals the plan from the whole ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preview_builders import (
    T0,
    converged,
    gpu_nodes,
    holding,
    namespace,
    npg,
    pdb,
    pod,
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
from tessera.domain.preview import Raw, snapshot
from tessera.domain.rollout.views import pending_taint

SECRET = "s3cr3t-db-password"


def _worn(obj: Raw) -> dict[str, Any]:
    """``obj`` as the API server returns it after ``kubectl apply``: bookkeeping everywhere."""
    meta = dict(obj["metadata"])
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        snapshot.LAST_APPLIED: json.dumps({"note": SECRET}),
    }
    meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:secret": SECRET}}]
    meta["uid"] = f"uid-{meta['name']}"
    return {**obj, "metadata": meta}


def _fat_pod(name: str, node: str, **labels: str) -> dict[str, Any]:
    """A serving pod carrying what must never leave the cluster in a snapshot."""
    raw = _worn(pod(name, node, **labels))
    container = {
        **raw["spec"]["containers"][0],
        "image": "registry.example/serving:1",
        "command": ["serve", f"--token={SECRET}"],
        "env": [{"name": "DB_PASSWORD", "value": SECRET}],
        "volumeMounts": [{"name": "creds", "mountPath": "/creds"}],
    }
    init = {"name": "fetch", "env": [{"name": "T", "value": SECRET}], "resources": {}}
    volumes = [
        {"name": "creds", "secret": {"secretName": "db"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    spec = {**raw["spec"], "containers": [container], "initContainers": [init], "volumes": volumes}
    status = {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [{"image": SECRET}]}
    return {**raw, "spec": spec, "status": status}


def _cluster_items() -> list[Raw]:
    old = npg("inf", LAYOUT_A, approval="Manual")
    nodes, cm = converged(gpu_nodes("inf", 2), old)
    policy = sharing_policy("nb", "nb", "TimeSlicing", timeSlicing={"replicas": 2})
    fresh = gpu_nodes("inf", 3)[2]  # joined the pool later: held by its pending taint
    fresh = holding(
        fresh, "NodePoolGeometry/inf", None, taint=pending_taint("NodePoolGeometry/inf").value
    )
    draining = holding(nodes[1], "NodePoolGeometry/inf", "Draining", "old")  # mid-rollout
    shared = sharing_applied([nodes[0], draining, fresh, cm, *whole_gpu_nodes("nb", 2)], policy)
    return [
        *(_worn(o) for o in shared),
        _worn(old),
        _worn(tenant_quota("t", "ml", gpus=1)),
        _worn(namespace("ml", team="ml")),
        _worn(resource_quota("ml", "t", used=1, nvidia_gpu=1)),
        _fat_pod("server-a", "inf-0", app="serving"),
        _fat_pod("server-b", "inf-1", app="serving"),
        _fat_pod("notebook", "nb-0", app="nb"),
        _fat_pod("notebook-2", "nb-1", app="nb"),
        _worn(pdb("serving-pdb", 0, app="serving")),
        _worn(pdb("notebook-pdb", 1, app="nb")),
    ]


def test_no_env_value_or_bookkeeping_copy_reaches_the_snapshot() -> None:
    items = _cluster_items()
    assert SECRET in yaml.safe_dump_all(items)  # the cluster does hold it
    text = yaml.safe_dump_all([snapshot.minimal(o) for o in items])
    assert SECRET not in text
    for absent in ("managedFields", snapshot.LAST_APPLIED, "env", "image", "command", "podIP"):
        assert absent not in text, absent
    [server] = [snapshot.minimal(o) for o in items if o["metadata"]["name"] == "server-a"]
    assert server == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "server-a",
            "namespace": "ml",
            "labels": {"app": "serving"},
            "uid": "uid-server-a",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": "inf-0",
            "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "initContainers": [{"name": "fetch", "resources": {}}],
            "volumes": [{"name": "creds"}, {"name": "scratch", "emptyDir": {}}],
        },
        "status": {"phase": "Running"},
    }


def _plan(items: list[Raw], wanted: list[Raw], *, prune: bool = False) -> dict[str, Any]:
    return preview.as_json(preview.preview(world(*items), wanted, T0, prune=prune))


def test_a_plan_from_the_snapshot_equals_the_plan_from_the_cluster() -> None:
    items = _cluster_items()
    reduced = [snapshot.minimal(o) for o in items]
    changes = [
        npg("inf", LAYOUT_B, approval="Manual"),  # evicts both serving pods, held by the PDB
        sharing_policy("nb", "nb", "MPS", mps={"replicas": 4}),  # drains the notebook
        tenant_quota("t", "ml", gpus=3),
    ]
    for wanted, prune in ((changes, False), (changes[:1], True), ([], True)):
        whole, small = _plan(items, wanted, prune=prune), _plan(reduced, wanted, prune=prune)
        assert small == whole
        assert whole["changed"]
    whole = _plan(items, changes)
    geo = next(o for o in whole["objects"] if o["name"] == "inf")
    assert list(geo["blocking_pdbs"]) == ["ml/serving-pdb"] and geo["pods_to_evict"] == 2
    sp = next(o for o in whole["objects"] if o["name"] == "nb")
    assert [list(c["evicts"]) for c in sp["changes"]] == [["ml/notebook"], ["ml/notebook-2"]]
    assert list(sp["blocking_pdbs"]) == []  # one disruption allowed at a time
    pruned = _plan(items, [], prune=True)
    released = next(o for o in pruned["objects"] if o["name"] == "inf")["deletion"]["released"]
    assert [r["node"] for r in released] == ["inf-1", "inf-2"]


def test_help_says_what_a_snapshot_keeps(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "snapshot", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "never container env" in text and "last-applied-configuration" in text


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("", 2, ""),  # an empty cluster: the tenant is created
        ("kind: List\nitems:\n- {kind: Namespace, apiVersion: v1, metadata: {name: ml}}\n", 2, ""),
        ("kind: Node\nmetadata: {name: a}\n---\njust text\n", 1, "cluster.yaml:4: not a Kubernetes object"),
        ("kind: List\nitems:\n- {kind: Node}\n", 1, "cluster.yaml:1 items[0]: not a Kubernetes object"),
        ("kind: Node\nmetadata: {name: a\n", 1, "cluster.yaml:3:1: "),
    ],
)  # fmt: skip
def test_a_snapshot_plan_cannot_read_is_an_error_naming_the_place(
    tmp_path: Path, text: str, code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cluster.yaml").write_text(text)
    manifest = tmp_path / "tq.yaml"
    manifest.write_text(yaml.safe_dump(tenant_quota("t", "ml")))
    argv = ["plan", "-f", str(manifest), "--snapshot", str(tmp_path / "cluster.yaml")]
    assert main(argv) == code
    err = capsys.readouterr().err
    assert f"{tmp_path}/{says}" in err if code == 1 else err == ""


def test_every_view_the_domain_builds_is_the_same_from_the_snapshot() -> None:
    """Field by field: what ``domain.cluster.objects`` reads survives, for objects using every field
    it reads (a mirror pod being deleted, init containers, an emptyDir; a cordoned, tainted,
    Ready node holding rollout state; a PDB whose status lags its spec)."""
    from tessera.domain.cluster import objects as cluster

    fat = _fat_pod("mirror", "inf-0", app="serving")
    fat["metadata"] |= {
        "deletionTimestamp": "2026-08-01T09:59:00Z",
        "annotations": {**fat["metadata"]["annotations"], "kubernetes.io/config.mirror": "h"},
    }
    fat["status"]["phase"] = "Succeeded"
    node = holding(gpu_nodes("inf", 1)[0], "NodePoolGeometry/inf", "Draining", "cfg")
    node = {**node, "spec": {**node["spec"], "taints": [{"key": "x", "effect": "NoExecute"}]}}
    node["status"] = {**node["status"], "conditions": [{"type": "Ready", "status": "True"}]}
    lagging = _worn(pdb("p", 3, app="serving"))
    lagging["metadata"]["generation"] = 2
    small = {id(o): snapshot.minimal(o) for o in (fat, node, lagging)}
    assert cluster.pod_view(small[id(fat)]) == cluster.pod_view(fat)
    assert cluster.pod_view(fat).is_mirror and cluster.pod_view(fat).uses_empty_dir
    assert cluster.node_view(small[id(node)]) == cluster.node_view(node)
    assert cluster.pool_view(small[id(node)], {}) == cluster.pool_view(node, {})
    assert cluster.sharing_facts(small[id(node)]) == cluster.sharing_facts(node)
    assert cluster.pdb_view(small[id(lagging)]) == cluster.pdb_view(lagging)
    assert cluster.pdb_view(lagging).disruptions_allowed == 0  # stale status counts as none


@pytest.mark.parametrize(
    "before", [["-f", "pools.yaml"], ["--prune"], ["-o", "json"], ["--snapshot", "cluster.yaml"]]
)
def test_plan_flags_before_snapshot_are_refused_not_dropped(
    before: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``tessera plan -f pools.yaml snapshot`` wrote the cluster and exited 0: the manifests the
    user named were silently not planned."""
    assert main(["plan", *before, "snapshot", "--kubeconfig", "/nonexistent"]) == 1
    assert f"{before[0]} belong to tessera plan" in capsys.readouterr().err
