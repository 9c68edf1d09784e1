"""Builders for rollout tests: a state, a target, a policy in one line each (the node, pod and
PDB views come from ``builders.views``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from builders.views import ALLOC, NEW, OLD
from tessera.api.constants import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.state import Eviction, NodeState, Phase, TargetSpec
from tessera.domain.rollout.views import DesiredNode

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)  # a Saturday
POOL = "NodePoolGeometry/h100"


def secs(n: float) -> timedelta:
    return timedelta(seconds=n)


def policy(**rollout: Any) -> RolloutSpec:
    return RolloutSpec.model_validate(rollout)


def desired(target: str = NEW, *, invalid: str = "", watch: bool = True) -> DesiredNode:
    return DesiredNode(
        target=target,
        labels={MIG_CONFIG_LABEL: target},
        watch_label=MIG_CONFIG_STATE_LABEL if watch else None,
        expected_allocatable=dict(ALLOC.get(target, {})),
        invalid=invalid,
    )


def target(name: str = NEW) -> TargetSpec:
    return TargetSpec(name, {MIG_CONFIG_LABEL: name}, MIG_CONFIG_STATE_LABEL, dict(ALLOC[name]))


def state(phase: Phase, *, since: datetime = T0, **kw: Any) -> NodeState:
    base = NodeState(
        phase=phase,
        owner=POOL,
        target=target(NEW),
        orig=False,
        since=since,
        drain_started=since if phase in (Phase.DRAINING, Phase.BLOCKED) else None,
        last_good=target(OLD),
    )
    return replace(base, **kw)


def evicted(pod_key: str, attempts: int, ago: float, now: datetime = T0) -> dict[str, Eviction]:
    return {pod_key: Eviction(attempts, now - secs(ago))}


def kinds(actions: tuple[act.Action, ...] | list[act.Action]) -> list[str]:
    """Compact, order-preserving view of a plan: ``["SetNodeState:Cordoned", "Cordon:gpu-1"]``."""
    out = []
    for a in actions:
        match a:
            case act.SetNodeState(state=s):
                out.append(f"SetNodeState:{s.phase.value}")
            case act.Evict() | act.DeletePod():
                out.append(f"{type(a).__name__}:{a.namespace}/{a.name}")
            case _:
                out.append(f"{type(a).__name__}:{a.node}")
    return out


def written(actions: tuple[act.Action, ...], node_name: str = "gpu-1") -> NodeState:
    """The last state the plan writes for ``node_name``."""
    states = [a.state for a in actions if isinstance(a, act.SetNodeState) and a.node == node_name]
    assert states, f"no state written for {node_name}: {kinds(actions)}"
    return states[-1]
