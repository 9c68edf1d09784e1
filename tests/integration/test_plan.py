"""``tessera plan`` against the live cluster and a snapshot of it: every kind of change,
the exit codes, and the plan hash the operator writes (approval from a reviewed plan)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import LAYOUT_A, LAYOUT_B, QUICK_ROLLOUT, GeometryWrapper, custom
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually, gpu_agents, namespace, nodes_of, serve, spare_node

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"


@pytest.fixture(scope="module")
def agents(kube: Kube) -> Iterator[None]:
    with gpu_agents(kube):
        yield


def _npg(name: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return GeometryWrapper(name).layout(layout).rollout(**QUICK_ROLLOUT).rollout(**rollout).obj()


def _write(tmp_path: Path, *docs: dict[str, Any]) -> Path:
    path = tmp_path / f"manifests-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def plan(
    kubeconfig: Path | None, *files: Path, snapshot: Path | None = None, prune: bool = False
) -> tuple[int, dict[str, Any], str]:
    """Run ``tessera plan -o json`` (and the text form); returns (exit code, JSON, text)."""
    source = [f"--snapshot={snapshot}"] if snapshot else [f"--kubeconfig={kubeconfig}"]
    args = [arg for f in files for arg in ("-f", str(f))] + (["--prune"] if prune else [])
    run = [sys.executable, "-m", "tessera.cli.main", "plan", *args, *source]
    out = subprocess.run([*run, "-o", "json"], capture_output=True, text=True, timeout=60)
    text = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert text.returncode == out.returncode, text.stderr
    doc = json.loads(out.stdout) if out.returncode != 1 else {}
    return out.returncode, doc, text.stdout + out.stderr


def _object(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(o for o in doc["objects"] if o["name"] == name)


def _ready(kube: Kube, path: str) -> bool:
    obj = kube.get_or_none(path)
    cond = condition(obj, "Ready")
    return bool(
        obj
        and cond
        and cond["status"] == "True"
        and obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    )


def plan_pool_live_and_offline(
    kubeconfig: Path, manifest: Path, pool: str, tmp_path: Path
) -> tuple[dict[str, Any], str]:
    """``tessera plan`` of ``manifest`` live (changes: exit 2), and from a snapshot of the
    cluster, which must plan ``pool``'s changes alike; the live plan's ``pool`` and its text."""
    code, live, text = plan(kubeconfig, manifest)
    assert code == 2, text
    [obj] = [o for o in live["objects"] if o["name"] == pool]
    snap = tmp_path / "cluster.yaml"
    save_snapshot(kubeconfig, snap)
    code, offline, _ = plan(None, manifest, snapshot=snap)
    assert code == 2
    assert next(o for o in offline["objects"] if o["name"] == pool)["changes"] == obj["changes"]
    return obj, text


def save_snapshot(kubeconfig: Path, path: Path) -> str:
    """``tessera plan snapshot`` of the live cluster, written to ``path``; its text."""
    saved = subprocess.run(
        [
            sys.executable,
            "-m",
            "tessera.cli.main",
            "plan",
            "snapshot",
            f"--kubeconfig={kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    path.write_text(saved)
    return saved


def test_hash_matches_the_operator_and_approves_the_rollout(
    kube: Kube, operator: OperatorProcess, agents: None, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    fleet.create_nodes(kube, fleet.pool("plan-man", "H100-80GB", 2))
    manifest = _write(tmp_path, _npg("plan-man", LAYOUT_A, approval="Manual"))
    code, before, text = plan(kubeconfig, manifest)
    assert code == 2, text
    previewed = _object(before, "plan-man")
    assert previewed["action"] == "create" and len(previewed["changes"]) == 2
    kube.create(NPG, _npg("plan-man", LAYOUT_A, approval="Manual"))

    def written() -> str | None:
        obj = kube.get_or_none(f"{NPG}/plan-man") or {}
        cond = condition(obj, "Reconciling")
        waiting = cond is not None and cond["reason"] == "WaitingForApproval"
        return ((obj.get("status") or {}).get("plan") or {}).get("hash") if waiting else None

    status_hash = eventually(written, 30, "status.plan.hash while WaitingForApproval")
    code, after, text = plan(kubeconfig, manifest)
    assert code == 2, text
    reviewed = _object(after, "plan-man")
    assert reviewed["action"] == "unchanged"
    assert reviewed["plan_hash"] == status_hash == previewed["plan_hash"]
    assert f"tessera.io/approve-plan={status_hash}" in text
    for node in ("plan-man-0", "plan-man-1"):  # nothing moved before the approval
        assert not kube.get(path_of("v1", "nodes", node))["spec"].get("unschedulable")
    patch = {"metadata": {"annotations": {c.APPROVE_PLAN_ANNOTATION: reviewed["plan_hash"]}}}
    kube.patch(f"{NPG}/plan-man", patch)
    eventually(lambda: _ready(kube, f"{NPG}/plan-man"), 90, "plan-man Ready after approval")
    code, done, text = plan(kubeconfig, manifest)
    assert code == 0, text
    assert _object(done, "plan-man")["approved"] is True
    assert "No changes." in text


def test_geometry_change_live_and_from_a_snapshot(
    kube: Kube, operator: OperatorProcess, agents: None, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    fleet.create_nodes(kube, fleet.pool("plan-geo", "H100-80GB", 2))
    kube.create(NPG, _npg("plan-geo", LAYOUT_A))
    eventually(lambda: _ready(kube, f"{NPG}/plan-geo"), 90, "plan-geo Ready")
    unchanged = _write(tmp_path, _npg("plan-geo", LAYOUT_A))
    code, _, text = plan(kubeconfig, unchanged)
    assert code == 0, text
    change = _write(tmp_path, _npg("plan-geo", LAYOUT_B))
    code, live, text = plan(kubeconfig, change)
    assert code == 2, text
    geo = _object(live, "plan-geo")
    assert [(n["node"], n["after"]) for n in geo["changes"]] == [
        ("plan-geo-0", "all: 7x1g.10gb"),
        ("plan-geo-1", "all: 7x1g.10gb"),
    ]
    assert geo["changes"][0]["before"] == "all: 3g.40gb + 2g.20gb + 2x1g.10gb"
    assert geo["capacity_after"]["nvidia.com/mig-1g.10gb"] == 2 * 8 * 7
    assert any("mig-parted" in d["where"] and "1g.10gb: 7" in d["diff"] for d in live["configs"])
    assert "-> " in text and "Config gpu-operator/tessera-mig-parted-config" in text
    snap = tmp_path / "cluster.yaml"
    saved = save_snapshot(kubeconfig, snap)
    kinds = {d["kind"] for d in yaml.safe_load_all(saved) if d}
    assert {"Node", "Namespace", "ConfigMap", "NodePoolGeometry"} <= kinds
    code, offline, _ = plan(None, change, snapshot=snap)
    assert code == 2
    assert _object(offline, "plan-geo")["plan_hash"] == geo["plan_hash"]
    assert _object(offline, "plan-geo")["changes"] == geo["changes"]
    code, _, _ = plan(None, unchanged, snapshot=snap)
    assert code == 0
    # nothing was written: the pool still runs layout A
    obj = kube.get(f"{NPG}/plan-geo")
    assert "3g.40gb" in json.dumps(obj["spec"])
    assert obj["status"]["capacity"]["nvidia.com/mig-3g.40gb"] == "16"


def test_sharing_change_in_place_and_drained(
    kube: Kube, operator: OperatorProcess, agents: None, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    names = fleet.create_nodes(kube, fleet.pool("plan-sp", "A30-24GB", 2, devices=4))
    for name in names:
        kube.patch(
            path_of("v1", "nodes", name),
            {"metadata": {"labels": {c.MIG_STRATEGY_LABEL: "none"}}},
        )

    def policy(backend: str, **section: Any) -> dict[str, Any]:
        spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: "plan-sp"}}, "backend": backend}
        return custom("SharingPolicy", "plan-sp", {**spec, **section})

    current = policy("TimeSlicing", timeSlicing={"replicas": 2})
    kube.create(SP, current)
    eventually(lambda: _ready(kube, f"{SP}/plan-sp"), 60, "plan-sp Ready")
    eventually(
        lambda: all(
            kube.get(path_of("v1", "nodes", n))["status"]["allocatable"]["nvidia.com/gpu"] == "8"
            for n in names
        ),
        30,
        "time-sliced GPUs advertised",
    )
    code, _, text = plan(kubeconfig, _write(tmp_path, current))
    assert code == 0, text
    more = _write(tmp_path, policy("TimeSlicing", timeSlicing={"replicas": 4}))
    code, doc, text = plan(kubeconfig, more)
    assert code == 2, text
    sp = _object(doc, "plan-sp")
    assert [n["disruptive"] for n in sp["changes"]] == [False, False]
    assert "replicas 2 -> 4" in sp["changes"][0]["note"]
    assert (
        doc["capacity"]["nvidia.com/gpu"]["after"] - doc["capacity"]["nvidia.com/gpu"]["before"]
        == 16
    )
    assert any("device-plugin-configs" in d["where"] for d in doc["configs"])
    code, doc, text = plan(kubeconfig, _write(tmp_path, policy("MPS", mps={"replicas": 4})))
    assert code == 2, text
    sp = _object(doc, "plan-sp")
    assert all(n["disruptive"] for n in sp["changes"]) and sp["plan_hash"]
    assert "[drain]" in text


def test_quota_change_and_overcommitment(
    kube: Kube, operator: OperatorProcess, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    namespace(kube, "plan-q-1", {"tessera.io/tenant": "plan-q"})
    resource = "example.com/plan-widget"  # nothing advertises it: any promise overcommits

    def tenant(hard: int) -> dict[str, Any]:
        spec = {
            "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "plan-q"}},
            "hard": {"nvidia.com/gpu": hard},
        }
        return custom("TenantQuota", "plan-q", spec)

    kube.create(TQ, tenant(1))
    eventually(lambda: _ready(kube, f"{TQ}/plan-q"), 30, "plan-q Ready")
    code, _, text = plan(kubeconfig, _write(tmp_path, tenant(1)))
    assert code == 0, text
    code, doc, text = plan(kubeconfig, _write(tmp_path, tenant(3)))
    assert code == 2, text
    [write] = _object(doc, "plan-q")["writes"]
    assert write.startswith(
        "update ResourceQuota plan-q-1/tessera-plan-q (requests.nvidia.com/gpu=3)"
    )
    assert "nvidia.com/gpu 1→3" in write
    greedy = tenant(1)
    greedy["spec"]["hard"][resource] = 5
    code, doc, text = plan(kubeconfig, _write(tmp_path, greedy))
    assert code == 2, text
    impact = next(t for t in doc["tenants"] if t["tenant"] == "plan-q")
    assert (
        impact["after"]
        and f"{resource}: tenants plan-q (5) promise 5 > capacity 0" in (impact["message"])
    )
    assert "tenantquota/plan-q" in text and "Overcommitted" in text
    # dropping a resource from `hard` is a change the plan shows, then the operator makes
    wider = tenant(1)
    wider["spec"]["hard"]["nvidia.com/mig-1g.10gb"] = 2
    kube.patch(f"{TQ}/plan-q", {"spec": wider["spec"]})
    quota = path_of("v1", "resourcequotas", "tessera-plan-q", "plan-q-1")
    eventually(
        lambda: "requests.nvidia.com/mig-1g.10gb" in kube.get(quota)["spec"]["hard"],
        30,
        "mig-1g.10gb in the ResourceQuota",
    )
    code, doc, text = plan(kubeconfig, _write(tmp_path, tenant(1)))
    assert code == 2, text
    assert "nvidia.com/mig-1g.10gb 2→unset" in _object(doc, "plan-q")["writes"][0]
    kube.patch(f"{TQ}/plan-q", {"spec": {"hard": {"nvidia.com/mig-1g.10gb": None}}})
    eventually(
        lambda: "requests.nvidia.com/mig-1g.10gb" not in kube.get(quota)["spec"]["hard"],
        30,
        "mig-1g.10gb dropped from the ResourceQuota",
    )
    eventually(lambda: plan(kubeconfig, _write(tmp_path, tenant(1)))[0] == 0, 30, "no change")


def _live_manifests(kube: Kube) -> list[dict[str, Any]]:
    """Every Tessera object in the cluster, as the manifest that would keep it as it is."""
    return [
        custom(kind, item["metadata"]["name"], item.get("spec") or {})
        for kind, path in (("NodePoolGeometry", NPG), ("SharingPolicy", SP), ("TenantQuota", TQ))
        for item in kube.list(path)
        if not item["metadata"].get("deletionTimestamp")
    ]


def test_prune_previews_the_deletion_of_what_the_manifests_omit(
    kube: Kube, operator: OperatorProcess, agents: None, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = control_plane.kubeconfig
    serves = {"plan.tessera.io/serves": "plan-prune"}  # the pool's nodes, then a spare's
    specs = [
        fleet.NodeSpec(f"plan-prune-{i}", "H100-80GB", pool="plan-prune", labels=serves)
        for i in range(2)
    ]
    nodes = fleet.create_nodes(kube, specs)
    namespace(kube, "plan-prune-serve")
    # a serving replica filling each node, under a PDB that lets none go: each drain holds
    pods = serve(
        kube, "plan-prune-serve", "llm", node_selector=serves, count=8, replicas=2, budget=2
    )
    assert sorted(nodes_of(pods)) == nodes
    # room for both replicas elsewhere, so the PDB alone holds the drains (not the capacity check)
    spare_node(kube, "plan-prune-spare", serves, {"nvidia.com/gpu": 16})
    # a drain timeout longer than the test: both nodes stay Draining while it plans
    kube.create(NPG, _npg("plan-prune", LAYOUT_A, maxUnavailable=2, drain={"timeout": "30m"}))

    def held(node: str) -> bool:
        obj = kube.get(path_of("v1", "nodes", node))
        taints = obj["spec"].get("taints") or []
        phase = (obj["metadata"].get("annotations") or {}).get(c.NODE_PHASE_ANNOTATION)
        tainted = any(t["key"] == c.GEOMETRY_PENDING_TAINT for t in taints)
        return tainted and phase in ("Draining", "Blocked")

    # the pool holds both nodes (cordon, taint, rollout state) while the PDBs hold their drains
    eventually(lambda: all(held(n) for n in nodes), 60, "plan-prune nodes held mid-drain")
    for ns in ("plan-prune-1", "plan-prune-2"):
        namespace(kube, ns, {"tessera.io/tenant": "plan-prune-q"})
    spec = {
        "namespaceSelector": {"matchLabels": {"tessera.io/tenant": "plan-prune-q"}},
        "hard": {"nvidia.com/gpu": 1},
        "total": {"nvidia.com/gpu": 2},
    }
    kube.create(TQ, custom("TenantQuota", "plan-prune-q", spec))
    quotas = [
        path_of("v1", "resourcequotas", "tessera-plan-prune-q", f"plan-prune-{i}") for i in (1, 2)
    ]
    eventually(lambda: all(kube.get_or_none(q) for q in quotas), 30, "plan-prune-q's quotas")
    live = _live_manifests(kube)
    keep = [m for m in live if m["metadata"]["name"] != "plan-prune-q"]
    manifests = _write(tmp_path, *keep)

    _, doc, _ = plan(kubeconfig, manifests)  # without --prune: no deletion
    assert not doc.get("deleted") and all(o["action"] != "delete" for o in doc["objects"])
    code, doc, text = plan(kubeconfig, manifests, prune=True)
    assert code == 2, text
    assert doc["deleted"] == ["TenantQuota/plan-prune-q"]
    gone = _object(doc, "plan-prune-q")["deletion"]
    assert [(q["namespace"], q["name"]) for q in gone["quotas"]] == [
        ("plan-prune-1", "tessera-plan-prune-q"),
        ("plan-prune-2", "tessera-plan-prune-q"),
    ]
    assert gone["unenforced"] == {"nvidia.com/gpu": 2}
    assert "TenantQuota/plan-prune-q: delete (2 ResourceQuota(s))" in text
    assert "delete ResourceQuota plan-prune-2/tessera-plan-prune-q" in text
    assert "the tenant-wide total (nvidia.com/gpu=2) is no longer enforced" in text

    keep = [
        m for m in live if m["kind"] != "NodePoolGeometry" or m["metadata"]["name"] != "plan-prune"
    ]
    manifests = _write(tmp_path, *keep)
    code, doc, text = plan(kubeconfig, manifests, prune=True)
    assert code == 2, text
    assert doc["deleted"] == ["NodePoolGeometry/plan-prune"]
    pool = _object(doc, "plan-prune")
    assert pool["action"] == "delete" and pool["changes"] == []
    released = pool["deletion"]["released"]
    assert [r["node"] for r in released] == nodes
    finalizer = ["remove taint tessera.io/geometry-pending", "uncordon", "clear its rollout state"]
    assert all(r["then"] == finalizer for r in released), released
    assert pool["deletion"]["kept"] == dict.fromkeys(nodes, "no layout yet")
    assert "  - plan-prune-0: holds rollout " in text and "cordoned by Tessera" in text, text
    # the same from a snapshot
    snap = tmp_path / "prune-cluster.yaml"
    save_snapshot(kubeconfig, snap)
    code, offline, _ = plan(None, manifests, snapshot=snap, prune=True)
    assert code == 2 and offline["deleted"] == doc["deleted"]
    assert _object(offline, "plan-prune")["deletion"] == pool["deletion"]
    # nothing was written: both objects, the quotas and the held nodes are still there
    for path in (f"{NPG}/plan-prune", f"{TQ}/plan-prune-q", *quotas):
        assert not kube.get(path)["metadata"].get("deletionTimestamp"), path
    assert all(held(n) for n in nodes)


def test_errors_exit_1(control_plane: Any, tmp_path: Path) -> None:
    bad = _write(tmp_path, _npg("plan-bad", LAYOUT_A, onFailure="Explode"))
    code, _, text = plan(control_plane.kubeconfig, bad)
    assert code == 1 and "spec.rollout.onFailure" in text
    code, _, text = plan(None, bad, snapshot=tmp_path / "missing.yaml")
    assert code == 1
    good = _write(tmp_path, _npg("plan-bad", LAYOUT_A))
    code, _, text = plan(None, good, snapshot=tmp_path / "missing.yaml")
    assert code == 1 and "missing.yaml" in text
