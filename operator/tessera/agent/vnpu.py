"""``tessera agent vnpu``: Tessera's Ascend node agent, one per NPU node (a DaemonSet).

It speaks the same protocol as the GPU Operator's MIG manager, so the
rollout engine drives both alike: the operator sets ``tessera.io/vnpu.config``
on the Node; the agent sets ``tessera.io/vnpu.config.state`` to ``pending``,
destroys the vNPUs it created before, creates the config's vNPUs with
``npu-smi``, records what exists in a Node annotation, and reports
``success`` — or ``failed`` with the reason in ``tessera.io/vnpu.config.error``.
The operator then verifies the node's allocatable (the Ascend device plugin
advertises the new vNPUs after it restarts).

The same agent switches the node's NPUs into vCANN-RT's device-share mode and back
(``tessera.agent.device_share``), asked by ``tessera.io/npu.device-share``.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

import yaml

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.agent.device_share import DeviceShare
from tessera.api import constants as c
from tessera.domain.geometry import npusmi

RECORD_ANNOTATION = "tessera.io/vnpu-created"
ERROR_ANNOTATION = "tessera.io/vnpu.config.error"
log = logging.getLogger("tessera.agent.vnpu")


class VnpuAgent:
    def __init__(
        self,
        kube: Kube,
        node: str,
        *,
        npu_smi: str = "npu-smi",
        configmap: tuple[str, str] = (c.VNPU_CONFIGMAP_NAMESPACE, c.VNPU_CONFIGMAP_NAME),
    ) -> None:
        self.kube = kube
        self.node = node
        self.npu_smi = npu_smi
        self.configmap = configmap
        self._lock = threading.Lock()
        self.device_share = DeviceShare(kube, node, npu_smi)

    def on_node(self, kind: str, obj: dict[str, Any]) -> None:
        """Informer callback: act when the wanted config is not the applied one."""
        if kind == "DELETED" or obj["metadata"]["name"] != self.node:
            return
        with self._lock:  # one reconfiguration at a time, like mig-parted
            try:  # events queue up while npu-smi runs: act on the node as it is now
                fresh = self.kube.get(path_of("v1", "nodes", self.node))
            except ApiError as err:
                log.warning("%s: cannot read the node: %s", self.node, err)
                return
            self.step(fresh)
            self.device_share.step(fresh)

    def step(self, node: Mapping[str, Any]) -> None:
        meta = node["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        wanted = labels.get(c.VNPU_CONFIG_LABEL)
        state = labels.get(c.VNPU_CONFIG_STATE_LABEL)
        try:
            record = npusmi.Record.decode(annotations.get(RECORD_ANNOTATION))
        except npusmi.ConfigError as err:
            self._report("failed", str(err))
            return
        if not wanted or (record.config == wanted and state in ("success", "failed")):
            return
        self._report("pending", None)
        try:
            count = int(labels.get(c.NPU_COUNT_LABEL, "0"))
            vnpus = npusmi.wanted_vnpus(self._entries(wanted), count)
            done = self._run(npusmi.commands(record, vnpus))
        except (npusmi.ConfigError, ValueError) as err:
            self._report("failed", str(err), npusmi.Record(wanted, record.vnpus))
            return
        if done is not None:  # npu-smi failed: record what may still exist, report why
            self._report("failed", done, npusmi.Record(wanted, record.vnpus))
            return
        self._report("success", None, npusmi.Record(wanted, vnpus))

    def _entries(self, config: str) -> list[Mapping[str, Any]]:
        ns, name = self.configmap
        cm = self.kube.get_or_none(path_of("v1", "configmaps", name, ns))
        text = ((cm or {}).get("data") or {}).get(c.VNPU_CONFIGMAP_KEY, "")
        configs = (yaml.safe_load(text) or {}).get("vnpu-configs") or {}
        if config not in configs:
            raise npusmi.ConfigError(f"config {config!r} not found in ConfigMap {ns}/{name}")
        entries: list[Mapping[str, Any]] = configs[config]
        return entries

    def _run(self, argv_list: list[list[str]]) -> str | None:
        """Run each npu-smi command; the first failure's output, or None when all succeeded."""
        for argv in argv_list:
            result = subprocess.run(
                [self.npu_smi, *argv], capture_output=True, text=True, timeout=120, check=False
            )
            log.info("%s: npu-smi %s -> %s", self.node, " ".join(argv), result.returncode)
            if result.returncode != 0:
                output = (result.stdout + result.stderr).strip()
                return f"npu-smi {' '.join(argv)} failed: {output}"
        return None

    def _report(self, state: str, error: str | None, record: npusmi.Record | None = None) -> None:
        annotations: dict[str, str | None] = {ERROR_ANNOTATION: error}
        if record is not None:
            annotations[RECORD_ANNOTATION] = record.encode()
        patch = {
            "metadata": {"labels": {c.VNPU_CONFIG_STATE_LABEL: state}, "annotations": annotations}
        }
        try:
            self.kube.patch(path_of("v1", "nodes", self.node), patch)
        except ApiError as err:
            log.warning("%s: could not report %s: %s", self.node, state, err)
