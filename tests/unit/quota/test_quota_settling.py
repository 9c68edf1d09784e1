"""Headroom moves wait while admission is charging the namespace they would write.

The story (integration: a burst of pod creates into qa-1 and qa-2): a write into a
namespace admission is charging makes the quota controller recount it from caches that
miss the last charge, and admission then lets that namespace pass its limit. Tessera
leaves busy namespaces' quotas alone, except where the sum of limits needs a lowering.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from quota_builders import GPU, MIG, members, seen, spec
from quota_cluster import Cluster

from tessera.domain.base.conditions import Verdict
from tessera.domain.quota import settling
from tessera.domain.quota.planning import Action, plan
from tessera.domain.quota.reporting import verdict

KEY = f"requests.{MIG}"
TENANT = spec({MIG: 4}, {MIG: 6})
T0 = datetime(2026, 1, 1, tzinfo=UTC)
# a is full and pressed, b idle: headroom moves from b to a (b 3→2 in wave 1, a 3→4 after)
PRESSED = [seen("a", {MIG: 3}, used={MIG: 3}), seen("b", {MIG: 3}, used={MIG: 1})]


def writes(actions: tuple[Action, ...]) -> dict[str, str]:
    return {a.namespace: a.manifest["spec"]["hard"][KEY] for a in actions if a.manifest}


@pytest.mark.parametrize(
    ("busy", "wave1", "wave2", "waiting"),
    [
        # quiet: the move goes, lowering first
        (set(), {"b": "2"}, {"a": "4"}, ()),
        # the namespace giving headroom is busy: its decrease waits, and every raise with it
        ({"b"}, {}, {}, ("b",)),
        # the full namespace is busy: the decrease goes, its raise waits
        ({"a"}, {"b": "2"}, {}, ("a",)),
        ({"a", "b"}, {}, {}, ("a", "b")),
        # a namespace without a move is not waited for
        ({"c"}, {"b": "2"}, {"a": "4"}, ()),
    ],
)
def test_moves_into_busy_namespaces_wait(
    busy: set[str], wave1: dict[str, str], wave2: dict[str, str], waiting: tuple[str, ...]
) -> None:
    got = plan("team-a", TENANT, members("team-a", "a", "b"), PRESSED, busy=frozenset(busy))
    assert (writes(got.wave1), writes(got.wave2), got.waiting) == (wave1, wave2, waiting)
    assert got.settled is False
    assert got.targets == {"a": {MIG: 4}, "b": {MIG: 2}}  # where it goes once quiet


def test_a_deferred_decrease_never_releases_the_raise() -> None:
    # wave 1 emptied by the deferral must not let wave 2 through: a 3→4 before b 3→2 is 7 > 6
    got = plan("team-a", TENANT, members("team-a", "a", "b"), PRESSED, busy=frozenset({"b"}))
    assert got.next_wave == ()


def test_a_lowered_total_lowers_busy_namespaces_at_once() -> None:
    quotas = [seen("a", {MIG: 3}, used={MIG: 1}), seen("b", {MIG: 3}, used={MIG: 1})]
    lowered = spec({MIG: 4}, {MIG: 4})  # limits 3 + 3 now allow 6 > 4: safety first
    got = plan("team-a", lowered, members("team-a", "a", "b"), quotas, busy=frozenset({"a", "b"}))
    assert writes(got.wave1) == {"a": "2", "b": "2"} and got.waiting == ()


def test_an_undercount_past_the_total_is_absorbed_at_once() -> None:
    # b holds 3 where status.used says 2: limits allow 3 + (3 + 1) > 6, so a gives 1 now
    quotas = [seen("a", {MIG: 3}, used={MIG: 0}), seen("b", {MIG: 3}, used={MIG: 2})]
    present = {"b": {MIG: 3}}
    busy = frozenset({"a", "b"})
    got = plan("team-a", TENANT, members("team-a", "a", "b"), quotas, present, busy)
    assert writes(got.wave1) == {"a": "2"} and got.waiting == ()


def test_a_namespace_s_first_quota_is_never_deferred() -> None:
    got = plan("team-a", TENANT, members("team-a", "a"), [], busy=frozenset({"a"}))
    assert [(a.verb, a.namespace) for a in got.wave1] == [("create", "a")]


def test_a_user_change_to_a_resource_without_total_goes_at_once() -> None:
    quotas = [seen("a", {MIG: 3, GPU: 1}, used={MIG: 3}), seen("b", {MIG: 3, GPU: 2})]
    changed = spec({MIG: 4, GPU: 2}, {MIG: 6})
    got = plan("team-a", changed, members("team-a", "a", "b"), quotas, busy=frozenset({"a", "b"}))
    # a's gpu limit is the user's word; b's decrease is a move and waits, so does a's raise
    assert [a.namespace for a in got.wave1] == ["a"] and got.wave2 == ()
    assert got.waiting == ("a", "b")


def test_the_condition_names_the_busy_namespaces() -> None:
    got = plan("team-a", TENANT, members("team-a", "a", "b"), PRESSED, busy=frozenset({"a", "b"}))
    overcommit = ("Overcommitted", "False", "Fits", "")
    said = verdict("team-a", got, members("team-a", "a", "b"), overcommit)  # type: ignore[arg-type]
    assert said == Verdict(
        "progressing",
        "AwaitingAdmission",
        "waiting for admission in a, b to settle before moving headroom",
        (overcommit,),  # type: ignore[arg-type]
    )


def snapshot(used: int, counted: int | None = None) -> settling.Snapshot:
    return ((MIG, used, counted),)


@pytest.mark.parametrize(
    ("before", "after", "elapsed", "busy"),
    [
        (None, 3, 0.0, False),  # first seen: nothing to compare with
        (3, 3, 0.1, False),  # unchanged since first seen
        (2, 3, 0.0, True),  # charged since the previous pass
        (2, 3, 0.9, True),  # ... less than a second ago
        (2, 3, 1.0, False),  # ... a second ago: settled
    ],
)
def test_a_namespace_is_busy_for_a_second_after_its_usage_changed(
    before: int | None, after: int, elapsed: float, busy: bool
) -> None:
    record: settling.Record = {}
    if before is not None:
        _, record = settling.busy({"a": settling.Seen(snapshot(3), None)}, {}, T0)
        _, record = settling.busy({"a": settling.Seen(snapshot(3), None)}, {"a": snapshot(3)}, T0)
        _, record = settling.busy(record, {"a": snapshot(before)}, T0)
    _, record = settling.busy(record, {"a": snapshot(after)}, T0)
    got, _ = settling.busy(record, {"a": snapshot(after)}, T0 + timedelta(seconds=elapsed))
    assert (got == {"a"}) is busy


def test_a_namespace_busy_without_a_pause_is_not_waited_for_past_patience() -> None:
    _, record = settling.busy({}, {"a": snapshot(0)}, T0)
    waited = []
    for tick in range(1, 41):  # a pod every half second for 20 s
        now = T0 + timedelta(seconds=tick / 2)
        got, record = settling.busy(record, {"a": snapshot(tick)}, now)
        waited.append(got == {"a"})
    assert waited == [True] * 30 + [False] * 10  # 15 s of waiting, then moves go ahead
    got, record = settling.busy(record, {"a": snapshot(40)}, T0 + timedelta(seconds=30))
    got, _ = settling.busy(record, {"a": snapshot(41)}, T0 + timedelta(seconds=31))
    assert got == {"a"}  # after a pause, a new burst is waited for again


def test_a_status_filled_in_for_the_first_time_is_not_a_charge() -> None:
    _, record = settling.busy({}, {"a": ((MIG, None, None),)}, T0)
    got, _ = settling.busy(record, {"a": snapshot(0)}, T0 + timedelta(seconds=0.5))
    assert got == frozenset()


def test_a_recount_change_alone_makes_a_namespace_busy() -> None:
    _, record = settling.busy({}, {"a": snapshot(2, 2)}, T0)
    got, _ = settling.busy(record, {"a": snapshot(2, 3)}, T0 + timedelta(seconds=0.5))
    assert got == {"a"}


def test_usage_takes_status_used_and_the_recount_per_namespace() -> None:
    got = settling.usage("team-a", ["a", "b"], [MIG], PRESSED, {"a": {MIG: 4}})
    assert got == {"a": ((MIG, 3, 4),), "b": ((MIG, 1, None),)}


def burst(cluster: Cluster, busy: frozenset[str]) -> None:
    """a fills up and b charges a pod its caches do not hold yet; Tessera moves headroom;
    admission then takes what each limit allows."""
    cluster.converge()  # limits 3 + 3
    cluster.admit("a", MIG, 3)
    cluster.admit("b", MIG, 1, cached=False)
    for _ in range(3):
        cluster.reconcile(busy=busy)
        for ns in ("a", "b"):
            cluster.sync(ns)
            for _ in range(3):
                cluster.admit(ns, MIG, 1)


def test_a_move_written_during_the_burst_lets_admission_pass_the_total() -> None:
    # the model's teeth: without waiting, b's recount drops its last charge and a + b hold 7
    with pytest.raises(AssertionError, match=r"\{'a': 4, 'b': 3\}"):
        burst(Cluster(TENANT, {"a", "b"}), frozenset())


def test_waiting_for_a_quiet_namespace_keeps_the_total() -> None:
    cluster = Cluster(TENANT, {"a", "b"})
    burst(cluster, frozenset({"a", "b"}))  # busy throughout: nothing written, nothing dropped
    assert cluster.quotas["b"].hard == {MIG: 3} and cluster.dropped == {}
    assert sum(cluster.held(ns, MIG) for ns in ("a", "b")) == 6


def test_a_deferred_move_happens_on_the_first_quiet_pass() -> None:
    cluster = Cluster(TENANT, {"a", "b"})
    cluster.converge()
    cluster.admit("a", MIG, 3)
    cluster.admit("b", MIG, 1, cached=False)
    assert cluster.reconcile(busy=frozenset({"b"})).waiting == ("b",)
    assert {ns: q.hard for ns, q in cluster.quotas.items()} == {"a": {MIG: 3}, "b": {MIG: 3}}
    cluster.caught_up("b")
    assert cluster.converge() == 2  # lower b, then raise a once b's decrease is enforced
    assert {ns: q.hard for ns, q in cluster.quotas.items()} == {"a": {MIG: 4}, "b": {MIG: 2}}
