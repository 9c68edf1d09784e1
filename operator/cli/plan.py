"""``tessera plan``: preview what applying manifests would do; ``tessera plan snapshot``: save a cluster.

Reads the cluster (``--kubeconfig``) or a snapshot file (``--snapshot``),
hands both to ``tessera.domain.preview`` and prints the result. Nothing is
written. With ``--prune`` the Tessera objects no manifest names are previewed
as deleted, as Argo CD's pruning (or ``kubectl apply --prune``) would delete
them. Exit codes follow ``terraform plan -detailed-exitcode``: 0 no change,
2 changes (a deletion is one), 1 an error (unreadable or invalid manifests,
no cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tessera.cli import configmaps

NO_CHANGE, ERROR, CHANGES = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="preview what applying Tessera manifests would change (nothing is written)",
        description="Per pool: nodes that change (old -> new), pods evicted, blocking PDBs, "
        "capacity, quota impact and the agent configs as a diff. Exit 0: no change, "
        "2: changes, 1: error.",
    )
    plan.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        metavar="MANIFEST",
        help="file, directory of *.yaml, or - for stdin (repeatable)",
    )
    source = plan.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", help="read the live cluster (default: $KUBECONFIG)")
    source.add_argument("--snapshot", type=Path, help="read a file from `tessera plan snapshot`")
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
        "app.kubernetes.io/instance=gpu-platform)",
    )
    plan.add_argument("-o", "--output", choices=("text", "json"), default="text")
    configmaps.add_flags(plan, "ConfigMaps to diff (as given to `tessera run`)")
    plan.set_defaults(func=_plan)
    sub = plan.add_subparsers(dest="plan_command", metavar="snapshot")
    snap = sub.add_parser("snapshot", help="write the objects a plan reads, as YAML, to stdout")
    snap.add_argument("--kubeconfig", help="default: $KUBECONFIG")
    configmaps.add_flags(snap, "ConfigMaps to read (as given to `tessera run`)", sub=True)
    snap.set_defaults(func=_snapshot)


def _plan(args: argparse.Namespace) -> int:
    from tessera.domain import preview, preview_text, selectors

    if not args.filename:
        print("tessera plan: give at least one -f MANIFEST", file=sys.stderr)
        return ERROR
    if args.selector is not None and not args.prune:
        print("tessera plan: -l/--selector narrows --prune; give --prune too", file=sys.stderr)
        return ERROR
    try:
        selector = selectors.parse(args.selector) if args.selector is not None else None
    except ValueError as err:
        print(f"tessera plan: -l {args.selector!r}: {err}", file=sys.stderr)
        return ERROR
    try:
        manifests, notes = preview.parse_manifests(_documents(args.filename))
        cluster = (
            preview.Cluster.of(_load_snapshot(args.snapshot))
            if args.snapshot
            else read_cluster(args.kubeconfig, locations(args))
        )
        result = preview.preview(
            cluster,
            manifests,
            datetime.now(UTC),
            locations(args),
            prune=args.prune,
            prune_selector=selector,
        )
    except (preview.ManifestError, OSError, yaml.YAMLError, ClusterUnreadable) as err:
        print(f"tessera plan: {err}", file=sys.stderr)
        return ERROR
    result = replace(result, notes=tuple(notes))
    if args.output == "json":
        print(json.dumps(preview_text.as_json(result), indent=2))
    else:
        sys.stdout.write(preview_text.render(result))
    return CHANGES if result.changed else NO_CHANGE


def _snapshot(args: argparse.Namespace) -> int:
    try:
        cluster = read_cluster(args.kubeconfig, locations(args))
    except ClusterUnreadable as err:
        print(f"tessera plan snapshot: {err}", file=sys.stderr)
        return ERROR
    yaml.safe_dump_all(cluster.items(), sys.stdout, sort_keys=False)
    return NO_CHANGE


# -- input ---------------------------------------------------------------------------------------


def _documents(paths: Iterable[str]) -> list[Any]:
    docs: list[Any] = []
    for raw in paths:
        if raw == "-":
            docs.extend(yaml.safe_load_all(sys.stdin))
            continue
        path = Path(raw)
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
        for file in files:
            docs.extend(yaml.safe_load_all(file.read_text()))
    return docs


def _load_snapshot(path: Path) -> list[Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    if len(docs) == 1 and docs[0].get("kind") == "List":  # kubectl get -o yaml
        return list(docs[0].get("items") or [])
    return docs


class ClusterUnreadable(Exception):
    """No kubeconfig, or the API server refused a read."""


def locations(args: argparse.Namespace) -> Any:
    """Where the maps are, from the ConfigMap flags (the same as ``tessera run``'s)."""
    from tessera.domain.preview import Locations

    return Locations(
        args.mig_parted_configmap,
        args.vnpu_configmap,
        args.device_plugin_configmap,
        args.hami_namespace,
    )


def read_cluster(kubeconfig: str | None, loc: Any) -> Any:
    """Every object a preview reads, from the live API server (read-only)."""
    from tessera.adapters.kube import ApiError, Kube, path_of
    from tessera.api import constants as c
    from tessera.api.v1alpha1 import KINDS
    from tessera.domain.preview import Cluster
    from tessera.domain.quota import objects as quota_objects

    try:
        kube = Kube.from_kubeconfig(kubeconfig)
    except Exception as err:  # the client raises several types for a bad kubeconfig
        raise ClusterUnreadable(f"cannot load kubeconfig: {err}") from err
    try:
        lists = {
            "Node": ("v1", kube.list("/api/v1/nodes")),
            "Pod": ("v1", kube.list("/api/v1/pods")),
            "PodDisruptionBudget": (
                "policy/v1",
                kube.list("/apis/policy/v1/poddisruptionbudgets"),
            ),
            "Namespace": ("v1", kube.list("/api/v1/namespaces")),
            "ResourceQuota": (
                "v1",
                kube.list("/api/v1/resourcequotas", label_selector=quota_objects.selector()),
            ),
        }
        wanted = {
            loc.mig,
            loc.vnpu,
            loc.device_plugin,
            (loc.hami_namespace, c.HAMI_NVIDIA_CONFIGMAP_NAME),
            (loc.hami_namespace, c.HAMI_ASCEND_CONFIGMAP_NAME),
        }
        maps = [
            cm
            for ns, name in sorted(wanted)
            if (cm := kube.get_or_none(path_of("v1", "configmaps", name, ns))) is not None
        ]
        tessera = [
            (k.kind, item)
            for k in KINDS
            for item in kube.list(f"/apis/{c.GROUP}/{c.VERSION}/{k.plural}")
        ]
    except ApiError as err:
        raise ClusterUnreadable(f"reading the cluster failed: {err}") from err
    finally:
        kube.close()
    typed = {kind: [_typed(api, kind, o) for o in items] for kind, (api, items) in lists.items()}
    return Cluster(
        nodes=tuple(typed["Node"]),
        pods=tuple(typed["Pod"]),
        pdbs=tuple(typed["PodDisruptionBudget"]),
        namespaces=tuple(typed["Namespace"]),
        configmaps=tuple(_typed("v1", "ConfigMap", cm) for cm in maps),
        quotas=tuple(typed["ResourceQuota"]),
        objects=tuple(_typed(c.API_VERSION, kind, o) for kind, o in tessera),
    )


def _typed(api_version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """List items carry no kind; a snapshot needs it. Managed fields are noise in a file."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "apiVersion": api_version, "kind": kind, "metadata": meta}
