"""``tessera dev``: the dev cluster's command, present only where the dev cluster is installed.

The dev cluster (``devcluster/`` in a checkout: control plane launcher, simulated GPU/NPU
nodes, ``tessera dev demo|agents|down``) is a distribution of its own, installed by
``make dev`` and never shipped in the operator's wheel or image. It registers the
``tessera.cli`` entry point ``dev``; this module hands it the sub-parsers when it is there
and otherwise registers a ``dev`` that says what it needs and exits 1. Nothing here imports
the dev cluster (import-linter: "The product never imports the dev cluster").
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
GROUP = "tessera.cli"
MISSING = (
    "tessera dev needs a checkout with `make dev`: the dev cluster (devcluster/) is not "
    "installed here, and the operator's package does not ship it"
)


def register(subparsers: Subparsers) -> None:
    why = ""
    for entry in entry_points(group=GROUP, name="dev"):
        try:
            plugin = cast("Callable[[Subparsers], None]", entry.load())
        except ImportError as err:  # a moved or broken checkout must not break `tessera run`
            why = f" (its entry point {entry.value} does not load: {err})"
            break
        plugin(subparsers)
        return
    dev = subparsers.add_parser(
        "dev", help="local control plane and simulated nodes (needs a checkout with `make dev`)"
    )
    dev.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    dev.set_defaults(func=lambda _: _missing(why))


def _missing(why: str) -> int:
    print(MISSING + why, file=sys.stderr)
    return 1
