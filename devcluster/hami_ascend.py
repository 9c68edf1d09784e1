"""HAMi's Ascend device plugin (ADP), simulated over its real protocol.

Why: a SharingPolicy with ``spec.ascend`` only writes entries into HAMi's
node config (``kube-system/hami-device-node-config``, ``node-config.yaml``);
on a real node ADP turns them into capacity. Without it no node would
re-advertise, a rollout turning soft slicing on could never verify, and
``status.advertised`` would be checked against nothing.

On every node labelled ``ascend=on`` (ADP's nodeSelector) with an NPU chip
label it does what ADP does with the node's first entry: registers
``vDeviceCount`` kubelet devices per card (allocatable ``huawei.com/<CW>`` =
cards x slots; slots = the entry's ``vDeviceCount`` when > 0, else
memoryAllocatable / smallest template memory of HAMi's chip config) and writes
``hami.io/node-register-<CW>`` (one JSON object per physical card) and
``hami-vnpu-core``. Cards: the node's ``tessera.io/npu.count`` label.

Simplified: ADP reads the config at start-up (a change takes a restart); here
it applies at once. Cards are healthy, ``filterDevices`` is ignored, the
global ``hamiVnpuCore`` is false (chart default), and no handshake annotation
is written (HAMi's scheduler, which reads it, is not simulated).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from . import fleet, hardware

Obj = dict[str, Any]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChipConfig:
    """One ``vnpus.configs`` entry of HAMi's ``hami-scheduler-device`` (memory in MB)."""

    common_word: str
    memory_allocatable: int
    smallest_template: int
    ai_core: int

    @property
    def default_slots(self) -> int:
        return self.memory_allocatable // self.smallest_template


# HAMi v2.10 chart values by DCMI chip name (docs/facts/hami.md §Ascend values HAMi ships).
CHIPS = {
    "310P3": ChipConfig("Ascend310P", 21527, 3072, 8),
    "910B4": ChipConfig("Ascend910B4", 32768, 8192, 20),
    "910B4-1": ChipConfig("Ascend910B4-1", 65536, 16384, 20),
}


def registration(
    node: str, chip: ChipConfig, cards: int, entry: Mapping[str, Any] | None
) -> tuple[dict[str, str], dict[str, int]]:
    """(annotations, kubelet devices) ADP publishes for ``node`` under its config ``entry``."""
    soft = (entry or {}).get("hami-vnpu-core") is True
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


def node_entries(cm: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The ``nodes`` of ``node-config.yaml``; none when absent or unreadable (ADP's defaults)."""
    text = ((cm or {}).get("data") or {}).get(c.HAMI_ASCEND_CONFIGMAP_KEY) or ""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    entries = doc.get("nodes") if isinstance(doc, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


class HamiAscendPlugin:
    """ADP on every ``ascend=on`` node, level-triggered from two informers."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._nodes: dict[str, Obj] = {}
        self._entries: list[Mapping[str, Any]] = []
        self._config_read = threading.Event()
        self._lock = threading.Lock()  # one node written at a time, from the latest config
        self.informers = [
            Informer(
                kube,
                path_of("v1", "configmaps", namespace=c.HAMI_NAMESPACE),
                self._on_config,
                name="sim-hami-ascend-config",
                field_selector=f"metadata.name={c.HAMI_ASCEND_CONFIGMAP_NAME}",
                on_synced=self._config_synced,
            ),
            Informer(kube, "/api/v1/nodes", self._on_node, name="sim-hami-ascend-nodes"),
        ]

    def start(self) -> HamiAscendPlugin:
        for informer in self.informers:
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    def _config_synced(self) -> None:
        self._config_read.set()  # no plugin publishes before it has read its config
        self._sync_all()

    def _on_config(self, kind: str, cm: Obj) -> None:
        entries = [] if kind == "DELETED" else node_entries(cm)
        with self._lock:
            self._entries = entries
        if self._config_read.is_set():
            self._sync_all()

    def _on_node(self, kind: str, node: Obj) -> None:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
        runs = labels.get(c.HAMI_ASCEND_NODE_LABEL) == c.HAMI_ASCEND_NODE_VALUE
        with self._lock:
            if kind == "DELETED" or not runs or c.NPU_CHIP_NAME_LABEL not in labels:
                self._nodes.pop(name, None)
                return
            self._nodes[name] = node
            if self._config_read.is_set():
                self._sync(node)

    def _sync_all(self) -> None:
        with self._lock:
            for node in list(self._nodes.values()):
                self._sync(node)

    def _sync(self, node: Obj) -> None:
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        try:
            chip = CHIPS[hardware.npu_chip(labels[c.NPU_CHIP_NAME_LABEL]).chip]
        except KeyError:  # UnknownHardwareError too
            return  # HAMi ships no config for this chip: ADP would not start
        count = labels.get(c.NPU_COUNT_LABEL, "0")
        cards = int(count) if count.isdigit() else 0
        entry = next((e for e in self._entries if e.get("name") == meta["name"]), None)
        annotations, devices = registration(meta["name"], chip, cards, entry)
        current = meta.get("annotations") or {}
        try:
            if any(current.get(k) != v for k, v in annotations.items()):
                patch = {"metadata": {"annotations": annotations}}
                self.kube.patch(path_of("v1", "nodes", meta["name"]), patch)
            fleet.publish_devices(self.kube, node, "huawei.com/", devices)
        except ApiError as err:  # the API server is away: its re-list hands the node back
            log.info("sim HAMi Ascend plugin: %s: %s", meta["name"], err)
