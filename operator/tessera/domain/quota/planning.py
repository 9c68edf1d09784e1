"""From a TenantQuota and the quotas seen, the writes that bring the cluster in line.

The plan is a value: the controller logs each action's ``reason``, applies
``next_wave`` and reconciles again, once per pass. Wave 1 holds everything
that can only tighten the tenant's limits or that needs no ordering: creates
(pinned at the namespace's usage), decreases, deletes of namespaces that left,
and changes to resources without a ``total``. Wave 2 raises limits towards
their target and is released only when wave 1 is empty and the quota
controller has enforced every Tessera quota (``status.hard == spec.hard``),
which is why ``next_wave`` withholds it until then (see ``allocation``).

A namespace that left the tenant loses its quota in wave 1, unless another
tenant now owns it and has no quota there yet, or it is contested: deleting
then would leave it with no limit at all, so the delete is *held* until the
new owner's quota exists.

Headroom moves wait while admission is busy in the namespace they would write
(``settling``): given the ``busy`` namespaces, a wave-1 decrease that only
moves headroom (the limits' sum is within the total) is deferred there, and
with it the whole of wave 2, which counts on every decrease; a wave-2 raise
into a busy namespace is deferred too. ``waiting`` names them; the plan is not
settled until they are written. What keeps the sum within the total (the total
lowered, an undercount to absorb), creates, deletes and changes to resources
without a total are never deferred: a delay is only ever safe for moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.quota import objects
from tessera.domain.quota.allocation import Slot, allocate, step_down
from tessera.domain.quota.membership import Membership
from tessera.domain.quota.objects import SeenQuota
from tessera.domain.quota.quantities import counts

Limits = Mapping[str, int]


@dataclass(frozen=True)
class Action:
    verb: Literal["create", "update", "delete"]
    namespace: str
    name: str
    reason: str
    manifest: Mapping[str, Any] | None = None  # None for delete
    resource_version: str | None = None  # the version this write was computed from


@dataclass(frozen=True)
class QuotaPlan:
    """Both waves, for logs and previews; the controller writes only ``next_wave``.

    Wave-2 writes carry the resourceVersion of this observation, which wave 1
    may have made stale: they are meant to be taken from a later plan whose
    wave 1 is empty, never written straight after this plan's wave 1.
    """

    wave1: tuple[Action, ...]
    wave2: tuple[Action, ...]
    targets: Mapping[str, Limits]  # namespace → resource → limit once both waves land
    unconfirmed: tuple[str, ...] = ()  # namespaces whose status.hard lags spec.hard
    held: tuple[str, ...] = ()  # deletes held until the namespace's new owner has a quota
    over_total: tuple[str, ...] = ()  # resources whose usage alone exceeds the total
    waiting: tuple[str, ...] = ()  # busy namespaces whose headroom moves are deferred

    @property
    def next_wave(self) -> tuple[Action, ...]:
        """What the controller may write now; empty while waiting for confirmation."""
        if self.wave1:
            return self.wave1
        return () if self.unconfirmed else self.wave2

    @property
    def settled(self) -> bool:
        return not (self.wave1 or self.wave2 or self.unconfirmed or self.held or self.waiting)


def plan(
    tenant: str,
    spec: TenantQuotaSpec,
    membership: Membership,
    seen: Iterable[SeenQuota],
    present: Mapping[str, Limits] | None = None,
    busy: frozenset[str] = frozenset(),
) -> QuotaPlan:
    """The plan for ``tenant``; ``seen`` holds every Tessera quota observed, of any tenant.

    ``present`` is Tessera's own recount (``charged``), namespace → resource → count,
    for the resources it can recount; it guards against a ``status.used`` the quota
    controller undercounted (``allocation``, step 1). ``busy`` namespaces get no
    headroom moves in this pass (``settling``).
    """
    seen = tuple(seen)
    present = present or {}
    hard = counts(spec.hard, what="spec.hard")
    total = counts(spec.total or {}, what="spec.total")
    members = membership.namespaces_of(tenant)
    mine = {q.namespace: q for q in seen if q.tenant == tenant}
    if spec.enforcement == "Kueue":  # Kueue's queues enforce it: this tenant's quotas go
        reason = "spec.enforcement is Kueue: its ClusterQueues enforce the quota"
        gone = tuple(
            Action("delete", ns, objects.quota_name(tenant), reason, None, _rv(quota))
            for ns, quota in sorted(mine.items())
        )
        return QuotaPlan(gone, (), {ns: {} for ns in members})
    target: dict[str, dict[str, int]] = {ns: {} for ns in members}
    first: dict[str, dict[str, int]] = {ns: {} for ns in members}
    over: list[str] = []
    required = False  # some total is exceeded by what the limits allow: lowering can not wait
    for resource in sorted(hard.keys() | total.keys()):
        if resource not in total:
            for ns in members:
                target[ns][resource] = first[ns][resource] = hard[resource]
            continue
        lags = {ns: _lag(resource, mine.get(ns), present.get(ns, {})) for ns in members}
        slots = [_slot(ns, resource, mine.get(ns), lags[ns], present) for ns in members]
        allocation = allocate(total[resource], hard.get(resource), slots)
        if allocation.over_total:
            over.append(resource)
        allowed = sum(s.used if s.current is None else s.current for s in slots)
        required = required or allocation.over_total or allowed > total[resource]
        for slot in slots:
            # limits are allocated as what a namespace can hold; written ``lag`` lower,
            # since admission still sees the undercounted status.used (``allocation``)
            goal, lag = allocation.targets[slot.namespace], lags[slot.namespace]
            target[slot.namespace][resource] = max(0, goal - lag)
            first[slot.namespace][resource] = max(0, step_down(slot, goal) - lag)
    wave1: list[Action] = []
    wave2: list[Action] = []
    for ns in members:
        lower, raise_ = _writes(tenant, ns, mine.get(ns), first=first[ns], target=target[ns])
        wave1.extend(lower)
        wave2.extend(raise_)
    held: list[str] = []
    owned_elsewhere = {(q.namespace, q.tenant) for q in seen}
    for ns, quota in sorted(mine.items()):
        if ns in members:
            continue
        heir = membership.owner.get(ns)
        if ns in membership.contested or (heir and (ns, heir) not in owned_elsewhere):
            held.append(ns)
            continue
        reason = f"namespace {ns} no longer belongs to tenant {tenant}"
        wave1.append(Action("delete", ns, objects.quota_name(tenant), reason, None, _rv(quota)))
    unconfirmed = tuple(ns for ns in members if ns in mine and not mine[ns].confirmed)
    moves = set() if required else _moves(mine, first, total.keys())
    wave1, wave2, waiting = _defer(wave1, wave2, busy, moves)
    return QuotaPlan(
        tuple(wave1), tuple(wave2), target, unconfirmed, tuple(held), tuple(over), waiting
    )


def _moves(
    mine: Mapping[str, SeenQuota], first: Mapping[str, Limits], totals: Iterable[str]
) -> set[str]:
    """The namespaces whose wave-1 update only moves headroom of resources with a total."""
    totals = set(totals)
    out = set()
    for ns, limits in first.items():
        quota = mine.get(ns)
        if quota is None or quota.stray:
            continue
        others = (limits.keys() | quota.hard.keys()) - totals
        if all(limits.get(r) == quota.hard.get(r) for r in others):
            out.add(ns)
    return out


def _defer(
    wave1: list[Action], wave2: list[Action], busy: frozenset[str], moves: set[str]
) -> tuple[list[Action], list[Action], tuple[str, ...]]:
    """Both waves without the moves that would write a busy namespace, and those namespaces."""
    late1 = {a.namespace for a in wave1 if a.verb == "update" and a.namespace in busy & moves}
    late2 = {a.namespace for a in wave2 if a.namespace in busy}
    now1 = [a for a in wave1 if a.namespace not in late1]
    # a deferred decrease defers every raise: wave 2's targets count on all of wave 1
    now2 = [] if late1 else [a for a in wave2 if a.namespace not in late2]
    return now1, now2, tuple(sorted(late1 | late2))


def _lag(resource: str, quota: SeenQuota | None, present: Limits) -> int:
    """How far ``status.used`` trails the recount.

    0 without a quota (admission charges nothing), and 0 until the quota controller has
    filled in this resource (``status.hard`` equal to ``spec.hard`` and a ``status.used``
    entry): a quota Tessera just wrote has no usage yet, which is not an undercount, and
    admission refuses every request against it meanwhile ("status unknown for quota").
    """
    if quota is None or not quota.confirmed or resource not in quota.used:
        return 0
    return max(0, present.get(resource, 0) - quota.used[resource])


def _slot(
    namespace: str, resource: str, quota: SeenQuota | None, lag: int, present: Mapping[str, Limits]
) -> Slot:
    """Usage and current limit as what the namespace holds or can come to hold."""
    if quota is None:
        return Slot(namespace, used=present.get(namespace, {}).get(resource, 0))
    current = quota.hard.get(resource)
    used = quota.used.get(resource, 0) + lag
    return Slot(namespace, used, None if current is None else current + lag)


def _writes(
    tenant: str, ns: str, quota: SeenQuota | None, *, first: Limits, target: Limits
) -> tuple[list[Action], list[Action]]:
    """One namespace's wave-1 and wave-2 writes."""
    name = objects.quota_name(tenant)
    lower: list[Action] = []
    if quota is None:
        reason = f"tenant {tenant} selects namespace {ns}: {_diff({}, first)}"
        lower.append(Action("create", ns, name, reason, objects.manifest(tenant, ns, first)))
    elif dict(first) != dict(quota.hard) or quota.stray:
        stray = f"; drop {', '.join(quota.stray)}" if quota.stray else ""
        body = objects.manifest(tenant, ns, first)
        lower.append(Action("update", ns, name, _diff(quota.hard, first) + stray, body, _rv(quota)))
    if dict(target) == dict(first):
        return lower, []
    body = objects.manifest(tenant, ns, target)
    return lower, [Action("update", ns, name, _diff(first, target), body, _rv(quota))]


def _diff(before: Limits, after: Limits) -> str:
    changes = [
        f"{r} {before.get(r, 'unset')}→{after.get(r, 'unset')}"
        for r in sorted(before.keys() | after.keys())
        if before.get(r) != after.get(r)
    ]
    return ", ".join(changes) or "no limit change"


def _rv(quota: SeenQuota | None) -> str | None:
    return quota.resource_version if quota is not None else None
