#!/usr/bin/env python3
"""Regenerate the parts of docs/ drawn from the code: the rollout state diagram, the Ascend
chip support matrix.

hack/gen_docs.py            rewrite the generated blocks of docs/rollout.md, docs/facts/ascend.md
hack/gen_docs.py --check    exit 1 if one is stale (tests/unit checks the same)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tessera.api.v1alpha1 import ascend_support
from tessera.domain.rollout import diagram

DOCS = Path(__file__).resolve().parent.parent / "docs"
GENERATED: tuple[tuple[Path, Callable[[str], str]], ...] = (
    (DOCS / "rollout.md", diagram.render),
    (DOCS / "facts" / "ascend.md", ascend_support.render),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/ is stale")
    args = parser.parse_args()
    stale = 0
    for doc, render in GENERATED:
        text = doc.read_text()
        fresh = render(text)
        if fresh == text:
            continue
        if args.check:
            print(f"{doc} is stale: run `make docs`", file=sys.stderr)
            stale = 1
            continue
        doc.write_text(fresh)
        print(f"wrote {doc}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
