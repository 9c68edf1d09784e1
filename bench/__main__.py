"""``python -m bench``: run every benchmark module's ``main()`` in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"bench.{info.name}")
        run = getattr(module, "main", None)
        if callable(run):
            print(f"== bench.{info.name}")
            run()
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
