"""The capacity ledger: what every pool really offers, per resource, and who promised it.

One ledger for everything that compares quota with capacity (``Overcommitted``, the Kueue
quotas Tessera writes): per pool and resource name, the sum of what its nodes offer. A node's
offer is what its geometry and sharing mode provide (``tessera.domain.cluster.capacity`` reads
it: MIG profile counts, time-slice or MPS replicas, HAMi memory and cores, vNPU templates, DRA
devices). A node a rollout is changing offers, per resource, the lower of what it offers now
and what it will offer once changed: during a 7g.80gb -> 7 x 1g.10gb change the node counts
neither its one 7g (it is about to go) nor its seven 1g (they do not exist yet), so nothing is
ever promised that might not be there a moment later. A node in no pool is counted under the
pool ``""``.

Nodes are only summed: the ledger is a fold, so recomputing it after one geometry change costs
one pass over the offers, and a pool's row changes only where its nodes' offers did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

NO_POOL = ""
_NAMED = 5  # tenants and pools named per resource in a message


@dataclass(frozen=True, slots=True)
class NodeOffer:
    """One node: its pool, what it offers now and, while a rollout changes it, afterwards."""

    node: str
    pool: str
    now: Mapping[str, int]
    after: Mapping[str, int] | None = None  # None: no rollout is changing the node
    taints: frozenset[tuple[str, str, str]] = frozenset()  # (key, value, effect), scheduling


def counted(offer: NodeOffer) -> dict[str, int]:
    """What the ledger counts of ``offer``: ``now``, or per resource the lower of now and after."""
    if offer.after is None:
        return {r: n for r, n in offer.now.items() if n > 0}
    after = offer.after
    lower = {r: min(n, after.get(r, 0)) for r, n in offer.now.items()}
    return {r: n for r, n in lower.items() if n > 0}


@dataclass(frozen=True)
class CapacityLedger:
    """Pool → resource → count, zeros left out; ``changing``: pool → nodes counted at the lower."""

    pools: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    changing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    offered: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Pool → the resources some node of it offers now or once changed (counted or not): the
    pool's Kueue flavor keeps listing them through a change, at the counted quota."""
    taints: Mapping[str, frozenset[tuple[str, str, str]]] = field(default_factory=dict)
    """Pool → the scheduling taints every node of it carries (its flavor tolerates them)."""

    def available(self, resource: str) -> int:
        return sum(row.get(resource, 0) for row in self.pools.values())

    def where(self, resource: str) -> dict[str, int]:
        """Pool → what it offers of ``resource``, only pools offering some."""
        return {p: row[resource] for p, row in sorted(self.pools.items()) if row.get(resource)}

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.pools.values():
            for resource, n in row.items():
                out[resource] = out.get(resource, 0) + n
        return dict(sorted(out.items()))


def build(offers: Iterable[NodeOffer]) -> CapacityLedger:
    pools: dict[str, dict[str, int]] = {}
    changing: dict[str, list[str]] = {}
    offered: dict[str, set[str]] = {}
    taints: dict[str, frozenset[tuple[str, str, str]]] = {}
    for offer in offers:
        row = pools.setdefault(offer.pool, {})
        for resource, n in counted(offer).items():
            row[resource] = row.get(resource, 0) + n
        names = offered.setdefault(offer.pool, set())
        names.update(r for r, n in offer.now.items() if n > 0)
        if offer.after is not None:
            changing.setdefault(offer.pool, []).append(offer.node)
            names.update(r for r, n in offer.after.items() if n > 0)
        seen = taints.get(offer.pool)
        taints[offer.pool] = offer.taints if seen is None else seen & offer.taints
    return CapacityLedger(
        {p: dict(sorted(r.items())) for p, r in sorted(pools.items())},
        {p: tuple(sorted(n)) for p, n in sorted(changing.items())},
        {p: frozenset(r) for p, r in sorted(offered.items())},
        dict(sorted(taints.items())),
    )


@dataclass(frozen=True, slots=True)
class Overcommit:
    """Tenants together promise more of ``resource`` than the pools offer."""

    resource: str
    promised: int
    available: int
    takers: tuple[tuple[str, int], ...]  # tenant → what it promises, by name
    pools: tuple[tuple[str, int], ...]  # pool → what it offers, by name

    @property
    def message(self) -> str:
        """``<resource>: tenants a (6), b (4) promise 10 > capacity 8 (pools: p (7), q (1))``;
        without pools (a preview, which has no ledger) the part in brackets is left out."""
        text = f"{self.resource}: tenants {_named(self.takers)} promise {self.promised} > "
        text += f"capacity {self.available}"
        if self.pools:
            text += f" (pools: {_named((p or '(no pool)', n) for p, n in self.pools)})"
        return text


def overcommitments(
    tenant: str,
    commitments: Mapping[str, Mapping[str, int]],
    available: Mapping[str, int | None],
    pools: Mapping[str, Mapping[str, int]],
) -> list[Overcommit]:
    """``tenant``'s resources whose promises (all tenants') exceed what is available.

    ``available`` is resource → capacity, None where nobody can say (it is then never
    compared); ``pools`` is resource → pool → what it offers, for the message.
    """
    out = []
    for resource in sorted(commitments.get(tenant, {})):
        known = available.get(resource)
        if known is None:
            continue
        takers = tuple((t, c[resource]) for t, c in sorted(commitments.items()) if c.get(resource))
        promised = sum(n for _, n in takers)
        if promised > known:
            where = tuple(sorted((pools.get(resource) or {}).items()))
            out.append(Overcommit(resource, promised, known, takers, where))
    return out


def _named(items: Iterable[tuple[str, int]]) -> str:
    listed = list(items)
    text = ", ".join(f"{name} ({n})" for name, n in listed[:_NAMED])
    more = len(listed) - _NAMED
    return text + (f" and {more} more" if more > 0 else "")
