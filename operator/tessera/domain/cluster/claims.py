"""Exactly one NodePoolGeometry per node: who may touch a node that several pools select.

A node runs one layout, so two pools selecting it would repartition it back
and forth forever. Every pass resolves the claims of all pools at once:

* a node one pool selects is that pool's;
* a node several pools select is *contested*. It stays with the one pool that
  already holds it — that pool's rollout state or pending taint is on the
  node, or the node's layout label names one of that pool's configs — so a
  pool added (or widened) by mistake never disrupts a pool already serving
  there, not even mid-rollout: the holder keeps the node and goes on;
* a contested node that none of its pools holds (a new node, or one several
  pools' marks are on) is touched by none of them: it keeps what it runs.

A pool that selects a node it may not touch cannot converge: it is Stalled,
reason Conflict, naming the other pools and the nodes, and starts no further
node anywhere — it finishes only what is already in flight (Reconciling,
reason Conflict, until then: a Stalled pool holds no cordon or taint). The holder stays as its rollout says
(Ready when done) and its message names the pools that also select its nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector, RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.base import selectors
from tessera.domain.base.conditions import Verdict
from tessera.domain.geometry.layouts import config_name
from tessera.domain.rollout import NodeView

LISTED = 5  # nodes named in one message; the rest are counted


def owner_of(pool: str) -> str:
    return f"NodePoolGeometry/{pool}"


@dataclass(frozen=True)
class ClaimConflict:
    """Nodes ``pool`` selects together with ``others``; ``kept`` when ``pool`` holds them."""

    pool: str
    others: tuple[str, ...]
    nodes: tuple[str, ...]
    kept: bool
    holder: str = ""  # the pool that keeps them, when not ``pool``

    @property
    def message(self) -> str:
        names = " and ".join(f"nodepoolgeometry/{p}" for p in self.others)
        where = f"{names} also select{'s' if len(self.others) == 1 else ''} {listing(self.nodes)}"
        them = "it" if len(self.nodes) == 1 else "them"
        if self.kept:
            return f"{where}; this pool already holds {them} and keeps {them}"
        if self.holder:
            return (
                f"{where}, which nodepoolgeometry/{self.holder} already holds: this pool "
                f"leaves {them} alone until a nodeSelector is narrowed"
            )
        return (
            f"{where}; a node belongs to one pool only, so no pool touches {them} until a "
            "nodeSelector is narrowed or a pool deleted"
        )


@dataclass(frozen=True)
class Claims:
    owner: Mapping[str, str] = field(default_factory=dict)  # node -> the pool that may touch it
    conflicts: tuple[ClaimConflict, ...] = ()

    def foreign(self, pool: str) -> frozenset[str]:
        """Nodes ``pool`` selects but may not touch."""
        return frozenset(n for c in self.conflicts_of(pool) if not c.kept for n in c.nodes)

    def conflicts_of(self, pool: str) -> tuple[ClaimConflict, ...]:
        return tuple(c for c in self.conflicts if c.pool == pool)

    def blocked(self, pool: str) -> bool:
        return any(not c.kept for c in self.conflicts_of(pool))


def claimants(pools: Iterable[Mapping[str, Any]]) -> dict[str, LabelSelector | None]:
    """NodePoolGeometry objects -> their nodeSelectors, for ``resolve``. A pool being deleted
    claims no node (it only gives back what it holds); one whose spec does not parse is
    Stalled (InvalidSpec) and touches no node."""
    out: dict[str, LabelSelector | None] = {}
    for obj in pools:
        if obj["metadata"].get("deletionTimestamp"):
            continue
        try:
            spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
        except ValidationError:
            continue
        out[obj["metadata"]["name"]] = spec.node_selector
    return out


def listing(nodes: Sequence[str], limit: int = LISTED) -> str:
    """``node a``, ``nodes a, b and 5 more``: long lists stay one readable line."""
    shown = ", ".join(nodes[:limit])
    more = f" and {len(nodes) - limit} more" if len(nodes) > limit else ""
    return f"{'node' if len(nodes) == 1 else 'nodes'} {shown}{more}"


def runs_config_of(pool: str, config: str) -> bool:
    """Whether a layout label value names one of ``pool``'s configs (``tessera-<pool>-<hash>``)."""
    prefix = config_name(pool, None).rsplit("-", 1)[0] + "-"
    return config.startswith(prefix) and "-" not in config[len(prefix) :]


def holder(node: NodeView, selecting: Iterable[str]) -> str | None:
    """The one pool among ``selecting`` that already holds ``node``, if exactly one does."""
    pools = sorted(selecting)
    marked = [p for p in pools if node.held_by(owner_of(p))]
    if not marked:  # no contender's mark (a SharingPolicy's or a leaving pool's state is none)
        keys = (c.MIG_CONFIG_LABEL, c.VNPU_CONFIG_LABEL, c.VGPU_CONFIG_LABEL)
        layouts = [node.labels.get(k, "") for k in keys]
        marked = [p for p in pools if any(runs_config_of(p, v) for v in layouts if v)]
    return marked[0] if len(marked) == 1 else None


def resolve(pools: Mapping[str, LabelSelector | None], nodes: Iterable[NodeView]) -> Claims:
    """Resolve every pool's claims (name -> nodeSelector; ``None`` claims nothing)."""
    owner: dict[str, str] = {}
    grouped: dict[tuple[str, tuple[str, ...], bool, str], list[str]] = {}
    index = selectors.SelectorIndex(pools)
    for node in nodes:
        selecting = index.matching(node.labels)
        if len(selecting) == 1:
            owner[node.name] = selecting[0]
        if len(selecting) < 2:
            continue
        keeper = holder(node, selecting)
        if keeper is not None:
            owner[node.name] = keeper
        for pool in selecting:
            others = tuple(p for p in selecting if p != pool)
            key = (pool, others, pool == keeper, keeper if keeper and keeper != pool else "")
            grouped.setdefault(key, []).append(node.name)
    conflicts = tuple(
        ClaimConflict(pool, others, tuple(sorted(names)), kept, held)
        for (pool, others, kept, held), names in sorted(grouped.items())
    )
    return Claims(owner, conflicts)


def verdict(pool: str, claims: Claims, plan: Verdict, in_flight: int = 0) -> Verdict:
    """The pool's verdict once conflicts are known: Stalled/Conflict when it is blocked.

    A Stalled pool holds no node: while ``in_flight`` nodes it started before the
    conflict still finish (cordoned, tainted), it is Reconciling, reason Conflict.
    """
    conflicts = claims.conflicts_of(pool)
    if not conflicts:
        return plan
    text = "; ".join(c.message for c in conflicts)
    if claims.blocked(pool) and in_flight:
        them = "node" if in_flight == 1 else "nodes"
        finishing = f"finishing the {in_flight} {them} already in flight: {plan.message}"
        return Verdict("progressing", "Conflict", f"{text}; {finishing}", plan.extra)
    if claims.blocked(pool):
        return Verdict("stalled", "Conflict", text, plan.extra)
    return Verdict(plan.state, plan.reason, f"{plan.message}; {text}", plan.extra)


def policy(pool: str, claims: Claims, rollout: RolloutSpec) -> RolloutSpec:
    """A blocked pool starts no node (as if paused); nodes in flight finish."""
    return rollout.model_copy(update={"paused": True}) if claims.blocked(pool) else rollout
