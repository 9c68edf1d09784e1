"""Where ``tessera plan`` reads the cluster from: the live API server, or a snapshot file.

``read_cluster`` lists, read-only, every object a preview reads (DeviceClasses and
ResourceSlices too: a cluster that refuses them is an error, not a plan without DRA);
``tessera plan snapshot`` stores them, each reduced by ``domain.preview.snapshot`` to
the fields planning reads; ``load_snapshot`` reads such a file back (or a
``kubectl get -o yaml`` List).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1 import KINDS
from tessera.domain import admission
from tessera.domain.dra import naming as dra
from tessera.domain.preview import Cluster, Locations, manifests
from tessera.domain.preview import schedulers as preview_schedulers
from tessera.domain.quota import objects as quota_objects


def load_snapshot(path: Path) -> list[Any]:
    """The objects of a snapshot file; ManifestError naming the place of one that is not."""
    loaded = manifests.load(manifests.decode(path.read_bytes(), str(path)), str(path))
    docs = [d for d in manifests.items(loaded) if d.body is not None]  # Lists: kubectl get -o yaml
    for doc in docs:
        body = doc.body
        if not isinstance(body, dict) or not (body.get("metadata") or {}).get("name"):
            raise manifests.ManifestError(
                f"{doc.where}: not a Kubernetes object with a name: {str(body)[:60]!r}"
            )
    return [d.body for d in docs]


class ClusterUnreadable(Exception):
    """No kubeconfig, or the API server refused a read."""


def locations(args: argparse.Namespace) -> Locations:
    """Where the maps are, from the ConfigMap flags (the same as ``tessera run``'s)."""
    return Locations(
        args.mig_parted_configmap,
        args.vnpu_configmap,
        args.device_plugin_configmap,
        args.hami_namespace,
        vgpu=args.vgpu_configmap,
    )


def read_cluster(
    kubeconfig: str | None, loc: Locations, manifests: Sequence[Mapping[str, Any]] = ()
) -> Cluster:
    """Every object a preview reads, from the live API server (read-only). The scheduler
    ConfigMaps and Deployments read are those the cluster's and ``manifests``' SharingPolicies
    name (a policy naming Volcano whose config cannot be read is the plan's error)."""
    # Imported here, not above: the client costs a second to load, and neither `tessera plan
    # --snapshot` nor any other command than this read needs it (test_cli_startup).
    from tessera.adapters.kube import ApiError, Kube, path_of

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
            loc.vgpu,
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
        # DRA: every class (a name Tessera wants may be someone else's) and the slices. A
        # plan that cannot read them cannot say what it changes: an error, never "no change".
        lists["DeviceClass"] = (dra.API, kube.list(dra.DEVICECLASSES))
        named_maps, named_deploys = scheduler_objects([o for _, o in _kinded(tessera)], manifests)
        maps += [
            cm
            for ns, name in sorted(named_maps - wanted)
            if (cm := kube.get_or_none(path_of("v1", "configmaps", name, ns))) is not None
        ]
        deployments = [
            d
            for ns, name in sorted(named_deploys)
            if (d := kube.get_or_none(path_of("apps/v1", "deployments", name, ns))) is not None
        ]
        lists["ResourceSlice"] = (dra.API, kube.list(dra.RESOURCESLICES))
        # who holds which GPU on a DRA pool: a change narrows to the GPUs it repartitions
        lists["ResourceClaim"] = (dra.API, kube.list(dra.RESOURCECLAIMS))
        # Pod contracts: every admission policy and binding (a name Tessera wants may be
        # taken); a server without admissionregistration.k8s.io/v1 (before 1.30) has none.
        for kind, path in (
            ("ValidatingAdmissionPolicy", admission.POLICIES),
            ("ValidatingAdmissionPolicyBinding", admission.BINDINGS),
        ):
            lists[kind] = (admission.API, _listed_or_none(kube, path))
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
        device_classes=tuple(typed["DeviceClass"]),
        slices=tuple(typed["ResourceSlice"]),
        admission=(
            *typed["ValidatingAdmissionPolicy"],
            *typed["ValidatingAdmissionPolicyBinding"],
        ),
        deployments=tuple(_typed("apps/v1", "Deployment", d) for d in deployments),
        claims=tuple(typed["ResourceClaim"]),
    )


def _listed_or_none(kube: Any, path: str) -> list[dict[str, Any]]:
    from tessera.adapters.kube import ApiError

    try:
        found: list[dict[str, Any]] = kube.list(path)
    except ApiError as err:
        if err.not_found:
            return []
        raise
    return found


def _kinded(tessera: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, {**o, "kind": kind}) for kind, o in tessera]


def scheduler_objects(
    live: Sequence[Mapping[str, Any]], manifests: Sequence[Mapping[str, Any]]
) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The scheduler ConfigMaps and Deployments the policies name, live or in the manifests."""
    return preview_schedulers.named([*live, *manifests])


def _typed(api_version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """List items carry no kind; a snapshot needs it. Managed fields are noise in a file."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "apiVersion": api_version, "kind": kind, "metadata": meta}
