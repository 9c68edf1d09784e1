"""``tessera plan --prune`` on NodePoolGeometries and SharingPolicies: the nodes they hold,
as each finalizer releases them, and where the nodes' layouts and sharing configs end up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from preview_builders import (
    T0,
    deleted,
    holding,
    pool_world,
    sharing_applied,
    sharing_policy,
    whole_gpu_nodes,
    world,
)

from builders import custom
from tessera.api import constants as c
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain import preview, rollout
from tessera.domain.cluster import objects as cluster
from tessera.domain.rollout.views import pending_taint

OWNER = "NodePoolGeometry/inf"


# -- NodePoolGeometry: what backout does with the nodes it holds ---------------------------------


@pytest.mark.parametrize(
    ("case", "hold", "holds", "then", "waits", "warning"),
    [
        (
            "draining",
            {"phase": "Draining", "target": "B"},
            ("rollout Draining toward all: 7x1g.10gb", "cordoned by Tessera"),
            ("uncordon", "clear its rollout state"),
            "",
            "",
        ),
        (
            "verifying",
            {"phase": "Verifying", "target": "B", "agent": "pending"},
            ("rollout Verifying toward all: 7x1g.10gb", "cordoned by Tessera"),
            ("uncordon", "clear its rollout state"),
            "layout all: 7x1g.10gb finishes first",
            "",
        ),
        (
            "verify timed out",
            {"phase": "Verifying", "target": "B", "agent": "pending", "since": T0 - timedelta(1)},
            ("rollout Verifying toward all: 7x1g.10gb", "cordoned by Tessera"),
            ("uncordon", "clear its rollout state"),
            "",
            "",
        ),
        (
            "cordoned before Tessera",
            {"phase": "Cordoned", "target": "B", "orig": True},
            ("rollout Cordoned toward all: 7x1g.10gb", "cordoned, not by Tessera"),
            ("clear its rollout state", "leave it cordoned"),
            "",
            "",
        ),
        (
            "pending taint, no state",
            {"phase": None, "cordoned": False, "taint": pending_taint(OWNER).value},
            ("taint tessera.io/geometry-pending",),
            ("remove taint tessera.io/geometry-pending",),
            "",
            "",
        ),
        (
            "unreadable state",
            {"phase": None, "state": "{not json", "taint": ""},
            ("unreadable rollout state", "taint tessera.io/geometry-pending", "cordoned, by whom"),
            ("remove taint tessera.io/geometry-pending", "clear its rollout state", "leave it"),
            "",
            "left cordoned: its original state was unreadable",
        ),
        (
            "another pool's node",
            {"phase": "Draining", "owner": "NodePoolGeometry/x"},
            None,
            (),
            "",
            "",
        ),
    ],
)
def test_geometry_deletion_releases_what_the_pool_holds_as_backout_does(
    case: str,
    hold: dict[str, Any],
    holds: tuple[str, ...] | None,
    then: tuple[str, ...],
    waits: str,
    warning: str,
) -> None:
    items, _, layout_a, layout_b = pool_world()
    target = {"A": layout_a, "B": layout_b}[hold.pop("target", "A")]
    owner = hold.pop("owner", OWNER)
    items[0] = holding(items[0], owner, hold.pop("phase"), target, **hold)
    obj = deleted(preview.preview(world(*items), [], T0, prune=True), "inf")
    assert obj.deletion is not None
    released = {r.node: r for r in obj.deletion.released}
    if holds is None:
        assert released == {}, case
        return
    r = released["inf-0"]
    assert len(r.holds) == len(holds) and all(
        got.startswith(want) for got, want in zip(r.holds, holds, strict=True)
    ), r.holds
    assert len(r.then) == len(then) and all(
        got.startswith(want) for got, want in zip(r.then, then, strict=True)
    ), r.then
    assert r.waits.startswith(waits) if waits else r.waits == ""
    assert any(warning in w for w in r.warnings) if warning else r.warnings == ()
    # the same decision as the finalizer's engine call
    view = cluster.pool_view(items[0], {})
    done = rollout.backout(OWNER, RolloutSpec(), [view], T0)
    assert bool(done.waiting) == bool(waits)


def test_geometry_deletion_never_repartitions_and_keeps_every_layout() -> None:
    items, _, layout_a, layout_b = pool_world()
    items[0] = holding(items[0], OWNER, "Verifying", layout_b, agent="pending")
    items[1] = holding(items[1], OWNER, "Draining", layout_b)
    result = preview.preview(world(*items), [], T0, prune=True)
    obj = deleted(result, "inf")
    assert obj.deletion is not None
    assert obj.changes == () and result.configs == () and result.capacity == {}
    assert obj.deletion.kept == {
        "inf-0": "all: 7x1g.10gb",  # requested before the deletion: the agent finishes it
        "inf-1": "all: 3g.40gb + 2g.20gb + 2x1g.10gb",
        "inf-2": "all: 3g.40gb + 2g.20gb + 2x1g.10gb",
    }
    assert any(layout_a in e and layout_b in e for e in obj.deletion.effects)
    views = [cluster.pool_view(n, {}) for n in world(*items).nodes]
    mine = [v for v in views if cluster.touched_by(v, OWNER)]
    actions = rollout.backout(OWNER, RolloutSpec(), mine, T0).actions
    assert actions and not any(isinstance(a, rollout.SetNodeLabels) for a in actions)
    text = preview.render(result)
    assert "NodePoolGeometry/inf: delete; holds 2 node(s), 3 node(s) keep their layout" in text
    assert "  - inf-1: holds rollout Draining toward all: 7x1g.10gb, cordoned by Tessera" in text
    assert "      finalizer: uncordon, clear its rollout state" in text
    assert "  = inf-1, inf-2 keep all: 3g.40gb + 2g.20gb + 2x1g.10gb" in text
    assert text.rstrip().endswith("0 config(s) rewritten, 1 object(s) deleted.")


def test_geometry_deletion_leaves_a_pool_ref_policy_selecting_nothing() -> None:
    items, _, _, _ = pool_world()
    for node in items[:3]:
        node["metadata"]["labels"][c.MIG_STRATEGY_LABEL] = "none"
    ref = custom(
        "SharingPolicy",
        "ts",
        {"poolRef": {"name": "inf"}, "backend": "TimeSlicing", "timeSlicing": {"replicas": 2}},
    )
    live = sharing_applied(items, ref)
    result = preview.preview(world(*live), [ref], T0, prune=True)
    obj = deleted(result, "inf")
    assert obj.deletion is not None
    assert any("sharingpolicy/ts" in e and "PoolNotFound" in e for e in obj.deletion.effects)
    [kept] = [o for o in result.objects if o.name == "ts"]
    assert kept.problems == ("spec.poolRef: NodePoolGeometry inf does not exist (PoolNotFound)",)
    assert [(ch.node, ch.after) for ch in kept.changes] == [
        ("inf-0", "default"),
        ("inf-1", "default"),
        ("inf-2", "default"),
    ]
    text = preview.render(result)
    assert "SharingPolicy/ts: spec unchanged; 3 of 3 node(s) change" in text, text


# -- SharingPolicy: back to the default config, at once --------------------------------------------


@pytest.mark.parametrize(
    ("backend", "section", "before", "after", "capacity", "problem"),
    [
        (
            "TimeSlicing",
            {"timeSlicing": {"replicas": 2}},
            "time-slicing (nvidia.com/gpu x2)",
            "default",
            ({"nvidia.com/gpu": 16}, {"nvidia.com/gpu": 8}),
            "",
        ),
        (
            "MPS",
            {"mps": {"replicas": 4}},
            "mps (nvidia.com/gpu x4)",
            "default",
            ({"nvidia.com/gpu": 32}, {"nvidia.com/gpu": 8}),
            "switch without a drain",
        ),
        (
            "HAMiCore",
            {"hamiCore": {"mode": "TimeSlicing", "deviceSplitCount": 10}},
            "HAMi hami-core (",
            "HAMi's own defaults (Tessera's fields removed)",
            None,
            "",
        ),
    ],
)
def test_sharing_deletion_returns_nodes_to_the_default_config(
    backend: str,
    section: dict[str, Any],
    before: str,
    after: str,
    capacity: tuple[dict[str, int], dict[str, int]] | None,
    problem: str,
) -> None:
    policy = sharing_policy("nb", "nb", backend, **section)
    live = sharing_applied(whole_gpu_nodes("nb", 2), policy)
    assert not preview.preview(world(*live), [policy], T0).changed  # converged
    result = preview.preview(world(*live), [], T0, prune=True)
    obj = deleted(result, "nb")
    assert obj.deletion is not None
    assert [ch.node for ch in obj.changes] == ["nb-0", "nb-1"]
    assert all(before in ch.before and ch.after == after for ch in obj.changes)
    assert not any(ch.disruptive for ch in obj.changes)  # the finalizer never drains
    assert obj.plan_hash == "" and obj.pods_to_evict == 0
    if capacity is not None:
        assert (obj.capacity_before, obj.capacity_after) == capacity
        resource = "nvidia.com/gpu"
        assert result.capacity[resource] == (capacity[0][resource], capacity[1][resource])
    assert any(problem in p for p in obj.problems) if problem else obj.problems == ()
    if backend == "MPS":  # why a policy would have drained it
        assert obj.changes[0].note.startswith("backend mps -> exclusive on node nb-0: MPS")
    if backend == "HAMiCore":
        assert obj.deletion.hami == ("nb-0", "nb-1")
        assert any(
            "tessera.io/hami-mode removed from nb-0, nb-1" in e for e in obj.deletion.effects
        )
        assert any("hami-device-plugin" in d.where for d in result.configs)
    else:
        assert obj.deletion.hami == ()
        assert any(
            "removed from gpu-operator/device-plugin-configs" in e for e in obj.deletion.effects
        )
        [diff] = result.configs
        assert "device-plugin-configs" in diff.where and "-nb-" in diff.diff
    text = preview.render(result)
    assert "SharingPolicy/nb: delete; 2 of 2 node(s) return at once, no drain" in text


def test_sharing_deletion_hands_nodes_to_the_next_policy_and_releases_its_rollout() -> None:
    top = sharing_policy("top", "nb", "TimeSlicing", priority=10, timeSlicing={"replicas": 4})
    low = custom(
        "SharingPolicy",
        "low",
        {
            "nodeSelector": {"matchLabels": {"tessera.io/tier": "low"}},
            "backend": "TimeSlicing",
            "timeSlicing": {"replicas": 2},
        },
    )
    nodes = whole_gpu_nodes("nb", 3)
    nodes[0]["metadata"]["labels"]["tessera.io/tier"] = "low"
    live = sharing_applied(nodes, top, low)
    live[2] = holding(live[2], "SharingPolicy/top", "Draining", "nb-config", label="x")
    result = preview.preview(world(*live), [low], T0, prune=True)
    obj = deleted(result, "top")
    assert obj.deletion is not None
    assert [ch.node for ch in obj.changes] == ["nb-1", "nb-2"]
    assert "nb-0 moves to sharingpolicy/low (see its changes)" in obj.deletion.effects
    [kept] = [o for o in result.objects if o.name == "low"]
    assert [ch.node for ch in kept.changes] == ["nb-0"]
    [released] = obj.deletion.released
    assert released.node == "nb-2"
    assert released.holds == ("rollout Draining toward nb-config", "cordoned by Tessera")
    assert released.then == ("uncordon", "clear its rollout state")
