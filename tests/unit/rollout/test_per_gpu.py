"""Per-GPU disruption (issue 28): only the pods on the GPUs a change repartitions leave, and
the whole node is drained, saying why, wherever the holders of a GPU are not known."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import pytest
from rollout_builders import POOL, T0, desired, kinds, policy, secs, state, written

from builders.views import NEW, gpu_pod, node
from tessera.api import constants as c
from tessera.api.v1alpha1.common import NodeScope
from tessera.domain.geometry import migparted
from tessera.domain.rollout import holders as h
from tessera.domain.rollout import scope
from tessera.domain.rollout import state as st
from tessera.domain.rollout.planning import plan
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import DesiredNode, Layout, NodeView, PodView

WHOLE: Layout = ((),) * 8
HALF: Layout = ((("3g.40gb", 2),),) * 4 + ((),) * 4  # GPUs 0-3 split, 4-7 whole
EVERY: Layout = ((("3g.40gb", 2),),) * 8
READ = T0 - secs(60)
BORN = T0 - secs(600)
AGENT = PodView(
    "tessera-agent",
    "gpu-agent-x",
    "gpu-1",
    labels={c.COMPONENT_LABEL: c.GPU_AGENT_COMPONENT},
    owner_kind="DaemonSet",
)


def pods(n: int = 8, *, on: str = "gpu-1") -> list[PodView]:
    """One replica per GPU: ``p<i>`` holds GPU i."""
    return [gpu_pod(f"p{i}", on, created=BORN) for i in range(n)]


def record(n: int = 8, read: datetime = READ, **extra: tuple[int, ...]) -> h.Holders:
    return h.Holders(read, {**{f"ml/p{i}": (i,) for i in range(n)}, **extra})


def gpu_node(
    name: str = "gpu-1",
    *,
    layout: Layout | None = WHOLE,
    rec: h.Holders | None = None,
    **kw: object,
) -> NodeView:
    base = node(name, **kw)  # type: ignore[arg-type]
    return replace(base, layout=layout, holders=rec if rec is not None else record())


def half(target: str = NEW) -> DesiredNode:
    return replace(desired(target), layout=HALF)


# -- which scope a node starts with --------------------------------------------------------------


@dataclass
class ScopeCase:
    node: NodeView
    want: tuple[int, ...] | None
    whole: str = ""
    pods: tuple[PodView, ...] = (*pods(), AGENT)
    target: DesiredNode | None = None


SCOPES = {
    "GPUs 0-3 change, the record covers every pod": ScopeCase(gpu_node(), (0, 1, 2, 3)),
    "a pool whose changes take whole nodes says nothing": ScopeCase(
        gpu_node(), None, target=desired()
    ),
    "every GPU changes: nothing to narrow": ScopeCase(
        gpu_node(), None, "every GPU changes", target=replace(desired(), layout=EVERY)
    ),
    "the layout the node runs is not known": ScopeCase(
        gpu_node(layout=None), None, "the layout gpu-1 runs now is not known"
    ),
    "no agent pod on the node": ScopeCase(
        gpu_node(), None, "no GPU node agent runs on gpu-1", pods=tuple(pods())
    ),
    "an agent pod that is terminating does not count": ScopeCase(
        gpu_node(),
        None,
        "no GPU node agent runs on gpu-1",
        pods=(*pods(), replace(AGENT, deletion_timestamp=T0)),
    ),
    "no record": ScopeCase(
        replace(gpu_node(), holders=None),
        None,
        "the GPU node agent's record is unusable: no GPU holders record",
    ),
    "an unreadable record is named": ScopeCase(
        replace(gpu_node(), holders=None, holders_error="tessera.io/gpu-holders: not JSON"),
        None,
        "the GPU node agent's record is unusable: tessera.io/gpu-holders: not JSON",
    ),
    "a pod the record does not list": ScopeCase(
        gpu_node(rec=record(7)), None, "pod ml/p7 is not in the GPU holders read at"
    ),
    "a pod created after the read (same name, another pod)": ScopeCase(
        gpu_node(),
        None,
        "pod ml/p0 was created after the GPU holders were read",
        pods=(gpu_pod("p0", created=READ), *pods()[1:], AGENT),
    ),
    "a pod created in the second of the read is not trusted either": ScopeCase(
        gpu_node(rec=record(read=BORN)), None, "pod ml/p0 was created after"
    ),
    "an overflowed record": ScopeCase(
        gpu_node(rec=h.Holders(READ, overflow=True)), None, "the GPU node agent's record overflowed"
    ),
    "a pod holding a device nvidia-smi does not name": ScopeCase(
        gpu_node(rec=replace(record(), unmapped=("ml/p5",))),
        None,
        "pod ml/p5 holds a device nvidia-smi does not name",
    ),
}


@pytest.mark.parametrize("case", SCOPES.values(), ids=SCOPES.keys())
def test_scope(case: ScopeCase) -> None:
    got = scope.decide(case.node, case.target or half(), case.pods, policy().drain)
    assert got.gpus == case.want
    assert got.whole.startswith(case.whole) and bool(got.whole) == bool(case.whole)


# -- which pods leave ------------------------------------------------------------------------------


def test_only_the_pods_on_changed_gpus_leave() -> None:
    n = gpu_node(rec=record(8, **{"ml/both": (3, 4)}))
    on = [*pods(), gpu_pod("both", created=BORN), AGENT]
    left = scope.leaving(n, scope.Scope((0, 1, 2, 3)), on, policy().drain)
    assert [p.name for p in left] == ["both", "p0", "p1", "p2", "p3"]  # both holds GPU 3


def test_a_pod_the_record_cannot_place_leaves() -> None:
    """A drain.podSelector pod without a request, and one that arrived after the read."""
    n = gpu_node()
    sidecar = PodView("ml", "sidecar", "gpu-1", labels={"gpu": "yes"}, created=BORN)
    late = gpu_pod("p6", created=T0)
    drain = policy(drain={"podSelector": {"matchLabels": {"gpu": "yes"}}}).drain
    left = scope.leaving(n, scope.Scope((0,)), [*pods()[:6], late, sidecar], drain)
    assert [p.name for p in left] == ["p0", "p6", "sidecar"]


def test_the_whole_scope_is_todays_drain() -> None:
    left = scope.leaving(gpu_node(), scope.Scope(None, "x"), [*pods(), AGENT], policy().drain)
    assert [p.name for p in left] == [f"p{i}" for i in range(8)]  # never the agent's pod


# -- a node through the rollout --------------------------------------------------------------------


def test_the_start_names_the_gpus_and_the_pods_that_move_and_stay() -> None:
    p = plan(POOL, policy(), {"gpu-1": half()}, [gpu_node()], [*pods(), AGENT], [], T0)
    s = written(p.actions)
    assert (s.phase, s.gpus, s.whole) == (Phase.CORDONED, (0, 1, 2, 3), "")
    cordon = next(a for a in p.actions if kinds([a]) == ["Cordon:gpu-1"])
    assert cordon.reason.endswith("; GPUs 0-3 change; 4 pods move, 4 stay"), cordon.reason
    assert p.summary.pods_to_evict == 4
    assert p.scopes == (NodeScope(node="gpu-1", phase="Cordoned", gpus="0-3"),)


def test_a_fallback_start_says_why_in_its_events() -> None:
    p = plan(POOL, policy(), {"gpu-1": half()}, [gpu_node()], pods(), [], T0)
    s = written(p.actions)
    assert (s.gpus, s.whole) == (None, "no GPU node agent runs on gpu-1")
    cordon = next(a for a in p.actions if kinds([a]) == ["Cordon:gpu-1"])
    assert cordon.reason.endswith("; whole node: no GPU node agent runs on gpu-1; 8 pods move")
    assert p.scopes == (
        NodeScope(node="gpu-1", phase="Cordoned", whole="no GPU node agent runs on gpu-1"),
    )


def test_status_names_the_gpus_of_each_node_in_flight_and_only_of_those() -> None:
    """``status.scopes``: a node draining GPU by GPU, one drained whole, bounded; a node
    waiting and a pool whose changes always take whole nodes say nothing there."""
    draining = state(Phase.DRAINING, gpus=(0, 1, 2, 3))
    busy = gpu_node("gpu-1", st=draining, cordoned=True, tainted=True)
    whole = gpu_node("gpu-2", st=state(Phase.DRAINING, whole="every GPU changes"), cordoned=True)
    waiting = gpu_node("gpu-3")
    on = [*pods(on="gpu-1"), *pods(on="gpu-2"), *pods(on="gpu-3")]
    want = {n: half() for n in ("gpu-1", "gpu-2", "gpu-3")}
    p = plan(POOL, policy(), want, [busy, whole, waiting], on, [], T0)
    assert p.scopes == (
        NodeScope(node="gpu-1", phase="Draining", gpus="0-3"),
        NodeScope(node="gpu-2", phase="Draining", whole="every GPU changes"),
    )
    plain = gpu_node("gpu-1", st=state(Phase.DRAINING), cordoned=True, tainted=True)
    assert plan(POOL, policy(), {"gpu-1": desired()}, [plain], on, [], T0).scopes == ()
    many = [
        gpu_node(f"n{i:02}", st=state(Phase.DRAINING, gpus=(i % 8,)), cordoned=True)
        for i in range(30)
    ]
    wide = plan(POOL, policy(maxUnavailable=30), {n.name: half() for n in many}, many, [], [], T0)
    assert len(wide.scopes) == 20 and wide.scopes[0].node == "n00"


def test_the_drain_evicts_the_changed_gpus_pods_only_then_applies_with_the_rest_running() -> None:
    cordoned = state(Phase.CORDONED, target=st.TargetSpec(NEW, {c.MIG_CONFIG_LABEL: NEW}))
    n = gpu_node(st=replace(cordoned, gpus=(0, 1, 2, 3)), cordoned=True, tainted=True)
    on = [*pods(), AGENT]
    p = plan(POOL, policy(), {"gpu-1": half()}, [n], on, [], T0)
    assert kinds(p.actions) == ["SetNodeState:Draining"] + [f"Evict:ml/p{i}" for i in range(4)]
    draining = written(p.actions)
    n2 = replace(n, state=draining)
    p2 = plan(POOL, policy(), {"gpu-1": half()}, [n2], on[4:], [], T0 + secs(5))
    assert kinds(p2.actions) == ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"]


def test_a_pod_on_an_unchanged_gpu_is_never_evicted_even_after_the_drain_times_out() -> None:
    draining = state(Phase.DRAINING, gpus=(0,))
    n = gpu_node(st=draining, cordoned=True, tainted=True)
    p = plan(POOL, policy(), {"gpu-1": half()}, [n], [*pods()[1:], AGENT], [], T0 + secs(9999))
    assert not [a for a in kinds(p.actions) if a.startswith(("Evict", "DeletePod"))]


def test_a_retarget_grows_the_scope_by_the_gpus_the_new_layout_changes() -> None:
    draining = state(Phase.DRAINING, gpus=(0, 1, 2, 3))
    n = gpu_node(st=draining, cordoned=True, tainted=True)
    more = replace(desired("tessera-newer"), layout=HALF[:4] + ((("7g.80gb", 1),),) + ((),) * 3)
    p = plan(POOL, policy(), {"gpu-1": more}, [n], [*pods(), AGENT], [], T0)
    assert written(p.actions).gpus == (0, 1, 2, 3, 4)
    assert "Evict:ml/p4" in kinds(p.actions) and "Evict:ml/p5" not in kinds(p.actions)


def test_a_retarget_while_verifying_drains_the_whole_node() -> None:
    verifying = state(Phase.VERIFYING, gpus=(0,))
    n = gpu_node(st=verifying, cordoned=True, tainted=True)
    p = plan(POOL, policy(), {"gpu-1": half("tessera-newer")}, [n], [*pods()[1:], AGENT], [], T0)
    s = written(p.actions)
    assert (s.gpus, s.whole) == (None, "the target changed while the layout was changing")


def test_the_cheapest_node_starts_first() -> None:
    """Of two nodes and one slot, the one with fewer pods to move goes first."""
    busy = gpu_node("gpu-1")
    light = gpu_node("gpu-2", rec=h.Holders(READ, {"ml/q0": (5,)}))
    on = [*pods(), AGENT, gpu_pod("q0", "gpu-2", created=BORN), replace(AGENT, node="gpu-2")]
    p = plan(POOL, policy(), {"gpu-1": half(), "gpu-2": half()}, [busy, light], on, [], T0)
    assert written(p.actions, "gpu-2").phase == Phase.CORDONED
    assert not [a for a in p.actions if a.node == "gpu-1"]


# -- the record on the node ------------------------------------------------------------------------


def test_the_scope_survives_the_record_round_trip() -> None:
    for s in (state(Phase.DRAINING, gpus=(0, 3)), state(Phase.DRAINING, whole="why")):
        assert st.decode(st.encode(s)) == s


@pytest.mark.parametrize(
    "bad", ['"gpus":[16]', '"gpus":"0-3"', '"gpus":[0],"whole":"x"', '"whole":1']
)
def test_a_bad_scope_on_the_record_is_refused(bad: str) -> None:
    text = st.encode(state(Phase.DRAINING)).rstrip("}") + "," + bad + "}"
    with pytest.raises(st.StateError):
        st.decode(text)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{", "not JSON"),
        ('{"v":2,"read":"2026-01-01T00:00:00Z"}', "unsupported version"),
        ('{"v":1,"read":"yesterday"}', "not RFC 3339"),
        ('{"v":1,"read":"2026-01-01T00:00:00Z","pods":{"ml/a":[16]}}', "GPU indices"),
        ('{"v":1,"read":"2026-01-01T00:00:00Z","pods":{"a":[1]}}', "GPU indices"),
        ('{"v":1,"read":"2026-01-01T00:00:00Z","unmapped":"ml/a"}', "unmapped"),
    ],
)
def test_an_untrustworthy_holder_record_is_refused(raw: str, why: str) -> None:
    with pytest.raises(h.HoldersError, match=why):
        h.decode(raw)


def test_the_holder_record_is_bounded_and_round_trips() -> None:
    small = h.bounded(READ, {"ml/a": [3, 1, 1]}, ["ml/b"])
    assert h.decode(h.encode(small)) == small == h.Holders(READ, {"ml/a": (1, 3)}, ("ml/b",))
    big = h.bounded(READ, {f"ml/p{i}": [0] for i in range(h.MAX_PODS + 1)}, [])
    assert big.overflow and h.decode(h.encode(big)) == big and big.gpus_of("ml/p0") is None


# -- what a node runs now, from its mig-parted config ----------------------------------------------


LAYOUTS = {
    "Tessera's entries": (
        [
            {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
            {"devices": [2, 3, 9], "mig-enabled": False},
        ],
        4,
        ((("3g.40gb", 2),), (("3g.40gb", 2),), (), ()),
    ),
    "all": ([{"devices": "all", "mig-enabled": False}], 2, ((), ())),
    "a device-filter is a model, not an index": (
        [{"device-filter": "0x233110DE", "devices": "all", "mig-enabled": False}],
        2,
        None,
    ),
    "overlapping entries": (
        [{"devices": "all", "mig-enabled": False}, {"devices": [0], "mig-enabled": False}],
        2,
        None,
    ),
    "a GPU no entry names": ([{"devices": [0], "mig-enabled": False}], 2, None),
    "not a list": ({"devices": "all"}, 2, None),
    "mig-enabled missing": ([{"devices": "all"}], 2, None),
}


@pytest.mark.parametrize(("body", "count", "want"), LAYOUTS.values(), ids=LAYOUTS.keys())
def test_layout_of(body: object, count: int, want: Layout | None) -> None:
    assert migparted.layout_of(body, count) == want


# -- what tessera plan says each changed GPU runs now and next -----------------------------------


@pytest.mark.parametrize(
    "now, target, gpus, want",
    [
        pytest.param(WHOLE, HALF, (0, 1, 2, 3), "0-3: whole GPU -> 2x3g.40gb", id="alike-grouped"),
        pytest.param(
            ((("7g.80gb", 1),), (("1g.10gb", 2), ("3g.40gb", 1)), ()),
            ((("1g.10gb", 7),), (), ()),
            (0, 1),
            "0: 7g.80gb -> 7x1g.10gb, 1: 2x1g.10gb + 3g.40gb -> whole GPU",
            id="each-its-own",
        ),
        pytest.param(None, HALF, (0,), "", id="layout-now-unknown"),
        pytest.param(WHOLE, HALF[:4], (0,), "", id="gpu-counts-differ"),
    ],
)
def test_moves_name_each_changed_gpu_old_and_new(
    now: Layout | None, target: Layout, gpus: tuple[int, ...], want: str
) -> None:
    assert scope.moves(now, target, gpus) == want
    assert (
        scope.Scope((0, 1, 2, 3))
        .text(4, 4, want)
        .startswith(f"GPUs 0-3 change ({want}); " if want else "GPUs 0-3 change; ")
    )
