"""What a test module leaves in the session's cluster goes when the module ends.

All modules share one control plane and one operator with a 5 s resync. Left in place, each
module's pools, policies and quotas would be reconciled for the rest of the session (a full
pass lists every Node) and its Deployments would keep their pods: the later a module ran, the
more of the machine went to the objects of modules long finished, and the slower its own waits
became. So when a module ends, what it created goes: its namespaces (their pods at once: no
kubelet is left to end them on a deleted node), its Nodes, then its Tessera objects, each
through the operator's finalizer. A Tessera object still there after ``TIMEOUT`` fails the
module, naming it: finalizing what a test left must work too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from devcluster import identity
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

NODES = "/api/v1/nodes"
NAMESPACES = "/api/v1/namespaces"
TESSERA = tuple(
    f"/apis/{c.GROUP}/{c.VERSION}/{plural}"
    for plural in ("nodepoolgeometries", "sharingpolicies", "tenantquotas")
)
# Namespaces later modules expect to be there (the operator's, the agents', the ConfigMaps'):
# kept even when a module was the first to make them.
KEPT = frozenset(
    {
        "default",
        identity.OPERATOR.namespace,
        identity.AGENT.namespace,
        c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
        c.MIG_PARTED_CONFIGMAP_NAMESPACE,
        c.VNPU_CONFIGMAP_NAMESPACE,
        c.HAMI_NAMESPACE,
    }
)
TIMEOUT = 120.0


@dataclass(frozen=True)
class Snapshot:
    """The names of every Node, Namespace and Tessera object, by collection path."""

    names: dict[str, frozenset[str]]


def names(kube: Kube, path: str) -> frozenset[str]:
    return frozenset(item["metadata"]["name"] for item in kube.list(path))


def take(kube: Kube) -> Snapshot:
    return Snapshot({path: names(kube, path) for path in (NODES, NAMESPACES, *TESSERA)})


def sweep(kube: Kube, before: Snapshot) -> None:
    """Delete what was made since ``before``; wait until it is gone (``TIMEOUT``)."""
    made = {path: names(kube, path) - known for path, known in before.names.items()}
    spaces = made[NAMESPACES] - KEPT
    for ns in spaces:
        kube.delete(path_of("v1", "namespaces", ns))
    for ns in spaces:  # no new pod can start in a terminating namespace
        for pod in kube.list(path_of("v1", "pods", namespace=ns)):
            kube.delete(
                path_of("v1", "pods", pod["metadata"]["name"], ns), {"gracePeriodSeconds": 0}
            )
    for node in made[NODES]:
        kube.delete(path_of("v1", "nodes", node))
    for path in TESSERA:
        for name in made[path]:
            kube.delete(f"{path}/{name}")
    left = {f"{path}/{name}" for path in TESSERA for name in made[path]}
    left |= {path_of("v1", "namespaces", ns) for ns in spaces}
    deadline = time.monotonic() + TIMEOUT
    while left:
        left = {path for path in left if kube.get_or_none(path) is not None}
        if left and time.monotonic() > deadline:
            raise AssertionError(
                f"left by the module, not gone after {TIMEOUT:.0f}s: {sorted(left)}"
            )
        time.sleep(0.2)  # polling the API with a deadline
