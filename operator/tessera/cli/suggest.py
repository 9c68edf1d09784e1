"""``tessera suggest``: the NodePoolGeometry change that fits pending demand, as a patch to commit.

Reads a demand file (``-f``; docs/autopilot.md §The demand file), hands it to
``tessera.domain.autopilot.suggestion`` and prints the decision's reasons and, when a change
fits, a merge patch of the NodePoolGeometry a person commits to Git (or applies with
``kubectl patch npg NAME --type merge --patch-file``). Nothing is written. Exit codes are
``tessera plan``'s: 0 no change (the demand is served, waits below the threshold, or nothing
fits — said plainly), 2 a change is suggested, 1 an error: a demand file that cannot be read
is an error, never "no changes".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from tessera.cli.parsing import Parser
from tessera.domain.autopilot import suggestion

NO_CHANGE, ERROR, CHANGES = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = subparsers.add_parser(
        "suggest",
        help="suggest the NodePoolGeometry change that fits pending demand (nothing is written)",
        description="From a demand file: which GPU indexes of a pool change layout so that the "
        "pods that pend fit, with the fewest GPUs reconfigured and only idle ones, within the "
        "bounds; printed with its reasons and as a merge patch. Exit 0: no change (or nothing "
        "fits, said plainly), 2: a change, 1: error (also a usage error).",
    )
    if isinstance(cmd, Parser):
        cmd.usage_status = ERROR
    cmd.set_defaults(usage_parser=cmd)
    cmd.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="DEMAND",
        help="the demand file (YAML; - for stdin): pool, model, nodes, gpus, layouts, used, "
        "pending, bounds (docs/autopilot.md)",
    )
    cmd.add_argument("-o", "--output", choices=("text", "json"), default="text")
    cmd.set_defaults(func=_suggest)


def _suggest(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
        doc = yaml.safe_load(text)
        inputs = suggestion.read(doc)
    except (OSError, yaml.YAMLError, suggestion.DemandFileError) as err:
        print(f"tessera suggest: {args.filename}: {err}", file=sys.stderr)
        return ERROR
    result = suggestion.suggest(inputs)
    if args.output == "json":
        body = {
            "pool": inputs.pool,
            "reasons": list(result.lines),
            "nothingFits": result.decision.nothing_fits,
            "unmet": dict(result.decision.unmet),
            "patch": result.patch,
        }
        print(json.dumps(body, indent=2))
    else:
        print(f"NodePoolGeometry/{inputs.pool}:")
        for line in result.lines:
            print(f"  {line}")
        if result.patch is not None:
            print(f"# merge patch for NodePoolGeometry/{inputs.pool}: commit it to the manifest")
            sys.stdout.write(yaml.safe_dump(result.patch, sort_keys=False))
        else:
            print("No change.")
    return CHANGES if result.patch is not None else NO_CHANGE
