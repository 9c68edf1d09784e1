"""NodePoolGeometry previews: nodes that change, evictions, PDBs, hash, capacity, config diff."""

from __future__ import annotations

import copy
import json
from typing import Any

from preview_builders import T0, converged, gpu_nodes, namespace, npg, pdb, pod, world

from builders import LAYOUT_A, LAYOUT_B, custom
from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import preview, rollout
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import objects as cluster
from tessera.domain.preview.geometry_configs import ranges
from tessera.domain.rollout import targets


def _one(p: preview.Preview) -> preview.ObjectPreview:
    assert len(p.objects) == 1
    return p.objects[0]


def test_new_pool_on_fresh_nodes_changes_every_node_and_writes_its_config() -> None:
    pool = npg("inf", LAYOUT_A)
    result = preview.preview(world(*gpu_nodes("inf", 3)), [pool], T0)
    obj = _one(result)
    assert obj.action == "create"
    assert [c.node for c in obj.changes] == ["inf-0", "inf-1", "inf-2"]
    assert obj.changes[0].before == "no layout yet"
    assert obj.changes[0].after == "all: 3g.40gb + 2g.20gb + 2x1g.10gb"
    assert obj.capacity_after["nvidia.com/mig-1g.10gb"] == 3 * 8 * 2
    assert obj.capacity_after["nvidia.com/gpu"] == 0
    assert result.changed
    [diff] = result.configs
    assert "tessera-mig-parted-config" in diff.where
    assert "+    mig-devices: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 2}" in diff.diff


def test_hash_is_the_rollout_engines_hash_of_the_same_observation() -> None:
    pool = npg("inf", LAYOUT_B)
    nodes = gpu_nodes("inf", 2)
    obj = _one(preview.preview(world(*nodes), [pool], T0))
    spec = NodePoolGeometrySpec.model_validate(pool["spec"])
    seen = cluster.observe_pool("inf", spec, nodes, {})
    assert obj.plan_hash == targets.plan_hash("NodePoolGeometry/inf", seen.desired)
    planned = rollout.plan(seen.owner, spec.rollout, seen.desired, list(seen.involved), [], [], T0)
    assert obj.plan_hash == planned.hash


def test_converged_pool_is_no_change() -> None:
    pool = npg("inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), pool)
    live = npg("inf", LAYOUT_A, maxUnavailable=1)
    result = preview.preview(world(*nodes, cm, live), [pool], T0)
    obj = _one(result)
    assert obj.action == "unchanged"  # defaults filled in by the API server are no difference
    assert obj.changes == ()
    assert result.configs == ()
    assert not result.changed
    assert "No changes." in preview.render(result)


def test_layout_change_names_old_and_new_layout_pods_and_blocking_pdb() -> None:
    old = npg("inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 2), old)
    items = [
        *nodes,
        cm,
        old,
        namespace("ml"),
        pod("server-a", "inf-0", app="serving"),
        pod("server-b", "inf-1", app="serving"),
        pod("batch", "inf-1", app="batch"),
        pdb("serving-pdb", 0, app="serving"),
    ]
    result = preview.preview(world(*items), [npg("inf", LAYOUT_B)], T0)
    obj = _one(result)
    assert obj.action == "update"
    by_node = {c.node: c for c in obj.changes}
    assert by_node["inf-0"].before == "all: 3g.40gb + 2g.20gb + 2x1g.10gb"
    assert by_node["inf-0"].after == "all: 7x1g.10gb"
    assert by_node["inf-1"].evicts == ("ml/batch", "ml/server-b")
    assert obj.pods_to_evict == 3
    assert obj.blocking_pdbs == ("ml/serving-pdb",)
    assert obj.capacity_before["nvidia.com/mig-3g.40gb"] == 16
    assert obj.capacity_after["nvidia.com/mig-3g.40gb"] == 0
    assert result.capacity["nvidia.com/mig-1g.10gb"] == (32, 112)


def test_manual_approval_prints_the_annotation_and_recognises_an_approved_plan() -> None:
    pool = npg("inf", LAYOUT_B, approval="Manual")
    nodes = gpu_nodes("inf", 1)
    obj = _one(preview.preview(world(*nodes), [pool], T0))
    text = preview.render(preview.preview(world(*nodes), [pool], T0))
    assert f"tessera.io/approve-plan={obj.plan_hash}" in text
    live = custom("NodePoolGeometry", "inf", pool["spec"], **{
        "tessera.io/approve-plan": obj.plan_hash
    })  # fmt: skip
    again = _one(preview.preview(world(*nodes, live), [pool], T0))
    assert again.approved and again.plan_hash == obj.plan_hash


def test_impossible_layout_is_a_problem_not_an_error() -> None:
    pool = npg("inf", {"mig": {"layouts": [{"profiles": {"7g.80gb": 2}}]}})
    obj = _one(preview.preview(world(*gpu_nodes("inf", 1)), [pool], T0))
    assert obj.problems and "impossible" in obj.problems[0]
    assert obj.changes[0].after == "impossible"


def test_ranges_compress_device_lists() -> None:
    assert ranges([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8"


def mig_pod(name: str, node: str, n: int) -> dict[str, object]:
    raw = pod(name, node, app="serving")
    raw["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": str(n)}}
    return raw


def ready(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes as KWOK (a kubelet) reports them: Ready."""
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return nodes


def test_pods_with_nowhere_to_run_are_a_warning_line_and_the_plan_still_changes() -> None:
    old = npg("inf", LAYOUT_A)  # 16 x 1g.10gb per node
    nodes, cm = converged(ready(gpu_nodes("inf", 2)), old)
    pods = [mig_pod(f"{n}-{i}", n, 8) for n in ("inf-0", "inf-1") for i in (0, 1)]
    result = preview.preview(world(*nodes, cm, old, *pods), [npg("inf", LAYOUT_B)], T0)
    line = (
        "InsufficientCapacity: 2 pod(s) would have nowhere to run: "
        "nvidia.com/mig-1g.10gb short by 16 (ml/inf-0-0, ml/inf-0-1)"
    )
    assert _one(result).problems[0] == line
    assert f"  ! {line}" in preview.render(result)
    assert result.changed and not result.conflicts  # exit 2: a warning on the pace, not an error

    spare, _ = converged(ready(gpu_nodes("spare", 1)), npg("spare", LAYOUT_A))
    roomy = preview.preview(world(*nodes, *spare, cm, old, *pods), [npg("inf", LAYOUT_B)], T0)
    assert not any("InsufficientCapacity" in p for p in _one(roomy).problems)


def _autopilot_pool(layout: Any = LAYOUT_A) -> dict[str, Any]:
    pool = npg("inf", layout)
    pool["spec"]["autopilot"] = {"profiles": {"H100-80GB": {"1g.10gb": {}, "3g.40gb": {}}}}
    return pool


def _with_choice(pool: dict[str, Any]) -> dict[str, Any]:
    """``pool`` as the API server holds it once its autopilot chose GPU 5 for 1g.10gb x7."""
    spec = NodePoolGeometrySpec.model_validate(pool["spec"])
    live = copy.deepcopy(pool)
    live["status"] = {
        "autopilot": {
            "layouts": [
                {"devices": "all", "profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}},
                {"devices": "5", "profiles": {"1g.10gb": 7}},
            ],
            "basis": pilot.basis(spec),
            "outcome": "Changed",
            "reason": "7 pods want 1g.10gb for 6 min; GPU 5 is idle on each of the 2 node(s)",
            "decidedAt": "2026-12-07T12:00:00Z",
            "day": "2026-12-07",
            "reconfigurations": [{"gpu": 5, "count": 1}],
        }
    }
    return live


def test_the_plan_targets_the_autopilots_choice_in_status_and_says_why() -> None:
    pool = _autopilot_pool()
    nodes, cm = converged(gpu_nodes("inf", 2), pool)
    result = preview.preview(world(*nodes, cm, _with_choice(pool)), [pool], T0)
    obj = _one(result)
    assert obj.action == "unchanged"  # Git's manifest is what the cluster holds
    assert [c.node for c in obj.changes] == ["inf-0", "inf-1"]
    assert obj.changes[0].after.endswith("; 5: 7x1g.10gb"), obj.changes[0].after
    assert obj.autopilot == (
        "targets the choice in status.autopilot (Changed at 2026-12-07T12:00:00Z: 7 pods want "
        "1g.10gb for 6 min; GPU 5 is idle on each of the 2 node(s))"
    )
    text = preview.render(result)
    assert "  autopilot: targets the choice in status.autopilot (Changed" in text
    # the hash is the operator's: the rollout of the effective spec
    eff = pilot.effective(
        NodePoolGeometrySpec.model_validate(pool["spec"]),
        pilot.recorded(_with_choice(pool)["status"]),
    )
    seen = cluster.observe_pool("inf", eff, nodes, {})
    assert obj.plan_hash == targets.plan_hash("NodePoolGeometry/inf", seen.desired)


def test_a_change_of_gits_layouts_drops_the_choice_in_the_plan_too() -> None:
    pool = _autopilot_pool()
    nodes, cm = converged(gpu_nodes("inf", 2), pool)
    result = preview.preview(world(*nodes, cm, _with_choice(pool)), [_autopilot_pool(LAYOUT_B)], T0)
    obj = _one(result)
    assert obj.autopilot == ""
    assert obj.changes[0].after == "all: 7x1g.10gb"


def test_a_busy_gpu_withdraws_the_choice_in_the_plan_as_the_operator_does() -> None:
    """A pod landed on inf-0's GPU 5 after the choice: the operator's pass withdraws the
    choice for GPU 5 (``cluster.autopilot.withdrawal``) and plans what is left; the preview
    does the same, so its hash is the one the operator then writes, and it says so."""
    pool = _autopilot_pool()
    nodes, cm = converged(gpu_nodes("inf", 2), pool)
    read = "2026-12-07T11:59:00Z"
    for node in nodes:
        held = {"ml/late": [5]} if node["metadata"]["name"] == "inf-0" else {}
        record = json.dumps({"v": 1, "read": read, "pods": held})
        node["metadata"]["annotations"] = {
            **(node["metadata"].get("annotations") or {}),
            c.GPU_HOLDERS_ANNOTATION: record,
        }
    agents = [pod(f"agent-{i}", f"inf-{i}", "tessera-system") for i in range(2)]
    for agent in agents:
        agent["metadata"]["labels"] = {c.COMPONENT_LABEL: c.GPU_AGENT_COMPONENT}
        agent["spec"]["containers"][0]["resources"] = {}
    late = pod("late", "inf-0")
    late["metadata"]["creationTimestamp"] = "2026-12-07T11:58:00Z"
    cluster_now = world(*nodes, cm, _with_choice(pool), *agents, late)
    obj = _one(preview.preview(cluster_now, [pool], T0))
    assert "its choice for GPU 5 is withdrawn (GPU inf-0/5 holds ml/late since the choice)" in (
        obj.autopilot
    ), obj.autopilot
    assert obj.changes == ()  # GPU 5 back to what both nodes run: nothing rolls
    assert obj.pods_to_evict == 0
    git = NodePoolGeometrySpec.model_validate(pool["spec"])
    seen = cluster.observe_pool("inf", git, nodes, {})
    assert obj.plan_hash == targets.plan_hash("NodePoolGeometry/inf", seen.desired)
