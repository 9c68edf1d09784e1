"""``tessera plan`` per GPU (issue 28): per node the GPUs a MIG change repartitions, what each
runs now and next, the pods that leave and those that stay, or why the whole node goes; the
scope is the rollout's own (``rollout.scope``), so the plan says what the operator will do."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from preview_builders import T0, converged, gpu_nodes, namespace, npg, pod, world

from builders import PodWrapper
from tessera.api import constants as c
from tessera.domain import preview
from tessera.domain.preview import snapshot
from tessera.domain.preview.results import GpuChange
from tessera.domain.rollout import holders
from tessera.domain.rollout.state import ts

WHOLE = {"mig": {"layouts": [{"devices": "all", "profiles": {}}]}}
HALF = {
    "mig": {
        "layouts": [
            {"devices": "all", "profiles": {}},
            {"devices": "0-3", "profiles": {"3g.40gb": 2}},
        ]
    }
}
EVERY = {"mig": {"layouts": [{"devices": "all", "profiles": {"3g.40gb": 2}}]}}
READ = T0 - timedelta(minutes=1)
BORN = T0 - timedelta(minutes=10)
Raw = dict[str, Any]


def replica(i: int, node: str = "inf-0", born: Any = BORN) -> Raw:
    raw = pod(f"p{i}", node, app="serving")
    raw["metadata"]["creationTimestamp"] = ts(born)
    return raw


def agent(node: str = "inf-0", phase: str = "Running") -> Raw:
    built = PodWrapper(f"gpu-agent-{node}").namespace("tessera-system").node(node)
    built = built.labels({c.COMPONENT_LABEL: c.GPU_AGENT_COMPONENT}).owner("DaemonSet", "agent")
    return built.phase(phase).obj()


def node_world(
    *, record: holders.Holders | None = None, agents: bool = True, extra: tuple[Raw, ...] = ()
) -> list[Raw]:
    """One 8-GPU H100 node converged on whole GPUs, ``p<i>`` on GPU i, the agent's record."""
    nodes, cm = converged(gpu_nodes("inf", 1), npg("inf", WHOLE))
    rec = record or holders.Holders(READ, {f"ml/p{i}": (i,) for i in range(8)})
    nodes[0]["metadata"].setdefault("annotations", {})[c.GPU_HOLDERS_ANNOTATION] = holders.encode(
        rec
    )
    live = npg("inf", WHOLE)
    pods = [replica(i) for i in range(8)]
    return [*nodes, cm, live, namespace("ml"), *pods, *([agent()] if agents else []), *extra]


def change_of(items: list[Raw], layout: Any = HALF) -> preview.NodeChange:
    result = preview.preview(world(*items), [npg("inf", layout)], T0)
    [obj] = result.objects
    [change] = obj.changes
    return change


def test_the_plan_names_the_gpus_that_change_old_and_new_and_the_pods_that_move_and_stay() -> None:
    items = node_world()
    change = change_of(items)
    assert change.scope == ("GPUs 0-3 change (0-3: whole GPU -> 2x3g.40gb); 4 pods move, 4 stay")
    assert change.gpus == tuple(GpuChange(i, "whole GPU", "2x3g.40gb") for i in range(4))
    assert change.evicts == ("ml/p0", "ml/p1", "ml/p2", "ml/p3")
    assert change.stays == ("ml/p4", "ml/p5", "ml/p6", "ml/p7")
    result = preview.preview(world(*items), [npg("inf", HALF)], T0)
    assert result.objects[0].pods_to_evict == 4  # the header counts what the rollout evicts
    text = preview.render(result)
    assert "      GPUs 0-3 change (0-3: whole GPU -> 2x3g.40gb); 4 pods move, 4 stay\n" in text
    assert "      evicts ml/p0, ml/p1, ml/p2, ml/p3\n" in text
    assert "      keeps ml/p4, ml/p5, ml/p6, ml/p7 (on GPUs that do not change)\n" in text
    assert "Plan: 1 node(s) change, 4 pod(s) evicted" in text
    doc = json.loads(json.dumps(preview.as_json(result)))["objects"][0]["changes"][0]
    assert doc["gpus"][0] == {"index": 0, "before": "whole GPU", "after": "2x3g.40gb"}
    assert doc["stays"] == ["ml/p4", "ml/p5", "ml/p6", "ml/p7"]


@pytest.mark.parametrize(
    "items, layout, why",
    [
        pytest.param(node_world(), EVERY, "every GPU changes", id="every-gpu"),
        pytest.param(
            node_world(agents=False), HALF, "no GPU node agent runs on inf-0", id="no-agent"
        ),
        pytest.param(
            node_world(extra=(agent(phase="Pending"),), agents=False),
            HALF,
            "no GPU node agent runs on inf-0",
            id="agent-not-running",
        ),
        pytest.param(
            node_world(extra=(replica(8, born=T0 - timedelta(seconds=5)),)),
            HALF,
            f"pod ml/p8 was created after the GPU holders were read at {ts(READ)}",
            id="pod-newer-than-the-record",
        ),
        pytest.param(
            node_world(record=holders.Holders(READ, {"ml/p0": (0,)})),
            HALF,
            f"pod ml/p1 is not in the GPU holders read at {ts(READ)}",
            id="pod-missing-from-the-record",
        ),
    ],
)
def test_where_the_change_cannot_be_narrowed_the_plan_says_why_and_evicts_every_pod(
    items: list[Raw], layout: Any, why: str
) -> None:
    change = change_of(items, layout)
    assert change.scope.startswith(f"whole node: {why}; ")
    assert change.gpus == () and change.stays == ()
    assert {f"ml/p{i}" for i in range(8)} <= set(change.evicts)
    text = preview.render(preview.preview(world(*items), [npg("inf", layout)], T0))
    assert f"      whole node: {why}; " in text
    assert "keeps" not in text


def test_a_node_whose_layout_is_not_known_goes_whole_and_says_so() -> None:
    items = node_world()
    for raw in items:
        if raw["kind"] == "Node":  # its MIG manager has not reported success
            raw["metadata"]["labels"][c.MIG_CONFIG_STATE_LABEL] = "pending"
    change = change_of(items)
    assert change.scope == "whole node: the layout inf-0 runs now is not known; 8 pods move"


def test_a_node_in_flight_shows_the_scope_on_its_record() -> None:
    """Once started, the node's record holds the scope; the plan reads it back, never
    deciding anew (a pod that arrived since the start still leaves)."""
    from tessera.domain.cluster import objects as cluster
    from tessera.domain.rollout import NodeState, Phase, encode, targets

    items = node_world()
    [node] = [r for r in items if r["kind"] == "Node"]
    view = cluster.node_view(node)
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec

    spec = NodePoolGeometrySpec.model_validate(npg("inf", HALF)["spec"])
    seen = cluster.observe_pool("inf", spec, [node], {})
    d = seen.desired["inf-0"]
    record = NodeState(
        Phase.DRAINING, seen.owner, targets.target_of(d), view.unschedulable, T0, gpus=(0, 1)
    )
    node["metadata"]["annotations"][c.NODE_STATE_ANNOTATION] = encode(record)
    node["spec"]["unschedulable"] = True
    change = change_of(items)
    assert change.scope.startswith("GPUs 0-1 change (0-1: whole GPU -> 2x3g.40gb); 2 pods move")
    assert change.evicts == ("ml/p0", "ml/p1")


def test_a_snapshot_keeps_what_the_per_gpu_scope_reads() -> None:
    """The pod's creation time and the node's holders record survive ``tessera plan
    snapshot``: a plan from the snapshot scopes the node as the live plan does."""
    items = node_world()
    kept = [snapshot.minimal(raw) for raw in items]
    assert change_of(kept) == change_of(items)
