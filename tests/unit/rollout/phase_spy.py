"""Which rollout phase changes a test takes: every change is checked by ``state.check``.

``watching()`` wraps that check wherever the rollout modules hold it, records
each (before, after) and still lets the real check raise on an illegal one.
It shows which edges a test *takes* (coverage); it cannot show an illegal
change, which raises before it is recorded or never meets the check at all.
What is *written* is held to the table by ``persisted``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tessera.domain.rollout import state
from tessera.domain.rollout.state import Edge, Phase

EDGES = frozenset(state.edges())


@contextmanager
def watching() -> Iterator[set[Edge]]:
    seen: set[Edge] = set()
    original = state.check

    def spy(before: Phase | None, after: Phase | None, node: str = "") -> None:
        seen.add((before, after))
        original(before, after, node)

    holders = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("tessera.domain.rollout") and getattr(m, "check", None) is original
    ]
    assert state in holders and len(holders) >= 3, "every phase change must go through check"
    for m in holders:
        m.check = spy
    try:
        yield seen
    finally:
        for m in holders:
            m.check = original


def shown(edges: set[Edge] | frozenset[Edge]) -> list[str]:
    return sorted(f"{a or '(none)'} -> {b or '(none)'}" for a, b in edges)
