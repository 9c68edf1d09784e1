"""Seeded simulations: 50 nodes, random agent timings, agent failures, PDBs and crashes.

Each step: the world ticks (kubelet, ReplicaSet, MIG manager), the engine plans
from a fresh observation, and the actions are applied one by one, sometimes
stopping early to model an operator killed mid-pass. After every single write
the invariants must hold; in the end the pool must converge. The transcript of
the main scenario is kept as a golden file (cluster-api's rolling-update
sequences): any change in behaviour shows up as a readable diff. Regenerate it
with ``TESSERA_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from persisted import ONE_WRITE, applied, not_one_write
from phase_spy import shown, watching
from rollout_builders import POOL, T0, desired, policy, secs
from rollout_world import World

from builders.views import NEW, OLD
from tessera.api.constants import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, NODE_STATE_ANNOTATION
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.gates import budget
from tessera.domain.rollout.planning import Plan, in_flight, plan
from tessera.domain.rollout.state import Edge, Phase
from tessera.domain.rollout.views import GEOMETRY_PENDING, DesiredNode

GOLDEN = Path(__file__).parent / "golden" / "simulation-50-nodes.txt"
ADMIN_CORDONED = ("gpu-07", "gpu-31")
INVALID = "gpu-13"
MAX_STEPS = 3000
C, D, A, V, U, F = (
    Phase.CORDONED,
    Phase.DRAINING,
    Phase.APPLYING,
    Phase.VERIFYING,
    Phase.UNCORDONING,
    Phase.FAILED,
)


@dataclass
class Run:
    world: World
    transcript: list[str] = field(default_factory=list)
    steps: int = 0
    max_disrupted: int = 0
    transitions: set[Edge] = field(default_factory=set)
    """Every edge ``state.check`` was asked about, as (before, after); ``None``: no record."""
    persisted: set[Edge] = field(default_factory=set)
    """Every change of a node's record, read back from the node around each write."""


def build(seed: int, fail_rate: float) -> tuple[World, dict[str, DesiredNode]]:
    rng = random.Random(seed)
    world = World(rng, T0)
    want: dict[str, DesiredNode] = {}
    for i in range(50):
        name = f"gpu-{i:02d}"
        world.add_node(name, OLD, cordoned=name in ADMIN_CORDONED)
        want[name] = desired(NEW, invalid="3g.40gb x3 needs 9 slots" if name == INVALID else "")
        for _ in range(rng.randint(0, 2)):
            world.add_pod(name, "train")
        if rng.random() < 0.3:
            world.add_pod(name, "serve")
        if rng.random() < 0.2:
            world.add_pod(name, "dcgm", owner="DaemonSet")
        if rng.random() < 0.2:
            world.add_pod(name, "web", accel=False)
        if rng.random() < fail_rate:
            world.failures_left.add(name)
    world.add_pod("gpu-20", "finalizer", grace=40)  # terminates slower than drain.timeout
    serving = sum(1 for p in world.pods.values() if p.pod.labels["app"] == "serve")
    world.pdb_min["serve"] = ("serve", max(0, serving - 1))
    return world, want


def executed(p: Plan, rng: random.Random, crash_rate: float) -> list[act.Action]:
    """What the executor writes, sometimes killed part way (as ``controllers.rollout.driver`` runs it).

    Stages run one after the other. Within a stage each node's actions run in
    order while different nodes run concurrently, so an operator killed during
    a stage leaves any prefix of each node's actions, interleaved in any order,
    and nothing of the stages after it.
    """
    if not p.stages or rng.random() >= crash_rate:
        return list(p.actions)
    dies_in = rng.randrange(len(p.stages))
    out = [a for stage in p.stages[:dies_in] for a in stage]
    chains: dict[str, list[act.Action]] = {}
    for a in p.stages[dies_in]:
        chains.setdefault(a.node, []).append(a)
    started = [chain[: rng.randint(0, len(chain))] for chain in chains.values()]
    while any(started):
        out.append(rng.choice([chain for chain in started if chain]).pop(0))
    return out


def simulate(seed: int, rollout: RolloutSpec, *, fail_rate: float, crash_rate: float) -> Run:
    world, want = build(seed, fail_rate)
    crash_rng = random.Random(seed * 7919)
    limit = budget(rollout.max_unavailable, len(want))
    daemonset_pods = {k for k, p in world.pods.items() if p.pod.is_daemonset}
    run, quiet = Run(world), 0
    settled: set[str] = set()
    for step in range(MAX_STEPS):
        run.steps = step
        world.tick(secs(10))
        run.transcript += [f"{step:04d} {e}" for e in world.events]
        world.events.clear()
        nodes, pods, pdbs = world.observe()
        with watching() as seen:
            p = plan(POOL, rollout, want, nodes, pods, pdbs, world.now)
        run.transitions |= seen
        ran = executed(p, crash_rng, crash_rate)
        for a in ran:
            if isinstance(a, act.SetNodeLabels):
                assert not world.accel_pods_on(a.node), f"device of {a.node} changed under a pod"
            assert a.node != INVALID or isinstance(a, act.AddTaint | act.RemoveTaint)
            if isinstance(a, act.SetNodeState) and a.state.rolled_back:
                settled.add(a.node)
            if isinstance(a, act.Cordon | act.SetNodeLabels):
                assert a.node not in settled, f"{a.node} retried a layout that was rolled back"
            if (change := applied(world, a)) is not None:  # what the node now carries
                run.persisted.add(change)
                assert change in ONE_WRITE, f"step {step}: {a.node} {not_one_write([change])}"
            run.transcript.append(f"{step:04d} {act.describe(a)}")
            # every unavailable node counts, the admins' cordons too (also once done)
            disrupted, held = world.disrupted(), world.held()
            run.max_disrupted = max(run.max_disrupted, len(disrupted))
            assert len(disrupted) <= limit, f"step {step}: {sorted(disrupted)} > {limit}"
            assert len(held) <= limit, f"step {step}: {sorted(held)} held > {limit}"
        if len(ran) < len(p.actions):
            run.transcript.append(
                f"{step:04d} -- operator killed after {len(ran)} of {len(p.actions)}"
            )
        assert all(n <= 1 for n in world.accepted_evictions.values())
        assert not daemonset_pods & set(world.accepted_evictions)
        busy = any(n.state is not None and in_flight(n.state) for n in nodes)
        quiet = quiet + 1 if not p.actions else 0
        if (not busy and not p.actions) or quiet >= 200:
            run.transcript.append(f"{step:04d} == {p.verdict.state} {p.verdict.reason}")
            return run
    pytest.fail(f"no convergence in {MAX_STEPS} steps")


def check_transitions(run: Run, *, rolled_back: bool) -> None:
    """The run took the way through the table that its failures call for; every write it
    persisted was one pass's worth of the table (asserted write by write, in ``simulate``)."""
    assert run.persisted and not not_one_write(run.persisted)
    want = {(None, C), (C, D), (D, A), (A, V), (V, U), (U, None), (V, F)}
    if rolled_back:
        want |= {(F, A), (U, F)}
    assert want <= run.transitions, shown(want - run.transitions)


def check_converged(world: World, *, rolled_back_ok: bool) -> None:
    for n in world.nodes.values():
        assert n.unschedulable == n.admin_cordoned, n.name
        state = world.view(n.name).state
        if n.name == INVALID:
            assert n.labels[MIG_CONFIG_LABEL] == OLD and state is None
            continue
        if state is not None:
            assert rolled_back_ok and state.rolled_back, (n.name, state.phase)
            assert n.labels[MIG_CONFIG_LABEL] == OLD
        else:
            assert n.labels[MIG_CONFIG_LABEL] == NEW, n.name
            assert n.labels[MIG_CONFIG_STATE_LABEL] == "success"
        assert GEOMETRY_PENDING not in n.taints


ROLLBACK = policy(
    maxUnavailable="10%", onFailure="Rollback", drain={"timeout": "2m"}, verifyTimeout="2m"
)


def test_golden_simulation_of_50_nodes() -> None:
    run = simulate(42, ROLLBACK, fail_rate=0.08, crash_rate=0.1)
    check_converged(run.world, rolled_back_ok=True)
    check_transitions(run, rolled_back=True)
    text = "\n".join(run.transcript) + "\n"
    if os.environ.get("TESSERA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), "golden missing: run with TESSERA_UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text(), "transcript changed; review, then TESSERA_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("seed", range(1, 7))
def test_invariants_hold_under_random_crashes(seed: int) -> None:
    run = simulate(seed, ROLLBACK, fail_rate=0.1, crash_rate=0.3)
    check_converged(run.world, rolled_back_ok=True)
    check_transitions(run, rolled_back=True)
    assert run.max_disrupted >= 3  # the budget was actually used


@pytest.mark.parametrize("seed", range(1, 4))
def test_hold_keeps_failed_nodes_cordoned_and_within_budget(seed: int) -> None:
    rollout = policy(maxUnavailable=4, drain={"timeout": "2m"}, verifyTimeout="2m")
    run = simulate(seed, rollout, fail_rate=0.1, crash_rate=0.2)
    check_transitions(run, rolled_back=False)
    for n in run.world.nodes.values():
        state = run.world.view(n.name).state
        if state is not None and state.phase.value == "Failed":
            assert n.unschedulable, f"{n.name} failed but was uncordoned under Hold"
    assert all(
        NODE_STATE_ANNOTATION not in n.annotations
        for n in run.world.nodes.values()
        if n.labels[MIG_CONFIG_LABEL] == NEW and not n.unschedulable
    )
