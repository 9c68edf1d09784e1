"""The ``make demo`` scenario: the demo's nodes, its agents and ``config/samples`` converge.

The session's operator (fixture ``operator``) plays the demo's operator; the
agents run in-process exactly as ``tessera dev agents`` runs them, and the vNPU
agents among them as processes under their ServiceAccount (config/rbac). The sample
objects are also applied by ``test_api_surface``; their pools' nodes exist
only here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import cli, demo, identity, workloads
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube

from .conftest import ROOT, Kubectl, OperatorProcess
from .dra_support import samples_dra_pool_removed
from .helpers import condition, eventually

DEADLINE = 120.0
__all__ = ["samples_dra_pool_removed"]
pytestmark = pytest.mark.usefixtures("samples_dra_pool_removed")  # classes are global
PDBS = "/apis/policy/v1/namespaces/ml/poddisruptionbudgets"
SAMPLES = {
    (doc["kind"], doc["metadata"]["name"])
    for path in sorted((ROOT / "config" / "samples").glob("*_*.yaml"))
    if (doc := yaml.safe_load(path.read_text()))
}


def _samples(kube: Kube) -> list[demo.Row]:
    return [r for r in demo.rows(kube) if (r.kind, r.name) in SAMPLES]


def _converge(kube: Kube, operator: OperatorProcess) -> list[demo.Row]:
    """Wait until every sample is Ready; fail showing the progress table and, for each pool
    not Ready, what its nodes' agents say and what the operator logged of it."""

    def converged() -> list[demo.Row] | None:
        rows = _samples(kube)
        return rows if len(rows) == len(SAMPLES) and demo.settled(rows) else None

    try:
        return eventually(converged, DEADLINE, "every sample Ready")
    except AssertionError as err:
        rows = _samples(kube)
        stuck = [_pool_story(kube, operator, r.name) for r in rows if r.kind == "NodePoolGeometry"
                 and r.ready != "True"]  # fmt: skip
        raise AssertionError("\n".join([str(err), demo.table(rows), *stuck])) from None


def _pool_story(kube: Kube, operator: OperatorProcess, name: str) -> str:
    """A pool's nodes with their agents' labels, then the operator's last lines naming it."""
    npg = kube.get(f"/apis/tessera.io/v1alpha1/nodepoolgeometries/{name}")
    selector = ",".join(f"{k}={v}" for k, v in npg["spec"]["nodeSelector"]["matchLabels"].items())
    lines = [f"-- {name}: status {npg.get('status')}"]
    for node in kube.list("/api/v1/nodes", label_selector=selector):
        labels = node["metadata"].get("labels") or {}
        agent = {k: v for k, v in labels.items() if ".config" in k or "tessera" in k}
        lines.append(f"   {node['metadata']['name']}: {agent} {node['spec'].get('taints')}")
    named = [line for line in operator.log().splitlines() if name in line]
    return "\n".join([*lines, f"-- operator log, last lines naming {name}:", *named[-25:]])


@pytest.fixture(scope="module")
def demo_agents(kube: Kube, rbac: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    stop = threading.Event()
    workdir: Path = tmp_path_factory.mktemp("demo-agents")
    thread = threading.Thread(target=demo.run_agents, args=(kube, workdir, stop), daemon=True)
    thread.start()
    yield workdir
    stop.set()
    thread.join(timeout=30)


def test_demo_scenario_converges_without_errors(
    kube: Kube, kubectl: Kubectl, operator: OperatorProcess, demo_agents: Path
) -> None:
    log_start = len(operator.log())
    started = time.monotonic()
    created = demo.build(kube)
    assert len(created) == sum(n for _, _, n, _ in demo.DEMO.pools)
    assert demo.build(kube) == []  # a rerun creates nothing and resets no node
    kubectl.ok("apply", "-k", str(ROOT / "config" / "samples"))

    rows = _converge(kube, operator)
    elapsed = time.monotonic() - started
    h100 = next(r for r in rows if r.name == "h100-inference")
    assert (h100.ready, h100.progress) == ("True", "4/4 nodes"), demo.table(rows)
    npg = kube.get("/apis/tessera.io/v1alpha1/nodepoolgeometries/h100-inference")
    assert npg["status"]["capacity"]["nvidia.com/mig-1g.10gb"] == str(4 * 7 * 2)
    for node in ("h100-dra-0", "h100-dra-1"):  # the DRA pool: its driver announces the MIG
        published = kube.get(f"/apis/resource.k8s.io/v1/resourceslices/{node}-gpu.nvidia.com")
        names = [d["name"] for d in published["spec"]["devices"]]
        assert len(names) == 4 * 7 and all("-mig-1g10gb-19-" in n for n in names), names
        allocatable = kube.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
        assert not [k for k in allocatable if k.startswith("nvidia.com/")], allocatable
    for node in ("a100-vms-0", "a100-vms-1"):  # the vGPU pool: the sandbox device plugin's
        allocatable = kube.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
        vgpus = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/")}
        mig_backed = ("A100-3-20C", "A100-2-10C", "A100-1-10C")  # GPU 7
        assert vgpus == {
            "nvidia.com/NVIDIA_A100-20C": "14",
            **{f"nvidia.com/NVIDIA_{t}": "1" for t in mig_backed},
        }
    tq = kube.get("/apis/tessera.io/v1alpha1/tenantquotas/team-a")
    assert tq["status"]["namespaces"] == 2
    log = operator.log()[log_start:]
    bad = [line for line in log.splitlines() if "Traceback" in line or " ERROR " in line]
    assert not bad, "\n".join(bad[:10])
    assert elapsed < DEADLINE
    # The Ascend pool rolled out through the real agents, each under its own token, unrefused.
    agent_logs = {p.parent.name: p.read_text() for p in demo_agents.glob("*/agent.log")}
    assert {"ascend-310p-0", "ascend-310p-1"} <= set(agent_logs)
    lines = [line for text in agent_logs.values() for line in text.splitlines()]
    assert not [line for line in lines if identity.PROBLEM.search(line)]


def test_the_serving_workloads_are_placed_by_the_scheduler_on_their_pools_and_run(
    kube: Kube,
    kubectl: Kubectl,
    control_plane: ControlPlane,
    operator: OperatorProcess,
    demo_agents: Path,
    tmp_path: Path,
) -> None:
    """What `make demo` runs once the samples are Ready: the walkthrough's pods to evict."""
    demo.build(kube)
    kubectl.ok("apply", "-k", str(ROOT / "config" / "samples"))
    _converge(kube, operator)
    workloads.apply(kube)
    assert workloads.apply(kube) == []  # a rerun creates nothing
    pods = eventually(lambda: workloads.all_running(kube), 60, "every serving replica Running")

    for doc in workloads.manifests():
        if doc["kind"] in ("StatefulSet", "Deployment"):
            assert "nodeName" not in doc["spec"]["template"]["spec"], doc["metadata"]["name"]
    pools = {
        "serving": "h100-inference",
        "embeddings": "a100-small",
        "ocr": "ascend-310p",
        "dra-inference": "h100-dra",
        "vms": "a100-vms",
    }
    for pod in pods:
        name, app = pod["metadata"]["name"], app_of(pod)
        scheduled = condition(pod, "PodScheduled") or {}
        assert scheduled.get("status") == "True", f"{name}: {scheduled}"  # bound by the scheduler
        assert pod["status"]["phase"] == "Running", name
        node = kube.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
        assert node["metadata"]["labels"]["tessera.io/pool"] == pools[app], name
    for pod in (p for p in pods if app_of(p) == "dra-inference"):  # DRA: a 1g.10gb device
        assert _claimed_profile(kube, pod) == "1g.10gb", pod["metadata"]["name"]
    serving = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if app_of(p) == "serving"}
    assert sorted(serving) == ["serving-0", "serving-1"]
    assert len(set(serving.values())) == 2, serving  # anti-affinity: one per node

    def serving_pdb() -> dict[str, Any] | None:  # the walkthrough's: allows no disruption
        status = kube.get(f"{PDBS}/serving-pdb").get("status") or {}
        healthy = status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 0
        return status if healthy else None

    eventually(serving_pdb, 30, "serving-pdb counting both replicas, allowing no disruption")

    # docs/plan.md's worked example, as printed: the denser H100 layouts evict both, held by the PDB
    manifest, printed = walkthrough()
    (tmp_path / "h100-denser.yaml").write_text(manifest)
    plan = subprocess.run(
        [sys.executable, "-m", "tessera.cli.main", "plan", "-f", "h100-denser.yaml"],
        cwd=tmp_path,
        env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 2, plan.stdout + plan.stderr
    header = next(line for line in printed.splitlines() if "to evict" in line)
    assert header in plan.stdout, plan.stdout  # the hash, the pods and the PDB
    for pod, node in serving.items():
        assert f"~ {node}: " in plan.stdout and f"evicts ml/{pod}" in plan.stdout, plan.stdout


def _claimed_profile(kube: Kube, pod: dict[str, Any]) -> str:
    """The MIG profile of the device the pod's claim holds, read in its node's ResourceSlice."""
    name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = kube.get(f"/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/{name}")
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert result["pool"] == pod["spec"]["nodeName"], (result, pod["spec"]["nodeName"])
    published = kube.get(f"/apis/resource.k8s.io/v1/resourceslices/{result['pool']}-gpu.nvidia.com")
    device = next(d for d in published["spec"]["devices"] if d["name"] == result["device"])
    return str(device["attributes"]["profile"]["string"])


def walkthrough() -> tuple[str, str]:
    """docs/plan.md's ``h100-denser.yaml`` and the output printed for ``tessera plan`` on it."""
    page = (ROOT / "docs" / "plan.md").read_text()
    block = page.split("$ cat h100-denser.yaml\n", 1)[1]
    manifest, rest = block.split("$ tessera plan -f h100-denser.yaml\n", 1)
    return manifest, rest.split("$ echo $?", 1)[0]


def app_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["app"])


def test_the_explore_hint_runs_as_printed_in_a_shell_without_the_venv(
    control_plane: ControlPlane, kubectl: Kubectl, demo_agents: Path, tmp_path: Path
) -> None:
    kubectl.ok("apply", "-k", str(ROOT / "config" / "samples"))
    hint = cli.explore_hint(control_plane.kubeconfig, control_plane.kubectl)
    script = "set -e\n" + "\n".join(line.strip() for line in hint.splitlines())
    # A fresh shell elsewhere: no venv on PATH, no KUBECONFIG, not in the repository, and no
    # kubectl on PATH (tessera plan renders config/samples, a kustomization, with one).
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": os.environ.get("HOME", str(tmp_path))}
    out = subprocess.run(
        ["/bin/bash", "-O", "expand_aliases", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # tessera plan exits 0 (no change) or 2 (changes); 127 would be "command not found".
    assert out.returncode in (0, 2), out.stderr
    assert "h100-inference" in out.stdout
    assert "NodePoolGeometry" in out.stdout or "No changes" in out.stdout, out.stdout


def _whoami(kubeconfig: Path) -> dict[str, Any]:
    """The user the API server sees behind ``kubeconfig`` (a SelfSubjectReview)."""
    client = Kube.from_kubeconfig(str(kubeconfig))
    try:
        review = client.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    finally:
        client.close()
    user: dict[str, Any] = review["status"]["userInfo"]
    return user


def _assert_the_printed_metrics_query_answers(stdout: str) -> None:
    """The closing lines' ``curl -s localhost:PORT/metrics | grep ^METRIC``: the operator the
    demo left running answers there with Tessera's reconcile counter, passes that concluded
    Ready counted, and the demo showed those samples."""
    query = re.search(r"^Metrics: curl -s localhost:(\d+)/metrics \| grep \^(\w+)", stdout, re.M)
    assert query is not None, stdout[-2000:]
    port, metric = int(query[1]), query[2]
    assert metric == "tessera_reconciles_total"  # docs/observability.md's, the product's own
    with urllib.request.urlopen(f"http://localhost:{port}/metrics", timeout=10) as page:
        samples = [s for s in page.read().decode().splitlines() if s.startswith(metric)]
    ready = [s for s in samples if 'kind="NodePoolGeometry",outcome="ready"' in s]
    assert ready and float(ready[0].rsplit(" ", 1)[1]) >= 1, samples
    shown = stdout.split(f"==> the operator's metrics on localhost:{port}/metrics", 1)[1]
    assert ready[0].split(" ", 1)[0] in shown, shown[:2000]  # the demo printed the series


def test_make_demo_runs_the_operator_and_the_agents_as_their_service_accounts(
    tmp_path: Path,
) -> None:
    """`make demo` itself (``tessera dev demo``, its own control plane): it succeeds, and what
    it runs of Tessera's authenticates as config/rbac's ServiceAccounts, the agents with
    tokens naming their nodes; the operator serves its metrics where the closing lines say."""
    state = tmp_path / "demo"
    tessera = [sys.executable, "-m", "tessera.cli.main", "dev"]
    try:
        run = subprocess.run(
            [*tessera, "demo", f"--state-dir={state}"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "refused:" not in run.stdout, run.stdout
        assert "ml/serving-0 -> h100-inference-" in run.stdout, run.stdout  # placed and running
        assert run.stdout.splitlines()[0] in (ROOT / "README.md").read_text()  # as the README shows
        _assert_the_printed_metrics_query_answers(run.stdout)
        assert _whoami(state / "operator.kubeconfig")["username"] == identity.OPERATOR.username
        agents = sorted((state / "agents").glob("*/agent.kubeconfig"))
        assert [p.parent.name for p in agents] == ["ascend-310p-0", "ascend-310p-1"]
        for config in agents:
            user = _whoami(config)
            assert user["username"] == identity.AGENT.username
            assert user["extra"][identity.NODE_NAME_EXTRA] == [config.parent.name]
    finally:
        down = subprocess.run(
            [*tessera, "down", f"--state-dir={state}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert down.returncode == 0, down.stderr
