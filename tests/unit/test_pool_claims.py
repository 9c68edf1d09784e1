"""One node, one pool: who may touch a node several NodePoolGeometries select."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from builders import GeometryWrapper
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector, RolloutSpec
from tessera.domain.base.conditions import Verdict
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.geometry.layouts import config_name
from tessera.domain.rollout import NodeState, NodeView, Phase, Taint, TargetSpec
from tessera.domain.rollout.views import pending_taint

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


def sel(value: str) -> LabelSelector:
    return LabelSelector.model_validate({"matchLabels": {c.POOL_LABEL: value}})


BOTH = {"a": sel("x"), "b": sel("x")}  # two pools with the same selector


def node(name: str = "n1", pool: str = "x", *, layout: str = "", holds: str = "") -> NodeView:
    """``holds``: ``taint:<pool>`` (its pending taint) or ``state:<pool>`` (its rollout state)."""
    labels = {c.POOL_LABEL: pool, **({c.MIG_CONFIG_LABEL: layout} if layout else {})}
    how, _, by = holds.partition(":")
    taints = (pending_taint(f"NodePoolGeometry/{by}"),) if how == "taint" else ()
    state = None
    if how == "state":
        target = TargetSpec("t", {}, None, {})
        state = NodeState(Phase.DRAINING, f"NodePoolGeometry/{by}", target, False, T0)
    return NodeView(name, labels, taints=taints, state=state)


def layout_of(pool: str) -> str:
    return config_name(pool, [{"devices": "all"}])


def _sharing(layout: str) -> NodeView:
    """A node running ``layout`` that a SharingPolicy's rollout holds mid-drain."""
    target = TargetSpec("t", {}, None, {})
    state = NodeState(Phase.DRAINING, "SharingPolicy/mps", target, False, T0)
    return replace(node(layout=layout), state=state)


@pytest.mark.parametrize(
    ("case", "pools", "nodes", "owner", "foreign_a", "foreign_b"),
    [
        # one pool selects the node: it is that pool's
        ("alone", {"a": sel("x"), "b": sel("y")}, [node()], {"n1": "a"}, set(), set()),
        # two pools, nobody holds the node (a new node): neither touches it
        ("new node", BOTH, [node()], {}, {"n1"}, {"n1"}),
        # the node runs a's layout: a keeps it, b leaves it alone
        ("a's layout", BOTH, [node(layout=layout_of("a"))], {"n1": "a"}, set(), {"n1"}),
        # a's rollout is in flight on it (mid-drain): a keeps it and goes on
        ("a in flight", BOTH, [node(holds="state:a")], {"n1": "a"}, set(), {"n1"}),
        # b's pending taint is on it: b keeps it, even though the layout is a's
        (
            "b's taint",
            BOTH,
            [node(layout=layout_of("a"), holds="taint:b")],
            {"n1": "b"},
            {"n1"},
            set(),
        ),
        # the rollout state outranks the layout label: b's rollout is moving it off a's layout
        (
            "b's state",
            BOTH,
            [node(layout=layout_of("a"), holds="state:b")],
            {"n1": "b"},
            {"n1"},
            set(),
        ),
        # a layout of a pool that does not select the node holds nothing
        ("c's layout", BOTH, [node(layout=layout_of("c"))], {}, {"n1"}, {"n1"}),
        # a pool named like a prefix of another does not hold the other's nodes
        (
            "prefix",
            {"a": sel("x"), "a-b": sel("x")},
            [node(layout=layout_of("a-b"))],
            {"n1": "a-b"},
            {"n1"},
            set(),
        ),
        # a pool with no selector claims nothing
        ("no selector", {"a": sel("x"), "b": None}, [node()], {"n1": "a"}, set(), set()),
        # a SharingPolicy's rollout in flight on a's node: still a's (it is no pool's mark)
        ("a's layout, sharing", BOTH, [_sharing(layout_of("a"))], {"n1": "a"}, set(), {"n1"}),
        # a pool that no longer selects it is releasing it: still a's layout, a keeps it
        (
            "a's layout, c leaving",
            BOTH,
            [node(layout=layout_of("a"), holds="state:c")],
            {"n1": "a"},
            set(),
            {"n1"},
        ),
    ],
)
def test_who_may_touch_a_node(
    case: str,
    pools: dict[str, LabelSelector | None],
    nodes: list[NodeView],
    owner: dict[str, str],
    foreign_a: set[str],
    foreign_b: set[str],
) -> None:
    claims = pool_claims.resolve(pools, nodes)
    assert dict(claims.owner) == owner, case
    assert claims.foreign("a") == foreign_a, case
    assert claims.foreign("b") == foreign_b, case


def test_a_legacy_unnamed_taint_holds_for_nobody() -> None:
    legacy = NodeView("n1", {c.POOL_LABEL: "x"}, taints=(Taint(c.GEOMETRY_PENDING_TAINT),))
    claims = pool_claims.resolve(BOTH, [legacy])
    assert claims.foreign("a") == claims.foreign("b") == {"n1"}


def test_both_pools_report_the_conflict_naming_each_other_and_the_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(1, 9)]
    claims = pool_claims.resolve(BOTH, nodes)
    running = Verdict("progressing", "RollingOut", "0 of 0 nodes updated")
    a, b = pool_claims.verdict("a", claims, running), pool_claims.verdict("b", claims, running)
    assert (a.state, a.reason, b.state, b.reason) == ("stalled", "Conflict", "stalled", "Conflict")
    assert a.message.startswith(
        "nodepoolgeometry/b also selects nodes n1, n2, n3, n4, n5 and 3 more"
    )
    assert b.message.startswith(
        "nodepoolgeometry/a also selects nodes n1, n2, n3, n4, n5 and 3 more"
    )
    assert "no pool touches them" in a.message


def test_the_holder_goes_on_and_says_who_else_selects_its_nodes() -> None:
    nodes = [node("n1", layout=layout_of("a")), node("n2", holds="state:a"), node("n3", "y")]
    claims = pool_claims.resolve({"a": sel("x"), "b": sel("x")}, nodes)
    ready = Verdict("ready", "Succeeded", "all 2 nodes match their layout")
    kept = pool_claims.verdict("a", claims, ready)
    assert (kept.state, kept.reason) == ("ready", "Succeeded")
    assert kept.message == (
        "all 2 nodes match their layout; nodepoolgeometry/b also selects nodes n1, n2; "
        "this pool already holds them and keeps them"
    )
    lost = pool_claims.verdict("b", claims, ready)
    assert (lost.state, lost.reason) == ("stalled", "Conflict")
    assert "which nodepoolgeometry/a already holds" in lost.message


def test_three_pools_name_both_others() -> None:
    pools = {"a": sel("x"), "b": sel("x"), "c": sel("x")}
    claims = pool_claims.resolve(pools, [node()])
    verdict = pool_claims.verdict("b", claims, Verdict("ready", "Succeeded", ""))
    assert verdict.message.startswith(
        "nodepoolgeometry/a and nodepoolgeometry/c also select node n1"
    )


def test_a_blocked_pool_starts_no_node_and_an_unblocked_one_is_unchanged() -> None:
    claims = pool_claims.resolve(BOTH, [node(layout=layout_of("a"))])
    rollout = RolloutSpec()
    assert pool_claims.policy("a", claims, rollout) is rollout
    assert pool_claims.policy("b", claims, rollout).paused


def test_no_conflict_leaves_the_verdict_alone() -> None:
    claims = pool_claims.resolve({"a": sel("x")}, [node()])
    verdict = Verdict("ready", "Succeeded", "all 1 nodes match their layout")
    assert pool_claims.verdict("a", claims, verdict) is verdict


def test_claimants_skip_pools_being_deleted_and_pools_whose_spec_does_not_parse() -> None:
    found = pool_claims.claimants(
        [
            GeometryWrapper("a").pool("x").obj(),
            GeometryWrapper("gone").pool("x").meta(deletionTimestamp="2026-08-01T10:00:00Z").obj(),
            GeometryWrapper("broken").spec(nodeSelector="not a selector").obj(),
        ]
    )
    assert found == {"a": sel("x")}


def test_a_blocked_pool_is_stalled_only_once_it_holds_no_node() -> None:
    """Issue 13, item 6: a Stalled pool holds no taint or cordon of its own; while its nodes
    already in flight finish, it is Reconciling, reason Conflict, and says so."""
    claims = pool_claims.resolve(BOTH, [node()])
    running = Verdict("progressing", "RollingOut", "1 of 3 nodes updated; n7 Draining")
    finishing = pool_claims.verdict("a", claims, running, in_flight=1)
    assert (finishing.state, finishing.reason) == ("progressing", "Conflict")
    assert finishing.message.startswith("nodepoolgeometry/b also selects node n1;")
    assert finishing.message.endswith(
        "; finishing the 1 node already in flight: 1 of 3 nodes updated; n7 Draining"
    )
    done = pool_claims.verdict("a", claims, running, in_flight=0)
    assert (done.state, done.reason) == ("stalled", "Conflict")


def test_a_node_running_a_pools_vgpu_config_is_that_pools() -> None:
    labels = {c.POOL_LABEL: "x", c.VGPU_CONFIG_LABEL: layout_of("a")}
    claims = pool_claims.resolve(BOTH, [NodeView("n1", labels)])
    assert claims.foreign("a") == set() and claims.foreign("b") == {"n1"}
