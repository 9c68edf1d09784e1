"""Every edge of the per-node state machine, one table row each (kueue style)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import pytest
from rollout_builders import POOL, T0, desired, evicted, kinds, policy, secs, state, target, written

from builders.views import NEW, NEW_ALLOC, OLD, gpu_pod, node, pdb
from tessera.api.constants import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.planning import Plan, plan
from tessera.domain.rollout.state import Phase
from tessera.domain.rollout.views import DesiredNode, NodeView, PdbView, PodView

DRAINING, BLOCKED = state(Phase.DRAINING), state(Phase.BLOCKED, message="x")
VERIFYING = state(Phase.VERIFYING)


@dataclass
class Case:
    nodes: Sequence[NodeView]
    want: list[str]
    pods: Sequence[PodView] = ()
    pdbs: Sequence[PdbView] = ()
    rollout: RolloutSpec = field(default_factory=RolloutSpec)
    desired: dict[str, DesiredNode] | None = None
    now: datetime = T0
    phase: Phase | None = None  # last state written for gpu-1
    reason: str | None = None  # verdict reason


def run(c: Case) -> Plan:
    want = c.desired if c.desired is not None else {n.name: desired() for n in c.nodes}
    return plan(POOL, c.rollout, want, c.nodes, c.pods, c.pdbs, c.now)


CASES = {
    "matching node gets no write at all": Case([node(config=NEW)], [], reason="Succeeded"),
    "matching node loses a stale taint, nothing else": Case(
        [node(config=NEW, tainted=True)], ["RemoveTaint:gpu-1"]
    ),
    "admission writes state before taint and cordon": Case(
        [node()],
        ["SetNodeState:Cordoned", "AddTaint:gpu-1", "Cordon:gpu-1"],
        phase=Phase.CORDONED,
        reason="RollingOut",
    ),
    "admin-cordoned node is admitted without a cordon": Case(
        [node(cordoned=True)], ["SetNodeState:Cordoned", "AddTaint:gpu-1"], phase=Phase.CORDONED
    ),
    "cordoned state, cordon not yet visible: cordon again": Case(
        [node(st=state(Phase.CORDONED), tainted=True)], ["Cordon:gpu-1"]
    ),
    "cordon visible: start draining and evict accelerator pods only": Case(
        [node(st=state(Phase.CORDONED), cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/a"],
        pods=[
            gpu_pod("a"),
            gpu_pod("web", requests_accelerator=False),
            gpu_pod("dcgm", owner_kind="DaemonSet"),
            gpu_pod("static", is_mirror=True),
            gpu_pod("done", phase="Succeeded"),
            gpu_pod("agent", labels={"tessera.io/drain.skip": "true"}),
        ],
        phase=Phase.DRAINING,
        reason="Draining",
    ),
    "custom podSelector adds matching pods": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/rt"],
        pods=[gpu_pod("rt", requests_accelerator=False, labels={"gpu": "runtime"})],
        rollout=policy(drain={"podSelector": {"matchLabels": {"gpu": "runtime"}}}),
    ),
    "terminating pod is waited on, never evicted twice": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        [],
        pods=[gpu_pod("a", deletion_timestamp=T0)],
    ),
    "drained node applies its layout in the same pass (the list was taken after the cordon)": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        phase=Phase.VERIFYING,
    ),
    "cordon visible and no pods: straight to the layout change": Case(
        [node(st=state(Phase.CORDONED), cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        phase=Phase.VERIFYING,
    ),
    "pdb with no disruptions left: no eviction before the timeout": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        [],
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("serving", 0, app="s")],
        reason="Draining",
    ),
    "pdb still blocks after the timeout: Blocked names the PDB": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Blocked"],
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("serving", 0, app="s")],
        now=T0 + secs(31 * 60),
        phase=Phase.BLOCKED,
        reason="DrainBlocked",
    ),
    "pdb budget is shared by the pods of one pass": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/a"],
        pods=[gpu_pod("a", labels={"app": "s"}), gpu_pod("b", labels={"app": "s"})],
        pdbs=[pdb("serving", 1, app="s")],
    ),
    "blocked node retries once the PDB relaxes": Case(
        [node(st=BLOCKED, cordoned=True, tainted=True)],
        ["SetNodeState:Blocked", "Evict:ml/a"],
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("serving", 1, app="s")],
        now=T0 + secs(31 * 60),
    ),
    "verifying but the layout was never requested, pods are back: drain again": Case(
        [node(st=VERIFYING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/a"],
        pods=[gpu_pod("a")],
        phase=Phase.DRAINING,
    ),
    "verifying but the layout was never requested, no pods: request it": Case(
        [node(st=VERIFYING, cordoned=True, tainted=True)], ["SetNodeLabels:gpu-1"]
    ),
    "blocked node whose pods are gone moves on to its layout": Case(
        [node(st=BLOCKED, cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
    ),
    "emptyDir pod without the flag blocks at once": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Blocked"],
        pods=[gpu_pod("scratch", uses_empty_dir=True)],
        reason="DrainBlocked",
    ),
    "emptyDir pod with deleteEmptyDirData is evicted": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/scratch"],
        pods=[gpu_pod("scratch", uses_empty_dir=True)],
        rollout=policy(drain={"deleteEmptyDirData": True}),
    ),
    "bare pod without force blocks": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Blocked"],
        pods=[gpu_pod("bare", owner_kind=None)],
    ),
    "bare pod with force is evicted through the Eviction API": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/bare"],
        pods=[gpu_pod("bare", owner_kind=None)],
        rollout=policy(drain={"force": True}),
    ),
    "two PDBs on one pod is a misconfiguration": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Blocked"],
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("one", 1, app="s"), pdb("two", 1, app="s")],
    ),
    "force deletes PDB-blocked pods after the timeout, once": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "DeletePod:ml/a"],
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("serving", 0, app="s")],
        rollout=policy(drain={"force": True}),
        now=T0 + secs(31 * 60),
    ),
    "refused eviction is not retried inside the back-off": Case(
        [node(st=replace(DRAINING, evictions=evicted("ml/a@uid-a", 1, 2)), cordoned=True)],
        ["AddTaint:gpu-1"],
        pods=[gpu_pod("a")],
    ),
    "refused eviction is retried after the back-off": Case(
        [
            node(
                st=replace(DRAINING, evictions=evicted("ml/a@uid-a", 1, 6)),
                cordoned=True,
                tainted=True,
            )
        ],
        ["SetNodeState:Draining", "Evict:ml/a"],
        pods=[gpu_pod("a")],
    ),
    "uncordoned during the drain: re-cordon, evict nothing": Case(
        [node(st=DRAINING, tainted=True)], ["Cordon:gpu-1"], pods=[gpu_pod("a")]
    ),
    "admin lifts an inherited cordon: it becomes ours": Case(
        [node(st=replace(DRAINING, orig=True), tainted=True)],
        ["SetNodeState:Draining", "Cordon:gpu-1"],
        phase=Phase.DRAINING,
    ),
    "pod appeared after the drain: back to Draining": Case(
        [node(st=state(Phase.APPLYING), cordoned=True, tainted=True)],
        ["SetNodeState:Draining", "Evict:ml/late"],
        pods=[gpu_pod("late")],
    ),
    "applying writes Verifying, then the labels": Case(
        [node(st=state(Phase.APPLYING), cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        phase=Phase.VERIFYING,
        reason="WaitingForAgent",
    ),
    "verifying after a crash before the label write: write it": Case(
        [node(st=VERIFYING, cordoned=True, tainted=True)], ["SetNodeLabels:gpu-1"]
    ),
    "agent pending: wait": Case(
        [node(st=VERIFYING, config=NEW, agent="pending", cordoned=True, tainted=True)],
        [],
        reason="WaitingForAgent",
    ),
    "agent success but allocatable stale: wait": Case(
        [node(st=VERIFYING, config=NEW, alloc={}, cordoned=True, tainted=True)], []
    ),
    "agent pending past verifyTimeout: Failed": Case(
        [node(st=VERIFYING, config=NEW, agent="pending", cordoned=True, tainted=True)],
        ["SetNodeState:Failed"],
        now=T0 + secs(16 * 60),
        phase=Phase.FAILED,
        reason="NodeFailed",
    ),
    "agent failed: Failed": Case(
        [node(st=VERIFYING, config=NEW, agent="failed", cordoned=True, tainted=True)],
        ["SetNodeState:Failed"],
        phase=Phase.FAILED,
    ),
    "verified: Uncordoning persisted, taint and cordon lifted, state cleared last": Case(
        [node(st=VERIFYING, config=NEW, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
    ),
    "verified on an admin-cordoned node: it stays cordoned": Case(
        [node(st=replace(VERIFYING, orig=True), config=NEW, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "ClearNodeState:gpu-1"],
    ),
    "crash after the uncordon: only the clear is left": Case(
        [node(st=state(Phase.UNCORDONING), config=NEW)], ["ClearNodeState:gpu-1"]
    ),
    "crash while a rollback uncordons: the settled record is still written": Case(
        [node(st=state(Phase.UNCORDONING, target=target(OLD), rollback_of=NEW), cordoned=True)],
        ["Uncordon:gpu-1", "SetNodeState:Failed"],
        phase=Phase.FAILED,
    ),
    "failed with Hold: nothing moves, Stalled": Case(
        [node(st=state(Phase.FAILED, message="boom"), config=NEW, agent="failed", cordoned=True)],
        [],
        reason="NodeFailed",
    ),
    "failed with Rollback: re-apply the last good layout": Case(
        [node(st=state(Phase.FAILED, message="boom"), config=NEW, agent="failed", cordoned=True)],
        ["SetNodeState:Applying"],
        rollout=policy(onFailure="Rollback"),
        phase=Phase.APPLYING,
    ),
    "failed with Rollback but nothing to go back to: hold": Case(
        [node(st=state(Phase.FAILED, last_good=None), config=NEW, agent="failed", cordoned=True)],
        [],
        rollout=policy(onFailure="Rollback"),
        reason="NodeFailed",
    ),
    "target changes while draining: keep draining toward the new one": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Draining"],
        desired={"gpu-1": desired("tessera-newer")},
        pods=[gpu_pod("a", deletion_timestamp=T0)],
    ),
    "target changes while verifying: re-apply the new one (still drained)": Case(
        [node(st=VERIFYING, config=NEW, agent="pending", cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        desired={"gpu-1": desired("tessera-newer")},
        phase=Phase.VERIFYING,
    ),
    "spec goes back to what a draining node runs: released at once, its pod not evicted": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(OLD)},
        pods=[gpu_pod("serving")],
        reason="Succeeded",
    ),
    "spec goes back while the drain is blocked: released, nothing evicted": Case(
        [node(st=BLOCKED, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(OLD)},
        pods=[gpu_pod("a", labels={"app": "s"})],
        pdbs=[pdb("serving", 1, app="s")],
    ),
    "spec goes back right after the cordon: released": Case(
        [node(st=state(Phase.CORDONED), cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(OLD)},
        pods=[gpu_pod("a")],
    ),
    "spec goes back before the layout was requested: released": Case(
        [node(st=VERIFYING, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(OLD)},
    ),
    "spec goes back on an admin-cordoned node: released, the admin's cordon stays": Case(
        [node(st=replace(DRAINING, orig=True), cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(OLD)},
        pods=[gpu_pod("serving")],
    ),
    "spec goes back while the new layout is being applied: it is re-requested": Case(
        [node(st=VERIFYING, config=NEW, agent="pending", cordoned=True, tainted=True)],
        ["SetNodeState:Verifying", "SetNodeLabels:gpu-1"],
        desired={"gpu-1": desired(OLD)},
        phase=Phase.VERIFYING,
    ),
    "layout becomes invalid before the device was touched: back out": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={"gpu-1": desired(invalid="3g.40gb x3 needs 9 slots, H100 has 8")},
    ),
    "node left the pool mid-drain: released": Case(
        [node(st=DRAINING, cordoned=True, tainted=True)],
        ["SetNodeState:Uncordoning", "RemoveTaint:gpu-1", "Uncordon:gpu-1", "ClearNodeState:gpu-1"],
        desired={},
    ),
    "invalid layout: never cordoned, Stalled": Case(
        [node()],
        [],
        desired={"gpu-1": desired(invalid="3g.40gb x3 needs 9 slots")},
        reason="InvalidGeometryForModel",
    ),
    "new node without any layout waits for its slot untainted; the budget names who holds it": Case(
        [node("gpu-1", config=None, agent=None), node("gpu-2", cordoned=True)],
        ["SetNodeState:Cordoned", "AddTaint:gpu-2"],
        rollout=policy(maxUnavailable=1),
        reason="RollingOut",
    ),
    "leftover taint on a node waiting for its slot is lifted": Case(
        [node("gpu-1", st=DRAINING, cordoned=True, tainted=True), node("gpu-2", tainted=True)],
        ["RemoveTaint:gpu-2"],
        pods=[gpu_pod("a", deletion_timestamp=T0)],
        rollout=policy(maxUnavailable=1),
    ),
    "leftover taint on a node whose layout is invalid is lifted (a Stalled pool holds none)": Case(
        [node(tainted=True)],
        ["RemoveTaint:gpu-1"],
        desired={"gpu-1": desired(invalid="3g.40gb x3 needs 9 slots")},
        reason="InvalidGeometryForModel",
    ),
    "waiting for approval: nothing is written to a fresh node": Case(
        [node(config=None, agent=None)], [], rollout=policy(approval="Manual")
    ),
    "node held by another owner is left alone": Case(
        [node(st=replace(DRAINING, owner="SharingPolicy/ts"), cordoned=True)], []
    ),
    "unreadable state: hands off, Stalled": Case(
        [node(cordoned=True, state_error="not JSON")], [], reason="NodeFailed"
    ),
    "NotReady node is not started": Case([node(ready=False)], [], reason="RollingOut"),
    "pre-flight: an undrainable node is not cordoned": Case(
        [node()], [], pods=[gpu_pod("scratch", uses_empty_dir=True)], reason="DrainBlocked"
    ),
    "paused: nothing starts": Case([node()], [], rollout=policy(paused=True), reason="RollingOut"),
    "manual approval without the annotation: nothing starts": Case(
        [node()], [], rollout=policy(approval="Manual"), reason="WaitingForApproval"
    ),
    "outside the window: nothing starts": Case(
        [node()],
        [],
        rollout=policy(window={"days": ["Sun"], "start": "01:00", "end": "05:00"}),
        reason="WaitingForWindow",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_state_machine(case: Case) -> None:
    got = run(case)
    assert kinds(got.actions) == case.want
    if case.phase is not None:
        assert written(got.actions).phase == case.phase
    if case.reason is not None:
        assert got.verdict.reason == case.reason


def test_admission_records_original_state_and_last_good() -> None:
    got = written(run(Case([node(cordoned=True)], [])).actions)
    assert got.orig is True
    assert got.last_good is not None
    assert got.last_good.labels == {MIG_CONFIG_LABEL: OLD}
    assert got.last_good.alloc == {"nvidia.com/mig-1g.10gb": 56, "nvidia.com/mig-3g.40gb": 0}


def test_label_write_clears_the_agents_stale_verdict() -> None:
    got = run(Case([node(st=state(Phase.APPLYING), cordoned=True, tainted=True)], []))
    labels = next(a for a in got.actions if isinstance(a, act.SetNodeLabels)).labels
    assert labels == {MIG_CONFIG_LABEL: NEW, MIG_CONFIG_STATE_LABEL: None}


def test_blocked_message_names_the_pdb_and_pod() -> None:
    c = CASES["pdb still blocks after the timeout: Blocked names the PDB"]
    got = run(c)
    assert got.problems[0].reason == "DrainBlocked"
    assert "pdb ml/serving allows 0 disruptions (pod ml/a)" in got.problems[0].message
    assert got.summary.blocking_pdbs == ["ml/serving"]


def test_rollback_ends_in_a_settled_failed_record_then_silence() -> None:
    rolling = state(Phase.VERIFYING, target=target(OLD), rollback_of=NEW)
    first = run(
        Case(
            [node(st=rolling, cordoned=True, tainted=True)],
            [],
            rollout=policy(onFailure="Rollback"),
        )
    )
    assert kinds(first.actions) == [
        "SetNodeState:Uncordoning",
        "RemoveTaint:gpu-1",
        "Uncordon:gpu-1",
        "SetNodeState:Failed",
    ]
    settled = written(first.actions)
    assert settled.rolled_back and settled.goal == NEW
    after = run(Case([node(st=settled)], [], rollout=policy(onFailure="Rollback")))
    assert after.actions == ()
    assert after.verdict.reason == "NodeFailed"
    assert "rolled back to tessera-old" in after.problems[0].message
    newer = run(Case([node(st=settled)], [], desired={"gpu-1": desired("tessera-newer")}))
    assert kinds(newer.actions)[:1] == ["SetNodeState:Cordoned"]


def test_verified_expectation_uses_allocatable() -> None:
    ok = node(config=NEW, alloc=dict(NEW_ALLOC))
    assert run(Case([ok], [])).actions == ()
    short = node(config=NEW, alloc={**NEW_ALLOC, "nvidia.com/mig-3g.40gb": 15})
    assert kinds(run(Case([short], [])).actions)[0] == "SetNodeState:Cordoned"


HELD_BY_PDB = {
    "a PDB allowing no disruption: named before the timeout": (
        [gpu_pod("a", labels={"app": "s"})],
        {},
        "eviction of pod ml/a blocked by PodDisruptionBudget ml/serving (0 disruptions allowed)",
    ),
    "a refused eviction (429), waiting out its back-off: named with the PDB": (
        [gpu_pod("a", labels={"app": "s"}, phase="Pending")],
        evicted("ml/a@uid-a", 1, 2),
        "eviction of pod ml/a refused by PodDisruptionBudget ml/serving; retrying",
    ),
    "a refused eviction retried after its back-off: still named": (
        [gpu_pod("a", labels={"app": "s"}, phase="Pending")],
        evicted("ml/a@uid-a", 1, 6),
        "eviction of pod ml/a refused by PodDisruptionBudget ml/serving; retrying",
    ),
    "a refused eviction no PDB here explains: the pod is still named": (
        [gpu_pod("a")],
        evicted("ml/a@uid-a", 1, 2),
        "eviction of pod ml/a refused (429) with no PodDisruptionBudget selecting it: an "
        "admission webhook (KubeVirt live-migrating a VM) or a budget not seen yet; retrying",
    ),
}


@pytest.mark.parametrize("pods,evictions,text", HELD_BY_PDB.values(), ids=HELD_BY_PDB.keys())
def test_draining_names_the_pod_and_pdb_holding_it_up_before_the_timeout(
    pods: list[PodView], evictions: dict[str, Any], text: str
) -> None:
    st = replace(DRAINING, evictions=evictions)
    got = run(
        Case(
            [node(st=st, cordoned=True, tainted=True)],
            [],
            pods=pods,
            pdbs=[pdb("serving", 0, app="s")],
        )
    )
    assert got.verdict.state == "progressing", got.verdict  # Stalled waits for drain.timeout
    assert got.verdict.reason == "Draining"
    assert text in got.verdict.message, got.verdict.message
    assert [str(h) for h in got.nodes[0].held] == [text]


def test_a_draining_node_without_a_blocked_pod_says_only_draining() -> None:
    got = run(
        Case(
            [node(st=DRAINING, cordoned=True, tainted=True)],
            [],
            pods=[gpu_pod("a", deletion_timestamp=T0)],
        )
    )
    assert got.verdict.message == "0 of 1 nodes updated; gpu-1 Draining"
