"""Real scheduling in the dev cluster: kube-scheduler and KWOK next to the control plane.

Every ``ControlPlane`` runs kube-controller-manager with all its default controllers
(``resourceclaim-controller`` named for DRA), kube-scheduler (from the same Kubernetes module as
the API server) and the KWOK controller (``sigs.k8s.io/kwok``, built by
``hack/build-tool.sh kwok``). KWOK plays the kubelet of every node annotated
``kwok.x-k8s.io/node: fake`` and of the pods bound to it: node status and Lease heartbeats, pods
Running and Ready, deletion when the grace period is over.

The KWOK controller has no stages of its own (kwokctl writes them into its config): the build
puts the defaults kwokctl uses, from the pinned module, next to the binary
(``kwok-stages.yaml``); :func:`kwok_config` adds Tessera's pod-delete stage in place of the
upstream one, which deletes a terminating pod at once, and leaves a pod annotated
``sim.tessera.io/stuck-terminating: "true"`` Terminating for ever (a node whose runtime hangs:
the fault the drain tests inject).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devcluster.build_tool import build_tool

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_SELECTOR = f"{KWOK_ANNOTATION}=fake"
# Every controller kube-controller-manager enables by default, and the DRA claim controller by
# name (on by default in 1.34, listed so that it stays on whatever the default becomes).
ALL_CONTROLLERS = ("*", "resourceclaim-controller")
STAGES_FILE = "kwok-stages.yaml"
# A cold KWOK build downloads its modules (and maybe a newer Go) and takes 6-10 min on 2 cores.
KWOK_BUILD_TIMEOUT = 1800.0
NODE_HEARTBEAT_STAGE = "node-heartbeat-with-lease"
STUCK_ANNOTATION = "sim.tessera.io/stuck-terminating"

# A terminating pod stays Terminating until its deletionTimestamp (the delete request plus
# terminationGracePeriodSeconds: a kubelet whose containers ignore SIGTERM), then is deleted;
# pods with finalizers wait for them, and a pod annotated stuck-terminating never goes.
POD_DELETE_AFTER_GRACE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "tessera-pod-delete-after-grace"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
                {
                    "key": f'.metadata.annotations["{STUCK_ANNOTATION}"]',
                    "operator": "NotIn",
                    "values": ["true"],
                },
            ]
        },
        "delay": {
            "durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
        },
        "next": {"delete": True},
    },
}


def find_kwok() -> Path:
    """The KWOK controller binary: ``TESSERA_KWOK_BIN``, else build or reuse the cache."""
    preset = os.environ.get("TESSERA_KWOK_BIN")
    if preset:
        return Path(preset)
    return build_tool("kwok", timeout=KWOK_BUILD_TIMEOUT)


@dataclass(frozen=True)
class Scheduling:
    """What the dev cluster runs for real scheduling, and how fast KWOK's nodes heartbeat."""

    kwok_bin: Path = field(default_factory=find_kwok)
    # Node Lease duration; KWOK renews each Lease every quarter of it, like the kubelet.
    lease_seconds: int = 40
    # Delay between node status heartbeats; None keeps KWOK's default stage (about 10 min:
    # with Leases the status need not be fresh).
    node_heartbeat_ms: int | None = None
    # kube-controller-manager's --node-monitor-grace-period and --node-startup-grace-period
    # (None: its defaults, 50 s and 1 min): a node whose Lease is older, or that KWOK has not
    # made Ready that long after its creation, goes Unknown. Raise it with ``lease_seconds``
    # (benches: 10,000 nodes).
    node_monitor_grace_seconds: int | None = None
    # Client QPS of kube-controller-manager and kube-scheduler (None: their defaults, 20 and 50;
    # kwokctl's --disable-qps-limits uses 5000): a ReplicaSet of 1,000 pods at 20 QPS takes 50 s.
    api_qps: int | None = None


def kwok_config(options: Scheduling, workdir: Path) -> Path:
    """Write the KWOK controller's config: the pinned default stages, Tessera's pod-delete."""
    upstream = options.kwok_bin.parent / STAGES_FILE
    if not upstream.is_file():
        raise FileNotFoundError(f"kwok: no {upstream} (hack/build-tool.sh kwok writes it)")
    stages = [doc for doc in yaml.safe_load_all(upstream.read_text()) if doc]
    if options.node_heartbeat_ms is not None:
        for stage in stages:
            if stage["metadata"]["name"] == NODE_HEARTBEAT_STAGE:
                stage["spec"]["delay"] = {
                    "durationMilliseconds": options.node_heartbeat_ms,
                    "jitterDurationMilliseconds": options.node_heartbeat_ms * 11 // 10,
                }
    stages.append(POD_DELETE_AFTER_GRACE)
    path = workdir / "kwok.yaml"
    path.write_text(yaml.safe_dump_all(stages, sort_keys=False))
    return path


def scheduler_args(kubeconfig: Path, port: int) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # token authentication only: no client CA in kube-system/extension-apiserver-authentication
        "--authentication-skip-lookup=true",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--v=1",
    ]


def client_args(options: Scheduling) -> list[str]:
    """kube-scheduler's extra flags (its client QPS, burst twice that)."""
    if options.api_qps is None:
        return []
    return [f"--kube-api-qps={options.api_qps}", f"--kube-api-burst={2 * options.api_qps}"]


def controller_manager_args(options: Scheduling) -> list[str]:
    """kube-controller-manager's extra flags for ``options``: none with the defaults."""
    grace = options.node_monitor_grace_seconds
    if not grace:
        return client_args(options)
    return [
        *client_args(options),
        f"--node-monitor-grace-period={grace}s",
        f"--node-startup-grace-period={grace}s",
    ]


def kwok_args(options: Scheduling, kubeconfig: Path, config: Path, port: int) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
        f"--node-lease-duration-seconds={options.lease_seconds}",
        "--cidr=10.244.0.0/16",  # pod IPs, apart from the service range 10.0.0.0/24
        f"--server-address=127.0.0.1:{port}",  # /healthz, to wait for it
    ]
