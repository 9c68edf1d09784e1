"""The simulated NVIDIA vGPU Device Manager and sandbox device plugin of every vm-vgpu node.

The device manager (``nvidia-k8s-vgpu-dm``, vgpu.md §1.3) runs on nodes labelled
``nvidia.com/gpu.deploy.vgpu-device-manager=true``, one daemon per node, as the real one does:

* at start it applies the node's ``nvidia.com/vgpu.config`` — or, the label empty, its default
  config (``default``, the GPU Operator's ``vgpuDeviceManager.config.default``) — then only a
  **change of the label's value** wakes it (the same value again, an edited ConfigMap or a
  removed label do nothing);
* it reads the config from the ConfigMap (``gpu-operator/tessera-vgpu-devices-config``, key
  ``config.yaml``) with the real parser's strictness (``vgpuconfig``): a config it cannot parse
  or find is ``failed`` at once; one already in place is ``success`` at once;
* otherwise: state ``pending``; the sandbox operands paused through their deploy labels
  (``paused-for-vgpu-change`` unless ``false``/absent); each changed GPU's vGPU devices all
  deleted and the new ones created as the board allows (``vgpumanager``, from its own table
  ``vgpu_boards.yaml``); the deploy labels restored to ``true``; ``success`` or ``failed``.

It never cordons or drains. The node's vGPU devices (its "hardware") are the annotation
``sim.tessera.io/vgpu-devices`` (JSON, one ``{type: count}`` per GPU); the last failure is
``sim.tessera.io/vgpu-error``. The sandbox device plugin runs where its deploy label is
``true`` and advertises one ``nvidia.com/NVIDIA_<type>`` per type in allocatable and capacity
(``sim.tessera.io/vgpu-mdev-prefix: GRID``: an older driver's ``GRID_<type>``); paused, its
resources read 0 allocatable (the kubelet's view of a plugin gone; capacity kept).

Faults by node annotation: ``sim.tessera.io/vgpu-fail`` (``true``: every apply, ``once``: the
next one, ``except:<config>``: every config but that one) fails an apply after the first GPU's
devices were deleted; ``sim.tessera.io/vgpu-stuck: "true"`` leaves it ``pending``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devcluster import fleet, vgpuboards, vgpumanager
from devcluster.vgpuconfig import VgpuError, config
from devcluster.vgpufleet import (
    PAUSED,
    SANDBOX_PLUGIN_LABEL,
    SANDBOX_VALIDATOR_LABEL,
    VGPU_DM_LABEL,
)
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

log = logging.getLogger(__name__)
DEVICES = "sim.tessera.io/vgpu-devices"
ERROR = "sim.tessera.io/vgpu-error"
APPLIED = "sim.tessera.io/vgpu-applied"  # the config of the last verdict (tests wait on it)
MDEV_PREFIX = "sim.tessera.io/vgpu-mdev-prefix"
FAIL = "sim.tessera.io/vgpu-fail"
STUCK = "sim.tessera.io/vgpu-stuck"
OPERANDS = (SANDBOX_PLUGIN_LABEL, SANDBOX_VALIDATOR_LABEL)


@dataclass(frozen=True)
class Names:
    namespace: str = c.VGPU_CONFIGMAP_NAMESPACE
    name: str = c.VGPU_CONFIGMAP_NAME
    default_config: str = "default"


def devices_of(node: Mapping[str, Any]) -> list[dict[str, int]]:
    """The node's vGPU devices per GPU (none yet: every GPU empty)."""
    meta = node["metadata"]
    raw = (meta.get("annotations") or {}).get(DEVICES)
    count = int((meta.get("labels") or {}).get(c.GPU_COUNT_LABEL, "0"))
    found: list[dict[str, int]] = json.loads(raw) if raw else []
    return found + [{} for _ in range(count - len(found))]


class _Daemon:
    """One node's ``nvidia-k8s-vgpu-dm``: the label's last value seen, and the last read."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.current = ""
        self.last_read = ""
        self.stopped = False

    def set(self, value: str) -> None:  # the informer: only a changed value gets here
        with self.cond:
            self.current = value
            if value:
                self.cond.notify_all()

    def get(self) -> str | None:  # waits for a value other than the last read (None: stop)
        with self.cond:
            if self.last_read == self.current and not self.stopped:
                self.cond.wait()
            if self.stopped:
                return None
            self.last_read = self.current
            return self.last_read

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


class VgpuNodeAgents:
    def __init__(
        self, kube: Kube, *, reconfigure_seconds: float = 0.5, names: Names = Names()
    ) -> None:
        self.kube = kube
        self.delay = reconfigure_seconds
        self.names = names
        self.informer = Informer(kube, "/api/v1/nodes", self._on_node, name="sim-vgpu-agents")
        self._daemons: dict[str, _Daemon] = {}
        self._labels: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(self) -> VgpuNodeAgents:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()
        with self._lock:
            for daemon in self._daemons.values():
                daemon.stop()

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        running = kind != "DELETED" and labels.get(VGPU_DM_LABEL) == "true"
        if kind != "DELETED" and SANDBOX_PLUGIN_LABEL in labels:
            self._plugin(node)
        with self._lock:
            daemon = self._daemons.get(name)
            if not running:
                if daemon:
                    daemon.stop()
                    del self._daemons[name]
                    self._labels.pop(name, None)
                return
            value = labels.get(c.VGPU_CONFIG_LABEL, "")
            if daemon is None:
                daemon = self._daemons[name] = _Daemon()
                daemon.current = daemon.last_read = value or self.names.default_config
                threading.Thread(target=self._run, args=(name, daemon), daemon=True).start()
            elif value != self._labels.get(name):
                daemon.set(value)
            self._labels[name] = value

    # -- the device manager -------------------------------------------------------------------

    def _run(self, name: str, daemon: _Daemon) -> None:
        selected: str | None = daemon.last_read
        while selected is not None:
            try:
                self._update(name, selected)
            except ApiError as err:  # the API server away: the next change is served again
                log.info("sim vGPU device manager: %s: %s", name, err)
            except Exception:  # this node's daemon must live on, or its changes go unseen
                log.exception("sim vGPU device manager: %s: applying %s failed", name, selected)
            selected = daemon.get()

    def _update(self, name: str, selected: str) -> None:
        node = self.kube.get_or_none(path_of("v1", "nodes", name))
        if node is None:
            return
        ann = node["metadata"].get("annotations") or {}
        try:
            board = vgpuboards.board(node["metadata"]["labels"].get(c.GPU_PRODUCT_LABEL, ""))
            specs = config(self._config_text(), selected)
        except (VgpuError, vgpuboards.UnknownBoardError) as err:
            self._verdict(
                name, selected, f"unable to validate the selected vGPU configuration: {err}"
            )
            return
        gpus = devices_of(node)
        if vgpumanager.asserted(board, gpus, specs):
            self._verdict(name, selected, None)
            return
        paused = {
            k: PAUSED
            for k in OPERANDS
            if node["metadata"]["labels"].get(k) not in (None, "", "false")
        }
        fleet.patch_node(self.kube, name, {c.VGPU_CONFIG_STATE_LABEL: "pending", **paused})
        if ann.get(STUCK) == "true":
            return
        self.informer.stopped.wait(self.delay)  # the simulated reconfiguration
        injected = ann.get(FAIL, "")
        fail = injected in ("true", "once") or (
            injected.startswith("except:") and injected != f"except:{selected}"
        )
        after, error = vgpumanager.apply(board, gpus, specs, fail_on=0 if fail else None)
        hardware = {DEVICES: json.dumps(after), **({FAIL: None} if injected == "once" else {})}
        fleet.patch_node(
            self.kube, name, dict.fromkeys(paused, "true"), hardware
        )  # deferred: operands back
        self._verdict(name, selected, error and f"unable to apply config '{selected}': {error}")

    def _verdict(self, name: str, selected: str, error: str | None) -> None:
        state = "failed" if error else "success"
        log.info("sim vGPU device manager: %s: %s -> %s %s", name, selected, state, error or "")
        fleet.patch_node(
            self.kube, name, {c.VGPU_CONFIG_STATE_LABEL: state}, {APPLIED: selected, ERROR: error}
        )

    def _config_text(self) -> str:
        path = path_of("v1", "configmaps", self.names.name, self.names.namespace)
        cm = self.kube.get_or_none(path)
        if cm is None:
            raise VgpuError(f"read error: no ConfigMap {self.names.namespace}/{self.names.name}")
        return str((cm.get("data") or {}).get(c.VGPU_CONFIGMAP_KEY, ""))

    # -- the sandbox device plugin ------------------------------------------------------------

    def _plugin(self, node: Mapping[str, Any]) -> None:
        meta = node["metadata"]
        prefix = (meta.get("annotations") or {}).get(MDEV_PREFIX, "NVIDIA")
        advertised = vgpumanager.resources(devices_of(node), prefix)
        if (meta.get("labels") or {}).get(SANDBOX_PLUGIN_LABEL) == "true":
            fleet.publish_devices(self.kube, node, "nvidia.com/", advertised)
            return
        status = node.get("status") or {}
        alloc = dict(status.get("allocatable") or {})
        zeroed = {**alloc, **{k: "0" for k in alloc if k.startswith("nvidia.com/")}}
        if zeroed != alloc:
            patch = [{"op": "replace", "path": "/status/allocatable", "value": zeroed}]
            try:
                self.kube.patch(
                    path_of("v1", "nodes", meta["name"]) + "/status", patch, kind="json"
                )
            except ApiError as err:
                if not err.not_found:
                    raise
