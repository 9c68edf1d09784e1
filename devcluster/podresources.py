"""The kubelet's PodResources API on each simulated GPU node, over its simulated device manager.

KWOK plays the kubelet but has no device manager, so nothing in the dev cluster knows which
device IDs a pod holds. This does, for the nodes whose device plugin the simulator plays
(``gpunode.GpuNodeAgents(..., podresources=sim)`` publishes each node's devices here,
``gpuinventory``): an Informer on pods sees each pod bound to a node (``spec.nodeName`` set,
not terminal, not being deleted) and, as the kubelet's device manager admits it, gives each
container ``requests`` (``limits`` when no request) of every ``nvidia.com/*`` resource from the
node's free device IDs of that resource, lowest GPU first, then ID (init containers are left
out). A pod keeps its devices while it terminates; they are free again once it is gone from the
API or terminal. A pod bound before the node's devices were published waits for them, as the
kubelet's admission would. When the node lacks free devices the shortfall is logged and the
pod gets what there is (the scheduler should not have placed it).

Each node with published devices serves ``v1.PodResourcesLister`` (``List``,
``GetAllocatableResources``, ``Get``; messages ``podresources_proto``) on
``<workdir>/<node>/pod-resources/kubelet.sock`` — the kubelet's socket path under the node's
folder — one gRPC server per node, all on one thread pool. Devices are listed as the kubelet
lists them: one ``ContainerDevices`` per device ID, with its NUMA node (GPUs split evenly over
two). The node's folder also holds ``inventory.json`` and the fake ``nvidia-smi``
(``fake_nvidia_smi``) listing it.

``holders(node)`` says which GPUs each pod holds, by the simulator's own record, and
``refusal(node, layouts)`` is what the simulated MIG manager asks before it changes a layout:
a GPU whose layout would change while a pod holds one of its devices fails the apply, as
``nvidia-mig-parted`` fails on a GPU in use.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from devcluster import fake_nvidia_smi, gpuinventory
from devcluster import podresources_proto as proto
from devcluster.gpuinventory import Device, Inventory, Layout
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of

log = logging.getLogger(__name__)
PREFIX = "nvidia.com/"
SOCKET = Path("pod-resources") / "kubelet.sock"  # under the node's folder
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, the last one NUL
TERMINAL = ("Succeeded", "Failed")


@dataclass
class _Pod:
    namespace: str
    name: str
    uid: str
    created: str
    containers: list[tuple[str, dict[str, int]]]  # name, nvidia.com/* requested
    devices: dict[str, list[Device]] | None = None  # container -> devices; None: not admitted

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class _Node:
    name: str
    folder: Path
    inventory: Inventory | None = None
    pods: dict[str, _Pod] = field(default_factory=dict)  # by uid
    server: grpc.Server | None = None


def requested(container: Mapping[str, Any]) -> dict[str, int]:
    """The ``nvidia.com/*`` devices a container gets: its requests, else its limits."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {k: int(str(v)) for k, v in merged.items() if k.startswith(PREFIX) and int(str(v)) > 0}


def numa_node(gpu: int, count: int) -> int:
    """The NUMA node of GPU ``gpu`` of ``count``: the first half on 0, the rest on 1."""
    return 0 if count < 2 else gpu * 2 // count


class PodResourcesSim:
    """The simulated device manager and PodResources endpoint of every simulated GPU node."""

    def __init__(
        self, kube: Kube, workdir: Path | None = None, *, workers: int = 8, spread: bool = False
    ) -> None:
        """``spread``: hand out free devices in an order drawn from the pod's uid instead of
        lowest GPU first — a kubelet's device manager promises no order, and a bench whose
        two replicas per node would all sit on GPUs 0 and 1 measures nothing per GPU."""
        self.kube = kube
        self.spread = spread
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="tessera-podres-"))
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="podres")
        self.informer = Informer(
            kube,
            "/api/v1/pods",
            self.observe,
            name="sim-podresources",
            on_listing=self._on_listing,
            on_synced=self._on_synced,
        )
        self._nodes: dict[str, _Node] = {}
        self._where: dict[str, str] = {}  # pod uid -> node
        self._listed: set[str] | None = None  # uids seen by the list under way
        self._lock = threading.RLock()

    def start(self) -> PodResourcesSim:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()
        with self._lock:
            servers = [n.server for n in self._nodes.values() if n.server]
        for server in servers:
            server.stop(grace=None)
        self.executor.shutdown(wait=False, cancel_futures=True)

    # -- what tests, benches and agents use ---------------------------------------------------

    def folder(self, node: str) -> Path:
        return self.workdir / node

    def socket(self, node: str) -> Path:
        """The node's ``kubelet.sock`` (served once its devices are published)."""
        return self.folder(node) / SOCKET

    def nvidia_smi(self, node: str) -> Path:
        """The node's fake ``nvidia-smi`` (written once its devices are published)."""
        return self.folder(node) / "nvidia-smi"

    def paths(self, node: str) -> tuple[Path, Path]:
        """(socket, nvidia-smi) of ``node``: what a node agent is pointed at."""
        return self.socket(node), self.nvidia_smi(node)

    def inventory(self, node: str) -> Inventory | None:
        with self._lock:
            found = self._nodes.get(node)
            return found.inventory if found else None

    def served(self) -> list[str]:
        """The nodes whose endpoint is up."""
        with self._lock:
            return sorted(n.name for n in self._nodes.values() if n.server)

    def assigned(self, node: str) -> dict[str, dict[str, dict[str, list[str]]]]:
        """``namespace/name`` -> container -> resource -> device IDs, of the pods holding any."""
        out: dict[str, dict[str, dict[str, list[str]]]] = {}
        with self._lock:
            for pod in self._node(node).pods.values():
                for container, devices in (pod.devices or {}).items():
                    for device in devices:
                        held = out.setdefault(pod.key, {}).setdefault(container, {})
                        held.setdefault(device.resource, []).append(device.id)
        return out

    def holders(self, node: str) -> dict[str, set[int]]:
        """``namespace/name`` -> the GPU indices its containers hold (by the sim's own record):
        what a node agent reading this endpoint and ``nvidia-smi -L`` should publish."""
        out: dict[str, set[int]] = {}
        with self._lock:
            for pod in self._node(node).pods.values():
                for devices in (pod.devices or {}).values():
                    out.setdefault(pod.key, set()).update(d.gpu for d in devices)
        return out

    # -- what the simulated device plugin and MIG manager call --------------------------------

    def publish(self, inventory: Inventory) -> None:
        """The device plugin (re)registered the node's devices: keep them, serve the node, and
        admit the pods that waited. Devices already assigned stay assigned (the kubelet's
        checkpoint), even where the new list lacks their ID."""
        folder = self.folder(inventory.node)
        gpuinventory.save(inventory, folder)
        with self._lock:
            node = self._node(inventory.node)
            node.inventory = inventory
            if node.server is None:
                fake_nvidia_smi.install(folder, inventory.node)
                node.server = self._serve(inventory.node)
            waiting = sorted(
                (p for p in node.pods.values() if p.devices is None),
                key=lambda p: (p.created, p.key),
            )
            for pod in waiting:
                self._admit(node, pod)

    def refusal(self, node: str, layouts: Sequence[Layout]) -> str | None:
        """Why the MIG manager cannot apply ``layouts`` now: a GPU whose layout would change
        holds a pod's device. Holders the API no longer has (a missed event) are freed first."""
        with self._lock:
            found = self._nodes.get(node)
            if found is None or found.inventory is None:
                return None
            changed = set(found.inventory.changed(layouts))
            suspects = [
                (pod.uid, pod.namespace, pod.name)
                for pod in found.pods.values()
                if changed & {d.gpu for ds in (pod.devices or {}).values() for d in ds}
            ]
        for uid, namespace, name in suspects:
            live = self.kube.get_or_none(path_of("v1", "pods", name, namespace))
            if _gone(live, uid):
                self._release(uid)
        busy: dict[int, list[str]] = {}
        for key, gpus in sorted(self.holders(node).items()):
            for gpu in sorted(gpus & changed):
                busy.setdefault(gpu, []).append(key)
        if not busy:
            return None
        return "; ".join(
            f"GPU {gpu}: unable to destroy GPU instances: In use by another client "
            f"(held by {', '.join(pods)})"
            for gpu, pods in sorted(busy.items())
        )

    def forget(self, node: str) -> None:
        """The node is gone: stop its endpoint and drop what it held."""
        with self._lock:
            found = self._nodes.pop(node, None)
            for uid in found.pods if found else ():
                self._where.pop(uid, None)
        if found and found.server:
            found.server.stop(grace=None)

    # -- the device manager -------------------------------------------------------------------

    def _node(self, name: str) -> _Node:
        with self._lock:
            if name not in self._nodes:
                self._nodes[name] = _Node(name, self.folder(name))
            return self._nodes[name]

    def _on_listing(self) -> None:
        with self._lock:
            self._listed = set()

    def _on_synced(self) -> None:
        """A pod the list no longer has went away during a watch gap: free its devices."""
        with self._lock:
            listed, self._listed = self._listed or set(), None
            for uid in set(self._where) - listed:
                self._release(uid)

    def observe(self, kind: str, pod: dict[str, Any]) -> None:
        """A pod event, as the Informer hands it over (tests feed it directly)."""
        meta = pod["metadata"]
        uid = meta["uid"]
        with self._lock:
            if self._listed is not None and kind == "SYNC":
                self._listed.add(uid)
            phase = (pod.get("status") or {}).get("phase")
            if kind == "DELETED" or phase in TERMINAL:
                self._release(uid)
                return
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or uid in self._where or meta.get("deletionTimestamp"):
                return  # unbound, admitted already (its devices stay), or never to start
            entry = _Pod(
                meta["namespace"],
                meta["name"],
                uid,
                meta.get("creationTimestamp", ""),
                [(c["name"], requested(c)) for c in pod["spec"].get("containers") or []],
            )
            node = self._node(node_name)
            node.pods[uid] = entry
            self._where[uid] = node_name
            if node.inventory is not None:
                self._admit(node, entry)

    def _admit(self, node: _Node, pod: _Pod) -> None:
        assert node.inventory is not None
        taken = {d.id for p in node.pods.values() for ds in (p.devices or {}).values() for d in ds}
        free = [d for d in node.inventory.devices if d.id not in taken]
        pod.devices = {}
        for container, wants in pod.containers:
            mine: list[Device] = []
            for resource, count in sorted(wants.items()):
                offered = [d for d in free if d.resource == resource]
                if self.spread:
                    offered.sort(
                        key=lambda d: hashlib.sha256(f"{pod.uid}/{d.id}".encode()).digest()
                    )
                offered = offered[:count]
                if len(offered) < count:
                    log.warning(
                        "sim device manager: %s: %s/%s wants %d %s, %d free",
                        node.name, pod.key, container, count, resource, len(offered),
                    )  # fmt: skip
                mine += offered
                free = [d for d in free if d not in offered]
            if mine:
                pod.devices[container] = mine

    def _release(self, uid: str) -> None:
        with self._lock:
            node = self._where.pop(uid, None)
            if node is not None and node in self._nodes:
                self._nodes[node].pods.pop(uid, None)

    # -- the gRPC endpoint --------------------------------------------------------------------

    def _serve(self, node: str) -> grpc.Server:
        sock = self.socket(node)
        if len(str(sock)) > MAX_SOCKET_PATH:
            raise ValueError(f"socket path longer than {MAX_SOCKET_PATH} bytes: {sock}")
        sock.parent.mkdir(parents=True, exist_ok=True)
        sock.unlink(missing_ok=True)
        handlers = {
            method: grpc.unary_unary_rpc_method_handler(
                _bind(getattr(self, f"_rpc_{method}"), node),
                request_deserializer=proto.message(request).FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for method, (request, _) in proto.METHODS.items()
        }
        server = grpc.server(
            self.executor, handlers=[grpc.method_handlers_generic_handler(proto.SERVICE, handlers)]
        )
        server.add_insecure_port(f"unix:{sock}")
        server.start()
        return server

    def _snapshot(self, node: str) -> tuple[Inventory | None, list[_Pod]]:
        with self._lock:
            found = self._nodes.get(node)
            if found is None:
                return None, []
            pods = sorted(found.pods.values(), key=lambda p: p.key)
            return found.inventory, [_Pod(**vars(p)) for p in pods if p.devices is not None]

    def _rpc_List(self, node: str, request: Any, context: grpc.ServicerContext) -> Any:
        inventory, pods = self._snapshot(node)
        response = proto.message("ListPodResourcesResponse")()
        for pod in pods:
            _fill(response.pod_resources.add(), pod, inventory)
        return response

    def _rpc_GetAllocatableResources(
        self, node: str, request: Any, context: grpc.ServicerContext
    ) -> Any:
        inventory, _ = self._snapshot(node)
        response = proto.message("AllocatableResourcesResponse")()
        _devices(response.devices, (inventory.devices if inventory else ()), inventory)
        return response

    def _rpc_Get(self, node: str, request: Any, context: grpc.ServicerContext) -> Any:
        inventory, pods = self._snapshot(node)
        for pod in pods:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                response = proto.message("GetPodResourcesResponse")()
                _fill(response.pod_resources, pod, inventory)
                return response
        context.abort(
            grpc.StatusCode.UNKNOWN,
            f"pod {request.pod_name} in namespace {request.pod_namespace} not found",
        )
        raise AssertionError("unreachable")  # abort raises


def _bind(method: Any, node: str) -> Any:
    return lambda request, context: method(node, request, context)


def _gone(live: Mapping[str, Any] | None, uid: str) -> bool:
    if live is None or live["metadata"].get("uid") != uid:
        return True
    return (live.get("status") or {}).get("phase") in TERMINAL


def _fill(message: Any, pod: _Pod, inventory: Inventory | None) -> None:
    message.name, message.namespace = pod.name, pod.namespace
    for container, _ in pod.containers:
        out = message.containers.add(name=container)
        _devices(out.devices, (pod.devices or {}).get(container, []), inventory)


def _devices(field: Any, devices: Iterable[Device], inventory: Inventory | None) -> None:
    count = len(inventory.gpus) if inventory else 1
    for device in devices:
        entry = field.add(resource_name=device.resource, device_ids=[device.id])
        entry.topology.nodes.add(ID=numa_node(device.gpu, count))
