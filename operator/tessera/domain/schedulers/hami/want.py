"""What the policies naming one HAMi config want of it, and where they cannot agree.

All policies whose ``spec.scheduler.hami.configMap`` is the same map write into one file, so
their asks are joined first:

* HAMi's version: the versions found for them (declared or image) must agree — else
  ``Conflict`` on all, nothing written; none found: ``SchedulerVersionUnknown``;
* chips: every Ascend chip their nodes hold gets HAMi's shipped entry; a chip HAMi ships none
  for, with no entry a person wrote either, leaves its pods Pending: ``SchedulerTrap``;
* ``hamiVnpuCore``: the policies with ``spec.ascend`` say true (soft slicing) or false; two
  that disagree are a ``Conflict`` on both and the field is left as it is; soft slicing with a
  HAMi that reads ``vnpus`` as a list (before v2.9, no hami-core mode) is a ``SchedulerTrap``;
* ``nvidia:`` scalings from each ``backend: HAMiCore`` policy (MIG mode has none): likewise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera.domain.base.conditions import Verdict
from tessera.domain.schedulers import outcome, vnpus
from tessera.domain.schedulers.demands import PolicyDemand
from tessera.domain.schedulers.hami.config import HAMI_VNPU_CORE, Want
from tessera.domain.schedulers.versions import Detected


@dataclass(frozen=True)
class Joined:
    want: Want | None
    """None: nothing may be written to this map (its version is unknown or disputed)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """Policies whose scheduler side is not ready, and why."""
    version: Detected | None = None


def join(where: str, demands: Sequence[PolicyDemand], present: Collection[str] = ()) -> Joined:
    """The asks of the policies naming the HAMi config ``where``; ``present``: the
    ``chipName`` of every ``vnpus`` entry already in the file (a person's entry counts)."""
    found = {d.policy: d.versions["hami"] for d in demands if "hami" in d.versions}
    if not found:
        why = {
            d.policy: _stalled(outcome.VERSION_UNKNOWN, d.unknown.get("hami", "")) for d in demands
        }
        return Joined(None, why)
    if len({v.version for v in found.values()}) > 1:
        listed = ", ".join(f"{p}: {v}" for p, v in sorted(found.items()))
        text = (
            f"SharingPolicies naming {where} disagree on HAMi's version ({listed}); nothing written"
        )
        return Joined(None, {d.policy: _stalled(outcome.CONFLICT, text) for d in demands})
    detected = next(iter(found.values()))
    version = detected.version
    verdicts: dict[str, Verdict] = {}
    chips: set[str] = set()
    for d in demands:
        for raw in d.chips:
            chip = vnpus.hami_chip(raw)
            entry = vnpus.entry(chip, version) if chip else None
            if entry is not None and chip:
                chips.add(chip)
            elif (chip or raw) not in present:
                text = (
                    f"chip {raw} of its nodes has no vnpus entry in {where} and HAMi {version} "
                    f"ships none Tessera could write; add one by hand (pods asking for it stay Pending)"
                )
                verdicts[d.policy] = _stalled(outcome.TRAP, text)
    held: set[str] = set()
    core = _agreed(
        where,
        HAMI_VNPU_CORE,
        {d.policy: d.soft_slicing for d in demands if d.ascend},
        verdicts,
        held,
    )
    if core and not vnpus.map_form(version):
        for d in demands:
            if d.soft_slicing:
                text = (
                    f"spec.ascend.mode HAMiCore (softSlicing: true) needs HAMi v2.9 or newer (vnpus.hamiVnpuCore, "
                    f"hami-core mode); {where} is read by HAMi {detected}"
                )
                verdicts[d.policy] = _stalled(outcome.TRAP, text)
        core = None
    nvidia = _agreed(
        where, "nvidia", {d.policy: _nvidia(d) for d in demands if _nvidia(d)}, verdicts, held
    )
    want = Want(version, tuple(sorted(chips)), core, nvidia or {}, frozenset(held))
    return Joined(want, verdicts, detected)


def _nvidia(demand: PolicyDemand) -> dict[str, Any] | None:
    spec = demand.hami_core
    if spec is None or spec.mode == "MIG":
        return None
    return {
        "deviceSplitCount": spec.device_split_count,
        "deviceMemoryScaling": spec.device_memory_scaling,
        "deviceCoreScaling": spec.device_core_scaling,
    }


def _agreed(
    where: str, what: str, asks: dict[str, Any], verdicts: dict[str, Verdict], held: set[str]
) -> Any:
    """The one value the policies ask for ``what``; None (and a Conflict on each, ``what``
    held) when they ask for different ones, or none asks."""
    values = {repr(v) for v in asks.values()}
    if len(values) <= 1:
        return next(iter(asks.values()), None)
    listed = "; ".join(f"{p} wants {_shown(v)}" for p, v in sorted(asks.items()))
    text = f"SharingPolicies disagree on {what} in {where} ({listed}); Tessera leaves it as it is"
    for policy in asks:
        verdicts[policy] = _stalled(outcome.CONFLICT, text)
    held.add(what)
    return None


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value).lower() if isinstance(value, bool) else str(value)


def _stalled(reason: str, message: str) -> Verdict:
    return Verdict("stalled", reason, message)
