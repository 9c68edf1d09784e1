"""Which namespaces admission is charging right now: *busy* ones, whose quota Tessera leaves be.

Every ``spec.hard`` write makes kube-controller-manager's quota controller
recount that namespace's ``status.used`` from its informer caches; a pod that
admission charged a moment earlier and the caches do not hold yet is dropped
from the count, and admission then lets the namespace take that much more,
past its limit (``charged``, ``allocation``: the residual window). The window
is open only while admission is charging the namespace, so Tessera does not
move headroom into or out of a namespace whose usage changed within the last
``SETTLE``: such *moves* wait for a pass where it is quiet (``planning``).
Only moves wait; a lowering that keeps the sum of limits within the total, a
namespace's first quota and user-driven changes go at once.

The controller keeps, per TenantQuota, the ``Record`` of the previous pass and
hands it back with the usage it observes now: status.used and Tessera's own
recount, per namespace and resource. A namespace seen for the first time (the
operator just started, or it just joined) counts as quiet: there is nothing to
compare with, and the plan's other guards (resourceVersion preconditions,
lowering before raising) hold regardless. A namespace busy without a pause for
longer than ``PATIENCE`` (a steady stream of pods) counts as quiet again, so
headroom still moves under constant churn, with the recount window open as it
was before Tessera waited at all: waiting narrows the window, it cannot
starve a namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from tessera.domain.quota.objects import SeenQuota

SETTLE = timedelta(seconds=1)  # usage unchanged this long: admission has gone quiet there
PATIENCE = timedelta(seconds=15)  # busy for longer than this: moves go ahead regardless
Snapshot = tuple[tuple[str, int | None, int | None], ...]  # (resource, status.used, recount)


@dataclass(frozen=True)
class Seen:
    usage: Snapshot
    since: datetime | None  # when it last changed; None: unchanged since first seen
    busy_since: datetime | None = None  # when it last went from quiet to busy


Record = Mapping[str, Seen]  # namespace → what the previous pass saw there


def usage(
    tenant: str,
    namespaces: Iterable[str],
    resources: Iterable[str],
    seen: Iterable[SeenQuota],
    present: Mapping[str, Mapping[str, int]],
) -> dict[str, Snapshot]:
    """Per namespace of ``tenant``, what the quota system and the recount say it uses."""
    mine = {q.namespace: q for q in seen if q.tenant == tenant}
    wanted = sorted(resources)
    out: dict[str, Snapshot] = {}
    for ns in namespaces:
        used = mine[ns].used if ns in mine else {}
        counted = present.get(ns, {})
        out[ns] = tuple((r, used.get(r), counted.get(r)) for r in wanted)
    return out


def busy(
    previous: Record,
    now_usage: Mapping[str, Snapshot],
    now: datetime,
    settle: timedelta = SETTLE,
    patience: timedelta = PATIENCE,
) -> tuple[frozenset[str], dict[str, Seen]]:
    """The namespaces whose usage changed within ``settle`` (for at most ``patience`` on
    end), and the record for the next pass."""
    record: dict[str, Seen] = {}
    active: set[str] = set()
    for ns, snapshot in now_usage.items():
        last = previous.get(ns)
        if last is None:
            record[ns] = Seen(snapshot, None)  # first seen: nothing to compare with
            continue
        since = now if _charged(last.usage, snapshot) else last.since
        if since is None or now - since >= settle:
            record[ns] = Seen(snapshot, since)  # quiet
            continue
        began = last.busy_since or now
        record[ns] = Seen(snapshot, since, began)
        if now - began < patience:
            active.add(ns)
    return frozenset(active), record


def _charged(before: Snapshot, after: Snapshot) -> bool:
    """Whether usage moved; a ``status.used`` filled in for the first time is the quota
    controller's doing on a quota just written (admission refuses until then), not a charge."""
    if [r for r, _, _ in before] != [r for r, _, _ in after]:
        return True
    return any(
        counted != counted_now or (used is not None and used != used_now)
        for (_, used, counted), (_, used_now, counted_now) in zip(before, after, strict=True)
    )
