"""HAMi's Ascend device plugin (ADP), simulated over its real protocol.

Why: a SharingPolicy with ``spec.ascend`` only writes entries into HAMi's
node config (``kube-system/hami-device-node-config``, ``node-config.yaml``);
on a real node ADP turns them into capacity. Without it no node would
re-advertise, a rollout turning soft slicing on could never verify, and
``status.advertised`` would be checked against nothing.

On every node labelled ``ascend=on`` (ADP's nodeSelector) with an NPU chip
label it does what ADP does with its two configs: the chip's ``vnpus`` entry
and the global ``vnpus.hamiVnpuCore`` of ``kube-system/hami-scheduler-device``
(its ``--config_file``; both shapes, ``hami_config``: the list of HAMi ≤ v2.8
has no ``hamiVnpuCore``, so soft slicing is off there), and the node's first
entry of ``hami-device-node-config``, whose ``hami-vnpu-core`` overrides the
global default. It registers ``vDeviceCount`` kubelet devices per card
(allocatable ``huawei.com/<CW>`` = cards x slots; slots = the entry's
``vDeviceCount`` when > 0, else memoryAllocatable / smallest template memory
of the chip's entry) and writes ``hami.io/node-register-<CW>`` (one JSON
object per physical card) and ``hami-vnpu-core`` (the mode in force, which
HAMi's and Volcano's schedulers read over the global default). Cards: the
node's ``tessera.io/npu.count`` label.

A chip the map has no ``vnpus`` entry for gets no plugin (ADP finds no config
for it and registers nothing); a map ADP cannot parse stops it the same way;
either is reported in the node annotation ``sim.tessera.io/hami-plugin-error``.
Without the map the chart's v2.10 values apply (``CHIPS``, soft slicing off).

Simplified: ADP reads the config at start-up (a change takes a restart); here
it applies at once. Cards are healthy, ``filterDevices`` is ignored, and no
handshake annotation is written (HAMi's scheduler, which reads it, is not
simulated).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import yaml

from devcluster import fleet, hami_config, hardware
from devcluster.hami_plugin import HamiPlugin
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

Obj = dict[str, Any]
log = logging.getLogger(__name__)


ChipConfig = hami_config.Chip
# HAMi v2.10 chart values by DCMI chip name (hami_ascend.md §1.5), when no map is installed.
CHIPS = {
    "310P3": ChipConfig("310P3", "Ascend310P", 21527, 3072, 8),
    "910B4": ChipConfig("910B4", "Ascend910B4", 32768, 8192, 20),
    "910B4-1": ChipConfig("910B4-1", "Ascend910B4-1", 65536, 16384, 20),
}
ERROR_ANNOTATION = "sim.tessera.io/hami-plugin-error"


def registration(
    node: str,
    chip: ChipConfig,
    cards: int,
    entry: Mapping[str, Any] | None,
    global_soft: bool = False,
) -> tuple[dict[str, str], dict[str, int]]:
    """(annotations, kubelet devices) ADP publishes for ``node`` under its config ``entry``;
    the entry's ``hami-vnpu-core`` (a bool) overrides the global ``global_soft``."""
    flag = (entry or {}).get("hami-vnpu-core")
    soft = flag if isinstance(flag, bool) else global_soft
    wanted = (entry or {}).get("vDeviceCount")
    slots = wanted if type(wanted) is int and wanted > 0 else chip.default_slots
    word = chip.common_word
    devices = []
    for index in range(cards):
        card: dict[str, Any] = {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"sim-npu://{node}/{index}")),
            "index": index,
            "count": slots,
            "devmem": chip.memory_allocatable,
            "devcore": 100 if soft else chip.ai_core,  # hami-core cores are percentages
            "type": word,
            "health": True,
        }
        devices.append({k: v for k, v in card.items() if v})  # Go's omitempty
    annotations = {
        c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + word: json.dumps(devices),
        c.HAMI_VNPU_CORE_ANNOTATION: "true" if soft else "false",
    }
    return annotations, {f"huawei.com/{word}": cards * slots}


def vnpus(cm: Mapping[str, Any] | None) -> hami_config.Vnpus:
    """The ``vnpus`` ADP reads of ``hami-scheduler-device``; the chart's without the map.
    ConfigError when ADP could not parse it."""
    doc = hami_config.document(cm)
    return hami_config.Vnpus(False, CHIPS) if doc is None else hami_config.vnpus(doc)


def node_entries(cm: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The ``nodes`` of ``node-config.yaml``; none when absent or unreadable (ADP's defaults)."""
    text = ((cm or {}).get("data") or {}).get(c.HAMI_ASCEND_CONFIGMAP_KEY) or ""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    entries = doc.get("nodes") if isinstance(doc, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


class HamiAscendPlugin(HamiPlugin):
    """ADP on every ``ascend=on`` node, level-triggered from two informers."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube, "hami-ascend")
        self._entries: list[Mapping[str, Any]] = []
        self._device_map: Obj | None = None

    def _take_config(self, kind: str, cm: Obj) -> bool:
        name = cm["metadata"]["name"]
        if name == c.HAMI_ASCEND_CONFIGMAP_NAME:
            self._entries = [] if kind == "DELETED" else node_entries(cm)
        elif name == hami_config.NAME:
            self._device_map = None if kind == "DELETED" else cm
        else:
            return False
        return True

    def _runs_on(self, labels: Mapping[str, Any]) -> bool:
        runs = labels.get(c.HAMI_ASCEND_NODE_LABEL) == c.HAMI_ASCEND_NODE_VALUE
        return runs and c.NPU_CHIP_NAME_LABEL in labels

    def _sync(self, node: Obj) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        try:
            chip_name = hardware.npu_chip(labels[c.NPU_CHIP_NAME_LABEL]).chip
        except KeyError:  # UnknownHardwareError too
            return  # not a chip the simulator knows
        try:
            config = vnpus(self._device_map)
        except hami_config.ConfigError as err:
            self._annotate(meta, {ERROR_ANNOTATION: f"ADP cannot read its config: {err}"})
            return
        chip = config.chips.get(chip_name)
        if chip is None:
            message = f"no vnpus entry with chipName {chip_name} in {hami_config.NAME}"
            self._annotate(meta, {ERROR_ANNOTATION: message})
            return
        count = labels.get(c.NPU_COUNT_LABEL, "0")
        cards = int(count) if count.isdigit() else 0
        entry = next((e for e in self._entries if e.get("name") == meta["name"]), None)
        annotations, devices = registration(meta["name"], chip, cards, entry, config.hami_vnpu_core)
        self._annotate(meta, {**annotations, ERROR_ANNOTATION: None})
        try:
            fleet.publish_devices(self.kube, node, "huawei.com/", devices)
        except ApiError as err:  # the API server is away: its re-list hands the node back
            log.info("sim HAMi Ascend plugin: %s: %s", meta["name"], err)

    def _annotate(self, meta: Mapping[str, Any], wanted: Mapping[str, str | None]) -> None:
        current = meta.get("annotations") or {}
        if all(current.get(k) == v for k, v in wanted.items()):
            return
        try:
            patch = {"metadata": {"annotations": dict(wanted)}}
            self.kube.patch(path_of("v1", "nodes", meta["name"]), patch)
        except ApiError as err:  # gone, or the API server is away: its re-list hands it back
            log.info("sim HAMi Ascend plugin: %s: %s", meta["name"], err)
