"""Nodes and namespaces: what the cluster is made of before any workload runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from devcluster import fleet

from .base import Raw, Wrapper


class NodeWrapper(Wrapper):
    """A Node: ``NodeWrapper("n1").label(POOL_LABEL, "a").ready().allocatable({...}).obj()``;
    :meth:`simulated` starts from the manifest the dev cluster gives its simulated nodes."""

    kind = "Node"

    @classmethod
    def simulated(cls, spec: fleet.NodeSpec) -> NodeWrapper:
        """``spec`` as ``devcluster.fleet`` creates it: a KWOK node with the labels and
        devices of its model (an H100 node advertises 8 ``nvidia.com/gpu``)."""
        built = cls(spec.name)
        built._obj = fleet.node_manifest(spec)
        return built

    def relabel(self, labels: Mapping[str, str]) -> Self:
        """Exactly ``labels``: every label set so far is dropped."""
        self._meta["labels"] = dict(labels)
        return self

    def taints(self, *taints: Raw) -> Self:
        """Exactly ``taints`` (none: ``spec.taints: []``)."""
        self._obj.setdefault("spec", {})["taints"] = [dict(t) for t in taints]
        return self

    def ready(self, status: str = "True") -> Self:
        """The kubelet's Ready condition, with ``status`` ``True``, ``False`` or ``Unknown``."""
        self._status["conditions"] = [{"type": "Ready", "status": status}]
        return self

    def heartbeat(self, at: str) -> Self:
        """The kubelet's last heartbeat ``at`` on the Ready condition :meth:`ready` set."""
        self._status["conditions"][0]["lastHeartbeatTime"] = at
        return self

    def allocatable(self, resources: Mapping[str, str]) -> Self:
        """``status.allocatable``, exactly ``resources``."""
        self._status["allocatable"] = dict(resources)
        return self

    def advertise(self, resources: Mapping[str, int | str]) -> Self:
        """Allocatable and capacity: 64 CPUs, 512Gi, 110 pods and ``resources``, as the
        device simulators publish a node's devices."""
        advertised = {"cpu": "64", "memory": "512Gi", "pods": "110"}
        advertised |= {name: str(count) for name, count in resources.items()}
        self._status["allocatable"] = advertised
        self._status["capacity"] = dict(advertised)
        return self

    @property
    def _status(self) -> Raw:
        status: Raw = self._obj.setdefault("status", {})
        return status


class NamespaceWrapper(Wrapper):
    """A Namespace; ``metadata.labels`` is always there, empty until :meth:`labels`."""

    kind = "Namespace"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._meta["labels"] = {}
