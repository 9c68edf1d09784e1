"""What ``tessera suggest POOL`` reads from the live cluster, read-only, and nothing more.

The NodePoolGeometry, the others' nodeSelectors (one node, one pool), the Nodes, the Pods
(those on the pool's nodes, and those that pend), mig-parted's ConfigMap (what each node
runs now) and the device plugin's (its sharing undone): exactly the reads the controller's
pass makes for a pool, handed to the same ``cluster.observe_pool``; then
``cluster.demand.observe``. A DRA pool's demand and usage are in its ResourceClaims, read
against the ResourceSlices (``cluster.dra_view``, as ``tessera plan`` reads them): both are
listed for a DRA pool only. The RBAC this needs is docs/autopilot.md's: get and list
nodepoolgeometries, list nodes and pods (and resourceclaims and resourceslices), get the
two ConfigMaps. ``--from-status`` reads
the NodePoolGeometry alone (``choice_of``).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.cluster import autopilot as pilot
from tessera.domain.cluster import claims as pool_claims
from tessera.domain.cluster import demand as live
from tessera.domain.cluster import objects, pools
from tessera.domain.dra import naming

if TYPE_CHECKING:
    from tessera.adapters.kube import Kube

PLURAL = "nodepoolgeometries"


class Unreadable(Exception):
    """No kubeconfig, no such pool, or the API server refused a read."""


def _client(args: argparse.Namespace) -> Kube:
    # Imported here: the client costs a second to load, and -f needs none (test_cli_startup).
    from tessera.adapters.kube import Kube

    try:
        return Kube.from_kubeconfig(args.kubeconfig)
    except Exception as err:  # the client raises several types for a bad kubeconfig
        raise Unreadable(f"cannot load kubeconfig: {err}") from err


def choice_of(args: argparse.Namespace) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    """The reasons and the merge patch that make the pool's recorded autopilot choice Git's;
    None when it chose nothing (Git's layouts rule), or Git holds the choice already."""
    from tessera.adapters.kube import ApiError, path_of

    kube = _client(args)
    name, where = args.pool, f"NodePoolGeometry/{args.pool}"
    try:
        obj = kube.get_or_none(path_of(f"{c.GROUP}/{c.VERSION}", PLURAL, name))
    except ApiError as err:
        raise Unreadable(f"reading {where} failed: {err}") from err
    finally:
        kube.close()
    if obj is None:
        raise Unreadable(f"{where}: not found")
    try:
        spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        raise Unreadable(f"{where}: its spec does not parse: {err}") from err
    if spec.autopilot is None:
        raise Unreadable(f"{where}: has no spec.autopilot, so nothing is chosen in its status")
    last = pilot.recorded(obj.get("status"))
    if last is None:
        raise Unreadable(f"{where}: no status.autopilot yet (is the operator running?)")
    head = f"autopilot {last.outcome or 'undecided'} at {last.decided_at or '-'}: {last.reason}"
    if not pilot.chosen(spec, last):
        return (head, "the pool runs spec.mig.layouts: nothing chosen to commit"), None
    return (head,), pilot.spec_patch(last)


def observe(args: argparse.Namespace, bounds: Bounds) -> live.Observed:
    from tessera.adapters.kube import ApiError, path_of

    kube = _client(args)
    name = args.pool
    group = f"{c.GROUP}/{c.VERSION}"
    try:
        obj = kube.get_or_none(path_of(group, PLURAL, name))
        if obj is None:
            raise Unreadable(f"NodePoolGeometry/{name}: not found")
        others = pool_claims.claimants(kube.list(path_of(group, PLURAL)))
        others.pop(name, None)
        nodes = kube.list("/api/v1/nodes")
        pods = kube.list("/api/v1/pods")
        maps = {}
        for key in ("mig_parted_configmap", "device_plugin_configmap"):
            namespace, cm = getattr(args, key)
            maps[key] = kube.get_or_none(path_of("v1", "configmaps", cm, namespace)) or {}
        dra = (obj.get("spec") or {}).get("allocation") == "DRA"
        claims = kube.list(naming.RESOURCECLAIMS) if dra else []
        slices = kube.list(naming.RESOURCESLICES) if dra else []
    except ApiError as err:
        raise Unreadable(f"reading the cluster for NodePoolGeometry/{name} failed: {err}") from err
    finally:
        kube.close()
    try:
        spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        raise Unreadable(f"NodePoolGeometry/{name}: its spec does not parse: {err}") from err
    mig_text = (maps["mig_parted_configmap"].get("data") or {}).get(c.MIG_PARTED_CONFIGMAP_KEY)
    mig_configs = pools.configs_in(mig_text or "", "mig-configs")
    sharing = maps["device_plugin_configmap"].get("data") or {}
    try:
        seen = objects.observe_pool(name, spec, nodes, sharing, others, mig_configs)
    except ValueError as err:  # a member whose labels no target can be made for
        raise live.LiveError(f"NodePoolGeometry/{name}: {err}") from err
    now = datetime.now(UTC)
    if not dra:
        return live.observe(name, spec, seen, pods, now, bounds)
    return live.observe_dra(name, spec, seen, pods, claims, slices, now, bounds)
