#!/usr/bin/env python3
"""Regenerate the parts of docs/ drawn from the code: the rollout state diagram.

hack/gen_docs.py            rewrite the generated block of docs/rollout.md
hack/gen_docs.py --check    exit 1 if it is stale (tests/unit checks the same)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tessera.domain.rollout import diagram

ROLLOUT_DOC = Path(__file__).resolve().parent.parent / "docs" / "rollout.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/ is stale")
    args = parser.parse_args()
    text = ROLLOUT_DOC.read_text()
    fresh = diagram.render(text)
    if fresh == text:
        return 0
    if args.check:
        print(f"{ROLLOUT_DOC} is stale: run `make docs`", file=sys.stderr)
        return 1
    ROLLOUT_DOC.write_text(fresh)
    print(f"wrote {ROLLOUT_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
