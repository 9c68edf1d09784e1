"""Which GPU a device-plugin device ID names: ``nvidia-smi -L`` and the device plugin's IDs.

The GPU node agent (``tessera.agent.gpus``) asks the kubelet which device IDs each pod holds
and maps them to GPU indices here, for the holders record (``tessera.domain.rollout.holders``).
``nvidia-smi -L`` lists each GPU with its UUID and, indented under a MIG-enabled GPU, its MIG
devices with theirs::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f1c0d9e-...)
      MIG 3g.40gb     Device  0: (UUID: MIG-7089d0f3-...)
      MIG 1g.10gb     Device  1: (UUID: MIG-9d14fb21-...)
    GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-...)

(drivers before R470 print MIG UUIDs as ``MIG-GPU-<uuid>/<gi>/<ci>``, read alike).

The NVIDIA device plugin advertises a GPU by its UUID and a MIG device by its MIG UUID; a
time-sliced or MPS-shared device is advertised once per replica as ``<id>::<n>``.
``deviceIDStrategy: index`` changes only what the container is told, but a device ID that is
an index (``<gpu>`` or ``<gpu>:<mig>``, the plugin's device indices) is read too. Anything
else is unknown: its pod is *unmapped*, taken to hold every GPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

NVIDIA_PREFIX = "nvidia.com/"

_GPU = re.compile(r"GPU (\d+): .*\(UUID: (GPU-[^\s)]+)\)")
_MIG = re.compile(r"\s+MIG \S+\s+Device\s+(\d+): \(UUID: (MIG-[^\s)]+)\)")
_REPLICA = re.compile(r"(.+)::\d+")


def parse_list(text: str) -> dict[str, int]:
    """``nvidia-smi -L`` output -> device ID -> GPU index: each GPU's UUID and index
    (``"0"``), each MIG device's UUID and ``"<gpu>:<mig>"``. Other lines are ignored (a MIG
    line before any GPU line too: it names no GPU)."""
    devices: dict[str, int] = {}
    gpu: int | None = None
    for line in text.splitlines():
        if found := _GPU.fullmatch(line.rstrip()):
            gpu = int(found.group(1))
            devices[found.group(2)] = gpu
            devices[str(gpu)] = gpu
        elif (found := _MIG.fullmatch(line.rstrip())) and gpu is not None:
            devices[found.group(2)] = gpu
            devices[f"{gpu}:{int(found.group(1))}"] = gpu
    return devices


def gpu_of(device_id: str, devices: Mapping[str, int]) -> int | None:
    """The GPU index ``device_id`` (a device-plugin ID, perhaps a replica's) is on, from
    ``parse_list``'s map; None when the map does not name it."""
    if replica := _REPLICA.fullmatch(device_id):
        device_id = replica.group(1)
    return devices.get(device_id)


def holders(
    held: Iterable[tuple[str, str, str]], devices: Mapping[str, int]
) -> tuple[dict[str, set[int]], set[str]]:
    """(pod ``namespace/name``, resource name, device ID) triples -> (pod -> the GPU indices
    it holds, pods holding a device ``devices`` does not name). Only NVIDIA resources
    (``nvidia.com/...``) count; an unmapped pod is in the second set only."""
    pods: dict[str, set[int]] = {}
    unmapped: set[str] = set()
    for pod, resource, device_id in held:
        if not resource.startswith(NVIDIA_PREFIX):
            continue
        gpu = gpu_of(device_id, devices)
        if gpu is None:
            unmapped.add(pod)
        else:
            pods.setdefault(pod, set()).add(gpu)
    return {p: g for p, g in pods.items() if p not in unmapped}, unmapped
