"""`tessera geometry check|list --vgpu`: the vGPU catalog on the command line.

    tessera geometry check --model MODEL --vgpu [-o json] TYPE[=COUNT]... | -
    tessera geometry list  --model MODEL --vgpu [-o json]

``check`` answers for one GPU: the types and counts (``A100-20C=2``, or ``A100-20C`` repeated)
are valid on the board ``--model`` names (a GFD product label such as
``NVIDIA-A100-PCIE-40GB``, a board id, or a GPU model such as ``A100-40GB``, whose boards
are told apart by the types' prefix), with a reason naming the type, the board and the rule.
``-`` reads one layout per line from stdin and prints one JSON object per line. Exit codes as
the MIG forms: 0 valid, 1 invalid, 2 usage error (unknown board, malformed argument).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tessera.domain.geometry import vgpu, vgpu_catalog


def run(args: argparse.Namespace) -> int:
    try:
        boards = vgpu_catalog.resolve(args.model)
    except vgpu_catalog.UnknownBoardError as err:
        print(f"tessera geometry: {err}", file=sys.stderr)
        return 2
    if args.geometry_command == "list":
        return _list(args, boards)
    lines = [line.split() for line in sys.stdin] if args.profiles == ["-"] else [args.profiles]
    ok = True
    for words in lines:
        counts = _counts(words)
        if counts is None:
            return 2
        answer = _answer(boards, counts)
        ok = ok and answer["valid"]
        if args.output == "json" or args.profiles == ["-"]:
            print(json.dumps(answer, separators=(", ", ": ")))
        else:
            print(f"{'valid' if answer['valid'] else 'invalid'}: {answer['reason']}")
    return 0 if ok else 1


def _counts(words: list[str]) -> dict[str, int] | None:
    counts: dict[str, int] = {}
    for word in words:
        name, sep, count = word.partition("=")
        if sep and not (count.isdigit() and 0 < len(count) < 4):
            print(f"tessera geometry check: {word!r} is not TYPE or TYPE=COUNT", file=sys.stderr)
            return None
        counts[name] = counts.get(name, 0) + (int(count) if sep else 1)
    return counts


def _answer(boards: tuple[vgpu_catalog.Board, ...], counts: dict[str, int]) -> dict[str, Any]:
    board, why = vgpu.check_boards(boards, counts)
    valid = why is None
    reason = why or f"fits one GPU of board {board.id} ({board.name})"
    resources = {vgpu.resource(t): n for t, n in sorted(counts.items())} if valid else {}
    return {
        "valid": valid,
        "reason": reason,
        "board": board.id,
        "types": dict(sorted(counts.items())),
        "resources": resources,
    }


def _list(args: argparse.Namespace, boards: tuple[vgpu_catalog.Board, ...]) -> int:
    if args.output == "json":
        rows = [
            {
                "board": b.id,
                "name": b.name,
                "prefix": b.prefix,
                "pci_device_ids": list(b.pci_device_ids),
                "time_sliced": {f"{b.prefix}-{s}": n for s, n in b.time_sliced.items()},
                "mig_backed": {f"{b.prefix}-{s}": n for s, n in b.mig_backed.items()},
            }
            for b in boards
        ]
        print(json.dumps(rows, separators=(", ", ": ")))
        return 0
    for b in boards:
        print(f"{b.id} ({b.name}, PCI {', '.join(b.pci_device_ids)}): types {b.prefix}-*")
        for kind, table in (("time-sliced", b.time_sliced), ("MIG-backed", b.mig_backed)):
            if table:
                listed = "  ".join(f"{b.prefix}-{s} x{n}" for s, n in table.items())
                print(f"  {kind} (max per GPU): {listed}")
    return 0
