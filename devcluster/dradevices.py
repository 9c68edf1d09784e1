"""What the simulated NVIDIA DRA driver announces for a node's GPUs: names, attributes, capacities.

As the GPU kubelet plugin of ``gpu.nvidia.com`` v0.4.x does at start (dra.md §5.2, §5.3, §5.5:
static MIG): a GPU with MIG off is one device ``gpu-<minor>`` of type ``gpu``; a GPU with MIG on
announces only the MIG devices that exist, each
``gpu-<minor>-mig-<profile, lower-cased, dots removed, other characters '-'>-<giProfileID>-<start>``
of type ``mig``, and the whole GPU not at all. Profile IDs, memory and multiprocessor counts come
from the simulator's own table (``dra_gpus.yaml``); where each instance sits comes from the
simulated MIG manager's placement (``migmanager.placement``) — never from Tessera's catalog.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from devcluster import hardware, migmanager

DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "580.82.7"  # NVML driver version, as a semver
CUDA_DRIVER_VERSION = "13.0.0"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
MAX_ATTRIBUTES_AND_CAPACITIES = 32  # per device (resource.k8s.io/v1)
Obj = dict[str, Any]
_UUIDS = uuid.UUID("6d1f3c2e-3a57-4c1e-9d0b-7e3f1a2b4c5d")  # namespace of the sim's UUIDs


@dataclass(frozen=True)
class DraProfile:
    gi_profile_id: int
    memory_mib: int
    multiprocessors: int


@dataclass(frozen=True)
class DraGpu:
    """One GPU model as NVML describes it to the DRA driver."""

    name: str  # productName
    architecture: str
    compute: str  # cudaComputeCapability, semver
    memory_mib: int
    profiles: dict[str, DraProfile]


def _mib(gib: float) -> int:
    return round(float(gib) * 1024)


@cache
def _table() -> dict[str, DraGpu]:
    rows: dict[str, Any] = yaml.safe_load((hardware.HERE / "dra_gpus.yaml").read_text())
    return {
        model: DraGpu(
            name=row["name"],
            architecture=row["architecture"],
            compute=_semver(str(row["compute"])),
            memory_mib=_mib(row["memory_gib"]),
            profiles={
                p: DraProfile(int(v[0]), _mib(v[1]), int(v[2])) for p, v in row["profiles"].items()
            },
        )
        for model, row in rows.items()
    }


def _semver(version: str) -> str:
    parts = version.split(".")
    return ".".join([*parts, "0", "0"][:3])


def dra_gpu(gpu: hardware.Gpu) -> DraGpu:
    try:
        return _table()[gpu.model]
    except KeyError:
        raise hardware.UnknownHardwareError(f"no DRA row for GPU model {gpu.model!r}") from None


def gpu_device_name(minor: int) -> str:
    return f"gpu-{minor}"


def mig_device_name(minor: int, profile: str, gi_profile_id: int, start: int) -> str:
    """``gpu-0-mig-1g10gb-19-0``: the driver's canonical MIG device name (v0.4.x)."""
    compliant = re.sub(r"[^a-z0-9-]", "-", profile.lower().replace(".", ""))
    return f"gpu-{minor}-mig-{compliant}-{gi_profile_id}-{start}"


def sim_uuid(prefix: str, *parts: object) -> str:
    """A stable ``GPU-``/``MIG-`` UUID of the simulated hardware: uuid5 of ``parts``."""
    return f"{prefix}-{uuid.uuid5(_UUIDS, '/'.join(str(p) for p in parts))}"


def _common(info: DraGpu, minor: int) -> dict[str, dict[str, str]]:
    return {
        "productName": {"string": info.name},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": info.architecture},
        "cudaComputeCapability": {"version": info.compute},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
        PCI_BUS_ID: {"string": f"0000:{0x18 + 0x10 * minor:02x}:00.0"},
        PCIE_ROOT: {"string": f"pci0000:{0x10 * (minor // 2):02x}"},
    }


def engines(profile: str) -> dict[str, int]:
    """Copy engines and media engines of a MIG profile: the simulator's approximation after the
    A100's ``-lgip`` (copy engines = compute slices; decoders 0/1/2/2/5 for 1g/2g/3g/4g/7g; a
    ``+me`` instance holds one of each media engine; no encoders). Nothing should key on them."""
    slices = int(profile.split("g", 1)[0])
    media = 0 if "-me" in profile else {1: 0, 2: 1, 3: 2, 4: 2, 7: 5}.get(slices, slices // 2)
    extended = "+me" in profile
    return {
        "copyEngines": slices,
        "decoders": max(media, 1) if extended else media,
        "encoders": 0,
        "jpegEngines": 1 if extended or slices == 7 else 0,
        "ofaEngines": 1 if extended or slices == 7 else 0,
    }


def gpu_device(node: str, info: DraGpu, minor: int) -> dict[str, Any]:
    attributes = {
        "type": {"string": "gpu"},
        "uuid": {"string": sim_uuid("GPU", node, minor)},
        **_common(info, minor),
    }
    capacity = {"memory": {"value": f"{info.memory_mib}Mi"}}
    return {"name": gpu_device_name(minor), "attributes": attributes, "capacity": capacity}


def mig_device(node: str, info: DraGpu, minor: int, profile: str, start: int, size: int) -> Obj:
    row = info.profiles[profile]
    attributes = {
        "type": {"string": "mig"},
        "uuid": {"string": sim_uuid("MIG", node, minor, profile, start)},
        "parentUUID": {"string": sim_uuid("GPU", node, minor)},
        "profile": {"string": profile},
        **_common(info, minor),
    }
    counts = {"multiprocessors": row.multiprocessors, **engines(profile)}
    capacity = {k: {"value": str(v)} for k, v in counts.items()}
    capacity["memory"] = {"value": f"{row.memory_mib}Mi"}
    capacity |= {f"memorySlice{i}": {"value": "1"} for i in range(start, start + size)}
    name = mig_device_name(minor, profile, row.gi_profile_id, start)
    return {"name": name, "attributes": attributes, "capacity": capacity}


def devices(node: str, gpu: hardware.Gpu, layouts: Sequence[Mapping[str, int] | None]) -> list[Obj]:
    """The devices the plugin announces for GPUs in ``layouts`` (index = minor; None: MIG off).

    MigError when the MIG manager could not have made a layout (no placement on the grid)."""
    info = dra_gpu(gpu)
    out: list[Obj] = []
    for minor, layout in enumerate(layouts):
        if layout is None:
            out.append(gpu_device(node, info, minor))
            continue
        wanted = {p: n for p, n in layout.items() if n}
        placed = migmanager.placement(gpu, wanted) if not migmanager.problem(gpu, wanted) else None
        if placed is None:
            raise migmanager.MigError(f"GPU {minor}: no placement for {wanted}")
        instances = sorted((s, p) for p, starts in placed.items() for s in starts)
        for start, profile in instances:
            size = gpu.profiles[profile].size
            out.append(mig_device(node, info, minor, profile, start, size))
    return out
