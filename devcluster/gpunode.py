"""What a GPU node's agents would do, simulated over the real label protocols.

On a real node three NVIDIA components turn labels and ConfigMaps into
allocatable resources: the MIG manager (``nvidia.com/mig.config`` →
``nvidia.com/mig.config.state`` pending/success/failed, reading the
mig-parted ConfigMap), the device plugin's config-manager
(``nvidia.com/device-plugin.config`` → a key of the device-plugin ConfigMap)
and GPU Feature Discovery (labels). This agent plays all three for every
simulated GPU node, so Tessera is tested against the protocol, not against
itself: whether a layout fits a GPU is decided from the simulator's own placement table
(``migmanager``, ``mig_placements.yaml``), never by Tessera's code. Fault injection by node annotation: ``sim.tessera.io/mig-fail``
makes the MIG manager report failed (``true``: every time, ``once``: the next
apply only, ``except:<config>``: for every config but that one), ``sim.tessera.io/mig-stuck`` leaves it
pending forever.

With ``podresources`` (a ``podresources.PodResourcesSim``, opt-in) the device plugin also
publishes each node's devices there — GPU and MIG UUIDs and device IDs (``gpuinventory``) —
which the simulated kubelet hands to pods and serves over the PodResources API, and the MIG
manager fails (``sim.tessera.io/mig-error``) a config that changes the layout of a GPU on which
a pod still holds a device.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from devcluster import fleet, gpuinventory, hardware, migmanager
from devcluster.migmanager import MigError
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

if TYPE_CHECKING:
    from devcluster.podresources import PodResourcesSim

log = logging.getLogger(__name__)
APPLIED_MIG = "sim.tessera.io/mig-applied"
APPLIED_PLUGIN = "sim.tessera.io/device-plugin-applied"
PLUGIN_ERROR = "sim.tessera.io/device-plugin-error"
MIG_ERROR = "sim.tessera.io/mig-error"
FAIL = "sim.tessera.io/mig-fail"
STUCK = "sim.tessera.io/mig-stuck"


@dataclass(frozen=True)
class Names:
    mig_namespace: str = c.MIG_PARTED_CONFIGMAP_NAMESPACE
    mig_name: str = c.MIG_PARTED_CONFIGMAP_NAME
    plugin_namespace: str = c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE
    plugin_name: str = c.DEVICE_PLUGIN_CONFIGMAP_NAME


def shared_resources(
    base: Mapping[str, int], config: Mapping[str, Any] | None
) -> tuple[dict[str, int], int, str]:
    """Apply a device-plugin config's sharing section: (resources, replicas, strategy label)."""
    sharing = (config or {}).get("sharing") or {}
    strategy, section = "none", None
    if sharing.get("timeSlicing"):
        strategy, section = "time-slicing", sharing["timeSlicing"]
    elif sharing.get("mps"):
        strategy, section = "mps", sharing["mps"]
    if section is None:
        return dict(base), 1, strategy
    rules = {r["name"]: r for r in section.get("resources", [])}
    out: dict[str, int] = {}
    replicas_label = 1
    for name, count in base.items():
        rule = rules.get(name)
        if rule is None:
            out[name] = out.get(name, 0) + count
            continue
        replicas = int(rule.get("replicas", 1))
        renamed = rule.get("rename") or (
            f"{name}.shared" if section.get("renameByDefault") else name
        )
        out[renamed] = out.get(renamed, 0) + count * replicas
        if name == "nvidia.com/gpu" or replicas_label == 1:
            replicas_label = replicas
    return out, replicas_label, strategy


class GpuNodeAgents:
    def __init__(
        self,
        kube: Kube,
        *,
        reconfigure_seconds: float = 0.5,
        names: Names = Names(),
        podresources: PodResourcesSim | None = None,
    ) -> None:
        self.kube = kube
        self.podresources = podresources
        self.delay = reconfigure_seconds
        self.names = names
        self.informer = Informer(kube, "/api/v1/nodes", self._on_node, name="sim-gpu-agents")
        self._busy: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def start(self) -> GpuNodeAgents:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    # -- reactions ---------------------------------------------------------------------------

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels", {})
        if kind == "DELETED" and self.podresources:
            self.podresources.forget(node["metadata"]["name"])
        if kind == "DELETED" or c.GPU_PRODUCT_LABEL not in labels:
            return
        if labels.get(c.GPU_WORKLOAD_CONFIG_LABEL, "container") != "container":
            return  # a VM node (vm-vgpu, vm-passthrough): no container stack (``vgpunode``)
        ann = node["metadata"].get("annotations", {})
        name = node["metadata"]["name"]
        wanted = labels.get(c.MIG_CONFIG_LABEL)
        state = labels.get(c.MIG_CONFIG_STATE_LABEL)
        if wanted and (ann.get(APPLIED_MIG) != wanted or state not in ("success", "failed")):
            # Each node's MIG manager runs on that node: its reaction goes on a thread of its
            # own, so a wave of a hundred nodes is not served one "pending" write after another.
            stuck = ann.get(STUCK) == "true"
            if not stuck and self._claim(name, wanted):
                worker = threading.Thread(
                    target=self._reconfigure, args=(name, wanted, state), daemon=True
                )
                worker.start()
            elif state != "pending":
                fleet.patch_node(self.kube, name, {c.MIG_CONFIG_STATE_LABEL: "pending"})
            return
        plugin_key = labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL, "")
        unpublished = self.podresources is not None and self.podresources.inventory(name) is None
        if plugin_key != ann.get(APPLIED_PLUGIN, "") or unpublished:
            self._refresh(name)

    def _claim(self, node: str, config: str) -> bool:
        with self._lock:
            if (node, config) in self._busy:
                return False
            self._busy.add((node, config))
            return True

    def _reconfigure(self, name: str, wanted: str, state: str | None) -> None:
        """Say ``pending``, take ``delay`` seconds from the label seen, then apply."""
        deadline = time.monotonic() + self.delay
        if state != "pending":
            try:
                fleet.patch_node(self.kube, name, {c.MIG_CONFIG_STATE_LABEL: "pending"})
            except ApiError as err:  # the API server is away: the re-list hands the node back
                log.info("sim MIG manager: %s: %s; retrying on the next event", name, err)
                with self._lock:
                    self._busy.discard((name, wanted))
                return
        time.sleep(max(0.0, deadline - time.monotonic()))  # the simulated reconfiguration
        self._apply_mig(name, wanted)

    def _apply_mig(self, name: str, wanted: str) -> None:
        try:
            node = self.kube.get(path_of("v1", "nodes", name))
            if node["metadata"].get("labels", {}).get(c.MIG_CONFIG_LABEL) != wanted:
                return  # the label moved on while we "reconfigured"
            injected = node["metadata"].get("annotations", {}).get(FAIL)
            if injected == "once":
                fleet.patch_node(self.kube, name, {}, {FAIL: None})
            if injected in ("true", "once") or (
                injected and injected.startswith("except:") and injected != f"except:{wanted}"
            ):
                raise MigError("injected failure")
            entries = self._mig_entries(wanted)
            self._advertised(node, entries)  # fails like mig-parted does
            if self.podresources:  # a GPU in use cannot be repartitioned
                count = int(node["metadata"]["labels"].get(c.GPU_COUNT_LABEL, "0"))
                why = self.podresources.refusal(name, migmanager.layouts(count, entries))
                if why:
                    raise MigError(why)
            fleet.patch_node(
                self.kube, name, {c.MIG_CONFIG_STATE_LABEL: "success"}, {APPLIED_MIG: wanted}
            )
            self._refresh(name)
        except (MigError, hardware.UnknownHardwareError) as err:
            fleet.patch_node(
                self.kube,
                name,
                {c.MIG_CONFIG_STATE_LABEL: "failed"},
                {APPLIED_MIG: wanted, MIG_ERROR: str(err)},
            )
        except ApiError as err:
            # The API server is away (a fault test restarts it). The node still says
            # pending, so the re-list after it returns hands the node back to us.
            log.info("sim MIG manager: %s: %s; retrying on the next event", name, err)
        finally:
            with self._lock:
                self._busy.discard((name, wanted))

    def _refresh(self, name: str) -> None:
        """Recompute what the device plugin advertises and what GFD labels say."""
        node = self.kube.get(path_of("v1", "nodes", name))
        labels = node["metadata"].get("labels", {})
        if fleet.DRA_NODE_LABEL in labels:
            return  # the DRA stack's node: no device plugin (the DRA driver announces the GPUs)
        if labels.get("gpu") == "on":
            return  # HAMi's node (its DaemonSet's nodeSelector): HAMi's plugin runs (hami_nvidia)
        applied = (
            node["metadata"].get("annotations", {}).get(APPLIED_MIG)
            if labels.get(c.MIG_CONFIG_STATE_LABEL) == "success"
            else None
        )
        try:
            entries = self._mig_entries(applied) if applied else []
            base = self._advertised(node, entries)
        except (MigError, hardware.UnknownHardwareError):
            return  # nothing a device plugin could advertise from
        key = labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL, "")
        config, error = self._plugin_config(key)
        if error:
            fleet.patch_node(self.kube, name, {}, {PLUGIN_ERROR: error, APPLIED_PLUGIN: key})
            return
        resources, replicas, sharing = shared_resources(base, config)
        if self.podresources:  # the devices behind the counts, before the scheduler sees them
            layouts = migmanager.layouts(int(labels.get(c.GPU_COUNT_LABEL, "0")), entries)
            inventory = gpuinventory.build(
                name,
                hardware.gpu(labels[c.GPU_PRODUCT_LABEL]),
                layouts,
                labels.get(c.MIG_STRATEGY_LABEL, "mixed"),
                config,
                self.podresources.inventory(name),
            )
            self.podresources.publish(inventory)
        fleet.publish_devices(self.kube, node, "nvidia.com/", resources)
        fleet.patch_node(
            self.kube,
            name,
            {c.GPU_REPLICAS_LABEL: str(replicas), c.GPU_SHARING_STRATEGY_LABEL: sharing},
            {APPLIED_PLUGIN: key, PLUGIN_ERROR: None},
        )

    @staticmethod
    def _advertised(node: Mapping[str, Any], entries: list[Mapping[str, Any]]) -> dict[str, int]:
        """MIG resources of the node's GPUs under ``entries``; MigError when a GPU cannot hold
        its layout on the simulator's own placement table."""
        labels = node["metadata"].get("labels", {})
        return migmanager.resources(
            hardware.gpu(labels[c.GPU_PRODUCT_LABEL]),
            int(labels.get(c.GPU_COUNT_LABEL, "0")),
            entries,
            labels.get(c.MIG_STRATEGY_LABEL, "mixed"),
        )

    # -- API plumbing ------------------------------------------------------------------------

    def _mig_entries(self, config_name: str) -> list[Mapping[str, Any]]:
        cm = self.kube.get_or_none(
            path_of("v1", "configmaps", self.names.mig_name, self.names.mig_namespace)
        )
        return migmanager.config_entries(
            (cm or {}).get("data", {}).get(c.MIG_PARTED_CONFIGMAP_KEY, ""), config_name
        )

    def _plugin_config(self, key: str) -> tuple[Mapping[str, Any] | None, str]:
        if not key:
            return None, ""
        cm = self.kube.get_or_none(
            path_of("v1", "configmaps", self.names.plugin_name, self.names.plugin_namespace)
        )
        data = (cm or {}).get("data", {})
        if key not in data:
            return None, f"config-manager: no config named {key!r} in the device-plugin ConfigMap"
        loaded: Mapping[str, Any] = yaml.safe_load(data[key]) or {}
        return loaded, ""
