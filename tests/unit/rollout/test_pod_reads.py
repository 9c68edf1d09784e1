"""Whose pods a pass reads, and how fresh: the recount must never come from a cache."""

from __future__ import annotations

import pytest
from rollout_builders import desired, state

from builders.views import NEW, OLD, node
from tessera.domain.cluster.objects import pod_reads
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import NodeView

CASES: dict[str, tuple[NodeView, str | None]] = {
    # name: (the node, how its pods are read: "fresh", "ranked" or None)
    "at its target, no state: nothing to read": (node(config=NEW), None),
    "waiting for a slot: ranked from the index": (node(), "ranked"),
    "cordoned: the drain lists fresh": (node(st=state(Phase.CORDONED), cordoned=True), "fresh"),
    "draining": (node(st=state(Phase.DRAINING), cordoned=True), "fresh"),
    "blocked": (node(st=state(Phase.BLOCKED), cordoned=True), "fresh"),
    "applying: the recount": (node(st=state(Phase.APPLYING), cordoned=True), "fresh"),
    "verifying: the agent works, pods are not read": (
        node(config=NEW, agent="pending", st=state(Phase.VERIFYING), cordoned=True),
        None,
    ),
    "verifying, layout not requested yet (a pass stopped short): recount": (
        node(st=state(Phase.VERIFYING), cordoned=True),
        "fresh",
    ),
    "failed": (node(st=state(Phase.FAILED), cordoned=True), None),
    "uncordoning": (node(config=NEW, st=state(Phase.UNCORDONING), cordoned=True), None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_pod_reads(case: tuple[NodeView, str | None]) -> None:
    view, want = case
    reads = pod_reads([view], {view.name: desired(NEW)})
    got = "fresh" if reads.fresh else "ranked" if reads.ranked else None
    assert got == want
    assert not (reads.fresh and reads.ranked)


@pytest.mark.parametrize("phase", [Phase.VERIFYING, Phase.FAILED])
def test_a_node_the_spec_moved_away_from_is_read_fresh(phase: Phase) -> None:
    """Retargeting sends it back to Applying in the same pass, and Applying recounts."""
    view = node(config=NEW, agent="pending", st=state(phase), cordoned=True)
    assert pod_reads([view], {view.name: desired(OLD)}).fresh == (view.name,)
    assert pod_reads([view], {view.name: desired(NEW)}).fresh == ()
