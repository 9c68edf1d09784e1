"""How a failed pass reports: which refusal, whether an Event, what counts as failed, which
conditions it keeps (tessera.domain.base.failures, conditions.kept), composed as the skeleton does."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tessera.domain.base import failures
from tessera.domain.base.conditions import Status, Verdict, conditions_for, kept
from tessera.domain.base.failures import Failure

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _forbidden(node: str) -> Failure:
    return Failure(
        403,
        f'(403) Forbidden: nodes "{node}" is forbidden: User "system:serviceaccount:'
        f'tessera-system:tessera" cannot patch resource "nodes" in API group ""',
    )


GPU1, GPU2 = _forbidden("gpu-1"), _forbidden("gpu-2")
SLOW = Failure(503, "(503) ServiceUnavailable: etcd is slow")


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ([], None),
        ([GPU2], GPU2),  # one: as the API said it
        # several, in either order of completion: counted, the first by object name
        ([GPU1, GPU2], Failure(403, f"2 writes refused; first: {GPU1.message}")),
        ([GPU2, GPU1], Failure(403, f"2 writes refused; first: {GPU1.message}")),
        # the one only a person can fix comes first, whatever its name
        ([SLOW, GPU2], Failure(403, f"2 writes refused; first: {GPU2.message}")),
        ([GPU2, GPU2], GPU2),  # the same refusal twice is one
    ],
)
def test_the_reported_refusal_does_not_depend_on_completion_order(
    found: list[Failure], expected: Failure | None
) -> None:
    assert failures.reported(found) == expected


def _pass(
    found: Sequence[Failure], tries: int, previous: list[dict[str, Any]], now: datetime
) -> tuple[list[dict[str, Any]], bool]:
    """One failed pass as the skeleton composes it: its conditions, and whether it posts."""
    failure = failures.reported(found)
    assert failure is not None
    verdict = failures.verdict(failure, tries, (now - T0).total_seconds())
    conditions = conditions_for(verdict, 3, previous, now)
    return conditions, failures.announces(verdict, previous, loud=True, wrote=True, announce=True)


def test_two_refused_nodes_report_the_same_status_and_one_event_across_passes() -> None:
    """Nodes of a stage are written concurrently: the refusals finish in any order."""
    first, posted = _pass([GPU2, GPU1], 1, [], T0)
    assert posted
    again, posted_again = _pass([GPU1, GPU2], 2, first, T0 + timedelta(seconds=1))
    assert again == first  # the status is not rewritten...
    assert not posted_again  # ...and no new Event for an unchanged failure


@pytest.mark.parametrize(
    ("state", "shown", "loud", "wrote", "announce", "posts"),
    [
        # Ready is no news
        ("ready", None, False, True, True, False),
        # a failed pass (or a spec that cannot be acted on): when what it reports changed
        ("stalled", None, True, False, True, True),
        ("stalled", ("Forbidden", "other message"), True, True, False, True),
        ("stalled", ("Forbidden", "msg"), True, True, True, False),  # unchanged: no new Event
        ("stalled", ("Forbidden", "msg"), True, False, True, False),  # status refused: same
        # any other verdict that is not Ready: when it changed the status, for a kind that says
        ("progressing", ("Forbidden", "msg"), False, True, True, True),
        ("progressing", None, False, True, False, False),
        ("progressing", None, False, False, True, False),
    ],
)
def test_when_a_pass_posts_an_event(
    state: Any,
    shown: tuple[str, str] | None,
    loud: bool,
    wrote: bool,
    announce: bool,
    posts: bool,
) -> None:
    previous = (
        []
        if shown is None
        else [{"type": "Ready", "status": "False", "reason": shown[0], "message": shown[1]}]
    )
    verdict = Verdict(state, "Forbidden", "msg")
    got = failures.announces(verdict, previous, loud=loud, wrote=wrote, announce=announce)
    assert got is posts


@pytest.mark.parametrize(
    ("failed", "written", "counts"),
    [
        (False, True, False),  # a good pass: the streak ends
        (True, True, True),  # a failed pass reported in the status
        (False, False, True),  # a good pass whose status could not be written: retried
        (True, False, True),
    ],
)
def test_what_counts_as_a_failed_pass(failed: bool, written: bool, counts: bool) -> None:
    assert failures.counts_as_failed(failed, written) is counts


def test_a_pass_that_failed_before_concluding_keeps_the_kinds_own_conditions() -> None:
    over: tuple[tuple[str, Status, str, str], ...] = (("Overcommitted", "True", "Over", "6 > 4"),)
    good = conditions_for(Verdict("ready", "Applied", "ok", over), 2, [], T0)
    failed = failures.verdict(SLOW, 1, 0.0)  # the error escaped: no finding of its own
    later = T0 + timedelta(minutes=5)
    conditions = conditions_for(failed, 2, good, later) + kept(good)
    assert [c["type"] for c in conditions] == ["Ready", "Reconciling", "Overcommitted"]
    assert conditions[-1] == good[-1]  # as it was: its lastTransitionTime did not move
    assert conditions[-1]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert kept(conditions) == [good[-1]]  # and the next failed pass keeps it still
