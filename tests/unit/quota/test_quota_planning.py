from quota_builders import GPU, MEM, MIG, members, rq, seen, spec

from tessera.domain.quota import objects
from tessera.domain.quota.membership import resolve
from tessera.domain.quota.planning import Action, plan


def hard_of(action: Action) -> dict[str, str]:
    assert action.manifest is not None
    return dict(action.manifest["spec"]["hard"])


def summary(actions: tuple[Action, ...]) -> list[tuple[str, str, dict[str, str] | None]]:
    return [(a.verb, a.namespace, hard_of(a) if a.manifest else None) for a in actions]


def test_fresh_tenant_creates_pinned_quotas_then_raises_them() -> None:
    got = plan("team-a", spec({MIG: 4}, {MIG: 6}), members("team-a", "a", "b"), [])
    assert summary(got.wave1) == [
        ("create", "a", {f"requests.{MIG}": "0"}),
        ("create", "b", {f"requests.{MIG}": "0"}),
    ]
    assert summary(got.wave2) == [
        ("update", "a", {f"requests.{MIG}": "3"}),
        ("update", "b", {f"requests.{MIG}": "3"}),
    ]
    assert got.next_wave == got.wave1
    assert got.targets == {"a": {MIG: 3}, "b": {MIG: 3}}


def test_resources_without_total_are_written_in_one_wave() -> None:
    got = plan("team-a", spec({MEM: "20480", MIG: 4}, {MIG: 4}), members("team-a", "a"), [])
    assert summary(got.wave1) == [
        ("create", "a", {f"requests.{MEM}": "20480", f"requests.{MIG}": "0"})
    ]
    assert summary(got.wave2) == [
        ("update", "a", {f"requests.{MEM}": "20480", f"requests.{MIG}": "4"})
    ]


def test_converged_tenant_plans_nothing() -> None:
    quotas = [seen("a", {MIG: 3}, used={MIG: 1}), seen("b", {MIG: 3})]
    got = plan("team-a", spec({MIG: 4}, {MIG: 6}), members("team-a", "a", "b"), quotas)
    assert got.settled and got.next_wave == ()


def test_canonical_quantities_read_back_do_not_churn() -> None:
    body = rq("a", hard={f"requests.{GPU}": "2k"}, status={"hard": {f"requests.{GPU}": "2k"}})
    quota = objects.read(body)
    assert quota is not None
    assert plan("team-a", spec({GPU: 2000}), members("team-a", "a"), [quota]).settled


def test_headroom_moves_lowering_first_with_the_observed_version() -> None:
    quotas = [seen("a", {MIG: 3}, used={MIG: 3}, rv="10"), seen("b", {MIG: 3}, rv="20")]
    got = plan("team-a", spec(total={MIG: 6}), members("team-a", "a", "b"), quotas)
    assert [(a.verb, a.namespace, a.resource_version) for a in got.wave1] == [("update", "b", "20")]
    assert hard_of(got.wave1[0]) == {f"requests.{MIG}": "1"}
    assert got.wave1[0].reason == f"{MIG} 3→1"
    assert summary(got.wave2) == [("update", "a", {f"requests.{MIG}": "5"})]


def test_increases_wait_until_the_quota_controller_enforces_the_decreases() -> None:
    quotas = [
        seen("a", {MIG: 3}, used={MIG: 3}),
        seen("b", {MIG: 1}, enforced={MIG: 3}),  # lowered, not yet in status.hard
    ]
    got = plan("team-a", spec(total={MIG: 6}), members("team-a", "a", "b"), quotas)
    assert got.wave1 == () and got.unconfirmed == ("b",)
    assert summary(got.wave2) == [("update", "a", {f"requests.{MIG}": "5"})]
    assert got.next_wave == ()


def test_namespace_that_left_loses_its_quota() -> None:
    quotas = [seen("a", {MIG: 4}), seen("gone", {MIG: 4}, rv="3")]
    got = plan("team-a", spec({MIG: 4}), members("team-a", "a"), quotas)
    assert [(a.verb, a.namespace, a.name, a.resource_version) for a in got.wave1] == [
        ("delete", "gone", "tessera-team-a", "3")
    ]


def test_delete_is_held_until_the_new_owner_has_a_quota() -> None:
    membership = resolve({"team-a": {"a"}, "team-b": {"moved"}})
    quotas = [seen("a", {MIG: 4}), seen("moved", {MIG: 4})]
    got = plan("team-a", spec({MIG: 4}), membership, quotas)
    assert got.wave1 == () and got.held == ("moved",) and not got.settled
    handed_over = [*quotas, seen("moved", {MIG: 2}, tenant="team-b")]
    got = plan("team-a", spec({MIG: 4}), membership, handed_over)
    assert summary(got.wave1) == [("delete", "moved", None)]


def test_contested_namespace_is_left_exactly_as_it_is() -> None:
    membership = resolve({"team-a": {"a", "both", "new"}, "team-b": {"both", "new"}})
    quotas = [seen("a", {MIG: 4}), seen("both", {MIG: 9})]
    got = plan("team-a", spec({MIG: 4}), membership, quotas)
    assert got.wave1 == got.wave2 == ()
    assert got.held == ("both",) and set(got.targets) == {"a"}


def test_other_tenants_quotas_are_not_touched() -> None:
    quotas = [seen("a", {MIG: 4}), seen("a", {MIG: 1}, tenant="team-b"), seen("x", tenant="team-b")]
    assert plan("team-a", spec({MIG: 4}), members("team-a", "a"), quotas).settled


def test_stray_keys_and_dropped_resources_are_removed_in_wave_1() -> None:
    quota = seen("a", {MIG: 4, GPU: 1})
    stray = quota.__class__(**{**quota.__dict__, "stray": ("pods",)})
    got = plan("team-a", spec({MIG: 4}), members("team-a", "a"), [stray])
    assert summary(got.wave1) == [("update", "a", {f"requests.{MIG}": "4"})]
    assert got.wave1[0].reason == f"{GPU} 1→unset; drop pods"
