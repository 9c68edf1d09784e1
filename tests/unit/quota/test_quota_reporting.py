from datetime import UTC, datetime

import pytest
from quota_builders import GPU, MEM, MIG, members, seen, spec

from tessera.domain.base.conditions import conditions_for
from tessera.domain.quota.membership import resolve
from tessera.domain.quota.planning import QuotaPlan, plan
from tessera.domain.quota.reporting import commitment, overcommitted, status, verdict

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WITHIN = ("Overcommitted", "False", "WithinCapacity", "")


def test_commitment_is_total_else_hard_times_namespaces() -> None:
    assert commitment(spec({MIG: 4, MEM: 100}, {MIG: 6}), 3) == {MIG: 6, MEM: 300}


@pytest.mark.parametrize(
    ("capacity", "want"),
    [
        pytest.param({MIG: 12, GPU: 3}, "False", id="fits"),
        pytest.param({MIG: 10, GPU: 2}, "False", id="equal-is-fine"),
        pytest.param({MIG: 9, GPU: 2}, "True", id="mig-over"),
        pytest.param({MIG: 10}, "True", id="unadvertised-resource-has-no-capacity"),
    ],
)
def test_overcommitted_compares_all_tenants_with_capacity(
    capacity: dict[str, int], want: str
) -> None:
    commitments = {"a": {MIG: 6, GPU: 2}, "b": {MIG: 4}}
    assert overcommitted("a", commitments, capacity)[1] == want


def test_overcommitted_message_names_tenants_and_resources() -> None:
    commitments = {"a": {MIG: 6}, "b": {MIG: 4, GPU: 9}, "c": {GPU: 1}}
    type_, state, reason, message = overcommitted("a", commitments, {MIG: 8, GPU: 1})
    assert (type_, state, reason) == ("Overcommitted", "True", "TotalsExceedCapacity")
    assert message == f"{MIG}: tenants a (6), b (4) promise 10 > capacity 8"
    assert GPU not in message  # a does not use it


def test_verdicts() -> None:
    calm = QuotaPlan((), (), {"a": {}})
    assert verdict("t", calm, members("t", "a"), WITHIN).state == "ready"
    busy = plan("t", spec(total={MIG: 2}), members("t", "a"), [])
    assert verdict("t", busy, members("t", "a"), WITHIN).reason == "ApplyingQuotas"
    waiting = QuotaPlan((), (), {"a": {}}, unconfirmed=("a",))
    assert verdict("t", waiting, members("t", "a"), WITHIN).reason == "AwaitingQuotaController"
    held = QuotaPlan((), (), {}, held=("x",))
    assert verdict("t", held, members("t"), WITHIN).reason == "HandingOver"
    over = QuotaPlan((), (), {"a": {}}, over_total=(MIG,))
    assert verdict("t", over, members("t", "a"), WITHIN).reason == "UsageOverTotal"
    clash = resolve({"t": {"x"}, "u": {"x"}})
    stalled = verdict("t", calm, clash, WITHIN)
    assert (stalled.state, stalled.reason) == ("stalled", "Conflict")
    assert "t and u" in stalled.message and "x" in stalled.message
    assert stalled.extra == (WITHIN,)


def test_status_sums_usage_and_lists_namespaces() -> None:
    tenant = spec({MIG: 4}, {MIG: 6})
    quotas = [
        seen("a", {MIG: 3}, used={MIG: 2}),
        seen("b", {MIG: 3}, used={MIG: 1}),
        seen("gone", {MIG: 3}, used={MIG: 3}),
        seen("a", {MIG: 1}, used={MIG: 1}, tenant="other"),
    ]
    p = plan("team-a", tenant, members("team-a", "a", "b", "c"), quotas)
    ready = verdict("team-a", p, members("team-a", "a", "b", "c"), WITHIN)
    got = status(
        tenant,
        p,
        quotas,
        {MIG: 128},
        tenant="team-a",
        generation=4,
        conditions=conditions_for(ready, 4, [], T0),
    )
    assert got.observed_generation == 4 and got.namespaces == 3
    assert got.used == {MIG: "3"} and got.total == {MIG: "6"} and got.capacity == {MIG: "128"}
    assert [(r.namespace, r.hard, r.used) for r in got.per_namespace] == [
        ("a", {MIG: "3"}, {MIG: "2"}),
        ("b", {MIG: "3"}, {MIG: "1"}),
        ("c", {}, {}),
    ]
    assert {c.type for c in got.conditions} == {"Ready", "Reconciling", "Overcommitted"}


def test_per_namespace_rows_are_bounded() -> None:
    names = [f"ns-{i:03}" for i in range(150)]
    p = plan("team-a", spec({MIG: 1}), members("team-a", *names), [])
    got = status(spec({MIG: 1}), p, [], {}, tenant="team-a", generation=1)
    assert got.namespaces == 150 and len(got.per_namespace) == 100
    assert got.capacity == {MIG: "0"}


def test_a_tenant_in_conflict_counts_the_namespaces_it_selects() -> None:
    """kubectl get tq showed NAMESPACES 0 for a tenant whose namespaces were all contested."""
    clash = resolve({"team-a": {"shared-1", "shared-2", "own"}, "team-b": {"shared-1", "shared-2"}})
    assert clash.contested_of("team-a") == ("shared-1", "shared-2")
    p = plan("team-a", spec({MIG: 1}), clash, [])
    got = status(
        spec({MIG: 1}),
        p,
        [],
        {},
        tenant="team-a",
        generation=1,
        contested=clash.contested_of("team-a"),
    )
    assert got.namespaces == 3
    assert got.contested == ["shared-1", "shared-2"]
    assert [r.namespace for r in got.per_namespace] == ["own"]
    only_shared = resolve({"team-b": {"shared-1"}, "team-c": {"shared-1"}})
    p = plan("team-b", spec({MIG: 1}), only_shared, [])
    got = status(
        spec({MIG: 1}),
        p,
        [],
        {},
        tenant="team-b",
        generation=1,
        contested=only_shared.contested_of("team-b"),
    )
    assert (got.namespaces, got.contested, got.per_namespace) == (1, ["shared-1"], [])
