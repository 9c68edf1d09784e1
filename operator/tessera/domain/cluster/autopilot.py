"""One pass of the autopilot over a pool: what it ran on, what it decides, what status says.

The NodePoolGeometry controller calls ``effective`` before it observes the pool: the spec
with ``spec.mig.layouts`` replaced by the layouts recorded in ``status.autopilot`` — when
the autopilot is on and the choice was made from the layouts Git holds now (``basis``);
otherwise Git's layouts rule, and a choice made from older ones is dropped. The rollout
then targets that spec through its own budget, approval and per-GPU rules. After the
rollout, ``step`` decides from the pool's observation and the pods (``cluster.demand``,
the same reading as ``tessera suggest POOL``; ``suggestion.suggest``, the same decision):

- **off** (``enabled: false``): no choice; Git's layouts rule;
- **invalid** for this cluster: the nodes' GPU model has no entry in ``autopilot.profiles``,
  or demand that cannot be read (a pod asking for a profile the model lacks): no change, and
  the Autopilot condition is False naming the model or the pod;
- **usage unknown** on a node (a change still rolling out, no holders record): no change;
  it decides once every node's usage is known;
- **busy**: a pod landed on a GPU the recorded choice changes before the rollout asked its
  node's device to change (``cluster.autopilot_idle``): that node is held or backed out,
  and the choice for the GPU is withdrawn where no node runs it yet (``withdrawal``; then
  the loop decides again), else the node waits; one such decision is announced once;
- otherwise the decision: ``Changed`` (new layouts recorded, today's count per GPU index
  raised), ``NothingFits``, ``Served`` (free instances serve what pends), ``Waiting`` (pods
  pend, none yet for ``pendingFor``; look again then) or ``Idle`` (nothing pends).

A decision is **announced** (an Event, a count of ``tessera_autopilot_decisions_total``, a
new ``decidedAt`` and reason) when it changes layouts or its outcome differs from the last
one recorded; otherwise status keeps what it said, so a pool whose demand cannot be met
writes nothing pass after pass. Pure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from tessera.api.v1alpha1.autopilot import AutopilotSpec, AutopilotStatus, GpuReconfigurations
from tessera.api.v1alpha1.layouts import MigLayout
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.autopilot import demand, suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.base.conditions import Status
from tessera.domain.cluster import autopilot_idle as idle
from tessera.domain.cluster import demand as live
from tessera.domain.cluster.objects import PoolObservation, pod_view
from tessera.domain.geometry import catalog, layouts
from tessera.domain.rollout import gates

Raw = Mapping[str, Any]
CHANGED, NOTHING_FITS, SERVED, WAITING, IDLE = "Changed", "NothingFits", "Served", "Waiting", "Idle"
OFF, INVALID, UNKNOWN, BUSY = "Off", "Invalid", "UsageUnknown", "Busy"
OUTCOMES = (CHANGED, NOTHING_FITS, SERVED, WAITING, IDLE, OFF, INVALID, UNKNOWN, BUSY)
CONDITION = "Autopilot"
REASON_LIMIT, HELD_LIMIT = 4096, 64
DECIDE_AGAIN_S = 1.0  # a choice recorded (Changed) or withdrawn (Busy): the next pass acts on it


@dataclass(frozen=True, slots=True)
class Step:
    """What the pass records and reports."""

    status: AutopilotStatus | None  # status.autopilot; None: the pool has no spec.autopilot
    announce: bool  # a new decision: an Event and a count
    profiles: tuple[str, ...]  # the metric's profile label(s): those served, else those pending
    condition: tuple[str, Status, str, str] | None  # (type, status, reason, message)
    requeue_after: float | None = None  # look again then (demand waits for pendingFor)


def basis(spec: NodePoolGeometrySpec) -> str:
    """A hash of Git's ``spec.mig.layouts``: what a recorded choice was made from."""
    raw = [lay.model_dump(by_alias=True) for lay in (spec.mig.layouts if spec.mig else [])]
    return hashlib.sha256(json.dumps(raw, sort_keys=True).encode()).hexdigest()[:16]


def recorded(status: Raw | None) -> AutopilotStatus | None:
    """``status.autopilot`` as last written; None when absent or unreadable (then Git rules)."""
    raw = (status or {}).get("autopilot")
    if not isinstance(raw, Mapping):
        return None
    try:
        return AutopilotStatus.model_validate(raw)
    except ValidationError:
        return None


def chosen(spec: NodePoolGeometrySpec, last: AutopilotStatus | None) -> tuple[MigLayout, ...]:
    """The layouts the autopilot chose that still apply: on, made from Git's layouts now."""
    auto = spec.autopilot
    if auto is None or not auto.enabled or last is None or spec.mig is None:
        return ()
    return tuple(last.layouts) if last.basis == basis(spec) else ()


def effective(spec: NodePoolGeometrySpec, last: AutopilotStatus | None) -> NodePoolGeometrySpec:
    """The spec the rollout targets: Git's, with ``spec.mig.layouts`` the autopilot's choice."""
    picked = chosen(spec, last)
    if not picked or spec.mig is None:
        return spec
    return spec.model_copy(update={"mig": spec.mig.model_copy(update={"layouts": list(picked)})})


def bounds_for(auto: AutopilotSpec, model: catalog.GpuModel) -> Bounds | None:
    """The bounds for the pool's GPU model; None when ``autopilot.profiles`` has no entry."""
    allowed = auto.profiles.get(model.id)
    if allowed is None:
        return None
    return Bounds(
        enabled=auto.enabled,
        profiles={model.id: tuple(allowed)},
        minimum={p: b.min for p, b in allowed.items() if b.min},
        maximum={p: b.max for p, b in allowed.items() if b.max is not None},
        pend_threshold=gates.duration(auto.pending_for),
        per_gpu_per_day=auto.max_reconfigurations_per_gpu_per_day,
    )


def demanding(pods: Sequence[Raw]) -> bool:
    """Whether any pod kube-scheduler marked Unschedulable asks for a MIG profile by name:
    without one, nothing pends for any pool, and no node's pods need reading."""
    for pod in pods:
        view = pod_view(pod)
        if view.node or view.phase != "Pending" or not live.unschedulable(pod)[0]:
            continue
        if any(r.startswith(live.MIG_PREFIX) for r in view.requests):
            return True
    return False


def step(
    pool: str,
    spec: NodePoolGeometrySpec,
    last: AutopilotStatus | None,
    seen: PoolObservation,
    pods: Sequence[Raw],
    now: datetime,
    busy: Sequence[idle.Busy] = (),
) -> Step:
    """The autopilot's decision for ``pool`` this pass (``seen`` observed with ``effective``);
    ``busy``: the rollout's recheck of the nodes the recorded choice changes (``idle``)."""
    auto = spec.autopilot
    if auto is None:
        return Step(None, False, (), None)
    day = now.date().isoformat()
    counts = _counts(last, day)
    base = basis(spec)
    picked = chosen(spec, last)
    if not auto.enabled:
        why = "the autopilot is off (spec.autopilot.enabled: false): the pool runs spec.mig.layouts"
        return _record(last, OFF, why, (), base, day, counts, now, "False")
    if busy and picked:
        return _busy(last, busy, picked, seen, base, day, counts, now)
    where = f"NodePoolGeometry/{pool}"
    eff = effective(spec, last)
    try:
        names = sorted(seen.targets)
        if not names:
            raise live.LiveError(f"{where}: selects no node, so no GPU can serve a pending pod")
        members = {v.name: v for v in seen.involved if v.name in seen.targets}
        model, _ = live.model_of(where, [(n, members[n].labels) for n in names])
        bounds = bounds_for(auto, model)
        if bounds is None:
            raise live.LiveError(
                f"spec.autopilot.profiles has no entry for {model.id}, the GPU model of the "
                f"pool's nodes ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}): "
                "the autopilot changes nothing"
            )
        observed = live.observe(pool, eff, seen, pods, now, bounds, counts)
    except live.LiveError as err:
        return _record(last, INVALID, str(err), picked, base, day, counts, now, "False")
    inputs = observed.inputs
    pending = tuple(sorted({w.profile for w in inputs.pods}))
    if observed.unknown and inputs.pods:
        why = "; ".join(f"usage unknown on {u}" for u in observed.unknown)
        why += ": the autopilot decides once every node's usage is known"
        out = _record(last, UNKNOWN, why, picked, base, day, counts, now, "True", pending)
        return dataclasses.replace(out, announce=False)  # no decision: the pool is settling
    result = suggestion.suggest(inputs)
    text = "; ".join((*result.lines, *live.lines(observed)))
    if result.patch is not None:
        new = tuple(MigLayout.model_validate(lay) for lay in result.patch["spec"]["mig"]["layouts"])
        for change in result.decision.changes:
            counts[change.gpu.index] = counts.get(change.gpu.index, 0) + 1
        served = tuple(sorted({p for c in result.decision.changes for p, _ in c.serves}))
        status = _status(new, base, CHANGED, text, now, day, counts)
        condition: tuple[str, Status, str, str] = (CONDITION, "True", CHANGED, status.reason)
        return Step(status, True, served or pending, condition, DECIDE_AGAIN_S)  # roll it
    outcome = _outcome(result.decision, inputs)
    wait = _wait(inputs, outcome)
    out = _record(last, outcome, text, picked, base, day, counts, now, "True", pending)
    return Step(out.status, out.announce, out.profiles, out.condition, wait)


@dataclass(frozen=True, slots=True)
class Withdrawal:
    """The recorded choice once the busy GPUs no node runs it on yet are withdrawn."""

    layouts: tuple[MigLayout, ...]  # the choice after the withdrawal (``picked`` when none)
    gpus: tuple[int, ...]  # the GPU indexes whose layout went back; () when none did
    held: tuple[str, ...]  # the busy nodes that wait: a GPU not withdrawn, or not known


def withdrawal(
    picked: Sequence[MigLayout], busy: Sequence[idle.Busy], seen: PoolObservation
) -> Withdrawal:
    """The choice ``picked`` with each busy GPU index that no member runs it on yet set back
    to what the members run there (``idle.withdrawable``); the step records it, and
    ``tessera plan`` previews it (``preview.geometry``), so both target the same layouts.

    The members may differ in GPU count: the per-index layouts are read for the largest
    node, and an index a smaller node lacks is never written to it (``per_device``)."""
    members = sorted(seen.targets)
    back = idle.withdrawable(busy, seen.involved, members)
    size = max(
        (len(v.layout) for v in seen.involved if v.name in seen.targets and v.layout is not None),
        default=0,
    )
    pairs = [(lay.devices, lay.profiles) for lay in picked]
    before = list(layouts.per_device(pairs, size))
    after = list(before)
    for i, counts_i in back.items():
        if i < size:
            after[i] = counts_i
    gpus = tuple(i for i in range(size) if after[i] != before[i])
    held = tuple(sorted({b.node for b in busy if not b.gpus or not set(b.gpus) <= set(gpus)}))
    if not gpus:
        return Withdrawal(tuple(picked), (), held)
    raw = suggestion.patch(after)["spec"]["mig"]["layouts"]
    return Withdrawal(tuple(MigLayout.model_validate(lay) for lay in raw), gpus, held)


def _busy(
    last: AutopilotStatus | None,
    busy: Sequence[idle.Busy],
    picked: tuple[MigLayout, ...],
    seen: PoolObservation,
    base: str,
    day: str,
    counts: Mapping[int, int],
    now: datetime,
) -> Step:
    """``Busy``: the choice withdrawn for the busy GPUs no node runs it on yet (their index
    goes back to what every node runs there), the other busy nodes held until idle.

    One decision is one set of withdrawn GPUs and waiting nodes (``status.autopilot.held``):
    the same set pass after pass is not announced again, whichever pods hold them (their
    names change as a Deployment replaces them), so its Events are bounded by its GPUs and
    nodes. After a withdrawal the loop decides again at once (the next pass targets the
    withdrawn choice; nothing else would wake the pool); a node that waits is woken by its
    Node changing (the GPU node agent's record), so no pass is asked for."""
    out = withdrawal(picked, busy, seen)
    why = "; ".join(b.why for b in busy)
    why += ": the autopilot changes idle GPUs only, nothing is evicted"
    if out.gpus:
        where = ", ".join(str(i) for i in out.gpus)
        why += f"; its choice for GPU {where} is withdrawn, and it decides again"
    if out.held:
        why += f"; {', '.join(out.held)} wait(s) until the GPUs are idle"
    withdrawn = {f"{b.node}/{i}" for b in busy for i in b.gpus if i in out.gpus}
    held = sorted(withdrawn | set(out.held))[:HELD_LIMIT]
    step = _record(last, BUSY, why, out.layouts, base, day, counts, now, "True", held=held)
    return dataclasses.replace(step, requeue_after=DECIDE_AGAIN_S if out.gpus else None)


def _outcome(decision: Any, inputs: suggestion.Inputs) -> str:
    if decision.nothing_fits:
        return NOTHING_FITS
    if not inputs.pods:
        return IDLE
    if not demand.counted(inputs.wants, inputs.bounds.pend_threshold) and any(
        w.pended < inputs.bounds.pend_threshold for w in inputs.pods
    ):
        return WAITING
    return SERVED


def _wait(inputs: suggestion.Inputs, outcome: str) -> float | None:
    """Seconds until the longest-waiting pod's demand counts, while demand waits for it."""
    if outcome != WAITING:
        return None
    young = [w.pended for w in inputs.pods if w.pended < inputs.bounds.pend_threshold]
    left = inputs.bounds.pend_threshold - max(young, default=timedelta(0))
    return max(1.0, left.total_seconds())


def _counts(last: AutopilotStatus | None, day: str) -> dict[int, int]:
    if last is None or last.day != day:
        return {}
    return {r.gpu: r.count for r in last.reconfigurations if r.count}


def _record(
    last: AutopilotStatus | None,
    outcome: str,
    why: str,
    picked: tuple[MigLayout, ...],
    base: str,
    day: str,
    counts: Mapping[int, int],
    now: datetime,
    state: Status,
    pending: tuple[str, ...] = (),
    held: Sequence[str] = (),
) -> Step:
    """A decision that changes no layout: announced only when it is new — its outcome, its
    layouts or what it holds (``held``) — else the reason and time recorded stay, so the
    status does not move pass after pass."""
    fresh = (
        last is None
        or last.outcome != outcome
        or tuple(last.layouts) != picked
        or list(last.held) != list(held)
    )
    if not fresh and last is not None:
        why, stamp = last.reason, last.decided_at
    else:
        stamp = _stamp(now)
    status = _status(picked, base if picked else "", outcome, why, now, day, counts, stamp, held)
    return Step(status, fresh, pending, (CONDITION, state, outcome, status.reason))


def _status(
    picked: Sequence[MigLayout],
    base: str,
    outcome: str,
    why: str,
    now: datetime,
    day: str,
    counts: Mapping[int, int],
    stamp: str | None = None,
    held: Sequence[str] = (),
) -> AutopilotStatus:
    return AutopilotStatus(
        layouts=list(picked),
        basis=base,
        outcome=outcome,
        reason=why[:REASON_LIMIT],
        decided_at=stamp or _stamp(now),
        day=day,
        reconfigurations=[GpuReconfigurations(gpu=i, count=n) for i, n in sorted(counts.items())],
        held=list(held),
    )


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def spec_patch(status: AutopilotStatus) -> dict[str, Any] | None:
    """The merge patch that makes the recorded choice Git's (``tessera suggest --from-status``);
    None when nothing is chosen."""
    if not status.layouts:
        return None
    return {
        "spec": {
            "mig": {
                "layouts": [
                    {"devices": lay.devices, "profiles": dict(lay.profiles)}
                    for lay in status.layouts
                ]
            }
        }
    }
