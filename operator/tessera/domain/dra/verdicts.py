"""What a pool's or policy's conditions say about its DeviceClasses, after a class sync.

A declarer is ``Stalled`` when it is refused (``InvalidConfig``, ``InvalidSelector``: nothing
written), when a class it declares has a name held by a class Tessera does not own
(``Conflict``, naming it), or when the API server dropped a field Tessera sent
(``FieldDropped``). A DRA pool whose nodes publish no ResourceSlice of the driver is
``Reconciling``, reason ``WaitingForDriver``, naming them — unless it is already stalled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera.api import constants as c
from tessera.domain.base.conditions import Verdict
from tessera.domain.base.failures import Failure
from tessera.domain.dra import slices
from tessera.domain.dra.classes import POLICY_KIND, POOL_KIND, DesiredClasses
from tessera.domain.dra.naming import DRIVER, declarer

WAITING_FOR_DRIVER = "WaitingForDriver"
SHOWN = 10


@dataclass(frozen=True)
class ClassesSynced:
    """What one class sync found and did; each declarer's part is read with ``verdict``."""

    desired: DesiredClasses = field(default_factory=DesiredClasses)
    conflicts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Class name → its declarers, for a name held by a class Tessera does not own."""
    dropped: Mapping[str, str] = field(default_factory=dict)
    """Class name → the FieldDropped message."""
    writes: int = 0
    owners: frozenset[str] = frozenset()
    """Every declarer named on a Tessera class as the sync read them (their deletion is theirs)."""
    error: Failure | None = None
    """The API error that stopped the sync (nothing after it written); ``failure_for`` says
    which objects report it."""

    def classes_of(self, who: str) -> tuple[str, ...]:
        return self.desired.declared.get(who, ())

    def verdict(self, who: str) -> Verdict | None:
        """Stalled, or None when nothing is wrong with the declarer's classes."""
        problems = self.desired.problems.get(who)
        if problems:
            text = "; ".join(map(str, problems)) + " (no DeviceClass written)"
            return Verdict("stalled", problems[0].reason, text)
        taken = sorted(n for n, by in self.conflicts.items() if who in by)
        if taken:
            text = (
                f"DeviceClass {', '.join(taken)} exists and is not Tessera's (no label "
                f"{c.MANAGED_BY_LABEL}={c.MANAGED_BY_VALUE}); it is left untouched: delete or "
                "rename it to let Tessera write its class"
            )
            return Verdict("stalled", "Conflict", text)
        lost = [self.dropped[n] for n in self.classes_of(who) if n in self.dropped]
        if lost:
            return Verdict("stalled", "FieldDropped", "; ".join(lost))
        return None


def failure_for(synced: ClassesSynced, who: str, *, on_dra: bool) -> Failure | None:
    """The sync's failure for the object ``who`` (``Kind/name``), or None when it is not
    concerned: a DRA pool and a policy on one report it (their classes may be unwritten), as
    does a policy whose classes still exist (their deletion is its); a device-plugin pool and
    a device-plugin policy never fail because of DRA. It is reported like any failed call of
    a pass (``domain.base.failures``: 403 and 422 stall at once, others after retries)."""
    if synced.error is None:
        return None
    if on_dra or (who.startswith(f"{POLICY_KIND}/") and who in synced.owners):
        return synced.error
    return None


def holds_deletion(synced: ClassesSynced, who: str) -> bool:
    """Whether a declarer being deleted waits: the sync failed while classes naming it still
    exist (its finalizer is called again; nothing of Tessera's is left behind)."""
    return synced.error is not None and who in synced.owners


def pool_classes(
    synced: ClassesSynced, pool: str, published: Iterable[Mapping[str, Any]], nodes: Iterable[str]
) -> list[dict[str, Any]]:
    """``status.deviceClasses`` of a pool: its geometry classes, devices on its nodes."""
    counted = slices.selected(published, nodes)
    out = []
    for name in synced.classes_of(declarer(POOL_KIND, pool)):
        selects = synced.desired.classes[name].selects
        out.append({"name": name, "selects": selects, "devices": counted.get(selects, 0)})
    return out


def pool_verdict(
    synced: ClassesSynced,
    pool: str,
    published: Iterable[Mapping[str, Any]],
    nodes: Iterable[str],
    base: Verdict,
) -> Verdict:
    """The DRA pool's verdict: its classes' problems first, then nodes without the driver."""
    found = synced.verdict(declarer(POOL_KIND, pool))
    if found is not None:
        return Verdict(found.state, found.reason, found.message, base.extra)
    if base.state == "stalled":
        return base
    if base.reason == WAITING_FOR_DRIVER:  # the rollout named them, and what waits on them
        return base
    waiting = slices.without_driver(published, nodes)
    if not waiting:
        return base
    return Verdict("progressing", WAITING_FOR_DRIVER, waiting_text(waiting), base.extra)


def waiting_text(nodes: Sequence[str]) -> str:
    """What a ``WaitingForDriver`` condition says, naming the nodes."""
    shown = ", ".join(nodes[:SHOWN])
    if len(nodes) > SHOWN:
        shown += f" and {len(nodes) - SHOWN} more"
    return (
        f"node(s) {shown} publish no ResourceSlice of driver {DRIVER}: is NVIDIA's DRA "
        "driver's kubelet plugin running there?"
    )
