"""A simulated GPU node's devices: GPU and MIG UUIDs, and the IDs its device plugin advertises.

What the fake ``nvidia-smi -L`` lists (``fake_nvidia_smi``) and what the simulated kubelet's
device manager hands out (``podresources``) come from one record per node, kept by the simulator
from its own tables — the applied MIG layout placed by ``migmanager.placement``, the
device-plugin config's sharing section — never from Tessera's. The UUIDs are stable: a GPU's
derives from its node and index (as the simulated DRA driver's, ``dradevices.sim_uuid``); a MIG
device's from node, GPU index, profile, placement start and the GPU's *generation*, which goes
up only when that GPU's own layout changes, so a reconfiguration that leaves a GPU alone leaves
its MIG devices, and the pods holding them, as they were.

Device IDs are the NVIDIA device plugin's (``deviceIDStrategy: uuid``, its default): a whole GPU
is its ``GPU-`` UUID under ``nvidia.com/gpu``; a MIG device its ``MIG-`` UUID under
``nvidia.com/mig-<profile>`` (MIG strategy ``mixed``) or ``nvidia.com/gpu`` (``single``). A
resource shared by time-slicing or MPS is advertised ``replicas`` times per device, as
``<id>::<replica>`` with replicas 0 to ``replicas - 1`` (k8s-device-plugin ``internal/rm``:
``NewAnnotatedID``, ``updateDeviceMapWithReplicas``), under its ``rename`` if it has one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster import dradevices, hardware, migmanager

Layout = Mapping[str, int] | None  # one GPU's MIG instances; None: MIG off
REPLICA = "::"  # the device plugin's separator of a replicated device ID
FILE = "inventory.json"


@dataclass(frozen=True)
class MigDevice:
    profile: str
    start: int  # placement start slot
    uuid: str


@dataclass(frozen=True)
class GpuRecord:
    index: int
    uuid: str
    layout: dict[str, int] | None  # non-zero counts; None: MIG off
    generation: int  # one higher each time this GPU's layout changes
    migs: tuple[MigDevice, ...] = ()


@dataclass(frozen=True)
class Device:
    """One device the device plugin advertises: its resource, its ID, the GPU it is on."""

    resource: str
    id: str
    gpu: int


@dataclass(frozen=True)
class Inventory:
    node: str
    product: str  # NVML device name, as nvidia-smi prints it
    gpus: tuple[GpuRecord, ...]
    devices: tuple[Device, ...] = field(default=())

    def gpu_of(self, device_id: str) -> int | None:
        """The GPU a device ID (replicated or not) is on; None for an ID of no device here."""
        uuid = device_id.split(REPLICA, 1)[0]
        for gpu in self.gpus:
            if gpu.uuid == uuid or any(m.uuid == uuid for m in gpu.migs):
                return gpu.index
        return None

    def changed(self, layouts: Sequence[Layout]) -> list[int]:
        """The GPUs whose layout ``layouts`` would change."""
        return [g.index for g in self.gpus if normalized(layouts[g.index]) != g.layout]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "product": self.product,
            "gpus": [
                {
                    "index": g.index,
                    "uuid": g.uuid,
                    "layout": g.layout,
                    "generation": g.generation,
                    "migs": [
                        {"profile": m.profile, "start": m.start, "uuid": m.uuid} for m in g.migs
                    ],
                }
                for g in self.gpus
            ],
            "devices": [{"resource": d.resource, "id": d.id, "gpu": d.gpu} for d in self.devices],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Inventory:
        gpus = tuple(
            GpuRecord(
                int(g["index"]),
                str(g["uuid"]),
                None if g["layout"] is None else {str(k): int(v) for k, v in g["layout"].items()},
                int(g["generation"]),
                tuple(
                    MigDevice(str(m["profile"]), int(m["start"]), str(m["uuid"])) for m in g["migs"]
                ),
            )
            for g in data["gpus"]
        )
        devices = tuple(
            Device(str(d["resource"]), str(d["id"]), int(d["gpu"])) for d in data["devices"]
        )
        return cls(str(data["node"]), str(data["product"]), gpus, devices)


def normalized(layout: Layout) -> dict[str, int] | None:
    return None if layout is None else {p: n for p, n in sorted(layout.items()) if n}


def gpu_records(
    node: str, gpu: hardware.Gpu, layouts: Sequence[Layout], previous: Inventory | None = None
) -> tuple[GpuRecord, ...]:
    """Each GPU under ``layouts`` (index = GPU index), its generation carried over from
    ``previous`` where its layout is unchanged. MigError when a layout has no placement."""
    before = {g.index: g for g in previous.gpus} if previous else {}
    out = []
    for index, raw in enumerate(layouts):
        layout = normalized(raw)
        old = before.get(index)
        generation = 0 if old is None else old.generation + (old.layout != layout)
        migs: tuple[MigDevice, ...] = ()
        if layout:
            why = migmanager.problem(gpu, layout)
            placed = None if why else migmanager.placement(gpu, layout)
            if placed is None:
                raise migmanager.MigError(f"GPU {index}: {why or 'no placement'}")
            migs = tuple(
                MigDevice(p, s, dradevices.sim_uuid("MIG", node, index, p, s, f"gen{generation}"))
                for s, p in sorted((s, p) for p, starts in placed.items() for s in starts)
            )
        uuid = dradevices.sim_uuid("GPU", node, index)
        out.append(GpuRecord(index, uuid, layout, generation, migs))
    return tuple(out)


def advertised(
    gpus: Sequence[GpuRecord], strategy: str, config: Mapping[str, Any] | None
) -> tuple[Device, ...]:
    """The devices the device plugin advertises for ``gpus`` under MIG ``strategy`` and the
    device-plugin ``config`` (its sharing section; ``gpunode.shared_resources`` counts them)."""
    base: list[Device] = []
    for gpu in gpus:
        if gpu.layout is None:
            base.append(Device("nvidia.com/gpu", gpu.uuid, gpu.index))
        for mig in gpu.migs:
            name = "nvidia.com/gpu" if strategy == "single" else f"nvidia.com/mig-{mig.profile}"
            base.append(Device(name, mig.uuid, gpu.index))
    sharing = (config or {}).get("sharing") or {}
    section = sharing.get("timeSlicing") or sharing.get("mps")
    if not section:
        return tuple(sorted(base, key=_order))
    rules = {r["name"]: r for r in section.get("resources", [])}
    out: list[Device] = []
    for device in base:
        rule = rules.get(device.resource)
        if rule is None:
            out.append(device)
            continue
        renamed = rule.get("rename") or (
            f"{device.resource}.shared" if section.get("renameByDefault") else device.resource
        )
        replicas = int(rule.get("replicas", 1))
        out += [Device(renamed, f"{device.id}{REPLICA}{i}", device.gpu) for i in range(replicas)]
    return tuple(sorted(out, key=_order))


def _order(device: Device) -> tuple[int, str, int]:
    """Lowest GPU first, then ID, replicas in their numeric order."""
    uuid, _, replica = device.id.partition(REPLICA)
    return device.gpu, uuid, int(replica or 0)


def build(
    node: str,
    gpu: hardware.Gpu,
    layouts: Sequence[Layout],
    strategy: str = "mixed",
    config: Mapping[str, Any] | None = None,
    previous: Inventory | None = None,
) -> Inventory:
    records = gpu_records(node, gpu, layouts, previous)
    name = dradevices.dra_gpu(gpu).name
    return Inventory(node, name, records, advertised(records, strategy, config))


def counts(devices: Sequence[Device]) -> dict[str, int]:
    out: dict[str, int] = {}
    for device in devices:
        out[device.resource] = out.get(device.resource, 0) + 1
    return out


def save(inventory: Inventory, folder: Path) -> Path:
    """Write ``folder/inventory.json`` at once (readers never see half a file)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / FILE
    partial = folder / f".{FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    partial.write_text(json.dumps(inventory.to_json(), indent=1))
    partial.replace(target)
    return target


def load(folder: Path) -> Inventory | None:
    path = folder / FILE
    return Inventory.from_json(json.loads(path.read_text())) if path.exists() else None
