"""``tessera plan`` on what a GitOps pipeline feeds it, against the real control plane: the
folder Argo CD syncs (a kustomization), typos, Argo CD 3.x annotation tracking, and a snapshot
fit to be kept as a CI artifact. Every answer it cannot give is exit 1, never a "No changes"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import (
    LAYOUT_A,
    LAYOUT_B,
    DeploymentWrapper,
    TenantQuotaWrapper,
    custom,
)
from devcluster import fleet
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import ROOT, Kubectl
from .helpers import eventually, namespace, nodes_of, wait_running

TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
TRACKING = "argocd.argoproj.io/tracking-id"
SECRET = "s3cr3t-from-the-pod-env"


def tessera_plan(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> tuple[int, str, str]:
    """``tessera plan ARGS`` as a CI job runs it; (exit code, stdout, stderr)."""
    run = subprocess.run(
        [sys.executable, "-m", "tessera.cli.main", "plan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        input=stdin,
    )
    return run.returncode, run.stdout, run.stderr


def planned(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    code, out, err = tessera_plan(*args, "-o", "json", env=env)
    assert code in (0, 2) and out.startswith("{"), err
    return code, json.loads(out)


def _pool(name: str, layout: dict[str, Any]) -> dict[str, Any]:
    return custom(
        "NodePoolGeometry",
        name,
        {"nodeSelector": {"matchLabels": {c.POOL_LABEL: name}}, **layout},
    )


def _tenant(name: str, **annotations: str) -> dict[str, Any]:
    tenant = TenantQuotaWrapper(name).namespaces(tenant=name).hard({"nvidia.com/gpu": 1})
    return tenant.annotations(annotations).obj() if annotations else tenant.obj()


def _write(path: Path, *docs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _no_kubectl(tmp_path: Path) -> dict[str, str]:
    """An environment where no kubectl can be found (a CI image without one)."""
    empty = tmp_path / "bin-without-kubectl"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), "TESSERA_KUBECTL": ""}


def _objects(doc: dict[str, Any]) -> dict[str, str]:
    return {f"{o['kind']}/{o['name']}": o["action"] for o in doc["objects"]}


# -- kustomizations ------------------------------------------------------------------------------


def test_a_kustomization_folder_is_rendered_as_argo_cd_renders_it(
    kube: Kube, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = f"--kubeconfig={control_plane.kubeconfig}"
    renderer = f"--kubectl={control_plane.kubectl}"
    fleet.create_nodes(kube, fleet.pool("gitops-k", "H100-80GB", 2))
    kept, gone = _tenant("gitops-k-kept"), _tenant("gitops-k-gone")
    for obj in (kept, gone):
        kube.create(TQ, obj)
    # gitops/base names the pool (layout A) and the kept tenant; the overlay Argo CD syncs
    # patches the pool to layout B. The overlay folder holds no manifest of its own.
    base, overlay = tmp_path / "gitops" / "base", tmp_path / "gitops" / "overlay"
    _write(base / "pools.yaml", _pool("gitops-k", LAYOUT_A), kept)
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    _write(base / "kustomization.yaml", {**kustomization, "resources": ["pools.yaml"]})
    patch = {"kind": "NodePoolGeometry", "name": "gitops-k"}
    _write(
        overlay / "kustomization.yaml",
        {
            **kustomization,
            "resources": ["../base"],
            "patches": [{"target": patch, "patch": yaml.safe_dump(_pool("gitops-k", LAYOUT_B))}],
        },
    )

    # kubectl from $TESSERA_KUBECTL (a CI image's setting), or --kubectl
    via_env = {"TESSERA_KUBECTL": str(control_plane.kubectl)}
    code, doc = planned("-f", str(overlay), kubeconfig, env=via_env)
    assert code == 2, "a kustomization folder planned as 'No changes'"
    assert _objects(doc) == {
        "NodePoolGeometry/gitops-k": "create",
        "TenantQuota/gitops-k-kept": "unchanged",
    }
    pool = next(o for o in doc["objects"] if o["name"] == "gitops-k")
    assert [(ch["node"], ch["after"]) for ch in pool["changes"]] == [
        ("gitops-k-0", "all: 7x1g.10gb"),  # the overlay's patch, not the base's layout A
        ("gitops-k-1", "all: 7x1g.10gb"),
    ]
    assert planned("-f", str(overlay), kubeconfig, renderer) == (2, doc)
    # the kustomization file stands for its folder
    assert planned("-f", str(overlay / "kustomization.yaml"), kubeconfig, renderer) == (2, doc)

    # --prune deletes what the rendered folder omits, and only that
    code, pruned = planned("-f", str(overlay), kubeconfig, renderer, "--prune")
    assert code == 2
    assert "TenantQuota/gitops-k-gone" in pruned["deleted"]
    assert _objects(pruned)["TenantQuota/gitops-k-kept"] == "unchanged"

    # no kubectl to render with: refused, never planned from the unrendered folder
    for target in (overlay, overlay / "kustomization.yaml"):
        for extra in ((), ("--prune",)):
            code, out, err = tessera_plan(
                "-f", str(target), kubeconfig, *extra, env=_no_kubectl(tmp_path)
            )
            assert (code, out) == (1, ""), err
            assert f"{overlay} is a kustomization (kustomization.yaml)" in err
            assert "no kubectl to render it" in err and "--kubectl" in err
    # nothing was written
    assert not kube.get(f"{TQ}/gitops-k-gone")["metadata"].get("deletionTimestamp")
    assert kube.get_or_none("/apis/tessera.io/v1alpha1/nodepoolgeometries/gitops-k") is None


def test_this_repositorys_argo_cd_install_is_planned_not_green(
    control_plane: Any, tmp_path: Path
) -> None:
    """deploy/argocd/install is what deploy/argocd/application.yaml syncs: the install and
    config/samples, through kustomize. Against an empty cluster every sample is a creation."""
    install = str(ROOT / "deploy" / "argocd" / "install")
    empty = tmp_path / "empty-cluster.yaml"
    empty.write_text("")
    via_env = {"TESSERA_KUBECTL": str(control_plane.kubectl)}
    code, doc = planned("-f", install, f"--snapshot={empty}", env=via_env)
    assert code == 2, "Argo CD's own install folder planned as 'No changes'"
    samples = [
        f"{d['kind']}/{d['metadata']['name']}"
        for f in sorted((ROOT / "config" / "samples").glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
        if d and d.get("apiVersion", "").startswith("tessera.io/")
    ]
    assert len(samples) >= 3
    assert _objects(doc) == dict.fromkeys(samples, "create")
    code, out, err = tessera_plan("-f", install, f"--snapshot={empty}", env=_no_kubectl(tmp_path))
    assert (code, out) == (1, "") and "is a kustomization" in err


# -- typos and usage -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            yaml.safe_dump({**_pool("typo", LAYOUT_A), "kind": "NodePoolGeometrie"}),
            "pools.yaml:1: tessera.io has no kind 'NodePoolGeometrie'",
        ),
        (
            "# a pool\n---\n" + yaml.safe_dump({**_pool("typo", LAYOUT_A), "apiVersion": "tessera.io/v1"}),
            "pools.yaml:3: NodePoolGeometry typo: apiVersion 'tessera.io/v1' is not served",
        ),
        (
            "apiVersion: tessera.io/v1alpha1\nkind: TenantQuota\nmetadata:\n  name: t\n spec: {}\n",
            "pools.yaml:5:2: expected <block end>",
        ),
    ],
)  # fmt: skip
def test_a_typo_is_an_error_naming_the_file_and_what_is_wrong(
    control_plane: Any, tmp_path: Path, text: str, says: str
) -> None:
    manifest = tmp_path / "pools.yaml"
    manifest.write_text(text)
    code, out, err = tessera_plan("-f", str(manifest), f"--kubeconfig={control_plane.kubeconfig}")
    assert (code, out) == (1, "")
    assert f"tessera plan: {tmp_path}/{says}" in err


@pytest.mark.parametrize(
    "args", [["--bogus"], ["-o", "yaml"], ["snapshot", "--bogus"], ["-f"]], ids=" ".join
)
def test_usage_errors_exit_1_not_the_2_of_changes(control_plane: Any, args: list[str]) -> None:
    code, out, err = tessera_plan(*args, f"--kubeconfig={control_plane.kubeconfig}")
    assert (code, out) == (1, "")
    assert "usage: tessera plan" in err and "error:" in err


# -- Argo CD 3.x annotation tracking -------------------------------------------------------------


def test_prune_tracking_id_selects_what_the_argo_cd_application_tracks(
    kube: Kube, control_plane: Any, tmp_path: Path
) -> None:
    def tracked(name: str, app: str = "gpu-platform", names: str = "") -> dict[str, Any]:
        # what Argo CD 3.x writes on apply: APP:GROUP/KIND:NAMESPACE/NAME, with the app's
        # destination namespace for a cluster-scoped object
        value = f"{app}:tessera.io/TenantQuota:argocd/{names or name}"
        return _tenant(name, **{TRACKING: value})

    live = [
        tracked("trk-ours"),  # left Git: Argo CD prunes it
        tracked("trk-still"),  # still in Git
        tracked("trk-theirs", app="research"),  # another application's
        _tenant("trk-mine"),  # created by hand
        tracked("trk-copied", names="trk-ours"),  # annotation copied from trk-ours
    ]
    for obj in live:
        kube.create(TQ, obj)
    manifests = _write(tmp_path / "gitops" / "tenants.yaml", tracked("trk-still"))
    base = ("-f", str(manifests), f"--kubeconfig={control_plane.kubeconfig}", "--prune")

    # --prune alone would delete them all
    code, doc = planned(*base)
    assert {f"TenantQuota/trk-{n}" for n in ("ours", "theirs", "mine", "copied")} <= set(
        doc["deleted"]
    )
    # the label Argo CD 2.x tracked by is not on these objects: -l selects nothing
    code, doc = planned(*base, "-l", "app.kubernetes.io/instance=gpu-platform")
    assert code == 0 and doc["deleted"] == []
    code, doc = planned(*base, "--prune-tracking-id", "gpu-platform")
    assert code == 2 and doc["deleted"] == ["TenantQuota/trk-ours"]
    code, out, _ = tessera_plan("--help")
    assert "--prune-tracking-id APP" in out
    page = (ROOT / "docs" / "plan.md").read_text()
    assert "tessera plan --prune --prune-tracking-id gpu-platform -f gitops/" in page


# -- snapshots -----------------------------------------------------------------------------------


def test_a_snapshot_keeps_no_pod_secret_and_plans_as_the_cluster_does(
    kube: Kube, kubectl: Kubectl, control_plane: Any, tmp_path: Path
) -> None:
    kubeconfig = f"--kubeconfig={control_plane.kubeconfig}"
    nodes = fleet.create_nodes(kube, fleet.pool("snap", "H100-80GB", 2))
    namespace(kube, "snap-ml")
    # a serving Deployment applied with kubectl; its pods carry the secret in args and env
    serving = (
        DeploymentWrapper("serving")
        .namespace("snap-ml")
        .pool("snap")
        .replicas(2)
        .limits({"nvidia.com/gpu": 1})
        .obj()
    )
    (container,) = serving["spec"]["template"]["spec"]["containers"]
    container |= {
        "image": "registry.example/serving:1",
        "args": [f"--api-key={SECRET}"],
        "env": [
            {"name": "DB_PASSWORD", "value": SECRET},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "token"}}},
        ],
        "volumeMounts": [{"name": "creds", "mountPath": "/creds"}],
    }
    serving["spec"]["template"]["spec"]["volumes"] = [
        {"name": "creds", "secret": {"secretName": "db"}}
    ]
    kubectl.ok("apply", "-f", "-", stdin=json.dumps(serving))
    running = wait_running(kube, "snap-ml", "serving", 2)
    assert set(nodes_of(running)) <= set(nodes)  # placed by kube-scheduler in the pool
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "serving", "namespace": "snap-ml"},
        # lets no replica go: the plan names it as blocking the drain
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "serving"}}},
    }
    kubectl.ok("apply", "-f", "-", stdin=json.dumps(pdb))
    pdb_path = "/apis/policy/v1/namespaces/snap-ml/poddisruptionbudgets/serving"
    eventually(
        lambda: (kube.get(pdb_path).get("status") or {}).get("observedGeneration") == 1,
        30,
        "the disruption controller to observe the PDB",
    )
    first = running[0]["metadata"]["name"]
    assert json.dumps(kube.get(path_of("v1", "pods", first, "snap-ml"))).count(SECRET) == 2

    snap = tmp_path / "cluster.yaml"
    code, text, err = tessera_plan("snapshot", kubeconfig)
    assert code == 0, err
    snap.write_text(text)
    assert SECRET not in text
    for absent in ("last-applied-configuration", "managedFields", "env:", "secretKeyRef", "image:"):
        assert absent not in text, absent
    pods = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Pod"]
    mine = next(p for p in pods if p["metadata"]["name"] == first)
    gpu = {"nvidia.com/gpu": "1"}  # the API server defaults requests to the limits
    token = next(v["name"] for v in mine["spec"]["volumes"] if v["name"] != "creds")
    assert mine["spec"] == {
        "nodeName": running[0]["spec"]["nodeName"],
        "containers": [{"name": "main", "resources": {"requests": gpu, "limits": gpu}}],
        "volumes": [{"name": "creds"}, {"name": token}],  # names only, no source
        # where it may run, which the capacity check reads: the workload's selector, and
        # the tolerations the API server's DefaultTolerationSeconds admission added
        "nodeSelector": running[0]["spec"]["nodeSelector"],
        "tolerations": running[0]["spec"]["tolerations"],
    }
    assert mine["spec"]["nodeSelector"] == {"tessera.io/pool": "snap"}

    change = _write(tmp_path / "snap.yaml", _pool("snap", LAYOUT_B))
    code, live = planned("-f", str(change), kubeconfig)
    assert code == 2
    pool = next(o for o in live["objects"] if o["name"] == "snap")
    assert pool["pods_to_evict"] == 2 and pool["blocking_pdbs"] == ["snap-ml/serving"]
    assert planned("-f", str(change), f"--snapshot={snap}") == (2, live)
