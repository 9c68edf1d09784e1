"""Tessera's real GPU node agent on simulated GPU nodes: ``tessera agent gpus`` per node.

Each agent is the command config/agent's GPU DaemonSet runs, as a process of its own, under
the ``tessera-agent`` ServiceAccount with a token bound to its Pod on the node (``identity``):
it may change that Node only, and only its record. It asks the node's simulated kubelet
(``podresources``) over gRPC and the node's fake ``nvidia-smi -L``; nothing else is faked.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

from devcluster import identity
from devcluster.npunode import AgentProcess
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube


class GpuAgents:
    """The GPU agent processes of some nodes; ``stop`` ends them and their DaemonSet."""

    def __init__(self, kube: Kube, sim: PodResourcesSim, *, interval: float = 0.5) -> None:
        self.kube, self.sim, self.interval = kube, sim, interval
        self.agents: dict[str, AgentProcess] = {}

    def start(self, nodes: Iterable[str]) -> GpuAgents:
        for node in nodes:
            if node not in self.agents:
                self.agents[node] = self._start(node)
        return self

    def stop_agent(self, node: str) -> None:
        """End one node's agent process (its Pod stays Running: a hung agent)."""
        self.agents[node].stop()

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()
        identity.remove_gpu_agents(self.kube)

    def problems(self) -> list[str]:
        """An agent that exited by itself, and log lines showing a refusal or a crash."""
        found = [
            f"{name}: exited with {agent.proc.returncode}"
            for name, agent in sorted(self.agents.items())
            if agent.proc.poll() is not None and not agent.stopping
        ]
        return found + [
            f"{name}: {line}"
            for name, agent in sorted(self.agents.items())
            for line in agent.log().splitlines()
            if identity.PROBLEM.search(line)
        ]

    def _start(self, node: str) -> AgentProcess:
        socket, smi = self.sim.paths(node)
        folder = socket.parent.parent
        pod = identity.gpu_agent_pod(self.kube, node)
        bearer = identity.token(self.kube, identity.AGENT, pod=pod)
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
                    "gpus",
                    f"--node={node}",
                    f"--kubeconfig={config}",
                    f"--pod-resources-socket={socket}",
                    f"--nvidia-smi={smi}",
                    f"--interval={self.interval}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        return AgentProcess(node, folder, proc)
