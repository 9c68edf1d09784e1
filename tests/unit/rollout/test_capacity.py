"""The check before a cordon: do the pods a drain would evict fit on the rest of the cluster?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from rollout_builders import POOL, T0, desired, kinds, policy, state

from builders.views import NEW, gpu_pod, node
from tessera.domain.cluster import objects as cluster
from tessera.domain.rollout import Plan, plan
from tessera.domain.rollout.capacity import REASON, Ledger, Room, room
from tessera.domain.rollout.state import Phase, ReportPhase
from tessera.domain.rollout.views import GEOMETRY_PENDING, NodeView, PodView, Taint, Toleration

MIG = "nvidia.com/mig-1g.10gb"
GPU = "nvidia.com/gpu"


def spare(name: str, resource: str, n: int) -> NodeView:
    """A node outside the pool advertising ``n`` of ``resource``."""
    return NodeView(name, allocatable={resource: n})


def mig(name: str, n: int = 1, on: str = "gpu-1", **kw: Any) -> PodView:
    return gpu_pod(name, on, requests={MIG: n}, **kw)


# The node the pods leave, in the pool: it advertises what they use, and is no room.
LEAVING = NodeView("gpu-1", allocatable={MIG: 7, GPU: 8})


def ledger(nodes: list[NodeView], pods: list[PodView], closed: set[str] | None = None) -> Ledger:
    return Ledger(room([LEAVING, *nodes], pods), {LEAVING.name, *(closed or set())})


FREE = spare("cpu-1", MIG, 2)
CASES: dict[str, tuple[list[NodeView], list[PodView], list[PodView], str]] = {
    # id: (nodes outside, pods bound there, pods leaving, "" or the message)
    "fits": ([FREE], [], [mig("a"), mig("b")], ""),
    "one short": (
        [FREE],
        [],
        [mig("a"), mig("b"), mig("c")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/c)",
    ),
    "room held by bound pods": (
        [FREE],
        [mig("x", 2, on="cpu-1")],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "a finished pod holds nothing": (
        [FREE],
        [mig("x", 2, on="cpu-1", phase="Succeeded")],
        [mig("a")],
        "",
    ),
    "biggest first": (
        [spare("n1", GPU, 1), spare("n2", GPU, 2)],
        [],
        [gpu_pod("one", requests={GPU: 1}), gpu_pod("two", requests={GPU: 2})],
        "",
    ),
    "fragmented": (
        [spare("n1", GPU, 1), spare("n2", GPU, 1)],
        [],
        [gpu_pod("two", requests={GPU: 2})],
        f"1 pod(s) would have nowhere to run: {GPU} short by 2 (ml/two)",
    ),
    "only the resource that lacks is named": (
        [spare("n1", GPU, 4)],
        [],
        [gpu_pod("both", requests={GPU: 1, MIG: 2})],
        f"1 pod(s) would have nowhere to run: {MIG} short by 2 (ml/both)",
    ),
    "pods without accelerator requests need no room": ([], [], [gpu_pod("cpu-only")], ""),
    # HAMi's scheduler places gpumem/gpucores; no node advertises them: only the GPU counts
    "requests no node advertises are not counted": (
        [spare("n1", GPU, 1)],
        [],
        [gpu_pod("hami", requests={GPU: 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})],
        "",
    ),
    "a pod already terminating needs no room": (
        [],
        [],
        [mig("going", deletion_timestamp=T0)],
        "",
    ),
    "a cordoned node is no room": (
        [NodeView("c", allocatable={MIG: 7}, unschedulable=True)],
        [],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "a NotReady node is no room": (
        [NodeView("c", allocatable={MIG: 7}, ready=False)],
        [],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "a node under Tessera's taint is no room": (
        [NodeView("c", allocatable={MIG: 7}, taints=(GEOMETRY_PENDING,))],
        [],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "another pool's node in flight is no room": (
        [node("c", alloc={MIG: 7}, st=state(Phase.VERIFYING, owner="NodePoolGeometry/other"))],
        [],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "a taint the pod does not tolerate": (
        [NodeView("c", allocatable={MIG: 7}, taints=(Taint("dedicated", "NoSchedule", "x"),))],
        [],
        [mig("a")],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "a taint the pod tolerates": (
        [NodeView("c", allocatable={MIG: 7}, taints=(Taint(GPU, "NoSchedule", "present"),))],
        [],
        [mig("a", tolerations=(Toleration(GPU, "Exists"),))],
        "",
    ),
    "a PreferNoSchedule taint does not keep pods off": (
        [NodeView("c", allocatable={MIG: 7}, taints=(Taint("soft", "PreferNoSchedule"),))],
        [],
        [mig("a")],
        "",
    ),
    "a nodeSelector that does not match": (
        [NodeView("c", labels={"zone": "b"}, allocatable={MIG: 7})],
        [],
        [mig("a", node_selector={"zone": "a"})],
        f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/a)",
    ),
    "many pods, five named": (
        [],
        [],
        [mig(f"p{i}") for i in range(7)],
        f"7 pod(s) would have nowhere to run: {MIG} short by 7 "
        "(ml/p0, ml/p1, ml/p2, ml/p3, ml/p4 and 2 more)",
    ),
}


@pytest.mark.parametrize(("nodes", "bound", "leaving", "want"), CASES.values(), ids=CASES.keys())
def test_fit(
    nodes: list[NodeView], bound: list[PodView], leaving: list[PodView], want: str
) -> None:
    assert ledger(nodes, bound).fit("gpu-1", leaving) == want


def test_the_leaving_node_is_no_room_for_its_own_pods() -> None:
    here = node("gpu-1", alloc={MIG: 7})
    assert ledger([here], []).fit("gpu-1", [mig("a")]) != ""


def test_room_taken_by_one_admission_is_gone_for_the_next_and_a_refusal_takes_nothing() -> None:
    book = ledger([FREE], [])
    assert book.fit("gpu-1", [mig("a")]) == ""
    assert book.fit("gpu-2", [mig("b", 2, on="gpu-2")]) != ""  # 1 left: refused, nothing taken
    assert book.fit("gpu-3", [mig("c", on="gpu-3")]) == ""
    assert book.fit("gpu-4", [mig("d", on="gpu-4")]) != ""


def test_pods_of_a_draining_node_take_their_room_first() -> None:
    book = ledger([FREE], [])
    book.settle("gpu-9", [mig("x", on="gpu-9"), mig("y", on="gpu-9")])
    assert "short by 1" in book.fit("gpu-1", [mig("a")])


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"containers": [{"resources": {"limits": {MIG: "2"}}}]}, {MIG: 2}),
        ({"containers": [{"resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}, {GPU: 1}),
        ({"containers": [{"resources": {"limits": {"cpu": "4", GPU: "1"}}}] * 2}, {GPU: 2}),
        (
            {
                "initContainers": [{"resources": {"limits": {GPU: "3"}}}],
                "containers": [{"resources": {"limits": {GPU: "1"}}}],
            },
            {GPU: 3},
        ),
        (
            {"containers": [{"resources": {"limits": {"huawei.com/Ascend310P": "1"}}}]},
            {"huawei.com/Ascend310P": 1},
        ),
        ({"containers": [{"name": "plain"}]}, {}),
    ],
)
def test_accelerator_requests_as_the_scheduler_counts_them(
    spec: dict[str, Any], want: dict[str, int]
) -> None:
    assert cluster.accelerator_requests(spec) == want


# -- in the rollout engine ------------------------------------------------------------------------

POOL3 = ["gpu-1", "gpu-2", "gpu-3"]


def pool_nodes(**over: NodeView) -> list[NodeView]:
    return [over.get(n.replace("-", "_"), node(n, alloc={MIG: 2})) for n in POOL3]


def full(name: str) -> list[PodView]:
    return [mig(f"{name}-a", on=name), mig(f"{name}-b", on=name)]


def decide(
    nodes: list[NodeView], pods: list[PodView], extra: Sequence[NodeView] = (), **rollout: Any
) -> Plan:
    want = {n.name: desired() for n in nodes}
    cluster_room = room([*nodes, *extra], pods)
    return plan(POOL, policy(**rollout), want, nodes, pods, [], T0, None, cluster_room)


def test_no_room_anywhere_holds_the_first_node_back_and_says_why() -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-1"), *full("gpu-2"), *full("gpu-3")]
    result = decide(nodes, pods)
    assert result.actions == ()
    assert result.verdict.state == "progressing" and result.verdict.reason == REASON
    want = f"2 pod(s) would have nowhere to run: {MIG} short by 2 (ml/gpu-1-a, ml/gpu-1-b)"
    assert result.short_of_room == want
    assert result.verdict.message.startswith(want)
    assert result.requeue_after is not None  # looks again on its own, besides the wake-ups
    assert all(f"not started: {MIG}" not in r.message for r in result.nodes)
    assert {r.phase for r in result.nodes} == {ReportPhase.PENDING}


@pytest.mark.parametrize(
    ("gate", "rollout"),
    [("WaitingForApproval", {"approval": "Manual"}), ("RollingOut", {"paused": True})],
)
def test_a_closed_gate_still_says_what_opening_it_would_meet(
    gate: str, rollout: dict[str, Any]
) -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-1"), *full("gpu-2"), *full("gpu-3")]
    result = decide(nodes, pods, **rollout)
    assert result.actions == ()
    assert result.verdict.reason == gate  # the gate the pool reports is still the closed one
    want = f"2 pod(s) would have nowhere to run: {MIG} short by 2 (ml/gpu-1-a, ml/gpu-1-b)"
    assert result.short_of_room == want  # … and tessera plan can warn before approval


def test_room_on_a_new_node_lets_the_rollout_go() -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-1"), *full("gpu-2"), *full("gpu-3")]
    result = decide(nodes, pods, [spare("gpu-4", MIG, 2)])
    assert result.short_of_room == ""
    assert kinds(result.actions) == ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"]


def test_a_node_with_nothing_to_evict_is_never_held_back() -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-2"), *full("gpu-3")]  # gpu-1 is empty, and no room anywhere
    result = decide(nodes, pods)
    assert "Cordon:gpu-1" in kinds(result.actions) and result.short_of_room == ""


def test_daemonset_pods_do_not_count() -> None:
    nodes = pool_nodes()
    pods = [mig("agent", owner_kind="DaemonSet"), *full("gpu-2"), *full("gpu-3")]
    assert "Cordon:gpu-1" in kinds(decide(nodes, pods).actions)


def test_with_two_slots_the_second_node_needs_room_after_the_first() -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-1"), mig("gpu-2-a", on="gpu-2"), mig("gpu-3-a", on="gpu-3")]
    result = decide(nodes, pods, [spare("cpu-1", MIG, 1)], maxUnavailable=2)
    cordoned = {a.node for a in result.actions if type(a).__name__ == "Cordon"}
    assert cordoned == {"gpu-2"}  # its pod takes cpu-1's room; then gpu-3's has none left
    assert result.verdict.reason != REASON  # a node is in flight: the pool says that first
    assert (
        result.short_of_room == f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/gpu-3-a)"
    )


def test_a_node_in_flight_keeps_going_and_its_pods_take_their_room_first() -> None:
    draining = node("gpu-1", alloc={MIG: 2}, cordoned=True, tainted=True, st=state(Phase.DRAINING))
    nodes = pool_nodes(gpu_1=draining)
    pods = [*full("gpu-1"), mig("gpu-2-a", on="gpu-2"), *full("gpu-3")]
    result = decide(nodes, pods, [spare("cpu-1", MIG, 2)], maxUnavailable=2)
    assert [k for k in kinds(result.actions) if k.startswith("Evict")] == [
        "Evict:ml/gpu-1-a",
        "Evict:ml/gpu-1-b",
    ]
    assert "Cordon:gpu-2" not in kinds(result.actions)  # cpu-1's room is gpu-1's pods'
    assert (
        result.short_of_room == f"1 pod(s) would have nowhere to run: {MIG} short by 1 (ml/gpu-2-a)"
    )


def test_without_a_room_nothing_is_checked() -> None:
    nodes = pool_nodes()
    pods = [*full("gpu-1"), *full("gpu-2"), *full("gpu-3")]
    want = {n.name: desired() for n in nodes}
    result = plan(POOL, policy(), want, nodes, pods, [], T0)
    assert "Cordon:gpu-1" in kinds(result.actions)


def test_a_cluster_of_the_leaving_node_alone_is_no_room() -> None:
    assert Ledger(Room((LEAVING,)), {"gpu-1"}).fit("gpu-1", [mig("a")]).startswith("1 pod(s)")


def test_pods_sent_to_a_node_admitted_later_in_the_pass_move_again() -> None:
    book = ledger([node("gpu-2", alloc={MIG: 2}), FREE], [])
    assert book.fit("gpu-1", [mig("a")]) == ""  # "cpu-1" sorts first: a goes there
    assert book.fit("gpu-3", [mig("b", 2, on="gpu-3")]) == ""  # b: gpu-2 (cpu-1 has 1 left)
    # gpu-2 leaving now: b must move again, and nowhere holds 2
    assert book.fit("gpu-2", []) == f"1 pod(s) would have nowhere to run: {MIG} short by 2 (ml/b)"


def test_a_node_released_in_this_pass_is_room_for_the_next_one() -> None:
    """gpu-1 verified on the new layout (16 x 3g.40gb): released, then its room takes gpu-2's
    pods in the same pass, though this observation still shows it cordoned and tainted."""
    m3 = "nvidia.com/mig-3g.40gb"
    verified = node("gpu-1", config=NEW, cordoned=True, tainted=True, st=state(Phase.VERIFYING))
    cordon = Taint("node.kubernetes.io/unschedulable", "NoSchedule")  # the node controller's
    verified = replace(verified, taints=(*verified.taints, cordon))
    nodes = [verified, node("gpu-2", alloc={m3: 2}), node("gpu-3", alloc={m3: 2})]
    pods = [gpu_pod(f"{n}-{i}", n, requests={m3: 1}) for n in ("gpu-2", "gpu-3") for i in (0, 1)]
    want = {n.name: desired() for n in nodes}
    result = plan(POOL, policy(), want, nodes, pods, [], T0, None, room(nodes, pods))
    assert kinds(result.actions)[:4] == [
        "SetNodeState:Uncordoning",
        "RemoveTaint:gpu-1",
        "Uncordon:gpu-1",
        "ClearNodeState:gpu-1",
    ]
    assert "Cordon:gpu-2" in kinds(result.actions) and result.short_of_room == ""
