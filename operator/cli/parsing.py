"""The ``tessera`` argument parser, in its own module so that every command sees one class.

(``python -m tessera.cli.main`` runs main as ``__main__``; a class defined there
would be another class than the one a sub-command module imports.)
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit ``usage_status`` (argparse's own: 2)."""

    usage_status = 2

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_status, f"{self.prog}: error: {message}\n")
