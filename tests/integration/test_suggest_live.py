"""``tessera suggest POOL`` against a live cluster (issue 29), as a platform engineer runs it.

An 8-GPU node at whole GPUs runs three pods on whole GPUs (kube-scheduler placed them; the
simulated kubelet gave each its GPU); Tessera's real GPU node agent publishes who holds
which GPU. Seven pods then ask for ``1g.10gb``, which the pool lacks: kube-scheduler marks
them Unschedulable. ``tessera suggest``, under a token of a read-only ServiceAccount bound
to exactly the RBAC docs/autopilot.md lists, prints a patch that changes idle GPUs only,
with a reason naming the pods; the patch applied as a person would commit it, the operator
repartitions those GPUs, the seven pods schedule and the three keep running. With nothing
pending the answer is no change (exit 0); a pod asking for a profile the pool's GPUs lack,
and a pool that does not exist, are errors (exit 1) naming them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import custom
from devcluster import fleet, identity
from devcluster.gpuagents import GpuAgents
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from . import story_support as story
from .conftest import ROOT, OperatorProcess
from .faults import NPG, wait_ready
from .helpers import app_pods, deployment, eventually, namespace, serve, wait_running

pytestmark = pytest.mark.integration
POOL, NS = "sg-live", "sg-live"
READER = identity.Account("tessera-suggest", "suggest-reader")
BUSY, WANTED = 3, 7
DOCS = ROOT / "docs" / "autopilot.md"


def _rbac_from_docs() -> list[dict[str, Any]]:
    """The ClusterRole and Role docs/autopilot.md prints (its ```yaml block under RBAC)."""
    text = DOCS.read_text().split("### What it may read", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    return [d for d in yaml.safe_load_all(block) if d]


def _made(kube: Kube, path: str, body: dict[str, Any]) -> None:
    """Create ``body``; one already there is the same (another module made the reader)."""
    try:
        kube.create(path, body)
    except ApiError as err:
        if not err.conflict:
            raise


@pytest.fixture(scope="module")
def reader(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig of a ServiceAccount bound to the documented read-only roles, nothing else
    (module-scoped and shared with test_autopilot: a second module finds them made)."""
    namespace(kube, READER.namespace)
    namespace(kube, c.MIG_PARTED_CONFIGMAP_NAMESPACE)
    _made(
        kube,
        path_of("v1", "serviceaccounts", namespace=READER.namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": READER.name}},
    )
    subject = {"kind": "ServiceAccount", "name": READER.name, "namespace": READER.namespace}
    rbac = "rbac.authorization.k8s.io/v1"
    for role in _rbac_from_docs():
        name, ns = role["metadata"]["name"], role["metadata"].get("namespace", "")
        plural = "clusterroles" if role["kind"] == "ClusterRole" else "roles"
        _made(kube, path_of(rbac, plural, namespace=ns), role)
        binding = {
            "apiVersion": rbac,
            "kind": role["kind"] + "Binding",
            "metadata": {"name": name, **({"namespace": ns} if ns else {})},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": role["kind"],
                "name": name,
            },
            "subjects": [subject],
        }
        _made(kube, path_of(rbac, plural.replace("roles", "rolebindings"), namespace=ns), binding)
    bearer = identity.token(kube, READER, seconds=3600)
    path = tmp_path_factory.mktemp("reader") / "kubeconfig"
    return identity.kubeconfig(kube, bearer, READER.name, path)


@pytest.fixture(scope="module")
def world(kube: Kube, operator: OperatorProcess) -> Iterator[tuple[PodResourcesSim, GpuAgents]]:
    with story.gpu_world(kube, "sg-") as world:
        yield world


def suggest(kubeconfig: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """``tessera suggest`` as a subprocess, in JSON and as text: (exit code, JSON, text)."""
    run = [sys.executable, "-m", "tessera.cli.main", "suggest", *args, f"--kubeconfig={kubeconfig}"]
    out = subprocess.run([*run, "-o", "json"], capture_output=True, text=True, timeout=60)
    text = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert text.returncode == out.returncode, text.stdout + text.stderr
    doc = json.loads(out.stdout) if out.returncode != 1 else {}
    return out.returncode, doc, text.stdout + text.stderr


def test_suggest_changes_idle_gpus_only_and_the_pods_then_schedule(
    kube: Kube, world: tuple[PodResourcesSim, GpuAgents], reader: Path
) -> None:
    sim, agents = world
    [node] = fleet.create_nodes(kube, story.nodes(POOL))
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
    }
    kube.create(NPG, custom("NodePoolGeometry", POOL, spec))
    wait_ready(kube, POOL, 120, f"{POOL} at whole GPUs")
    eventually(lambda: sim.inventory(node) is not None, 60, f"{node}'s devices published")
    namespace(kube, NS)
    busy = serve(kube, NS, "busy", replicas=BUSY, node_selector={story.SERVES: POOL})
    agents.start([node])
    record = eventually(lambda: story.record(kube, sim, node), 60, "the agent's record of 3 pods")
    held = sorted(g for gpus in record.pods.values() for g in gpus)
    assert len(held) == BUSY

    code, body, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 0, text
    assert body["patch"] is None and body["pending"] == {} and body["unknownUsage"] == []
    assert "No change." in text

    want = deployment("want", resource=story.MIG_1G, replicas=WANTED)
    want["spec"]["template"]["spec"]["nodeSelector"] = {story.SERVES: POOL}
    kube.create(path_of("apps/v1", "deployments", namespace=NS), want)
    eventually(
        lambda: story.unschedulable(kube, NS, "want", WANTED), 60, "7 pods marked Unschedulable"
    )

    code, body, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 2, text
    names = sorted(f"{NS}/{p['metadata']['name']}" for p in app_pods(kube, NS, "want"))
    assert body["pending"] == {"1g.10gb": names}
    assert body["unknownUsage"] == []
    assert body["reasons"][0].startswith(f"{WANTED} pods want 1g.10gb for "), body["reasons"]
    assert f"  pending for 1g.10gb: {', '.join(names)}\n" in text
    layouts = body["patch"]["spec"]["mig"]["layouts"]
    assert layouts[0] == {"devices": "all", "profiles": {}}  # every other GPU stays whole
    changed = [int(i) for lay in layouts[1:] for i in _indexes(lay["devices"])]
    assert changed and not set(changed) & set(held), f"busy GPUs {held} in the patch"
    assert sum(lay["profiles"].get("1g.10gb", 0) for lay in layouts[1:]) >= WANTED
    # the same patch in the text, as a person copies it into the manifest
    assert yaml.safe_load(text.split("commit it to the manifest\n", 1)[1]) == body["patch"]

    uids = {p["metadata"]["uid"] for p in busy}
    kube.patch(f"{NPG}/{POOL}", body["patch"])
    wait_ready(kube, POOL, 240, f"{POOL} with GPUs {changed} repartitioned")
    wait_running(kube, NS, "want", WANTED, timeout=120)
    assert {p["metadata"]["uid"] for p in app_pods(kube, NS, "busy")} == uids, "busy GPUs kept"
    eventually(lambda: story.record(kube, sim, node), 60, "the agent's record of all 10 pods")

    code, body, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 0, text
    assert body["patch"] is None and body["pending"] == {}


def test_what_it_cannot_read_is_an_error_naming_it(kube: Kube, reader: Path) -> None:
    """After the test above, on its pool: one pod asking for a profile no H100 has is enough
    to make the whole answer an error, though seven pods' demand is served."""
    code, _, text = suggest(reader, "no-such-pool")
    assert code == 1
    assert "tessera suggest: NodePoolGeometry/no-such-pool: not found" in text
    odd = deployment("odd", resource="nvidia.com/mig-1g.12gb", replicas=1)
    odd["spec"]["template"]["spec"]["nodeSelector"] = {story.SERVES: POOL}
    namespace(kube, NS)
    kube.create(path_of("apps/v1", "deployments", namespace=NS), odd)
    try:
        eventually(lambda: story.unschedulable(kube, NS, "odd", 1), 60, "the odd pod Unschedulable")
        code, _, text = suggest(reader, POOL, "--pend-threshold", "0s")
        assert code == 1
        [pod] = app_pods(kube, NS, "odd")
        assert f"pod {NS}/{pod['metadata']['name']} asks for nvidia.com/mig-1g.12gb" in text
    finally:
        kube.delete(path_of("apps/v1", "deployments", "odd", NS))


def test_without_the_roles_a_read_refused_is_an_error(kube: Kube, tmp_path: Path) -> None:
    """The reader's token is no stronger than its roles: the same ServiceAccount setup, bound
    to nothing, is refused, and that is exit 1 naming the pool, never "no change"."""
    nobody = identity.Account(READER.namespace, "suggest-nobody")
    namespace(kube, nobody.namespace)
    kube.create(
        path_of("v1", "serviceaccounts", namespace=nobody.namespace),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": nobody.name}},
    )
    bearer = identity.token(kube, nobody, seconds=3600)
    config = identity.kubeconfig(kube, bearer, nobody.name, tmp_path / "kubeconfig")
    code, _, text = suggest(config, POOL)
    assert code == 1
    assert f"NodePoolGeometry/{POOL}" in text and "403" in text, text


def _indexes(devices: str) -> list[int]:
    out: list[int] = []
    for part in str(devices).split(","):
        lo, _, hi = part.strip().partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
