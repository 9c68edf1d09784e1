"""Two policies' pod contracts that contradict each other on the resources both guard.

A ValidatingAdmissionPolicy is cluster-wide and a resource name (``huawei.com/Ascend310P``,
``nvidia.com/gpumem``) says nothing of the pool a pod will land in, so every contract that
guards a resource checks every pod requesting it. Two policies guarding one resource and
asking for different pieces — another ``schedulerName``, soft slicing on in one (the
``hami-core`` annotation on every pod) and off in the other (only with a ``-core``
request), another runtime class — give each such pod two contracts of which it can satisfy
at most one: under ``Deny`` no such pod is admitted, under ``Warn`` each is warned.

Both policies are then Stalled, reason ``Conflict``, each naming the other and the shared
resources, and NEITHER contract is enforced: one already written is removed (a contract
left from before the conflict would keep asking for one side's pieces, blocking the other
side's pods under ``Deny``). The conflict ends when the two agree, one sets
``podContract: Off``, or their pools stop sharing a chip. Contracts that agree on every
piece may overlap freely: both checks ask the same; ``Warn`` against ``Deny`` is no
contradiction (a pod that satisfies one satisfies both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tessera.domain.admission.contract import (
    ASCEND_RUNTIME_CLASS,
    HAMI_CORE,
    VNPU_MODE_ANNOTATION,
    Contract,
)
from tessera.domain.base.conditions import Verdict


@dataclass(frozen=True)
class Overlap:
    """Policy ``other`` guards ``resources`` too, asking for other pieces (``differences``,
    each "<piece> <what this policy asks> here, <what the other asks> there")."""

    other: str
    resources: tuple[str, ...]
    differences: tuple[str, ...]


@dataclass(frozen=True)
class _Asks:
    """What a contract asks of a pod requesting one of its resources."""

    scheduler: str
    runtime_class: str | None  # Ascend resources: the runtime class that mounts the vNPU
    annotation: str | None  # Ascend resources: when the hami-core annotation is required


def overlaps(contracts: Iterable[Contract]) -> dict[str, tuple[Overlap, ...]]:
    """Every policy whose contract contradicts another's on a shared resource, with those
    others (by name); a policy with none is absent."""
    found: dict[str, list[Overlap]] = {}
    ordered = sorted(contracts, key=lambda k: k.policy)
    for i, one in enumerate(ordered):
        for other in ordered[i + 1 :]:
            shared = sorted(set(one.resources) & set(other.resources))
            ours, theirs = _differences(one, other, shared), _differences(other, one, shared)
            if ours:
                found.setdefault(one.policy, []).append(Overlap(other.policy, tuple(shared), ours))
                found.setdefault(other.policy, []).append(
                    Overlap(one.policy, tuple(shared), theirs)
                )
    return {name: tuple(found[name]) for name in sorted(found)}


def _differences(one: Contract, other: Contract, shared: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for piece in ("scheduler", "runtime_class", "annotation"):
        for resource in shared:
            mine = getattr(_asks(one, resource), piece)
            theirs = getattr(_asks(other, resource), piece)
            if mine != theirs:
                out.append(f"{_PIECES[piece]} {_say(mine)} here, {_say(theirs)} there")
                break
    return tuple(out)


_PIECES = {
    "scheduler": "schedulerName",
    "runtime_class": "runtimeClassName",
    "annotation": f"annotation {VNPU_MODE_ANNOTATION}: {HAMI_CORE}",
}


def _say(value: str | None) -> str:
    return value if value is not None else "not asked"


def _asks(contract: Contract, resource: str) -> _Asks:
    part = contract.ascend
    if part is None or resource not in part.resources:
        return _Asks(contract.scheduler, None, None)
    when = "on every pod (soft slicing on)" if part.soft else "with a -core request only"
    return _Asks(contract.scheduler, ASCEND_RUNTIME_CLASS, when)


def overlap_message(who: str, found: Sequence[Overlap]) -> str:
    """Why ``who``'s contract is not enforced, naming each other policy and what differs."""
    parts = [
        f"SharingPolicy {o.other} guards {', '.join(o.resources)} too and asks otherwise "
        f"({'; '.join(o.differences)})"
        for o in found
    ]
    return (
        f"{'; '.join(parts)}: every pod requesting them would fail one of the two pod "
        f"contracts, so neither is enforced ({who}'s objects are removed) until they agree, "
        "one sets spec.scheduler.podContract: Off, or their pools stop sharing a chip"
    )


def with_overlaps(base: Verdict, found: Sequence[Overlap], who: str) -> Verdict:
    """Contradicting contracts stall the policy (``Conflict``); one already Stalled for
    another reason keeps that reason and says both."""
    if not found:
        return base
    text = overlap_message(who, found)
    if base.state == "stalled":
        return Verdict("stalled", base.reason, f"{base.message}; {text}", base.extra)
    return Verdict("stalled", "Conflict", text, base.extra)
