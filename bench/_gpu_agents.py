"""Tessera's GPU node agent for a bench's hundred nodes, in the bench's own process.

``devcluster.gpuagents`` runs the agent as processes (the CLI the DaemonSet runs); a hundred
of them on two CPUs would measure Python start-ups, so the bench runs the same ``GpuAgent``
code here. The dev cluster may not import the product's agent (the simulators never decide
with Tessera's code); a bench may.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from devcluster import fake_nvidia_smi, identity
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube
from tessera.agent.gpus import GpuAgent


class InProcessGpuAgents:
    """The same agent code for a bench's hundred nodes, in this process: one ``GpuAgent`` per
    node, each with its own client holding its own Pod-bound token (the same RBAC and policy
    as the processes above), stepped in turn by one thread. ``nvidia-smi -L`` is the fake's
    listing of the node's inventory, read in-process instead of a fork per node."""

    def __init__(self, kube: Kube, sim: PodResourcesSim, *, interval: float = 1.0) -> None:
        self.kube, self.sim, self.interval = kube, sim, interval
        self.agents: list[GpuAgent] = []
        self.clients: list[Kube] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-agents", daemon=True)

    def start(self, nodes: Iterable[str]) -> InProcessGpuAgents:
        for node in nodes:
            socket, _ = self.sim.paths(node)
            pod = identity.gpu_agent_pod(self.kube, node)
            bearer = identity.token(self.kube, identity.AGENT, pod=pod)
            path = identity.kubeconfig(
                self.kube, bearer, identity.AGENT.name, socket.parent.parent / "agent.kubeconfig"
            )
            client = Kube.from_kubeconfig(str(path))
            self.clients.append(client)
            self.agents.append(
                GpuAgent(client, node, socket=str(socket), nvidia_smi=self._smi(node))
            )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        for client in self.clients:
            client.close()
        identity.remove_gpu_agents(self.kube)

    def _smi(self, node: str) -> Callable[[], str]:
        def listing() -> str:
            inventory = self.sim.inventory(node)
            if inventory is None:
                raise OSError(f"{node}: no GPUs published yet")
            return fake_nvidia_smi.listing(inventory)

        return listing

    def _loop(self) -> None:
        while not self._stop.is_set():
            for agent in self.agents:
                agent.step()
            self._stop.wait(self.interval)
