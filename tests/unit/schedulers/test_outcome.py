"""The scheduler side's verdict joined with the node side's, and status.scheduler."""

from __future__ import annotations

import pytest

from tessera.domain.base.conditions import Verdict
from tessera.domain.schedulers.outcome import SchedulerOutcome, merge, overall, ready, status

READY = Verdict("ready", "Applied", "nodes applied")
ROLLING = Verdict("progressing", "RollingOut", "node 1 of 2")
CONFLICT = Verdict("stalled", "Conflict", "a and b disagree")
WAITING = Verdict("progressing", "WaitingForScheduler", "no map")


@pytest.mark.parametrize(
    ("base", "side", "result"),
    [
        # node side, scheduler side, the policy's verdict
        (READY, None, READY),
        (READY, SchedulerOutcome(CONFLICT), CONFLICT),
        (ROLLING, SchedulerOutcome(CONFLICT), CONFLICT),
        (ROLLING, SchedulerOutcome(WAITING), ROLLING),  # equal rank: the node side speaks
        (CONFLICT, SchedulerOutcome(WAITING), CONFLICT),
        (READY, SchedulerOutcome(WAITING), WAITING),
        (READY, ready("map holds x"), Verdict("ready", "Applied", "nodes applied; map holds x")),
    ],
)
def test_overall(base: Verdict, side: SchedulerOutcome | None, result: Verdict) -> None:
    assert overall(base, side) == result


def test_merge_keeps_the_worse_verdict_and_every_map() -> None:
    hami = SchedulerOutcome(READY, ("kube-system/hami",), {"hami": "v2.10.0 (image)"})
    volcano = SchedulerOutcome(
        WAITING, ("volcano-system/v",), {"volcano": "v1.16.0 (declared)"}, True
    )
    joined = merge([hami, volcano])
    assert joined == SchedulerOutcome(
        WAITING,
        ("kube-system/hami", "volcano-system/v"),
        {"hami": "v2.10.0 (image)", "volcano": "v1.16.0 (declared)"},
        True,
    )
    assert merge([]) is None
    two = merge([SchedulerOutcome(ready("x").verdict), SchedulerOutcome(ready("y").verdict)])
    assert two is not None and two.verdict.message == "x; y"


def test_status() -> None:
    found = SchedulerOutcome(READY, ("kube-system/hami",), {"hami": "v2.10.0 (image)"})
    assert status("HAMi", found) == {
        "name": "HAMi",
        "versions": {"hami": "v2.10.0 (image)"},
        "configMaps": ["kube-system/hami"],
        "restartPending": False,
    }
    assert status("Volcano", None)["configMaps"] == []
