"""Exactly one SharingPolicy per node.

A node can only run one device-plugin config, so overlapping policies are
resolved here: the highest ``priority`` among the policies selecting a node
wins; a tie at the top is an AssignmentConflict, reported on every tied policy with the
nodes involved, and those nodes are *held* (they keep whatever config they
run now) rather than flip-flopping between the tied policies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.base import selectors
from tessera.domain.sharing.nodes import NodeFacts


@dataclass(frozen=True)
class Policy:
    """A SharingPolicy by name; ``pool_selector`` is the resolved ``poolRef``
    (the NodePoolGeometry's nodeSelector), which the controller looks up; ``controllers.dra.pool``:
    that pool has ``allocation: DRA``, so the policy renders DeviceClasses
    (``tessera.domain.dra``), never a device-plugin config or label."""

    name: str
    spec: SharingPolicySpec
    pool_selector: LabelSelector | None = None
    dra_pool: bool = False

    @property
    def selector(self) -> LabelSelector | None:
        return (
            self.spec.node_selector if self.spec.node_selector is not None else self.pool_selector
        )


@dataclass(frozen=True)
class AssignmentConflict:
    """Policies tied at the top priority on ``nodes``."""

    policies: tuple[str, ...]
    priority: int
    nodes: tuple[str, ...]

    @property
    def message(self) -> str:
        names = " and ".join(f"sharingpolicy/{p}" for p in self.policies)
        return (
            f"{names} both select {_listing(self.nodes)} with priority {self.priority}; "
            "those nodes keep their current config until one priority is raised or a "
            "selector is narrowed"
        )


@dataclass(frozen=True)
class Assignment:
    owner: Mapping[str, str] = field(default_factory=dict)  # node -> winning policy
    held: frozenset[str] = frozenset()  # nodes in a conflict: keep their config
    conflicts: tuple[AssignmentConflict, ...] = ()
    selecting: frozenset[str] = frozenset()  # policies whose selector matches some node

    def nodes_of(self, policy: str) -> tuple[str, ...]:
        return tuple(sorted(n for n, p in self.owner.items() if p == policy))

    def conflicts_of(self, policy: str) -> tuple[AssignmentConflict, ...]:
        return tuple(c for c in self.conflicts if policy in c.policies)


def assign(policies: Sequence[Policy], nodes: Iterable[NodeFacts]) -> Assignment:
    """Which policy governs each node; nodes no policy selects are absent."""
    owner: dict[str, str] = {}
    tied: dict[tuple[tuple[str, ...], int], list[str]] = defaultdict(list)
    matched: set[str] = set()
    for node in nodes:
        selecting = [p for p in policies if selectors.matches(p.selector, node.labels)]
        if not selecting:
            continue
        matched.update(p.name for p in selecting)
        top = max(p.spec.priority for p in selecting)
        winners = sorted(p.name for p in selecting if p.spec.priority == top)
        if len(winners) == 1:
            owner[node.name] = winners[0]
        else:
            tied[(tuple(winners), top)].append(node.name)
    conflicts = tuple(
        AssignmentConflict(names, priority, tuple(sorted(held)))
        for (names, priority), held in sorted(tied.items())
    )
    held = frozenset(n for c in conflicts for n in c.nodes)
    return Assignment(owner, held, conflicts, frozenset(matched))


def _listing(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    noun = "node" if len(names) == 1 else "nodes"
    return f"{noun} {shown}{more}"
