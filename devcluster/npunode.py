"""Ascend NPU nodes in the dev cluster: Tessera's real vNPU agent over a fake npu-smi.

Each simulated Ascend node runs the real agent — ``tessera agent vnpu``, the command the
DaemonSet runs, as a process of its own — with its own fake ``npu-smi``, under the
``tessera-agent`` ServiceAccount of config/rbac with a token bound to its Pod on the node
(``identity``): exactly the permissions a cluster grants it, never the admin's. What the
Ascend device plugin would do after a vNPU change — advertise ``huawei.com/<vNPU type>``
resources — is simulated here from the fake npu-smi's state, so the operator verifies
against what was actually created, not against what it asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import fake_npu_smi, fleet, hardware, identity
from tessera.adapters.informer import Informer
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

SHARE_DEV_COUNT = 100  # the device plugin's -shareDevCount, the only value soft sharing allows


def advertised(
    chip: hardware.NpuChip, npus: int, state: Mapping[str, Mapping[str, Any]]
) -> dict[str, int]:
    """What the Ascend device plugin advertises for the vNPUs npu-smi reports."""
    out: dict[str, int] = {}
    for npu in range(npus):
        created = state.get(str(npu)) or {}
        if fake_npu_smi.device_shared(state, npu) and not created:
            # Huawei's plugin with -shareDevCount=100: a shared chip is 100 units, one per
            # AI-core percent (what vCANN-RT's pods request)
            key = f"huawei.com/{chip.whole_resource}"
            out[key] = out.get(key, 0) + SHARE_DEV_COUNT
            continue
        if not created:
            key = f"huawei.com/{chip.whole_resource}"
            out[key] = out.get(key, 0) + 1
        for vnpu in created.values():
            template = chip.templates[str(vnpu["template"])]
            key = f"huawei.com/{template.resource}"
            out[key] = out.get(key, 0) + 1
    return out


@dataclass
class AgentProcess:
    """One ``tessera agent vnpu`` process and the files it uses."""

    node: str
    folder: Path
    proc: subprocess.Popen[bytes]
    stopping: bool = False

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "agent.kubeconfig"

    @property
    def log_path(self) -> Path:
        return self.folder / "agent.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        self.stopping = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class AscendNodes:
    """One agent process + device-plugin stand-in per Ascend node (label npu.chip.name),
    except nodes labelled ``ascend=on``: HAMi's device plugin (``hami_ascend``) serves those.

    ``kube`` (the admin's) plays the kubelet and the device plugin, and mints the agents'
    tokens; the agents themselves use only their own.
    """

    def __init__(self, kube: Kube, workdir: Path | None = None) -> None:
        self.kube = kube
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="tessera-npu-"))
        self.agents: dict[str, AgentProcess] = {}
        self.informer = Informer(kube, "/api/v1/nodes", self._on_node, name="sim-ascend")
        self._lock = threading.Lock()

    def start(self) -> AscendNodes:
        self.informer.start()
        return self

    def stop(self) -> None:
        self.informer.stop()
        with self._lock:
            for agent in self.agents.values():
                agent.stop()

    def npu_smi_state(self, node: str) -> dict[str, Any]:
        path = self.workdir / node / "state.json"
        loaded: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        return loaded

    def problems(self) -> list[str]:
        """An agent that exited by itself, and the lines of the agents' logs that show a
        refused call, a rejected token or a crash."""
        with self._lock:
            agents = sorted(self.agents.items())
        found = [
            f"{name}: exited with {agent.proc.returncode}"
            for name, agent in agents
            if agent.proc.poll() is not None and not agent.stopping
        ]
        found += [
            f"{name}: {line}"
            for name, agent in agents
            for line in agent.log().splitlines()
            if identity.PROBLEM.search(line)
        ]
        return found

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        labels = node["metadata"].get("labels") or {}
        chip_name = labels.get(c.NPU_CHIP_NAME_LABEL)
        hami = labels.get(c.HAMI_ASCEND_NODE_LABEL) == c.HAMI_ASCEND_NODE_VALUE
        if kind == "DELETED" or not chip_name or hami:  # HAMi's plugin runs there instead
            return
        name = node["metadata"]["name"]
        with self._lock:
            if name not in self.agents:
                self.agents[name] = self._start_agent(name, chip_name)
        self._advertise(name, hardware.npu_chip(chip_name), int(labels.get(c.NPU_COUNT_LABEL, "0")))

    def _start_agent(self, node: str, chip_name: str) -> AgentProcess:
        folder = self.workdir / node
        script = fake_npu_smi.install(folder, chip_name)
        bearer = identity.token(self.kube, identity.AGENT, pod=identity.agent_pod(self.kube, node))
        config = identity.kubeconfig(
            self.kube, bearer, identity.AGENT.name, folder / "agent.kubeconfig"
        )
        with (folder / "agent.log").open("ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tessera.cli.main",
                    "agent",
                    "vnpu",
                    f"--node={node}",
                    f"--kubeconfig={config}",
                    f"--npu-smi={script}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return AgentProcess(node, folder, proc)

    def _advertise(self, name: str, chip: hardware.NpuChip, npus: int) -> None:
        node = self.kube.get(path_of("v1", "nodes", name))
        devices = advertised(chip, npus, self.npu_smi_state(name))
        fleet.publish_devices(self.kube, node, "huawei.com/", devices)
