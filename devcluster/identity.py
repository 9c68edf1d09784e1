"""Tessera's own components run in the dev cluster as their ServiceAccounts, never as admin.

``config/rbac`` is what a cluster grants the operator (ServiceAccount ``tessera`` in
``tessera-system``) and the Ascend vNPU agent (``tessera-agent`` in ``tessera-agent``). The
integration suite and ``make demo`` install it and hand each component a kubeconfig holding a
token from the TokenRequest API — what the kubelet mounts into their pods — so a verb missing
from config/rbac fails there as it would in a cluster.

The agent's token is bound to the agent's Pod on its node, as the kubelet binds the token it
mounts, so the API server puts the node's name into the token's user
(``authentication.kubernetes.io/node-name``): the ValidatingAdmissionPolicy of config/rbac
lets the agent change that Node only. ``agent_pod`` finds that Pod, created by the dev
cluster's DaemonSet controller from a stand-in of config/agent's DaemonSet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import fleet
from devcluster.controlplane import kubeconfig_text
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

WEEK = 7 * 24 * 3600  # a demo may run for days; a token outliving its Pod is refused anyway
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
# What never appears in the log of a component running as its ServiceAccount: a call RBAC or
# an admission policy refused, a token the API server rejected, a crash.
PROBLEM = re.compile(r"forbidden|unauthorized|Traceback", re.IGNORECASE)


@dataclass(frozen=True)
class Account:
    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


OPERATOR = Account("tessera-system", "tessera")
AGENT = Account("tessera-agent", "tessera-agent")
# Stands in for config/agent's DaemonSet, and is named apart from it: an install applied to
# the same cluster (the install tests' server dry runs) never meets an object of ours.
AGENT_DAEMONSET = "tessera-vnpu-agent-sim"
AGENT_LABELS = {"app.kubernetes.io/name": "tessera", "app.kubernetes.io/component": "vnpu-agent"}
# The same for config/agent's GPU agent DaemonSet; the operator counts a GPU holder record
# only while a pod with these labels runs on the node.
GPU_AGENT_DAEMONSET = "tessera-gpu-agent-sim"
GPU_AGENT_LABELS = {"app.kubernetes.io/name": "tessera", c.COMPONENT_LABEL: c.GPU_AGENT_COMPONENT}


def token(
    kube: Kube, account: Account, *, pod: Mapping[str, Any] | None = None, seconds: int = WEEK
) -> str:
    """A token of ``account`` from the TokenRequest API, bound to ``pod`` when given."""
    spec: dict[str, Any] = {"expirationSeconds": seconds}
    if pod is not None:
        meta = pod["metadata"]
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "uid": meta["uid"],
        }
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = path_of("v1", "serviceaccounts", account.name, account.namespace) + "/token"
    issued: str = kube.create(path, request)["status"]["token"]
    return issued


def kubeconfig(kube: Kube, bearer: str, user: str, path: Path) -> Path:
    """Write a kubeconfig for the API server ``kube`` talks to, authenticating with ``bearer``."""
    if kube.ca_file is None:
        raise ValueError(f"{kube.server}: no CA file to write into a kubeconfig")
    path.write_text(kubeconfig_text(kube.server, bearer, Path(kube.ca_file), user=user))
    return path


def gpu_agent_pod(kube: Kube, node: str, timeout: float = 60.0) -> dict[str, Any]:
    """The GPU agent's Pod on ``node``, as ``agent_pod`` finds the vNPU agent's: its
    DaemonSet stand-in runs on every GPU node (GPU Feature Discovery's product label)."""
    ds = _daemonset(kube, GPU_AGENT_DAEMONSET, GPU_AGENT_LABELS, c.GPU_PRODUCT_LABEL)
    return _pod_of(kube, ds, node, GPU_AGENT_DAEMONSET, GPU_AGENT_LABELS, timeout)


def remove_gpu_agents(kube: Kube) -> None:
    """Delete the GPU agent's DaemonSet stand-in, and with it its Pods."""
    path = path_of("apps/v1", "daemonsets", GPU_AGENT_DAEMONSET, AGENT.namespace)
    try:
        kube.delete(path, {"propagationPolicy": "Foreground"})
    except ApiError as err:
        if not err.not_found:
            raise


def agent_pod(kube: Kube, node: str, timeout: float = 60.0) -> dict[str, Any]:
    """The agent's Pod on ``node``, created there by the DaemonSet controller.

    The DaemonSet stand-in runs on every Ascend node, as config/agent's does; the real
    DaemonSet controller creates its Pod for ``node`` and kube-scheduler binds it there — the
    node is the point: a token bound to the Pod names it. Owned by the DaemonSet, it is
    skipped by drains as the real agent's pod is; it runs no container (the agent runs as a
    process of the dev cluster), and KWOK reports it Running.
    """
    ds = _daemonset(kube, AGENT_DAEMONSET, AGENT_LABELS, c.NPU_CHIP_NAME_LABEL)
    return _pod_of(kube, ds, node, AGENT_DAEMONSET, AGENT_LABELS, timeout)


def _pod_of(
    kube: Kube,
    ds: Mapping[str, Any],
    node: str,
    name: str,
    labels: Mapping[str, str],
    timeout: float,
) -> dict[str, Any]:
    uid = ds["metadata"]["uid"]

    def owned(pod: Mapping[str, Any]) -> bool:
        return uid in {o.get("uid") for o in pod["metadata"].get("ownerReferences") or []}

    return fleet.daemonset_pod(
        kube,
        AGENT.namespace,
        node,
        owned,
        f"Pod of DaemonSet {AGENT.namespace}/{name} bound (DaemonSet controller, kube-scheduler)",
        timeout,
        label_selector=",".join(f"{k}={v}" for k, v in labels.items()),
    )


def _daemonset(kube: Kube, name: str, labels: Mapping[str, str], on: str) -> dict[str, Any]:
    """A DaemonSet stand-in on the nodes carrying label ``on`` (as config/agent's select)."""
    where = {"key": on, "operator": "Exists"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [where]}]
            }
        }
    }
    mid_rollout = {"key": c.GEOMETRY_PENDING_TAINT, "operator": "Exists", "effect": "NoSchedule"}
    spec = {**_pod_spec(), "affinity": affinity, "tolerations": [mid_rollout]}
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": spec},
        },
    }
    return _ensure(kube, path_of("apps/v1", "daemonsets", namespace=AGENT.namespace), ds)


def _ensure(kube: Kube, collection: str, body: dict[str, Any]) -> dict[str, Any]:
    """The object named in ``body``: as it exists, or created from ``body`` now."""
    path = f"{collection}/{body['metadata']['name']}"
    found = kube.get_or_none(path)
    if found is not None:
        return found
    try:
        return kube.create(collection, body)
    except ApiError as err:  # another agent of this cluster created it meanwhile
        if not err.conflict:
            raise
        return kube.get(path)


def _pod_spec() -> dict[str, Any]:
    return {
        "serviceAccountName": AGENT.name,
        "containers": [{"name": "agent", "image": "tessera:0.1.0"}],
        "terminationGracePeriodSeconds": 1,
    }
