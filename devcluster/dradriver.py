"""The simulated NVIDIA DRA driver: its GPU kubelet plugin, publishing one ResourceSlice a node.

The plugin is a DaemonSet (``nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin``, the
defaults of a NodePoolGeometry's ``spec.dra.kubeletPlugin``) on the nodes labelled
``nvidia.com/gpu.deploy.dra-driver=true`` (``fleet.DRA_NODE_LABEL``): the real DaemonSet
controller creates its pods, kube-scheduler binds them and KWOK runs them. What the container
would do runs here: when a plugin pod with a new uid is Running on a node, the node's GPUs and
their MIG state — as the simulated MIG manager left them (``gpunode``) — are enumerated once and
published as the ResourceSlice ``<node>-gpu.nvidia.com`` (driver ``gpu.nvidia.com``, pool = node,
``resourceSliceCount`` 1, the pool's generation one higher than before, owned by the Node so that
deleting the node deletes it). Devices, attributes and capacities: ``dradevices``. Nothing is
republished after a MIG change until the pod is restarted (deleted: the DaemonSet controller
makes a new one), as static MIG devices are enumerated only at plugin start (dra.md §5.5).
When a plugin pod is gone (deleted: its node unlabelled, an uninstall, a restart), its
plugin has unregistered; as the kubelet does then, the slice it published is deleted unless a
plugin pod runs on the node again within ``wipe_after`` seconds (30, the kubelet's delay).

The slice records the uid of the pod that published it (``sim.tessera.io/kubelet-plugin-pod``),
so a restarted simulator does not republish for a pod that already did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devcluster import dradevices, fleet, hardware, migmanager
from devcluster.gpunode import APPLIED_MIG, Names
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

log = logging.getLogger(__name__)
NAMESPACE = "nvidia-dra-driver-gpu"
DAEMONSET = "nvidia-dra-driver-gpu-kubelet-plugin"
POD_ANNOTATION = "sim.tessera.io/kubelet-plugin-pod"
PLUGIN_LABELS = {
    "app.kubernetes.io/name": "nvidia-dra-driver-gpu",
    "app.kubernetes.io/component": "kubelet-plugin",
}
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
MIG_PARTED = Names()  # the mig-parted ConfigMap the MIG manager reads
SLICES = path_of("resource.k8s.io/v1", "resourceslices")
WIPE_AFTER_S = 30.0
"""How long the kubelet lets an unregistered DRA plugin come back before it deletes the
plugin's ResourceSlices (kubelet's DRA manager, ``defaultWipingDelay``, Kubernetes 1.34)."""


@dataclass(frozen=True)
class Plugin:
    """Where the kubelet plugin's DaemonSet lives (NodePoolGeometry ``spec.dra.kubeletPlugin``)."""

    namespace: str = NAMESPACE
    daemonset: str = DAEMONSET


def slice_name(node: str) -> str:
    return f"{node}-{dradevices.DRIVER}"


def daemonset(plugin: Plugin = Plugin()) -> dict[str, Any]:
    """The kubelet plugin's DaemonSet: on DRA nodes, tolerating every taint (a node agent's
    pod must come back on a cordoned or tainted node, mid-rollout, after a restart)."""
    spec = {
        "nodeSelector": {fleet.DRA_NODE_LABEL: "true"},
        "tolerations": [{"operator": "Exists"}],
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "gpus", "image": IMAGE}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": plugin.daemonset, "namespace": plugin.namespace},
        "spec": {
            "selector": {"matchLabels": PLUGIN_LABELS},
            "template": {"metadata": {"labels": PLUGIN_LABELS}, "spec": spec},
        },
    }


def layouts(
    kube: Kube, node: Mapping[str, Any], names: Names = MIG_PARTED
) -> list[dict[str, int] | None]:
    """Each GPU's MIG instances as the MIG manager left them (None: MIG off): the applied config
    when it reports ``success``, else every GPU whole (as the simulated device plugin reads it)."""
    meta = node["metadata"]
    labels = meta.get("labels") or {}
    count = int(labels.get(c.GPU_COUNT_LABEL, "0"))
    applied = (meta.get("annotations") or {}).get(APPLIED_MIG)
    if labels.get(c.MIG_CONFIG_STATE_LABEL) != "success" or not applied:
        return [None] * count
    cm = kube.get_or_none(path_of("v1", "configmaps", names.mig_name, names.mig_namespace))
    text = (cm or {}).get("data", {}).get(c.MIG_PARTED_CONFIGMAP_KEY, "")
    return migmanager.layouts(count, migmanager.config_entries(text, applied))


def resource_slice(
    node: Mapping[str, Any], devices: list[dict[str, Any]], generation: int, pod_uid: str
) -> dict[str, Any]:
    name = node["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(name),
            "annotations": {POD_ANNOTATION: pod_uid},
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {
            "driver": dradevices.DRIVER,
            "pool": {"name": name, "generation": generation, "resourceSliceCount": 1},
            "nodeName": name,
            "devices": devices,
        },
    }


class DraDriver:
    """The kubelet plugin's pods, watched: each new one Running publishes its node's slice."""

    def __init__(
        self,
        kube: Kube,
        *,
        names: Names = MIG_PARTED,
        plugin: Plugin = Plugin(),
        wipe_after: float = WIPE_AFTER_S,
    ) -> None:
        self.kube = kube
        self.wipe_after = wipe_after
        self.names = names
        self.plugin = plugin
        pods = path_of("v1", "pods", namespace=plugin.namespace)
        self.informer = Informer(kube, pods, self._on_pod, name="sim-dra-driver")
        self._published: dict[str, str] = {}  # node -> uid of the plugin pod that published
        self._live: dict[str, str] = {}  # node -> uid of its Running plugin pod
        self._lock = threading.Lock()

    def start(self) -> DraDriver:
        """Install the DaemonSet (and its namespace) if missing, then watch its pods."""
        _ensure(self.kube, "/api/v1/namespaces", {"metadata": {"name": self.plugin.namespace}})
        ds = daemonset(self.plugin)
        _ensure(self.kube, path_of("apps/v1", "daemonsets", namespace=self.plugin.namespace), ds)
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        owners = {(o.get("kind"), o.get("name")) for o in meta.get("ownerReferences") or []}
        if not node or ("DaemonSet", self.plugin.daemonset) not in owners:
            return
        if kind == "DELETED" or meta.get("deletionTimestamp") or not _running(pod):
            if self._live.get(node) == meta["uid"]:
                del self._live[node]
            if kind == "DELETED":  # its plugin unregistered: the kubelet wipes after a delay
                wipe = threading.Timer(self.wipe_after, self._wipe, (node, meta["uid"]))
                wipe.daemon = True
                wipe.start()
            return
        self._live[node] = meta["uid"]
        self._try(node, meta["uid"])

    def _try(self, node: str, pod_uid: str) -> None:
        """Publish for the pod unless it did; the API server away: again in a second."""
        with self._lock:
            if self._live.get(node) != pod_uid or self._published.get(node) == pod_uid:
                return
            try:
                self.publish(node, pod_uid)
            except ApiError as err:
                log.info("sim DRA driver: %s: %s; retrying", node, err)
                if not self.informer.stopped.is_set():
                    retry = threading.Timer(1.0, self._try, (node, pod_uid))
                    retry.daemon = True
                    retry.start()

    def _wipe(self, node: str, pod_uid: str) -> None:
        """``wipe_after`` seconds after plugin pod ``pod_uid`` went: unless a plugin pod runs
        on the node again (it re-registered), delete the slice that pod published, as the
        kubelet does (a newer pod's slice is never touched)."""
        with self._lock:
            if self.informer.stopped.is_set() or node in self._live:
                return
            if self._published.get(node) == pod_uid:
                del self._published[node]
            path = path_of("resource.k8s.io/v1", "resourceslices", slice_name(node))
            try:
                old = self.kube.get_or_none(path)
                if (
                    old is None
                    or old["metadata"].get("annotations", {}).get(POD_ANNOTATION) != pod_uid
                ):
                    return
                version = old["metadata"]["resourceVersion"]
                self.kube.delete(path, {"preconditions": {"resourceVersion": version}})
            except ApiError as err:  # gone already, or republished meanwhile: nothing to do
                log.info("sim DRA driver: %s: slice not withdrawn: %s", node, err)
                return
        log.info("sim DRA driver: %s: plugin pod %s gone, its ResourceSlice deleted", node, pod_uid)

    def publish(self, node_name: str, pod_uid: str) -> None:
        """Enumerate the node's GPUs now and write its ResourceSlice (unless ``pod_uid`` did)."""
        node = self.kube.get_or_none(path_of("v1", "nodes", node_name))
        if node is None:
            return
        path = path_of("resource.k8s.io/v1", "resourceslices", slice_name(node_name))
        old = self.kube.get_or_none(path)
        if (
            old is not None
            and old["metadata"].get("annotations", {}).get(POD_ANNOTATION) == pod_uid
        ):
            self._published[node_name] = pod_uid  # published before this simulator restarted
            return
        try:
            labels = node["metadata"].get("labels") or {}
            gpu = hardware.gpu(labels.get(c.GPU_PRODUCT_LABEL, ""))
            devices = dradevices.devices(node_name, gpu, layouts(self.kube, node, self.names))
        except (migmanager.MigError, hardware.UnknownHardwareError) as err:
            log.warning("sim DRA driver: %s: cannot enumerate GPUs: %s", node_name, err)
            return
        generation = int(old["spec"]["pool"]["generation"]) + 1 if old else 1
        body = resource_slice(node, devices, generation, pod_uid)
        self._write(path, old, body, node["metadata"]["uid"])
        self._published[node_name] = pod_uid
        log.info(
            "sim DRA driver: %s: %d devices, generation %d", node_name, len(devices), generation
        )

    def _write(
        self, path: str, old: dict[str, Any] | None, body: dict[str, Any], node_uid: str
    ) -> None:
        if old is not None:
            owners = {o.get("uid") for o in old["metadata"].get("ownerReferences") or []}
            if node_uid in owners:
                body["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                self.kube.replace(path, body)
                return
            self.kube.delete(path)  # a node of that name that no longer exists owned it
        self.kube.create(SLICES, body)


def plugin_pod(
    kube: Kube, node: str, plugin: Plugin = Plugin(), timeout: float = 60.0
) -> dict[str, Any]:
    """The kubelet plugin's live pod on ``node`` (created by the DaemonSet controller), Running."""

    def owned(pod: Mapping[str, Any]) -> bool:
        owners = {
            (o.get("kind"), o.get("name")) for o in pod["metadata"].get("ownerReferences") or []
        }
        return ("DaemonSet", plugin.daemonset) in owners and _running(pod)

    return fleet.daemonset_pod(
        kube,
        plugin.namespace,
        node,
        owned,
        f"Running pod of DaemonSet {plugin.namespace}/{plugin.daemonset}"
        " (DaemonSet controller, kube-scheduler, KWOK)",
        timeout,
    )


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


def _ensure(kube: Kube, collection: str, body: dict[str, Any]) -> None:
    try:
        kube.create(collection, body)
    except ApiError as err:
        if not err.conflict:
            raise
