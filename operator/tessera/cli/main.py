"""The ``tessera`` command: one entry point, one module per sub-command.

Each sub-command module exposes ``register(subparsers)`` and sets ``func`` on
its parser; ``main`` only dispatches. Exit codes are part of the contract:
0 success, 1 a negative answer or failure, 2 a usage error — except where a
command's contract gives 2 another meaning: ``tessera plan`` exits 2 for
"changes", so its parsers set ``usage_status = 1``, and name themselves in
``set_defaults(usage_parser=...)`` to report arguments no parser claims.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Protocol, cast

from tessera.cli import agent, dev, geometry, plan, run, suggest
from tessera.cli.parsing import Parser

VERSION = metadata.version("tessera-operator")  # the installed distribution's, from pyproject


class _Registrar(Protocol):
    def __call__(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


def _registrars() -> list[_Registrar]:
    return [
        geometry.register,
        run.register,
        dev.register,
        agent.register,
        plan.register,
        suggest.register,
    ]


def build_parser() -> Parser:
    parser = Parser(
        prog="tessera",
        description="Declare how GPUs and NPUs are partitioned and shared; Tessera makes the "
        "cluster match.",
    )
    parser.add_argument("--version", action="version", version=f"tessera {VERSION}")
    # sub-parsers are Parsers too (argparse builds them with the parent's class)
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )
    for register in _registrars():
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # what no parser claimed: the command chosen reports it, as it exits on usage
        chosen: argparse.ArgumentParser = getattr(args, "usage_parser", parser)
        chosen.error(f"unrecognized arguments: {' '.join(extra)}")
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = func(args)
        sys.stdout.flush()  # here, not at exit, where a closed pipe can no longer be caught
        return code
    except BrokenPipeError:  # the reader (head, less) stopped reading: no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush
        return 1


if __name__ == "__main__":
    sys.exit(main())
