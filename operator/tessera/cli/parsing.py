"""The ``tessera`` argument parser, in its own module so that every command sees one class.

(``python -m tessera.cli.main`` runs main as ``__main__``; a class defined there
would be another class than the one a sub-command module imports.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit ``usage_status`` (argparse's own: 2)."""

    usage_status = 2
    # What to say of a word that is none of this parser's sub-commands (argparse: "invalid
    # choice"), given the word; None keeps argparse's message.
    unknown_command: Callable[[str], str] | None = None

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        explain = self.unknown_command
        command = isinstance(action, argparse._SubParsersAction)
        if explain and command and value not in (action.choices or ()):
            self.error(explain(value))
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")


def usage_exits(parser: argparse.ArgumentParser, status: int) -> None:
    """Usage errors of ``parser`` exit ``status``, and arguments no parser claims are reported
    by it: ``tessera plan`` and ``tessera suggest`` exit 2 for "changes", so a usage error must
    exit 1 there (``tessera.cli.main`` reads ``usage_parser``)."""
    if isinstance(parser, Parser):
        parser.usage_status = status
    parser.set_defaults(usage_parser=parser)
