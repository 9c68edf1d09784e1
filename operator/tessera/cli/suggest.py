"""``tessera suggest``: the NodePoolGeometry change that fits pending demand, as a patch to commit.

Reads a demand file (``-f``; docs/autopilot.md §The demand file) or the live cluster
(``tessera suggest POOL``: ``cli.suggest_cluster`` reads, read-only, what
``tessera.domain.cluster.demand`` turns into the same inputs), hands them to
``tessera.domain.autopilot.suggestion`` and prints the decision's reasons and, when a change
fits, a merge patch of the NodePoolGeometry a person commits to Git (or applies with
``kubectl patch npg NAME --type merge --patch-file``). ``tessera suggest --from-status POOL``
prints instead the layouts the pool's autopilot chose (``status.autopilot``) as that patch:
the choice made static in Git. Nothing is written. Exit codes are
``tessera plan``'s: 0 no change (the demand is served, waits below the threshold, or nothing
fits — said plainly), 2 a change is suggested, 1 an error: a demand file, a pool or a
pending pod that cannot be read is an error, never "no changes".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tessera.cli import configmaps
from tessera.cli.parsing import usage_exits
from tessera.domain.autopilot import choice, suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.rollout import gates

NO_CHANGE, ERROR, CHANGES = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = subparsers.add_parser(
        "suggest",
        help="suggest the NodePoolGeometry change that fits pending demand (nothing is written)",
        description="From the live cluster (POOL: its nodes, their layouts, the GPU agent's "
        "holders record, the pods kube-scheduler marked Unschedulable for the pool's MIG "
        "resources) or a demand file (-f): which GPU indexes of a pool change layout so that "
        "the pods that pend fit, with the fewest GPUs reconfigured and only idle ones, within "
        "the bounds; printed with its reasons and as a merge patch. Exit 0: no change (or "
        "nothing fits, said plainly), 2: a change, 1: error (also a usage error).",
    )
    usage_exits(cmd, ERROR)
    cmd.add_argument(
        "pool", nargs="?", metavar="POOL", help="the NodePoolGeometry to read from the cluster"
    )
    cmd.add_argument(
        "-f",
        "--filename",
        metavar="DEMAND",
        help="instead of the cluster, a demand file (YAML; - for stdin): pool, model, nodes, "
        "gpus, layouts, used, pending, bounds (docs/autopilot.md)",
    )
    cmd.add_argument(
        "--from-status",
        action="store_true",
        help="with POOL: the layouts its autopilot chose (status.autopilot) as a patch for Git",
    )
    cmd.add_argument("--kubeconfig", help="with POOL: the cluster to read (default: $KUBECONFIG)")
    cmd.add_argument(
        "--pend-threshold",
        metavar="DURATION",
        help="with POOL: how long a pod must pend before it counts (Go duration; default "
        f"{int(Bounds().pend_threshold.total_seconds() // 60)}m)",
    )
    configmaps.add_flags(
        cmd,
        "with POOL: ConfigMaps to read (as given to `tessera run`)",
        only=("mig_parted_configmap", "device_plugin_configmap"),
    )
    cmd.add_argument("-o", "--output", choices=("text", "json"), default="text")
    cmd.set_defaults(func=_suggest)


def _suggest(args: argparse.Namespace) -> int:
    if (args.pool is None) == (args.filename is None):
        print(
            "tessera suggest: give a POOL to read from the cluster, or -f DEMAND", file=sys.stderr
        )
        return ERROR
    if args.from_status:
        return _from_status(args)
    notes: tuple[str, ...] = ()
    waiting: dict[str, list[str]] = {}
    unknown: list[str] = []
    if args.filename is not None:
        given = [
            f
            for f, v in (
                ("--kubeconfig", args.kubeconfig),
                ("--pend-threshold", args.pend_threshold),
                ("--from-status", args.from_status),
            )
            if v
        ]
        if given:
            print(
                f"tessera suggest: {', '.join(given)} read the cluster; -f reads a file",
                file=sys.stderr,
            )
            return ERROR
        try:
            text = sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
            doc = yaml.safe_load(text)
            inputs = suggestion.read(doc)
        except (OSError, yaml.YAMLError, suggestion.DemandFileError) as err:
            print(f"tessera suggest: {args.filename}: {err}", file=sys.stderr)
            return ERROR
    else:
        # the cluster's reading loads the client and the rollout's domain: not for -f
        from tessera.cli.suggest_cluster import Unreadable, observe
        from tessera.domain.cluster import demand as live

        try:
            bounds = Bounds()
            if args.pend_threshold is not None:
                bounds = Bounds(pend_threshold=gates.duration(args.pend_threshold))
        except ValueError as err:
            print(f"tessera suggest: --pend-threshold: {err}", file=sys.stderr)
            return ERROR
        try:
            observed = observe(args, bounds)
        except (Unreadable, live.LiveError) as err:
            print(f"tessera suggest: {err}", file=sys.stderr)
            return ERROR
        inputs, notes = observed.inputs, live.lines(observed)
        waiting = {p: list(refs) for p, refs in observed.waiting.items()}
        unknown = list(observed.unknown)
    result = suggestion.suggest(inputs)
    return _print(
        args, inputs.pool, result.lines, notes, result.patch, result.decision, waiting, unknown
    )


def _print(
    args: argparse.Namespace,
    pool: str,
    reasons: tuple[str, ...],
    notes: tuple[str, ...],
    patch: dict[str, Any] | None,
    decision: choice.Decision | None,
    waiting: dict[str, list[str]],
    unknown: list[str],
) -> int:
    """The answer as text or JSON, and its exit code: 2 a patch, 0 none."""
    if args.output == "json":
        body = {
            "pool": pool,
            "reasons": list(reasons),
            "nothingFits": decision.nothing_fits if decision else False,
            "unmet": dict(decision.unmet) if decision else {},
            "patch": patch,
            "pending": waiting,
            "unknownUsage": unknown,
        }
        print(json.dumps(body, indent=2))
    else:
        print(f"NodePoolGeometry/{pool}:")
        for line in (*reasons, *notes):
            print(f"  {line}")
        if patch is not None:
            print(f"# merge patch for NodePoolGeometry/{pool}: commit it to the manifest")
            sys.stdout.write(yaml.safe_dump(patch, sort_keys=False))
        else:
            print("No change.")
    return CHANGES if patch is not None else NO_CHANGE


def _from_status(args: argparse.Namespace) -> int:
    """``--from-status POOL``: the autopilot's recorded choice as the patch that makes it Git's."""
    if args.pool is None or args.filename is not None or args.pend_threshold is not None:
        print(
            "tessera suggest: --from-status reads a POOL's status; no -f or --pend-threshold",
            file=sys.stderr,
        )
        return ERROR
    from tessera.cli.suggest_cluster import Unreadable, choice_of

    try:
        reasons, patch = choice_of(args)
    except Unreadable as err:
        print(f"tessera suggest: {err}", file=sys.stderr)
        return ERROR
    return _print(args, args.pool, reasons, (), patch, None, {}, [])
