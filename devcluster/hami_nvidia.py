"""HAMi's NVIDIA device plugin, simulated over its real protocol.

Why: a SharingPolicy with ``backend: HAMiCore`` only writes entries into HAMi's per-node config
(``kube-system/hami-device-plugin``, ``config.json``); on a real node HAMi's device plugin turns
them into capacity. Without it, HAMi-core capacity could only be predicted, never observed.

On every node labelled ``gpu=on`` (the chart's ``devicePlugin.nvidiaNodeSelector``) with GFD's
product label it does what the plugin does at start-up (hami_ascend.md §1.2, §1.3, §2.1): reads
the ``nvidia:`` defaults of ``hami-scheduler-device``/``device-config.yaml`` (``hami_config``),
merges the node's ``nodeconfig`` entry of ``config.json`` over them (a field the entry sets
wins: ``operatingmode``, ``devicesplitcount``, ``devicememoryscaling``, ``devicecorescaling``),
and registers per GPU (GFD ``nvidia.com/gpu.count``):

* ``hami-core`` (any mode other than ``mig``, ``mps`` included): ``count = devicesplitcount``,
  ``devmem = memory x devicememoryscaling``, ``devcore = devicecorescaling x 100``;
* ``mig``: ``count`` = the largest instance count of the profiles ``migProfileAllowlist``
  allows for the model (the simulator's own MIG table, ``hardware``), unscaled memory,
  ``devcore = 100``; a model the allowlist does not name registers nothing.

It advertises allocatable ``nvidia.com/gpu`` = the sum of ``count`` (one kubelet device per
slot) and writes the node annotation ``hami.io/node-nvidia-register``: a JSON list, one object
per GPU (``id``, ``index``, ``count``, ``devmem``, ``devcore``, ``type``, ``numa``, ``mode``,
``health``). A config the plugin cannot parse (``config.json`` not JSON, a field of the wrong
type, ``device-config.yaml`` broken) stops the plugin: nothing is registered, and the node is
annotated ``sim.tessera.io/hami-plugin-error`` with the reason.

Fault injection by node annotation: ``sim.tessera.io/hami-plugin-stuck: "true"`` keeps what the
plugin registered, as a real plugin does until its pod restarts; removing it is the restart.

Simplified: the plugin reads its config at start-up (a change takes a plugin restart); here a
change applies at once. GPUs are healthy, ``filterdevices`` is ignored, memory comes from the
simulator's tables (approximate), and no handshake annotation is written (HAMi's scheduler, which
reads it, is not simulated). Without ``hami-scheduler-device`` the chart's values apply (as if
installed; no MIG allowlist). GPU Operator's device plugin does not run on
these nodes (``gpunode`` leaves their ``nvidia.com/*`` alone).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devcluster import dradevices, fleet, hami_config, hardware
from devcluster.hami_plugin import HamiPlugin
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

Obj = dict[str, Any]
log = logging.getLogger(__name__)
NODE_LABEL, NODE_VALUE = "gpu", "on"  # the chart's devicePlugin.nvidiaNodeSelector
REGISTER_ANNOTATION = c.HAMI_NVIDIA_REGISTER_ANNOTATION
ERROR_ANNOTATION = "sim.tessera.io/hami-plugin-error"
STUCK_ANNOTATION = "sim.tessera.io/hami-plugin-stuck"
GPU = "nvidia.com/gpu"
_UINT, _FLOAT = ("devicesplitcount",), ("devicememoryscaling", "devicecorescaling")
# GPUs without MIG, which the MIG tables leave out: (NVML name, memory MiB).
WHOLE_GPUS = {"NVIDIA-A10": ("NVIDIA A10", 23028)}


@dataclass(frozen=True)
class NodeConfig:
    """The plugin's settings for one node after the merge."""

    mode: str
    split: int
    memory_scaling: float
    core_scaling: float


def node_config(
    defaults: hami_config.NvidiaDefaults, entries: list[Mapping[str, Any]], node: str
) -> NodeConfig:
    """``defaults`` with the node's ``nodeconfig`` entry over them (the first with its name)."""
    entry = next((e for e in entries if e.get("name") == node), {})
    mode = entry.get("operatingmode") or "hami-core"
    return NodeConfig(
        "mig" if mode == "mig" else "hami-core",
        int(entry.get("devicesplitcount") or defaults.split),
        float(entry.get("devicememoryscaling") or defaults.memory_scaling),
        float(entry.get("devicecorescaling") or defaults.core_scaling),
    )


def nodeconfig_entries(cm: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The ``nodeconfig`` list of ``config.json``; ConfigError where JSON decoding would fail."""
    text = ((cm or {}).get("data") or {}).get(c.HAMI_NVIDIA_CONFIGMAP_KEY)
    if not text:
        return []
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise hami_config.ConfigError(f"{c.HAMI_NVIDIA_CONFIGMAP_KEY}: {err}") from None
    entries = doc.get("nodeconfig") if isinstance(doc, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise hami_config.ConfigError(f"{c.HAMI_NVIDIA_CONFIGMAP_KEY}: nodeconfig is not a list")
    for entry in entries:
        for key in _UINT:
            value = entry.get(key)
            if value is not None and (type(value) is not int or value < 0):
                raise hami_config.ConfigError(f"nodeconfig {entry.get('name')}: {key} {value!r}")
        for key in _FLOAT:
            value = entry.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise hami_config.ConfigError(f"nodeconfig {entry.get('name')}: {key} {value!r}")
    return entries


def gpu_info(product: str) -> tuple[str, int]:
    """(NVML name, memory MiB) of a GFD product; UnknownHardwareError when the tables lack it."""
    if product in WHOLE_GPUS:
        return WHOLE_GPUS[product]
    info = dradevices.dra_gpu(hardware.gpu(product))
    return info.name, info.memory_mib


def mig_slots(product: str, allowlist: hami_config.NvidiaDefaults) -> int:
    """The largest instance count of the allowed profiles for ``product``; 0 when none."""
    try:
        profiles = hardware.gpu(product).profiles
    except hardware.UnknownHardwareError:
        return 0
    allowed = {
        p for models, names in allowlist.mig_allowlist if _named(product, models) for p in names
    }
    return max((profiles[p].max for p in allowed if p in profiles), default=0)


def _named(product: str, models: tuple[str, ...]) -> bool:
    return any(m.replace(" ", "-") in product for m in models)


def registration(
    node: str, product: str, gpus: int, cfg: NodeConfig, defaults: hami_config.NvidiaDefaults
) -> tuple[str, int]:
    """(the register annotation, allocatable nvidia.com/gpu) for ``gpus`` of ``product``."""
    name, memory = gpu_info(product)
    mig = cfg.mode == "mig"
    count = mig_slots(product, defaults) if mig else cfg.split
    devices = [
        {
            "id": "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"sim-gpu://{node}/{index}")),
            "index": index,
            "count": count,
            "devmem": memory if mig else int(memory * cfg.memory_scaling),
            "devcore": 100 if mig else int(cfg.core_scaling * 100),
            "type": name.replace(" ", "-"),
            "numa": 0,
            "mode": cfg.mode,
            "health": True,
        }
        for index in range(gpus)
    ]
    return json.dumps(devices), count * gpus


def pool(name: str, count: int, gpus: int = 4, product: str = "NVIDIA-A10") -> list[Obj]:
    """Node manifests (``fleet.create_from_manifests``) of ``count`` HAMi nodes ``<name>-<i>``
    of pool ``name``: ``gpus`` GPUs of a GFD ``product`` without MIG, labelled ``gpu=on``."""
    out = []
    for spec in fleet.pool(name, "A30-24GB", count, gpus):  # the table's whole-GPU stand-in
        manifest = fleet.node_manifest(spec)
        manifest["metadata"]["labels"] |= {
            c.GPU_PRODUCT_LABEL: product,
            c.MIG_STRATEGY_LABEL: "none",
            "nvidia.com/mig.capable": "false",
            NODE_LABEL: NODE_VALUE,
        }
        out.append(manifest)
    return out


class HamiNvidiaPlugin(HamiPlugin):
    """HAMi's NVIDIA device plugin on every ``gpu=on`` node, level-triggered from two informers."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube, "hami-nvidia")
        self._maps: dict[str, Obj] = {}

    def _take_config(self, kind: str, cm: Obj) -> bool:
        name = cm["metadata"]["name"]
        if name not in (hami_config.NAME, c.HAMI_NVIDIA_CONFIGMAP_NAME):
            return False
        if kind == "DELETED":
            self._maps.pop(name, None)
        else:
            self._maps[name] = cm
        return True

    def _runs_on(self, labels: Mapping[str, Any]) -> bool:
        return labels.get(NODE_LABEL) == NODE_VALUE and c.GPU_PRODUCT_LABEL in labels

    def _sync(self, node: Obj) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        if (meta.get("annotations") or {}).get(STUCK_ANNOTATION) == "true":
            return  # registered at its start, not restarted since
        count = labels.get(c.GPU_COUNT_LABEL, "0")
        try:
            defaults = hami_config.nvidia(
                hami_config.document(self._maps.get(hami_config.NAME)) or {}
            )
            entries = nodeconfig_entries(self._maps.get(c.HAMI_NVIDIA_CONFIGMAP_NAME))
            cfg = node_config(defaults, entries, meta["name"])
            product = labels[c.GPU_PRODUCT_LABEL]
            register, slots = registration(
                meta["name"], product, int(count) if count.isdigit() else 0, cfg, defaults
            )
        except (hami_config.ConfigError, hardware.UnknownHardwareError) as err:
            self._annotate(meta, {ERROR_ANNOTATION: str(err)})
            return
        self._annotate(meta, {REGISTER_ANNOTATION: register, ERROR_ANNOTATION: None})
        try:
            fleet.publish_devices(self.kube, node, "nvidia.com/", {GPU: slots})
        except ApiError as err:  # the API server is away: its re-list hands the node back
            log.info("sim HAMi NVIDIA plugin: %s: %s", meta["name"], err)

    def _annotate(self, meta: Mapping[str, Any], wanted: Mapping[str, str | None]) -> None:
        current = meta.get("annotations") or {}
        if all(current.get(k) == v for k, v in wanted.items()):
            return
        try:
            self.kube.patch(
                path_of("v1", "nodes", meta["name"]), {"metadata": {"annotations": dict(wanted)}}
            )
        except ApiError as err:
            if not err.not_found:
                log.info("sim HAMi NVIDIA plugin: %s: %s", meta["name"], err)
