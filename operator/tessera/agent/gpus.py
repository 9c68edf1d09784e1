"""``tessera agent gpus``: Tessera's GPU node agent, one per GPU node (a DaemonSet).

Every ``interval`` seconds it asks the kubelet's PodResources API which device IDs each pod
holds (``tessera.agent.podresources``), maps them to GPU indices with ``nvidia-smi -L``
(``tessera.domain.geometry.nvidiasmi``) and publishes who holds which GPU on its own Node, in
the annotation ``tessera.io/gpu-holders`` (``tessera.domain.rollout.holders``), so that a
rollout evicts only the pods on the GPUs it changes.

It writes when the holders change, and once more at its next look a second or more later
(``settle``): a rollout trusts the record only for pods created before ``read``, to the
second, so a pod that started in the second of the read would otherwise make the record
stale until the next change. Otherwise it never writes for a newer ``read`` alone: ten
thousand nodes stay quiet while their pods do. The index map is re-read with ``nvidia-smi`` only when the
node's allocatable device IDs change (a MIG reconfiguration, a new sharing config) or when the
last map did not name them all. When the kubelet does not answer, or nvidia-smi fails, it logs
and publishes nothing: the record it left grows stale, and a rollout drains the whole node.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.agent.podresources import DEFAULT_SOCKET, PodResources, PodResourcesError
from tessera.api import constants as c
from tessera.domain.geometry import nvidiasmi
from tessera.domain.rollout import holders

log = logging.getLogger("tessera.agent.gpus")


class GpuAgent:
    def __init__(
        self,
        kube: Kube,
        node: str,
        *,
        socket: str = DEFAULT_SOCKET,
        nvidia_smi: Callable[[], str] | str = "nvidia-smi",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.node = node
        self.kubelet = PodResources(socket)
        self.clock = clock
        self._smi = _runner(nvidia_smi) if isinstance(nvidia_smi, str) else nvidia_smi
        self._devices: dict[str, int] = {}
        self._listed: frozenset[str] | None = None  # the allocatable IDs _devices was read for
        self._published: holders.Holders | None = None  # what the Node holds, once known
        self._settle = False  # a change was published: write it again with a later read

    def step(self) -> bool:
        """One look at the kubelet; True when it published a new record."""
        read = self.clock()  # before List: a pod it lists is older than the record says
        try:
            allocatable = {i for r, i in self.kubelet.allocatable() if _nvidia(r)}
            held = self.kubelet.held()
        except PodResourcesError as err:
            log.warning("%s: %s; not publishing", self.node, err)
            return False
        try:
            devices = self._index(frozenset(allocatable))
        except (OSError, subprocess.SubprocessError) as err:
            why = f"{err} {getattr(err, 'stderr', None) or ''}".strip()
            log.warning("%s: nvidia-smi -L failed: %s; not publishing", self.node, why)
            return False
        pods, unmapped = nvidiasmi.holders(held, devices)
        record = holders.bounded(read, pods, unmapped)
        if unmapped:
            log.info("%s: devices nvidia-smi does not name, held by %s", self.node, unmapped)
        current = self._current()
        if _same(record, current):
            if not (self._settle and current is not None and _later(read, current.read)):
                return False
            self._settle = False  # the same holders, read a second later: trusted for them all
        else:
            self._settle = True
        patch = {"metadata": {"annotations": {c.GPU_HOLDERS_ANNOTATION: holders.encode(record)}}}
        try:
            self.kube.patch(path_of("v1", "nodes", self.node), patch)
        except ApiError as err:
            self._published = None  # it may have landed: read the Node again next time
            log.warning("%s: could not publish the GPU holders: %s", self.node, err)
            return False
        self._published = record
        log.info(
            "%s: published %d GPU holders%s",
            self.node,
            len(record.pods) + len(record.unmapped),
            " (overflow)" if record.overflow else "",
        )
        return True

    def run(self, interval: float, stop: threading.Event) -> None:
        """Step every ``interval`` seconds until ``stop`` is set; an error is logged, not fatal."""
        while not stop.is_set():
            try:
                self.step()
            except Exception:
                log.exception("%s: GPU holders step failed", self.node)
            stop.wait(interval)

    def _index(self, allocatable: frozenset[str]) -> dict[str, int]:
        """The device -> GPU map, re-read when the node's devices changed or were not all named."""
        if allocatable != self._listed:
            self._devices = nvidiasmi.parse_list(self._smi())
            named = all(nvidiasmi.gpu_of(i, self._devices) is not None for i in allocatable)
            self._listed = allocatable if named else None
        return self._devices

    def _current(self) -> holders.Holders | None:
        """The record on the Node: read once (and after a failed write), then remembered."""
        if self._published is None:
            try:
                node = self.kube.get(path_of("v1", "nodes", self.node))
                raw = (node["metadata"].get("annotations") or {}).get(c.GPU_HOLDERS_ANNOTATION)
                self._published = holders.decode(raw)
            except (ApiError, holders.HoldersError) as err:
                log.info("%s: no GPU holders record to keep: %s", self.node, err)
        return self._published


def _nvidia(resource: str) -> bool:
    return resource.startswith(nvidiasmi.NVIDIA_PREFIX)


def _same(record: holders.Holders, published: holders.Holders | None) -> bool:
    if published is None:
        return False
    return (dict(record.pods), record.unmapped, record.overflow) == (
        dict(published.pods),
        published.unmapped,
        published.overflow,
    )


def _later(a: datetime, b: datetime) -> bool:
    """``a`` is in a later second than ``b`` (the record keeps seconds)."""
    return a.replace(microsecond=0) > b.replace(microsecond=0)


def _runner(path: str) -> Callable[[], str]:
    def run() -> str:
        return subprocess.run(
            [path, "-L"], capture_output=True, text=True, timeout=30, check=True
        ).stdout

    return run
