"""Per-GPU disruption (issue 28), as a platform engineer running inference would see it.

An 8-GPU node runs one serving replica on each GPU (kube-scheduler placed them; the
simulated kubelet gave each its GPU). Tessera's real GPU node agent, under its own token,
publishes who holds which GPU from the kubelet's PodResources API. Git then repartitions GPUs
0-3. An outside watcher of the node and the pods checks: the replicas on GPUs 4-7 keep their
uids and are never evicted, those on 0-3 are evicted once each, the PDB always holds, and
nothing of Tessera's is left on the node. The simulated MIG manager independently refuses to
repartition a GPU a pod still holds, so a wrong eviction set fails the layout.

With a stale record — the agent stopped, a pod arrived since — the node is drained whole, and
the start's Event on the node says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import custom
from devcluster import fleet
from devcluster.gpuagents import GpuAgents
from devcluster.podresources import PodResourcesSim
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c
from tessera.domain.rollout import holders

from . import story_support as story
from .conftest import OperatorProcess
from .faults import NPG, assert_released, node_of, wait_ready
from .helpers import app_pods, eventually, namespace, serve
from .rollout_ledger import Ledger
from .test_plan import plan_pool_live_and_offline

pytestmark = pytest.mark.integration
REPLICAS = 8
MIN_AVAILABLE = REPLICAS - 2


@dataclass
class World:
    kube: Kube
    sim: PodResourcesSim
    agents: GpuAgents


@pytest.fixture(scope="module")
def world(kube: Kube, operator: OperatorProcess) -> Iterator[World]:
    with story.gpu_world(kube, "pg-") as (sim, agents):
        yield World(kube, sim, agents)


def _pool(
    w: World, pool: str, ns: str, replicas: int = REPLICAS, *, spare: bool = True
) -> tuple[str, list[dict[str, Any]]]:
    """A pool of one 8-GPU node at whole GPUs (its first layout, applied while empty), and a
    Deployment with one replica on each of ``replicas`` GPUs under a PDB that lets two go; a
    spare outside the pool (later, without ``spare``)."""
    [node] = fleet.create_nodes(w.kube, story.nodes(pool))
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        "mig": {"layouts": [{"devices": "all", "profiles": {}}]},
    }
    w.kube.create(NPG, custom("NodePoolGeometry", pool, spec))
    wait_ready(w.kube, pool, 120, f"{pool} at whole GPUs")
    eventually(lambda: w.sim.inventory(node) is not None, 60, f"{node}'s devices published")
    namespace(w.kube, ns)
    pods = serve(
        w.kube,
        ns,
        "serve",
        replicas=replicas,
        node_selector={story.SERVES: pool},
        budget=replicas - 2,
    )
    if spare:
        story.spare(w.kube, pool)
    story.counted(w.kube, ns, "serve", replicas)
    return node, pods


def _published(w: World, node: str) -> holders.Holders | None:
    """The agent's record once it places every pod the simulator's own record does, and was
    read after they all came."""
    raw = (node_of(w.kube, node)["metadata"].get("annotations") or {}).get(c.GPU_HOLDERS_ANNOTATION)
    record = holders.decode(raw)
    truth = {pod: tuple(sorted(gpus)) for pod, gpus in w.sim.holders(node).items()}
    if record is None or dict(record.pods) != truth:
        return None
    return record if record.read > _newest(w, node) else None


def _newest(w: World, node: str) -> datetime:
    pods = w.kube.list("/api/v1/pods", field_selector=f"spec.nodeName={node}")
    return max(_time(p["metadata"]["creationTimestamp"]) for p in pods)


def _time(raw: str) -> datetime:
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _on(w: World, node: str, gpus: set[int]) -> set[str]:
    """The uids of the pods the simulated kubelet says hold one of ``gpus``."""
    names = {p for p, held in w.sim.holders(node).items() if held & gpus}
    pods = w.kube.list("/api/v1/pods", field_selector=f"spec.nodeName={node}")
    return {
        p["metadata"]["uid"]
        for p in pods
        if f"{p['metadata']['namespace']}/{p['metadata']['name']}" in names
    }


def _repartition(w: World, pool: str) -> None:
    path = f"{NPG}/{pool}"
    w.kube.patch(path, {"spec": story.HALF_MIG})


def _start_events(w: World, node: str) -> str:
    """The messages of the Cordon Events on ``node``: what each start said."""
    events = w.kube.list(
        path_of("v1", "events", namespace="default"),
        field_selector=f"involvedObject.kind=Node,involvedObject.name={node},reason=Cordon",
    )
    assert events, f"no Cordon Event on {node}"
    return "\n".join(str(e["message"]) for e in events)


def _names_on(w: World, node: str, gpus: set[int]) -> set[str]:
    """``namespace/name`` of the pods the simulated kubelet says hold one of ``gpus``."""
    return {p for p, held in w.sim.holders(node).items() if held & gpus}


def _plan_says_what_moves(
    w: World, pool: str, node: str, kubeconfig: Path, tmp_path: Path
) -> list[dict[str, Any]]:
    """``tessera plan`` of the repartition, live and from a snapshot: the node's GPUs 0-3
    change, old -> new, the pods on them move and the others stay. Its changes, as JSON."""
    spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}}, **story.HALF_MIG}
    manifest = tmp_path / "half.yaml"
    manifest.write_text(yaml.safe_dump(custom("NodePoolGeometry", pool, spec)))
    obj, text = plan_pool_live_and_offline(kubeconfig, manifest, pool, tmp_path)
    [change] = obj["changes"]
    line = "GPUs 0-3 change (0-3: whole GPU -> 7x1g.10gb); 4 pods move, 4 stay"
    assert change["node"] == node and change["scope"] == line
    assert [(g["index"], g["before"], g["after"]) for g in change["gpus"]] == [
        (i, "whole GPU", "7x1g.10gb") for i in range(4)
    ]
    assert set(change["evicts"]) == _names_on(w, node, {0, 1, 2, 3})
    assert set(change["stays"]) == _names_on(w, node, {4, 5, 6, 7})
    assert obj["pods_to_evict"] == 4
    assert f"      {line}\n" in text
    changes: list[dict[str, Any]] = obj["changes"]
    return changes


def test_only_the_pods_on_the_changed_gpus_move_and_each_moves_once(
    world: World, control_plane: Any, tmp_path: Path
) -> None:
    w, pool, ns = world, "pg-half", "pg-half"
    node, pods = _pool(w, pool, ns)
    w.agents.start([node])
    record = eventually(lambda: _published(w, node), 60, "the agent's record of all 8 replicas")
    assert sorted(g for gpus in record.pods.values() for g in gpus) == list(range(8))
    changing, staying = _on(w, node, {0, 1, 2, 3}), _on(w, node, {4, 5, 6, 7})
    assert len(changing) == len(staying) == 4
    planned = _plan_says_what_moves(w, pool, node, control_plane.kubeconfig, tmp_path)
    scopes: list[list[dict[str, Any]]] = []  # status.scopes, every write of the pool's status

    def status(kind: str, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == pool and kind != "DELETED":
            scopes.append((obj.get("status") or {}).get("scopes") or [])

    watch = Informer(w.kube, NPG, status, name="scopes")
    watch.start()
    with Ledger(w.kube, pool, ns, budgets={"serve": MIN_AVAILABLE}) as ledger:
        ledger.gate_open.set()
        _repartition(w, pool)
        wait_ready(w.kube, pool, 240, f"{pool} with GPUs 0-3 repartitioned")
    eventually(lambda: scopes and scopes[-1] == [], 30, "status.scopes empty once Ready")
    watch.stop()
    named = [(s["node"], s["gpus"], s["whole"]) for seen in scopes for s in seen]
    assert named and set(named) == {(node, "0-3", "")}, "the status named GPUs 0-3 in flight"
    assert story.slices(node_of(w.kube, node)) == ("4", "28")
    assert set(ledger.evicted) == changing, "exactly the replicas on GPUs 0-3 were evicted"
    moved = {f"{ns}/{name}" for name in ledger.evicted.values()}
    assert moved == set(planned[0]["evicts"]), "the pods the plan named, and only those"
    live = {p["metadata"]["uid"] for p in app_pods(w.kube, ns, "serve")}
    assert staying <= live, "the replicas on GPUs 4-7 kept running, untouched"
    assert ledger.below_budget == [] and ledger.worst <= 1
    assert "GPUs 0-3 change; 4 pods move, 4 stay" in _start_events(w, node)
    assert_released(w.kube, pool)
    eventually(lambda: len(app_pods(w.kube, ns, "serve")) == REPLICAS, 60, "8 replicas again")
    assert len(pods) == REPLICAS


def test_a_stale_record_drains_the_whole_node_and_says_why(world: World) -> None:
    w, pool, ns = world, "pg-stale", "pg-stale"
    node, _ = _pool(w, pool, ns, replicas=REPLICAS - 1, spare=False)  # GPU 7 left free
    w.agents.start([node])
    record = eventually(lambda: _published(w, node), 60, "the agent's record of 7 replicas")
    w.agents.stop_agent(node)  # its Pod still Running: a hung agent, its record left behind
    serve(w.kube, ns, "late", node_selector={story.SERVES: pool})  # on GPU 7: no spare yet
    story.spare(w.kube, pool)
    assert _newest(w, node) >= record.read
    every = {p["metadata"]["uid"] for p in w.kube.list(
        path_of("v1", "pods", namespace=ns), field_selector=f"spec.nodeName={node}"
    )}  # fmt: skip
    assert len(every) == REPLICAS
    with Ledger(w.kube, pool, ns, budgets={"serve": REPLICAS - 3}) as ledger:
        ledger.gate_open.set()
        _repartition(w, pool)
        wait_ready(w.kube, pool, 240, f"{pool} repartitioned, the node drained whole")
    assert every <= set(ledger.evicted), "every replica on the node left"
    assert ledger.below_budget == []
    why = _start_events(w, node)
    assert f"whole node: pod {ns}/late-" in why, why
    assert "was created after the GPU holders were read at" in why, why
    assert_released(w.kube, pool)
