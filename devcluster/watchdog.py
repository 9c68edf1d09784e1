"""Checks every dev-cluster wait runs before each poll.

Whoever runs a control plane (the integration suite's session fixture, the benches) registers
``plane.check_alive`` for the components it needs; a wait for nodes, pods or DaemonSets then
fails at once, naming the component that died and its log tail, instead of running out its
deadline for something that can no longer happen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

CHECKS: list[Callable[[], None]] = []


def check() -> None:
    """Run every registered check (each raises when what it watches has died)."""
    for probe in tuple(CHECKS):
        probe()


@contextlib.contextmanager
def watching(probe: Callable[[], None]) -> Iterator[None]:
    """``probe`` runs before each poll of every wait while the block runs."""
    CHECKS.append(probe)
    try:
        yield
    finally:
        CHECKS.remove(probe)
