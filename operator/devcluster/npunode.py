"""Ascend NPU nodes in the dev cluster: Tessera's real vNPU agent over a fake npu-smi.

Each simulated Ascend node gets the real ``VnpuAgent`` (the code the
DaemonSet runs) with its own fake ``npu-smi``. What the Ascend device plugin
would do after a vNPU change — advertise ``huawei.com/<vNPU type>`` resources
— is simulated here from the fake npu-smi's state, so the operator verifies
against what was actually created, not against what it asked for.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of
from tessera.agent.vnpu import VnpuAgent
from tessera.api import constants as c
from tessera.domain.geometry import ascend

from . import fake_npu_smi, kubelet


def advertised(
    chip: ascend.Chip, npus: int, state: Mapping[str, Mapping[str, Any]]
) -> dict[str, int]:
    """What the Ascend device plugin advertises for the vNPUs npu-smi reports."""
    out: dict[str, int] = {}
    for npu in range(npus):
        created = state.get(str(npu)) or {}
        if not created:
            key = f"huawei.com/{chip.whole_resource}"
            out[key] = out.get(key, 0) + 1
        for vnpu in created.values():
            template = chip.by_name[str(vnpu["template"])]
            key = f"huawei.com/{template.resource}"
            out[key] = out.get(key, 0) + 1
    return out


class AscendNodes:
    """One VnpuAgent + device-plugin stand-in per Ascend node (label npu.chip.name), except
    nodes labelled ``ascend=on``: HAMi's device plugin (``hami_ascend``) serves those."""

    def __init__(self, kube: Kube, workdir: Path | None = None) -> None:
        self.kube = kube
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="tessera-npu-"))
        self.agents: dict[str, VnpuAgent] = {}
        self.informer = Informer(kube, "/api/v1/nodes", self._on_node, name="sim-ascend")
        self._lock = threading.Lock()

    def start(self) -> AscendNodes:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()

    def npu_smi_state(self, node: str) -> dict[str, Any]:
        path = self.workdir / node / "state.json"
        loaded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return loaded

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels") or {}
        chip_name = labels.get(c.NPU_CHIP_NAME_LABEL)
        hami = labels.get(c.HAMI_ASCEND_NODE_LABEL) == c.HAMI_ASCEND_NODE_VALUE
        if kind == "DELETED" or not chip_name or hami:  # HAMi's plugin runs there instead
            return
        name = node["metadata"]["name"]
        with self._lock:
            agent = self.agents.get(name)
            if agent is None:
                script = fake_npu_smi.install(self.workdir / name, chip_name)
                agent = self.agents[name] = VnpuAgent(self.kube, name, npu_smi=str(script))
        agent.on_node(kind, node)
        self._advertise(
            name, ascend.resolve_chip(chip_name), int(labels.get(c.NPU_COUNT_LABEL, "0"))
        )

    def _advertise(self, name: str, chip: ascend.Chip, npus: int) -> None:
        node = self.kube.get(path_of("v1", "nodes", name))
        devices = advertised(chip, npus, self.npu_smi_state(name))
        kubelet.publish_devices(self.kube, node, "huawei.com/", devices)
