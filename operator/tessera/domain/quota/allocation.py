"""Splitting a tenant-wide ``total`` into per-namespace hard limits.

Kubernetes enforces quotas per namespace only, so a tenant-wide total is kept by
making the per-namespace ResourceQuota limits Tessera writes sum to at most the
total. The API server then enforces the total natively, also while pods are
created in several namespaces at once and also while Tessera is down.

Algorithm, per resource, for one tenant (pure; the controller runs it on every
reconcile from fresh observations):

1. *Floor.* No namespace's limit is set below what it already uses: the API
   server never evicts, so a lower limit frees nothing and only hides what runs.
   Usage is the larger of ``status.used`` and Tessera's own recount of the pods
   and ResourceClaims there (``charged``; the planner passes it in as ``used``):
   ``status.used`` can be *undercounted*, because kube-controller-manager's
   quota controller recomputes it from its informer caches whenever it syncs a
   quota (on every ``spec.hard`` change, on replenishment, on its periodic
   resync: ``syncResourceQuota``) and drops what admission charged for a pod its
   caches do not hold yet. Admission keeps counting from that lower value, so an
   undercounted namespace can hold its limit plus the *lag* (recount minus
   ``status.used``): the planner allocates what a namespace can come to hold
   (limit + lag) and writes each limit ``lag`` lower. An explicit per-namespace
   ``hard`` below usage still wins: that is the user's word, and plain
   ResourceQuota semantics.
2. *Fair share.* The free headroom ``total - sum(floors)`` is water-filled:
   every namespace gets an equal share on top of its usage, limited by its
   ``hard``; what a capped namespace cannot take goes to the others; the last
   odd units go to the busiest namespaces (most used, then by name). The result
   ``g`` depends only on usage, caps and names, never on the current limits, so
   recomputing it can not oscillate.
3. *Hysteresis.* The current limits stay as they are while they are valid
   (each between floor and cap, sum within total, all headroom handed out) and
   no namespace is *pressed*: one that has used half or more of the share ``g``
   would give it. Otherwise every limit moves to ``g``. So usage changes cost
   no writes until some namespace runs low; then headroom moves from the idle
   namespaces to it. A converged tenant (limits equal ``g``, or valid and
   unpressed) yields zero changes on resync.
4. *Waves.* The controller writes decreases first (``step_down``: each limit
   drops to ``min(current, target)``; a namespace without a limit yet gets one at
   its usage) and raises limits only once the quota controller has enforced
   every decrease (``status.hard`` equals ``spec.hard``), from a fresh plan.
   Admission checks ``status.hard``, so until then pods may still be admitted
   under the old, higher limit; the fresh plan sees them in ``status.used``.
   During wave 1 the sum only falls, during wave 2 it only rises towards
   ``sum(g) <= total``: it never exceeds the total at any instant. Each write
   carries the ``resourceVersion`` it was computed from: admission bumps it
   when it admits a pod, so a decrease computed from stale usage fails (409)
   and is recomputed rather than landing below what was admitted meanwhile.

Residual window (not closed; Kubernetes' own). Between the quota controller's
undercounted write and Tessera's next pass, admission may let in up to the
lag more in that namespace, beyond even its own limit; and Tessera sees a lag
only once the pods are stored (it does not watch pods: a pod stored after the
pass that followed its charge waits for the next quota event or resync). Every
limit Tessera writes during a burst would trigger such a recount, so headroom
moves into and out of namespaces admission is charging wait until they are
quiet (``settling``); the writes that cannot wait (lowering to keep the sum
within the total) and the quota controller's own recounts remain, so under
concurrent creates the tenant total is kept as tightly as Kubernetes keeps a
single namespace's quota, no tighter: ``sum(spec.hard) <= total`` always
holds, the pods admitted can transiently pass it by what one recount dropped.
Tessera then reports ``UsageOverTotal`` and lowers limits until pods finish.

Trade-offs. A namespace can be refused while headroom sits idle in another
namespace, until the next reconcile moves it (refused pods are invisible in
quota status, so need is inferred from usage: a namespace is helped once it has
used half its share, not when it is refused). Moving headroom takes two writes
and a confirmation. When usage already exceeds the total (the total was lowered,
or a namespace joined with pods running), nothing is raised and every limit is
lowered to its usage at most: nothing new is admitted and the limits follow
usage down as pods finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One namespace's side of one resource: its usage and the limit Tessera last wrote."""

    namespace: str
    used: int
    current: int | None = None  # None: no Tessera limit on this resource yet


@dataclass(frozen=True)
class Allocation:
    targets: Mapping[str, int]
    over_total: bool  # usage alone exceeds the total; targets only lower


def allocate(total: int, cap: int | None, slots: Sequence[Slot]) -> Allocation:
    """The target limit of every namespace for one resource under ``total``."""
    floors = {s.namespace: s.used if cap is None else min(s.used, cap) for s in slots}
    free = total - sum(floors.values())
    if free < 0:
        held = {s.namespace: min(_now(s), floors[s.namespace]) for s in slots}
        return Allocation(held, over_total=True)
    busiest_first = sorted(slots, key=lambda s: (-s.used, s.namespace))
    room = {ns: None if cap is None else cap - floor for ns, floor in floors.items()}
    share = water_fill(free, room, [s.namespace for s in busiest_first])
    fair = {ns: floors[ns] + share[ns] for ns in floors}
    if _keeps(cap, slots, fair, share):
        return Allocation({s.namespace: _now(s) for s in slots}, over_total=False)
    return Allocation(fair, over_total=False)


def step_down(slot: Slot, target: int) -> int:
    """The wave-1 limit: ``target`` where that is a decrease, else the limit as it stands."""
    return min(_now(slot), target)


def _now(slot: Slot) -> int:
    # A namespace without a Tessera limit is bounded only by what it already
    # uses: that is the value wave 1 pins it to before anything is raised.
    return slot.used if slot.current is None else slot.current


def _keeps(
    cap: int | None, slots: Sequence[Slot], fair: Mapping[str, int], share: Mapping[str, int]
) -> bool:
    """Whether the current limits may stand (see step 3 of the module docstring).

    ``sum(fair)`` is the total, or less when every namespace is at its cap, so
    asking the current sum to equal it both bounds it and says no headroom is
    left unhanded; it does not move with usage, so it causes no churn.
    """
    if any(s.current is None for s in slots):
        return False
    current = {s.namespace: s.current for s in slots if s.current is not None}
    if sum(current.values()) != sum(fair.values()):
        return False
    for s in slots:
        limit, floor = current[s.namespace], fair[s.namespace] - share[s.namespace]
        if limit < floor or (cap is not None and limit > cap):
            return False
        pressed = limit < fair[s.namespace] and 2 * (limit - s.used) <= share[s.namespace]
        if pressed:
            return False
    return True


def water_fill(free: int, room: Mapping[str, int | None], order: Sequence[str]) -> dict[str, int]:
    """Split ``free`` equally, each taking at most its ``room`` (None: unlimited); also how
    the Kueue quotas share a pool among tenants and a tenant's share among namespaces.

    Namespaces that fill up drop out and the rest share what they could not take;
    units that do not divide evenly go one each to the first namespaces in ``order``.
    """
    share = dict.fromkeys(order, 0)

    def left(ns: str) -> int | None:
        limit = room[ns]
        return None if limit is None else limit - share[ns]

    open_ = [ns for ns in order if left(ns) != 0]
    while free > 0 and open_:
        each = free // len(open_)
        if each == 0:
            for ns in open_[:free]:
                share[ns] += 1
            break
        for ns in open_:
            rest = left(ns)
            give = each if rest is None else min(each, rest)
            share[ns] += give
            free -= give
        open_ = [ns for ns in open_ if left(ns) != 0]
    return share
