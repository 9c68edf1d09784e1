"""Planning with Tessera's recount, when the quota controller undercounted status.used.

The story (kube-controller-manager 1.34): Tessera lowers namespace b while pods are
being admitted there; the quota controller recomputes b's status.used from caches
that miss a pod admission had just charged, so status.used reads 1 where 2 pods are.
"""

from __future__ import annotations

from quota_builders import MIG, members, seen, spec

from tessera.domain.quota.planning import Action, plan

KEY = f"requests.{MIG}"
TENANT = spec({MIG: 4}, {MIG: 6})


def writes(actions: tuple[Action, ...]) -> dict[str, str]:
    return {a.namespace: a.manifest["spec"]["hard"][KEY] for a in actions if a.manifest}


def test_an_undercounted_namespace_is_planned_from_what_it_holds() -> None:
    quotas = [seen("a", {MIG: 3}, used={MIG: 3}), seen("b", {MIG: 3}, used={MIG: 1})]
    trusted = plan("team-a", TENANT, members("team-a", "a", "b"), quotas)
    # status.used alone: b keeps room for 1 more pod and a is raised to 4, so once
    # admission lets b's extra pod in, a + b can hold 4 + 3 = 7 against a total of 6
    assert writes(trusted.wave1) == {"b": "2"} and writes(trusted.wave2) == {"a": "4"}
    got = plan(
        "team-a", TENANT, members("team-a", "a", "b"), quotas, {"a": {MIG: 3}, "b": {MIG: 2}}
    )
    # b holds 2: its share is 2, written 1 lower because admission counts from status.used 1
    assert writes(got.wave1) == {"b": "1"} and writes(got.wave2) == {"a": "4"}
    assert got.targets == {"a": {MIG: 4}, "b": {MIG: 1}}


def test_a_recount_below_status_used_changes_nothing() -> None:
    # charged by admission, not yet stored: status.used is the larger and stands
    quotas = [seen("a", {MIG: 3}, used={MIG: 3}), seen("b", {MIG: 3}, used={MIG: 1})]
    lower = {"a": {MIG: 2}, "b": {MIG: 0}}
    got = plan("team-a", TENANT, members("team-a", "a", "b"), quotas, lower)
    assert got == plan("team-a", TENANT, members("team-a", "a", "b"), quotas)


def test_a_converged_tenant_whose_recount_agrees_plans_nothing() -> None:
    quotas = [seen("a", {MIG: 3}, used={MIG: 1}), seen("b", {MIG: 3})]
    got = plan("team-a", TENANT, members("team-a", "a", "b"), quotas, {"a": {MIG: 1}})
    assert got.settled


def test_an_undercount_left_standing_holds_the_total_with_lower_written_limits() -> None:
    # limits 3 + 3 with b undercounted by 1: b can come to hold 4, so a must give 1
    quotas = [seen("a", {MIG: 3}, used={MIG: 0}), seen("b", {MIG: 3}, used={MIG: 2})]
    got = plan("team-a", TENANT, members("team-a", "a", "b"), quotas, {"b": {MIG: 3}})
    assert writes(got.wave1) == {"a": "2"} and got.wave2 == ()
    final = {ns: limits[MIG] for ns, limits in got.targets.items()}
    assert final["a"] + final["b"] + 1 == 6  # b: written limit + the lag admission ignores


def test_a_namespace_without_a_quota_is_pinned_at_what_it_holds() -> None:
    got = plan("team-a", TENANT, members("team-a", "a"), [], {"a": {MIG: 2}})
    assert writes(got.wave1) == {"a": "2"}


def test_a_quota_the_controller_has_not_filled_in_is_not_an_undercount() -> None:
    # a holds 3 under its limit 3, but its status is still empty (just written by Tessera):
    # nothing to move, and in particular no limit written below what a holds
    fresh = seen("a", {MIG: 3}, enforced={})
    settled = seen("b", {MIG: 3}, used={MIG: 0})
    got = plan("team-a", TENANT, members("team-a", "a", "b"), [fresh, settled], {"a": {MIG: 3}})
    assert got.wave1 == () and got.wave2 == ()


def test_a_resource_new_to_the_quota_is_not_an_undercount() -> None:
    # status.hard caught up, but status.used has no entry for the resource yet
    fresh = seen("a", {MIG: 3}, used={})
    settled = seen("b", {MIG: 3}, used={MIG: 0})
    got = plan("team-a", TENANT, members("team-a", "a", "b"), [fresh, settled], {"a": {MIG: 3}})
    assert got.wave1 == () and got.wave2 == ()
