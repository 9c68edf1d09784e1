from datetime import UTC, datetime
from typing import Literal

import pytest

from tessera.domain.base.conditions import Verdict, condition, conditions_for, landed, warns

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("verdict", "types"),
    [
        (Verdict("ready", "Succeeded", "done"), {"Ready": "True"}),
        (Verdict("progressing", "RollingOut", "2 of 4"), {"Ready": "False", "Reconciling": "True"}),
        (Verdict("stalled", "Conflict", "sp/a and sp/b"), {"Ready": "False", "Stalled": "True"}),
        (
            Verdict("ready", "Succeeded", "", extra=(("Overcommitted", "True", "Over", "x"),)),
            {"Ready": "True", "Overcommitted": "True"},
        ),
    ],
)
def test_verdict_becomes_kstatus_conditions(verdict: Verdict, types: dict[str, str]) -> None:
    got = conditions_for(verdict, 3, [], T0)
    assert {c["type"]: c["status"] for c in got} == types
    assert all(c["observedGeneration"] == 3 for c in got)


def test_transition_time_moves_only_when_status_changes() -> None:
    first = conditions_for(Verdict("progressing", "RollingOut", "a"), 1, [], T0)
    same = conditions_for(Verdict("progressing", "Draining", "b"), 2, first, T1)
    ready = condition(same, "Ready")
    assert ready is not None and ready["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    flipped = conditions_for(Verdict("ready", "Succeeded", ""), 2, same, T1)
    ready = condition(flipped, "Ready")
    assert ready is not None and ready["lastTransitionTime"] == "2026-01-02T00:00:00Z"
    assert condition(flipped, "Reconciling") is None


READY = Verdict("ready", "Succeeded", "all 3 nodes match their layout")
MOVING = Verdict("progressing", "Draining", "1 of 3 nodes updated")
STUCK = Verdict("stalled", "DrainBlocked", "pdb ns/a")


@pytest.mark.parametrize(
    ("verdict", "all_landed", "state", "reason"),
    [
        (READY, True, "ready", "Succeeded"),  # every write landed: the plan's verdict stands
        (READY, False, "progressing", "RollingOut"),  # a node write failed: not Ready yet
        (MOVING, False, "progressing", "Draining"),  # already not Ready: unchanged
        (STUCK, False, "stalled", "DrainBlocked"),  # needs a human either way
    ],
)
def test_a_pass_whose_writes_did_not_all_land_is_never_ready(
    verdict: Verdict, all_landed: bool, state: str, reason: str
) -> None:
    got = landed(verdict, all_landed)
    assert (got.state, got.reason) == (state, reason)
    if state == "progressing" and verdict.state == "ready":
        assert "did not land" in got.message


@pytest.mark.parametrize(
    ("state", "reason", "warning"),
    [
        ("stalled", "InvalidSpec", True),
        ("progressing", "InsufficientCapacity", True),  # held until someone adds room
        ("progressing", "BudgetHeldByOthers", True),  # held until others give nodes back
        ("progressing", "Draining", False),
        ("progressing", "WaitingForApproval", False),
    ],
)
def test_an_event_warns_when_the_object_is_stuck_or_waits_for_room(
    state: Literal["ready", "progressing", "stalled"], reason: str, warning: bool
) -> None:
    assert warns(Verdict(state, reason, "message")) is warning
