"""DeviceTaintRules of a DRA pool's rollout (issue 28, item 4): which devices a node's change
taints, the rules that say so, and which rules go (after verify, back-out, a crash)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from rollout_builders import POOL as OWNER
from rollout_builders import state

from builders.dra import board_gpu as gpu
from builders.dra import board_mig as mig
from tessera.api import constants as c
from tessera.domain.dra.naming import DRIVER
from tessera.domain.dra.slices import SlicePool, slice_pools
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.dra import taints as t
from tessera.domain.rollout.state import NodeState, Phase
from tessera.domain.rollout.views import NodeView

NODE = "dra-1"


def pool_of(devices: list[dict[str, Any]], node: str = NODE) -> SlicePool:
    pool = {"name": node, "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": DRIVER, "pool": pool, "nodeName": node, "devices": devices}
    return slice_pools([{"spec": spec}])[node]


# GPUs 0-1 split in two, 2-3 whole
POOL = pool_of([mig(0, 0), mig(0, 4), mig(1, 0), mig(1, 4), gpu(2), gpu(3)])
ALL = tuple(sorted(set(POOL.kinds)))


def node(phase: Phase | None, *, count: str = "4", **kw: Any) -> NodeView:
    record = None if phase is None else state(phase, **kw)
    return NodeView(NODE, labels={c.GPU_COUNT_LABEL: count} if count else {}, state=record)


@dataclass(frozen=True)
class Case:
    view: NodeView
    want: tuple[str, ...]
    pool: SlicePool | None = POOL
    kept: tuple[str, ...] = ()


CHANGING = {
    "GPUs 0-1 change: their four MIG devices, not gpu-2 and gpu-3": Case(
        node(Phase.DRAINING, gpus=(0, 1)),
        (
            "gpu-0-mig-3g40gb-9-0",
            "gpu-0-mig-3g40gb-9-4",
            "gpu-1-mig-3g40gb-9-0",
            "gpu-1-mig-3g40gb-9-4",
        ),
    ),
    "GPU 3 only": Case(node(Phase.CORDONED, gpus=(3,)), ("gpu-3",)),
    "held from Cordoned, before any eviction": Case(node(Phase.CORDONED, gpus=(2,)), ("gpu-2",)),
    "while the layout is applied": Case(node(Phase.APPLYING, gpus=(2,)), ("gpu-2",)),
    "while it is verified": Case(node(Phase.VERIFYING, gpus=(2,)), ("gpu-2",)),
    "a failed layout stays held": Case(node(Phase.FAILED, gpus=(2,)), ("gpu-2",)),
    "blocked by a PDB": Case(node(Phase.BLOCKED, gpus=(2,)), ("gpu-2",)),
    "drained whole: every device": Case(node(Phase.DRAINING, whole="every GPU changes"), ALL),
    "verified or backed out: none": Case(node(Phase.UNCORDONING, gpus=(0, 1)), ()),
    "no record: none": Case(node(None), ()),
    "the slices cannot say which GPU: the rules it has stay": Case(
        node(Phase.VERIFYING, gpus=(0,)), ("gpu-0-old",), pool_of([gpu(0)]), ("gpu-0-old",)
    ),
    "the slices cannot say and no rule yet: every device": Case(
        node(Phase.DRAINING, gpus=(0,)), ("gpu-0",), pool_of([gpu(0)])
    ),
    "no GPU count on the node: every device": Case(node(Phase.DRAINING, gpus=(2,), count=""), ALL),
    "no slices at all, no rule: nothing to name": Case(node(Phase.DRAINING, gpus=(2,)), (), None),
}


@pytest.mark.parametrize("case", CHANGING.values(), ids=CHANGING.keys())
def test_changing_devices(case: Case) -> None:
    assert t.changing(case.view, case.pool, case.kept) == case.want


def test_a_rule_selects_exactly_one_device_with_a_noschedule_taint() -> None:
    rule = t.rule(OWNER, NODE, "gpu-2")
    assert rule["apiVersion"] == "resource.k8s.io/v1alpha3"
    assert rule["kind"] == "DeviceTaintRule"
    assert rule["metadata"]["name"] == "tessera.dra-1.gpu-2"
    assert rule["metadata"]["labels"] == {
        c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE,
        t.OWNER_LABEL: "NodePoolGeometry.h100",
        t.NODE_LABEL: NODE,
    }
    assert rule["spec"] == {
        "deviceSelector": {"driver": DRIVER, "pool": NODE, "device": "gpu-2"},
        "taint": {
            "key": "tessera.io/geometry-pending",
            "value": "NodePoolGeometry.h100",
            "effect": "NoSchedule",
        },
    }


def test_names_are_bounded_deterministic_and_distinct() -> None:
    long_node = "n" * 250
    a, b = t.rule_name(long_node, "gpu-0"), t.rule_name(long_node[:-1] + "m", "gpu-0")
    assert len(a) <= 253 and len(b) <= 253 and a != b
    assert a == t.rule_name(long_node, "gpu-0") and a.endswith(".gpu-0")
    assert t.rule_name("a.b", "c") != t.rule_name("a", "b-c")
    assert len(t.node_token(long_node)) <= 63
    assert (
        len(
            t.rule(f"NodePoolGeometry/{'p' * 200}", long_node, "gpu-0")["metadata"]["labels"][
                t.OWNER_LABEL
            ]
        )
        <= 63
    )


def stored(owner: str, node_name: str, device: str, **spec: Any) -> dict[str, Any]:
    """A rule as the API server returns it: a version, ``timeAdded`` on the taint."""
    body = t.rule(owner, node_name, device)
    body["metadata"]["resourceVersion"] = "7"
    body["spec"]["taint"]["timeAdded"] = "2026-12-07T13:00:00Z"
    body["spec"].update(spec)
    return body


OTHER = "NodePoolGeometry/a100"
GONE = "NodePoolGeometry/deleted"


@dataclass(frozen=True)
class PlanCase:
    want: dict[str, tuple[str, ...]]
    rules: list[dict[str, Any]]
    create: list[str]
    delete: list[str]
    owners: tuple[str, ...] | None = (OWNER, OTHER)
    remove: bool = True


PLANS = {
    "a node enters its window: one rule per changed device": PlanCase(
        {NODE: ("gpu-2", "gpu-3")}, [], ["tessera.dra-1.gpu-2", "tessera.dra-1.gpu-3"], []
    ),
    "already written: nothing to do": PlanCase(
        {NODE: ("gpu-2",)}, [stored(OWNER, NODE, "gpu-2")], [], []
    ),
    "verified: its rules go": PlanCase(
        {},
        [stored(OWNER, NODE, "gpu-2"), stored(OWNER, NODE, "gpu-3")],
        [],
        ["tessera.dra-1.gpu-2", "tessera.dra-1.gpu-3"],
    ),
    "a device no longer changing (republished under a new name)": PlanCase(
        {NODE: ("gpu-2-mig-a",)},
        [stored(OWNER, NODE, "gpu-2")],
        ["tessera.dra-1.gpu-2-mig-a"],
        ["tessera.dra-1.gpu-2"],
    ),
    "another pool's rules are its own": PlanCase({}, [stored(OTHER, "dra-9", "gpu-0")], [], []),
    "a rule whose owner is gone (a crash after the pool went)": PlanCase(
        {}, [stored(GONE, "dra-9", "gpu-0")], [], ["tessera.dra-9.gpu-0"]
    ),
    "without the owners listed, others' rules are not judged": PlanCase(
        {}, [stored(GONE, "dra-9", "gpu-0")], [], [], owners=None
    ),
    "a rule edited by hand is written again": PlanCase(
        {NODE: ("gpu-2",)},
        [stored(OWNER, NODE, "gpu-2", taint={"key": "x", "effect": "NoExecute"})],
        ["tessera.dra-1.gpu-2"],
        ["tessera.dra-1.gpu-2"],
    ),
    "after writes that did not all land: create only": PlanCase(
        {NODE: ("gpu-3",)},
        [stored(OWNER, NODE, "gpu-2"), stored(GONE, "x", "gpu-0")],
        ["tessera.dra-1.gpu-3"],
        [],
        remove=False,
    ),
}


@pytest.mark.parametrize("case", PLANS.values(), ids=PLANS.keys())
def test_rule_plan(case: PlanCase) -> None:
    got = t.plan(OWNER, case.want, t.listed(case.rules), case.owners, remove=case.remove)
    assert [r["metadata"]["name"] for r in got.create] == case.create
    assert [name for name, _ in got.delete] == case.delete
    assert all(version == "7" for _, version in got.delete)
    assert got.held == case.want


def test_listed_reads_only_tesseras_rules_and_their_device() -> None:
    foreign = {"metadata": {"name": "admin-rule", "labels": {}}, "spec": {}}
    got = t.listed([stored(OWNER, "a.b", "c"), foreign])
    assert [(r.name, r.node, r.device) for r in got] == [("tessera.a.b.c", "a.b", "c")]


def test_wanted_follows_this_owners_records_only() -> None:
    mine = node(Phase.DRAINING, gpus=(2,))
    theirs = replace(
        node(Phase.DRAINING, gpus=(3,)),
        name="dra-2",
        state=state(Phase.DRAINING, owner=OTHER, gpus=(3,)),
    )
    got = t.wanted([mine, theirs], {NODE: POOL, "dra-2": POOL}, [], OWNER)
    assert got == {NODE: ("gpu-2",)}


def test_after_a_pass_a_released_node_keeps_no_rule() -> None:
    held = node(Phase.VERIFYING, gpus=(2,))
    released: NodeState = replace(held.state, phase=Phase.UNCORDONING)  # type: ignore[arg-type]
    cleared = replace(held, name="dra-2")
    views = t.after(
        [held, cleared],
        [act.SetNodeState(NODE, released, "verified"), act.ClearNodeState("dra-2", "done")],
    )
    assert [v.state.phase if v.state else None for v in views] == [Phase.UNCORDONING, None]
    assert t.wanted(views, {NODE: POOL, "dra-2": POOL}, [], OWNER) == {}


def test_summary() -> None:
    assert t.summary({}) == "no device tainted"
    assert t.summary({"b": ("gpu-1",), "a": ("gpu-0", "gpu-2")}) == "a: gpu-0, gpu-2; b: gpu-1"
