"""``tessera plan``: preview what applying manifests would do; ``tessera plan snapshot``: save a cluster.

Reads the manifests as Argo CD would (``cli.manifests``: kustomizations
rendered), the cluster (``--kubeconfig``) or a snapshot file (``--snapshot``),
hands both to ``tessera.domain.preview`` and prints the result. Nothing is
written. With ``--prune`` the Tessera objects no manifest names are previewed
as deleted, as Argo CD's pruning (or ``kubectl apply --prune``) would delete
them. Exit codes follow ``terraform plan -detailed-exitcode``: 0 no change,
2 changes (a deletion is one), 1 an error — unreadable or invalid manifests,
a kustomization with no kubectl to render it, no cluster, and usage errors
(which exit 2 elsewhere: here 2 means "changes").
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tessera.cli import configmaps
from tessera.cli import manifests as reading
from tessera.cli.parsing import Parser, usage_exits
from tessera.cli.plan_cluster import ClusterUnreadable, load_snapshot, locations, read_cluster
from tessera.domain import preview
from tessera.domain.base import selectors
from tessera.domain.preview import manifests, snapshot, tracking

NO_CHANGE, ERROR, CHANGES = 0, 1, 2

SNAPSHOT_HELP = (
    "Write the objects a plan reads, as YAML, to stdout: Nodes, Pods, PodDisruptionBudgets, "
    "Namespaces, the agents' ConfigMaps, Tessera's ResourceQuotas, DeviceClasses, "
    "ResourceSlices (per device its name and attributes), ResourceClaims (allocation and "
    "reservations) and Tessera's objects. "
    "Each keeps only the fields planning reads — of a Pod its name, namespace, creation time, "
    "labels, owner references, node, phase and condition statuses, per container its resource "
    "requests and limits, its ResourceClaims, its emptyDir volumes — never container env, commands, images or other volumes; no object keeps "
    "managedFields or kubectl's last-applied-configuration. A plan from the snapshot equals "
    "the plan from the live cluster."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="preview what applying Tessera manifests would change (nothing is written)",
        description="Per pool: nodes that change (old -> new), pods evicted, blocking PDBs, "
        "capacity, quota impact and the agent configs as a diff. Exit 0: no change, "
        "2: changes, 1: error (also a usage error).",
    )
    usage_exits(plan, ERROR)
    if isinstance(plan, Parser):
        plan.unknown_command = _stray_path
    plan.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="MANIFEST",
        help="file, directory of *.yaml/*.yml/*.json, kustomization directory (rendered with "
        "`kubectl kustomize`, as Argo CD does), or - for stdin (repeatable)",
    )
    source = plan.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", help="read the live cluster (default: $KUBECONFIG)")
    source.add_argument("--snapshot", type=Path, help="read a file from `tessera plan snapshot`")
    plan.add_argument(
        "--kubectl",
        metavar="PATH",
        help="kubectl that renders kustomizations (default: $TESSERA_KUBECTL, else kubectl "
        "on PATH; without one a kustomization is an error)",
    )
    plan.add_argument(
        "--prune",
        action="store_true",
        help="also preview deleting every NodePoolGeometry, SharingPolicy and TenantQuota "
        "in the cluster that no manifest names (what Argo CD pruning would delete)",
    )
    plan.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="with --prune: prune only objects with these labels (kubectl -l syntax, e.g. "
        "app.kubernetes.io/instance=gpu-platform: Argo CD's label tracking)",
    )
    plan.add_argument(
        "--prune-tracking-id",
        metavar="APP",
        help="with --prune: prune only objects Argo CD application APP tracks by annotation "
        "(Argo CD 3.x's default: argocd.argoproj.io/tracking-id: APP:GROUP/KIND:NS/NAME "
        "naming the object itself)",
    )
    plan.add_argument("-o", "--output", choices=("text", "json"), default="text")
    configmaps.add_flags(plan, "ConfigMaps to diff (as given to `tessera run`)")
    plan.set_defaults(func=_plan)
    sub = plan.add_subparsers(dest="plan_command", metavar="snapshot")
    snap = sub.add_parser("snapshot", help="write the objects a plan reads, as YAML, to stdout")
    snap.description = SNAPSHOT_HELP
    usage_exits(snap, ERROR)
    snap.add_argument("--kubeconfig", help="default: $KUBECONFIG")
    configmaps.add_flags(snap, "ConfigMaps to read (as given to `tessera run`)", sub=True)
    snap.set_defaults(func=_snapshot)


def _stray_path(word: str) -> str:
    """``tessera plan -f a.yaml b.yaml``: b.yaml is read as a sub-command, not a manifest."""
    return (
        f"{word!r} is no command of tessera plan (only snapshot); -f takes one path, "
        f"so each manifest needs its own -f: ... -f {word}"
    )


def _plan(args: argparse.Namespace) -> int:
    if not args.filename:
        print("tessera plan: give at least one -f MANIFEST", file=sys.stderr)
        return ERROR
    narrowing = {"-l/--selector": args.selector, "--prune-tracking-id": args.prune_tracking_id}
    for flag, value in narrowing.items():
        if value is not None and not args.prune:
            print(f"tessera plan: {flag} narrows --prune; give --prune too", file=sys.stderr)
            return ERROR
    try:
        selector = selectors.parse(args.selector) if args.selector is not None else None
    except ValueError as err:
        print(f"tessera plan: -l {args.selector!r}: {err}", file=sys.stderr)
        return ERROR
    try:
        app = None if args.prune_tracking_id is None else tracking.check_app(args.prune_tracking_id)
    except ValueError as err:
        print(f"tessera plan: --prune-tracking-id: {err}", file=sys.stderr)
        return ERROR
    try:
        docs = reading.documents(args.filename, reading.kubectl(args.kubectl))
        wanted, notes = manifests.parse(docs)
        cluster = (
            preview.Cluster.of(load_snapshot(args.snapshot))
            if args.snapshot
            else read_cluster(args.kubeconfig, locations(args), wanted)
        )
        result = preview.preview(
            cluster,
            wanted,
            datetime.now(UTC),
            locations(args),
            prune=args.prune,
            prune_selector=selector,
            prune_tracking_id=app,
        )
    except (manifests.ManifestError, OSError, ClusterUnreadable) as err:
        print(f"tessera plan: {err}", file=sys.stderr)
        return ERROR
    result = replace(result, notes=tuple(notes))
    if args.output == "json":
        print(json.dumps(preview.as_json(result), indent=2))
    else:
        sys.stdout.write(preview.render(result))
    for conflict in result.conflicts:  # one node, one pool: applying this would stall pools
        print(f"tessera plan: {conflict}", file=sys.stderr)
    if result.conflicts:
        return ERROR
    return CHANGES if result.changed else NO_CHANGE


def _snapshot(args: argparse.Namespace) -> int:
    plan_only = {
        "-f": args.filename,
        "--snapshot": args.snapshot,
        "--kubectl": args.kubectl,
        "--prune": args.prune,
        "-l": args.selector,
        "--prune-tracking-id": args.prune_tracking_id,
        "-o": args.output != "text",
    }
    if given := [flag for flag, value in plan_only.items() if value]:
        print(
            f"tessera plan snapshot: {', '.join(given)} belong to tessera plan, which "
            "previews manifests; snapshot only writes the cluster",
            file=sys.stderr,
        )
        return ERROR
    try:
        cluster = read_cluster(args.kubeconfig, locations(args))
    except ClusterUnreadable as err:
        print(f"tessera plan snapshot: {err}", file=sys.stderr)
        return ERROR
    print("# tessera plan snapshot: only the fields planning reads (tessera plan snapshot --help)")
    yaml.safe_dump_all([snapshot.minimal(o) for o in cluster.items()], sys.stdout, sort_keys=False)
    return NO_CHANGE
