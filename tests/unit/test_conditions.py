from datetime import UTC, datetime

import pytest

from tessera.domain.conditions import Verdict, condition, conditions_for

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
