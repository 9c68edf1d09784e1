"""The autopilot inside the operator (issue 29), with kube-scheduler, the simulated kubelet and
Tessera's real GPU node agent.

An 8-GPU H100 node at whole GPUs runs three pods on whole GPUs; seven pods then ask for
``1g.10gb``, which the pool lacks, and kube-scheduler marks them Unschedulable. With
``spec.autopilot.enabled: false`` nothing changes: no choice in status, no write to the
node's MIG config or mig-parted's ConfigMap, the pods still pend. Switched on, the operator
records a layout in ``status.autopilot`` that changes idle GPUs only, within the bounds
(``max`` 1g.10gb), rolls it out, and the seven schedule; the three busy pods keep their uids
(none evicted); the spec in the API server is byte for byte what it was, at the same
generation (Argo CD stays in sync); an Event and a count of
``tessera_autopilot_decisions_total`` say what was decided and why. ``tessera suggest
--from-status`` prints the choice as the patch for Git; committed, the choice is Git's: the
status drops it and nothing rolls (the pods keep their uids).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import custom
from devcluster import fleet
from devcluster.gpuagents import GpuAgents
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain.geometry import layouts

from . import story_support as story
from .conftest import OperatorProcess
from .faults import NPG, node_of, npg, wait_ready
from .helpers import app_pods, condition, deployment, eventually, namespace, serve, wait_running
from .test_suggest_live import reader, suggest

pytestmark = pytest.mark.integration
__all__ = ["reader"]  # the read-only ServiceAccount docs/autopilot.md prints, for suggest
POOL, NS = "ap-live", "ap-live"
BUSY, WANTED, MAX_1G = 3, 7, 14
AUTOPILOT = {
    "enabled": False,
    "profiles": {"H100-80GB": {"1g.10gb": {"max": MAX_1G}, "7g.80gb": {}}},
    "pendingFor": "0s",
    "maxReconfigurationsPerGPUPerDay": 1,
}


@pytest.fixture(scope="module")
def world(kube: Kube, operator: OperatorProcess) -> Iterator[tuple[PodResourcesSim, GpuAgents]]:
    with story.gpu_world(kube, "ap-") as world:
        yield world


def _autopilot(kube: Kube, generation: int, outcome: str) -> Obj | None:
    """The pool once a pass of ``generation`` recorded ``outcome`` in status.autopilot."""
    obj = npg(kube, POOL)
    status = (obj or {}).get("status") or {}
    if status.get("observedGeneration") != generation:
        return None
    return obj if (status.get("autopilot") or {}).get("outcome") == outcome else None


def _mig_parted(kube: Kube) -> str:
    path = path_of(
        "v1", "configmaps", c.MIG_PARTED_CONFIGMAP_NAME, c.MIG_PARTED_CONFIGMAP_NAMESPACE
    )
    return str(kube.get(path)["metadata"]["resourceVersion"])


def _per_gpu(chosen: list[dict[str, Any]]) -> list[dict[str, int]]:
    pairs = [(lay["devices"], lay["profiles"]) for lay in chosen]
    return [dict(counts) for counts in layouts.per_device(pairs, 8)]


def _events(kube: Kube, reason: str, pool: str = POOL) -> list[Obj]:
    events = kube.list("/api/v1/events", field_selector="involvedObject.kind=NodePoolGeometry")
    return [e for e in events if e["involvedObject"]["name"] == pool and e.get("reason") == reason]


def _uids(kube: Kube, app: str) -> set[str]:
    return {p["metadata"]["uid"] for p in app_pods(kube, NS, app)}


def test_autopilot_repartitions_idle_gpus_only_and_never_writes_the_spec(
    kube: Kube,
    world: tuple[PodResourcesSim, GpuAgents],
    operator: OperatorProcess,
    reader: Path,
) -> None:
    sim, agents = world
    [node] = fleet.create_nodes(kube, story.nodes(POOL))
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: POOL}},
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
        "autopilot": AUTOPILOT,
    }
    kube.create(NPG, custom("NodePoolGeometry", POOL, spec))
    wait_ready(kube, POOL, 120, f"{POOL} at whole GPUs")
    eventually(lambda: sim.inventory(node) is not None, 60, f"{node}'s devices published")
    namespace(kube, NS)
    serve(kube, NS, "busy", replicas=BUSY, node_selector={story.SERVES: POOL})
    agents.start([node])
    record = eventually(lambda: story.record(kube, sim, node), 60, "the agent's record of 3 pods")
    held = sorted(g for gpus in record.pods.values() for g in gpus)
    assert len(held) == BUSY
    busy = _uids(kube, "busy")
    want = deployment("want", resource=story.MIG_1G, replicas=WANTED)
    want["spec"]["template"]["spec"]["nodeSelector"] = {story.SERVES: POOL}
    kube.create(path_of("apps/v1", "deployments", namespace=NS), want)
    eventually(lambda: story.unschedulable(kube, NS, "want", WANTED), 60, "7 pods Unschedulable")

    # off: a pass after the pods pend (a spec change makes one) decides nothing, writes nothing
    label = node_of(kube, node)["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    configs = _mig_parted(kube)
    kube.patch(f"{NPG}/{POOL}", {"spec": {"autopilot": {"maxReconfigurationsPerGPUPerDay": 2}}})
    generation = npg(kube, POOL)["metadata"]["generation"]
    off = eventually(lambda: _autopilot(kube, generation, "Off"), 60, "the autopilot off")
    assert off["status"]["autopilot"]["layouts"] == []
    assert condition(off, "Autopilot")["status"] == "False"
    assert node_of(kube, node)["metadata"]["labels"][c.MIG_CONFIG_LABEL] == label
    assert _mig_parted(kube) == configs, "mig-parted's ConfigMap written with the autopilot off"
    assert story.unschedulable(kube, NS, "want", WANTED)

    # on: the spec from here is what Git holds; the operator never changes it
    kube.patch(f"{NPG}/{POOL}", {"spec": {"autopilot": {"enabled": True}}})
    before = npg(kube, POOL)
    wait_running(kube, NS, "want", WANTED, timeout=240)
    after = wait_ready(kube, POOL, 120, f"{POOL} with the autopilot's layout")
    assert json.dumps(after["spec"]) == json.dumps(before["spec"]), "the spec was written"
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    chosen = after["status"]["autopilot"]["layouts"]
    per_gpu = _per_gpu(chosen)
    assert all(per_gpu[i] == {} for i in held), f"busy GPUs {held} changed: {per_gpu}"
    assert WANTED <= sum(p.get("1g.10gb", 0) for p in per_gpu) <= MAX_1G
    counts = after["status"]["autopilot"]["reconfigurations"]
    assert [(r["gpu"], r["count"]) for r in counts] == [(i, 1) for i, p in enumerate(per_gpu) if p]
    assert _uids(kube, "busy") == busy, "a busy GPU's pod was evicted"
    assert condition(after, "Autopilot")["status"] == "True"
    [event] = _events(kube, "AutopilotChanged")
    assert event["message"].startswith(f"{WANTED} pods want 1g.10gb for "), event["message"]
    metric = 'tessera_autopilot_decisions_total{outcome="Changed",pool="ap-live",profile="1g.10gb"}'
    assert f"{metric} 1.0" in operator.scrape()

    # the choice as Git's: the patch a person commits; committed, nothing rolls
    code, body, text = suggest(reader, POOL, "--from-status")
    assert code == 2, text
    assert body["patch"] == {"spec": {"mig": {"layouts": chosen}}}
    assert "commit it to the manifest" in text
    wanted = _uids(kube, "want")
    runs = node_of(kube, node)["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    assert runs != label  # the autopilot's layout, not Git's old one
    kube.patch(f"{NPG}/{POOL}", body["patch"])
    generation = npg(kube, POOL)["metadata"]["generation"]
    git = eventually(lambda: _autopilot(kube, generation, "Idle"), 60, "the choice made Git's")
    assert git["status"]["autopilot"]["layouts"] == []  # Git's layouts are the choice now
    wait_ready(kube, POOL, 60, f"{POOL} on Git's layout")
    assert node_of(kube, node)["metadata"]["labels"][c.MIG_CONFIG_LABEL] == runs
    assert _uids(kube, "busy") == busy and _uids(kube, "want") == wanted
    code, body, text = suggest(reader, POOL, "--from-status")
    assert code == 0 and body["patch"] is None, text


LATE_POOL, LATE_NS = "ap-late", "ap-late"


def _waiting_for_approval(kube: Kube, gpu: int) -> str | None:
    """The plan hash the pool waits for, once its recorded choice changes ``gpu`` (the outcome
    after ``Changed`` is ``UsageUnknown``: the node does not run the choice yet)."""
    obj = npg(kube, LATE_POOL) or {}
    auto = (obj.get("status") or {}).get("autopilot") or {}
    if not auto.get("layouts") or not _per_gpu(auto["layouts"])[gpu]:
        return None
    cond = condition(obj, "Reconciling") or {}
    found = re.search(r"plan (\S+) needs approval", cond.get("message", ""))
    return found.group(1) if cond.get("reason") == "WaitingForApproval" and found else None


def test_a_pod_that_lands_on_a_chosen_gpu_before_the_node_starts_is_never_evicted(
    kube: Kube, world: tuple[PodResourcesSim, GpuAgents]
) -> None:
    """The approval gate keeps the node waiting after the choice; a pod lands on the chosen
    GPU (the simulated kubelet hands out the lowest free one); the rollout's recheck holds the
    node, the choice for that GPU is withdrawn with an Event naming node and GPU, and the loop
    chooses another idle GPU; approved, that one changes and no pod is ever evicted."""
    sim, agents = world
    [node] = fleet.create_nodes(kube, story.nodes(LATE_POOL))
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: LATE_POOL}},
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
        "autopilot": {**AUTOPILOT, "enabled": True},
    }
    kube.create(NPG, custom("NodePoolGeometry", LATE_POOL, spec))
    wait_ready(kube, LATE_POOL, 120, f"{LATE_POOL} at whole GPUs")
    kube.patch(f"{NPG}/{LATE_POOL}", {"spec": {"rollout": {"approval": "Manual"}}})
    eventually(lambda: sim.inventory(node) is not None, 60, f"{node}'s devices published")
    namespace(kube, LATE_NS)
    serve(kube, LATE_NS, "busy", replicas=BUSY, node_selector={story.SERVES: LATE_POOL})
    agents.start([node])
    eventually(lambda: story.record(kube, sim, node), 60, "the agent's record of 3 pods")
    want = deployment("want", resource=story.MIG_1G, replicas=WANTED)
    want["spec"]["template"]["spec"]["nodeSelector"] = {story.SERVES: LATE_POOL}
    kube.create(path_of("apps/v1", "deployments", namespace=LATE_NS), want)
    eventually(lambda: _waiting_for_approval(kube, BUSY), 120, f"GPU {BUSY} chosen, unapproved")

    # a pod lands on the chosen GPU while the node waits for approval
    serve(kube, LATE_NS, "late", replicas=1, node_selector={story.SERVES: LATE_POOL})
    uids = _uids_in(kube, LATE_NS)
    record = eventually(lambda: story.record(kube, sim, node), 60, "the record of 4 pods")
    [late] = [gpus for pod, gpus in record.pods.items() if "/late-" in pod]
    assert late == (BUSY,), f"the late pod holds {late}, not the chosen GPU {BUSY}"

    def withdrawn() -> Obj | None:
        found = _events(kube, "AutopilotBusy", LATE_POOL)
        return next((e for e in found if f"GPU {node}/{BUSY} holds" in e["message"]), None)

    event = eventually(withdrawn, 60, "the Busy Event naming the node and the GPU")
    assert f"its choice for GPU {BUSY} is withdrawn" in event["message"], event["message"]
    digest = eventually(lambda: _waiting_for_approval(kube, BUSY + 1), 60, "another GPU chosen")
    chosen = _per_gpu(npg(kube, LATE_POOL)["status"]["autopilot"]["layouts"])
    assert chosen[BUSY] == {}, f"GPU {BUSY} holds the late pod and still changes: {chosen}"
    assert _uids_in(kube, LATE_NS) == uids

    patch = {"metadata": {"annotations": {c.APPROVE_PLAN_ANNOTATION: digest}}}
    kube.patch(f"{NPG}/{LATE_POOL}", patch)
    wait_running(kube, LATE_NS, "want", WANTED, timeout=240)
    wait_ready(kube, LATE_POOL, 120, f"{LATE_POOL} with the autopilot's layout")
    assert uids <= _uids_in(kube, LATE_NS), "a pod on the pool's node was evicted"
    # one Event per decision (the node waiting for the record, then the withdrawal), however
    # many passes saw it: bounded by the GPUs and nodes, never by the passes
    said = [e["message"] for e in _events(kube, "AutopilotBusy", LATE_POOL)]
    assert 1 <= len(said) <= 2 and len(set(said)) == len(said), said


def _uids_in(kube: Kube, ns: str) -> set[str]:
    return {p["metadata"]["uid"] for p in kube.list(f"/api/v1/namespaces/{ns}/pods")}
