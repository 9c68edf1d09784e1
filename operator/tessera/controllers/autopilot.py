"""The autopilot's part of a NodePoolGeometry pass: read what pends, decide, announce.

The decision is ``tessera.domain.cluster.autopilot.step``'s; this reads its pods — those no
node holds yet (one list), and, only when one of them is Unschedulable for a MIG profile,
those on the pool's nodes (one list per node, as a drain's recount) — and posts an Event and
counts ``tessera_autopilot_decisions_total`` for a decision the step announces. What it
chose is written by the pass, in ``status.autopilot``; the spec is never written.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor

from tessera.adapters.events import EventType
from tessera.adapters.kube import Obj
from tessera.api.v1alpha1.autopilot import AutopilotStatus
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.controllers.runtime import Context, ref_of
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import autopilot_idle as idle
from tessera.domain.cluster.objects import PoolObservation
from tessera.observability import metrics

UNBOUND = "spec.nodeName="
LISTS_AT_ONCE = 16
_WARN = {pilot.INVALID, pilot.NOTHING_FITS}


def enabled(obj: Obj) -> bool:
    auto = (obj.get("spec") or {}).get("autopilot")
    return isinstance(auto, dict) and auto.get("enabled", True) is not False


def inputs(ctx: Context, obj: Obj) -> tuple[Hashable, ...]:
    """What the autopilot reads besides the pool's Nodes, for the pass's skip check: the pods
    no node holds (a new one, or the scheduler marking one, moves it). Nothing when it is off."""
    if not enabled(obj):
        return ()
    pods = ctx.kube.list("/api/v1/pods", field_selector=UNBOUND)
    return tuple(sorted((p["metadata"].get("uid", ""), _version(p)) for p in pods))


def decide(
    ctx: Context,
    obj: Obj,
    spec: NodePoolGeometrySpec,
    last: AutopilotStatus | None,
    seen: PoolObservation,
    busy: Sequence[idle.Busy] = (),
) -> pilot.Step:
    name = obj["metadata"]["name"]
    pods: list[Obj] = []
    if spec.autopilot is not None and spec.autopilot.enabled:
        pods = ctx.kube.list("/api/v1/pods", field_selector=UNBOUND)
        if pilot.demanding(pods):
            pods += _on(ctx, sorted(seen.targets))
    step = pilot.step(name, spec, last, seen, pods, ctx.clock(), busy)
    if step.announce and step.status is not None:
        outcome = step.status.outcome
        type_: EventType = "Warning" if outcome in _WARN else "Normal"
        ctx.events.post(ref_of(obj), f"Autopilot{outcome}", step.status.reason, ctx.clock(), type_)
        for profile in step.profiles or ("",):
            metrics.AUTOPILOT_DECISIONS.labels(name, profile, outcome).inc()
    return step


def _on(ctx: Context, nodes: list[str]) -> list[Obj]:
    if not nodes:
        return []

    def on(node: str) -> list[Obj]:
        return ctx.kube.list("/api/v1/pods", field_selector=f"spec.nodeName={node}")

    with ThreadPoolExecutor(min(LISTS_AT_ONCE, len(nodes))) as pool:
        return [p for pods in pool.map(on, nodes) for p in pods]


def _version(pod: Obj) -> str:
    return str(pod["metadata"].get("resourceVersion", ""))
