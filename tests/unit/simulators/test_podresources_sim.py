"""The simulated GPU inventory, fake ``nvidia-smi -L`` and kubelet PodResources endpoint.

What a GPU node agent reads (issue 28): stable GPU/MIG UUIDs, MIG UUIDs that survive a
reconfiguration of the *other* GPUs, the device plugin's IDs (``<id>::<n>`` when shared), the
kubelet's device assignment and its gRPC v1 answers — all from the simulator's own tables.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from builders import podresources as client
from devcluster import fake_nvidia_smi, gpuinventory, gpunode, hardware, migmanager
from devcluster import podresources_proto as proto
from devcluster.podresources import PodResourcesSim
from tessera.adapters.kube import Kube

H100 = hardware.gpu("H100-80GB")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
GPU_LINE = re.compile(rf"^GPU (\d+): (.+) \(UUID: (GPU-{UUID})\)$")
MIG_LINE = re.compile(rf"^  MIG (\S+) +Device +(\d+): \(UUID: (MIG-{UUID})\)$")
HALVES = [{"3g.40gb": 2}, {"3g.40gb": 2}, {"1g.10gb": 7}, None]
TIME_SLICED = {
    "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}
}


def inventory(layouts: list[dict[str, int] | None], **kw: Any) -> gpuinventory.Inventory:
    return gpuinventory.build("node-a", H100, layouts, **kw)


# -- the inventory ---------------------------------------------------------------------------


def test_gpu_uuids_are_stable_per_node_and_index() -> None:
    first, again = inventory([None] * 4), inventory([None] * 4)
    other = gpuinventory.build("node-b", H100, [None] * 4)
    uuids = [g.uuid for g in first.gpus]
    assert uuids == [g.uuid for g in again.gpus]
    assert len(set(uuids)) == 4 and all(re.fullmatch(f"GPU-{UUID}", u) for u in uuids)
    assert not set(uuids) & {g.uuid for g in other.gpus}
    assert first.product == "NVIDIA H100 80GB HBM3"


def test_mig_devices_follow_the_placement_table() -> None:
    inv = inventory(HALVES)
    assert [(m.profile, m.start) for m in inv.gpus[0].migs] == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert len(inv.gpus[2].migs) == 7 and inv.gpus[3].migs == ()
    uuids = [m.uuid for g in inv.gpus for m in g.migs]
    assert len(set(uuids)) == len(uuids) == 11
    assert all(re.fullmatch(f"MIG-{UUID}", u) for u in uuids)


def test_a_gpu_left_alone_keeps_its_mig_uuids_and_a_changed_one_gets_new_ones() -> None:
    before = inventory(HALVES)
    after = inventory([{"1g.10gb": 7}, *HALVES[1:]], previous=before)
    assert after.gpus[1:] == before.gpus[1:]  # same UUIDs, same generation
    assert after.gpus[0].generation == 1
    assert not {m.uuid for m in after.gpus[0].migs} & {m.uuid for m in before.gpus[0].migs}
    back = inventory(HALVES, previous=after)  # the old layout again: new instances, new UUIDs
    assert back.gpus[0].generation == 2
    assert back.gpus[0].migs != before.gpus[0].migs
    assert before.changed([{"1g.10gb": 7, "2g.20gb": 0}, *HALVES[1:]]) == [0]  # zeros ignored


def test_an_impossible_layout_is_a_mig_error() -> None:
    with pytest.raises(migmanager.MigError, match="GPU 1"):
        inventory([None, {"7g.80gb": 2}])


def test_device_ids_are_the_device_plugins() -> None:
    inv = inventory(HALVES)
    by = {d.id: d for d in inv.devices}
    assert by[inv.gpus[3].uuid].resource == "nvidia.com/gpu"
    assert by[inv.gpus[0].migs[1].uuid] == gpuinventory.Device(
        "nvidia.com/mig-3g.40gb", inv.gpus[0].migs[1].uuid, 0
    )
    single = inventory([{"3g.40gb": 2}] * 2, strategy="single")
    assert {d.resource for d in single.devices} == {"nvidia.com/gpu"}
    assert [d.gpu for d in inv.devices] == sorted(d.gpu for d in inv.devices)


def test_time_sliced_ids_are_replicas_of_each_device() -> None:
    inv = inventory([None, None], config=TIME_SLICED)
    ids = [d.id for d in inv.devices]
    assert ids == [f"{g.uuid}::{i}" for g in inv.gpus for i in range(3)]
    assert {inv.gpu_of(i) for i in ids[:3]} == {0}
    renamed = {
        "sharing": {
            "mps": {
                "renameByDefault": True,
                "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}],
            }
        }
    }
    inv = inventory([{"1g.10gb": 7}, None], config=renamed)
    assert gpuinventory.counts(inv.devices) == {
        "nvidia.com/mig-1g.10gb.shared": 14,
        "nvidia.com/gpu": 1,
    }


@pytest.mark.parametrize(
    "config",
    [
        None,
        TIME_SLICED,
        {
            "sharing": {
                "timeSlicing": {
                    "renameByDefault": True,
                    "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
                }
            }
        },
        {
            "sharing": {
                "mps": {
                    "resources": [
                        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2, "rename": "slice"}
                    ]
                }
            }
        },
    ],
)
def test_the_ids_agree_with_the_advertised_counts(config: dict[str, Any] | None) -> None:
    layouts: list[dict[str, int] | None] = [{"1g.10gb": 7}, {"3g.40gb": 2}, None, None]
    entries = [
        {"devices": [i], "mig-enabled": layout is not None, "mig-devices": layout or {}}
        for i, layout in enumerate(layouts)
    ]
    base = migmanager.resources(H100, 4, entries, "mixed")
    expected, _, _ = gpunode.shared_resources(base, config)
    assert gpuinventory.counts(inventory(layouts, config=config).devices) == expected


def test_the_inventory_survives_its_json_file(tmp_path: Path) -> None:
    inv = inventory(HALVES, config=TIME_SLICED)
    gpuinventory.save(inv, tmp_path)
    assert gpuinventory.load(tmp_path) == inv
    assert gpuinventory.load(tmp_path / "absent") is None


# -- nvidia-smi -L ---------------------------------------------------------------------------


def test_nvidia_smi_lists_gpus_then_their_mig_devices() -> None:
    inv = inventory(HALVES)
    lines = fake_nvidia_smi.listing(inv).splitlines()
    assert lines[0] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {inv.gpus[0].uuid})"
    assert lines[1] == f"  MIG 3g.40gb     Device  0: (UUID: {inv.gpus[0].migs[0].uuid})"
    assert lines[7] == f"  MIG 1g.10gb     Device  0: (UUID: {inv.gpus[2].migs[0].uuid})"
    assert lines[-1] == f"GPU 3: NVIDIA H100 80GB HBM3 (UUID: {inv.gpus[3].uuid})"
    gpus = [m.groups() for line in lines if (m := GPU_LINE.match(line))]
    migs = [m.groups() for line in lines if (m := MIG_LINE.match(line))]
    assert len(gpus) + len(migs) == len(lines) == 4 + 11
    assert [g[0] for g in gpus] == ["0", "1", "2", "3"]


def test_the_installed_nvidia_smi_reads_the_nodes_inventory(tmp_path: Path) -> None:
    script = fake_nvidia_smi.install(tmp_path, "node-a")
    run = subprocess.run([str(script), "-L"], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout.strip()) == (6, "No devices were found")
    inv = inventory(HALVES)
    gpuinventory.save(inv, tmp_path)
    run = subprocess.run([str(script), "-L"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == fake_nvidia_smi.listing(inv)


# -- the device manager ----------------------------------------------------------------------


class FakeKube:
    """The one call the device manager makes: is a holder still in the API?"""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return self.pods.get(path.rsplit("/", 1)[-1])


def pod(name: str, node: str | None, *containers: dict[str, int], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-12-07T07:00:{len(name):02d}Z",
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": f"c{i}", "resources": {"limits": {**want, "cpu": "1"}}}
                for i, want in enumerate(containers)
            ],
        },
        "status": status,
    }


@pytest.fixture
def workdir() -> Iterator[Path]:
    short = Path(tempfile.mkdtemp(prefix="podres-"))  # unix socket paths hold 107 bytes
    yield short
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def sim(workdir: Path) -> Iterator[PodResourcesSim]:
    made = PodResourcesSim(cast(Kube, FakeKube()), workdir, workers=2)
    yield made
    made.stop()


def test_pods_get_distinct_devices_lowest_gpu_first(sim: PodResourcesSim) -> None:
    inv = inventory([None, None, {"1g.10gb": 7}, None])
    early = pod("early", "node-a", {"nvidia.com/gpu": 1})
    sim.observe("ADDED", early)  # bound before the device plugin registered: it waits
    assert sim.holders("node-a") == {}
    sim.publish(inv)
    sim.observe("ADDED", pod("two", "node-a", {"nvidia.com/gpu": 1}, {"nvidia.com/mig-1g.10gb": 2}))
    sim.observe("ADDED", pod("elsewhere", "node-b", {"nvidia.com/gpu": 1}))
    sim.observe("ADDED", pod("no-gpu", "node-a", {}))
    assert sim.holders("node-a") == {"ns/early": {0}, "ns/two": {1, 2}}
    held = sim.assigned("node-a")
    assert held["ns/early"] == {"c0": {"nvidia.com/gpu": [inv.gpus[0].uuid]}}
    assert held["ns/two"] == {
        "c0": {"nvidia.com/gpu": [inv.gpus[1].uuid]},
        "c1": {"nvidia.com/mig-1g.10gb": sorted(m.uuid for m in inv.gpus[2].migs)[:2]},
    }
    sim.observe("MODIFIED", {**early, "status": {"phase": "Succeeded"}})
    sim.observe("ADDED", pod("late", "node-a", {"nvidia.com/gpu": 2}))
    assert sim.holders("node-a")["ns/late"] == {0, 3}  # GPU 0 was freed, GPU 1 is taken


def test_a_terminating_pod_keeps_its_devices_until_it_is_gone(sim: PodResourcesSim) -> None:
    sim.publish(inventory([None, None]))
    held = pod("held", "node-a", {"nvidia.com/gpu": 2})
    sim.observe("ADDED", held)
    deleting = {**held, "metadata": {**held["metadata"], "deletionTimestamp": "now"}}
    sim.observe("MODIFIED", deleting)
    assert sim.holders("node-a") == {"ns/held": {0, 1}}
    sim.observe("ADDED", pod("new", "node-a", {"nvidia.com/gpu": 1}))  # none free: what there is
    assert "ns/new" not in sim.holders("node-a")
    sim.observe("DELETED", deleting)
    assert "ns/held" not in sim.holders("node-a")


def test_a_reconfiguration_keeps_the_devices_of_gpus_left_alone(sim: PodResourcesSim) -> None:
    before = inventory(HALVES)
    sim.publish(before)
    sim.observe("ADDED", pod("on-gpu1", "node-a", {"nvidia.com/mig-3g.40gb": 3}))
    assert sim.holders("node-a") == {"ns/on-gpu1": {0, 1}}
    sim.observe("DELETED", pod("on-gpu1", "node-a"))
    sim.observe("ADDED", pod("gpu-1", "node-a", {"nvidia.com/mig-1g.10gb": 1}))
    assert sim.holders("node-a") == {"ns/gpu-1": {2}}
    ids = sim.assigned("node-a")
    new = [{"1g.10gb": 7}, *HALVES[1:]]
    assert sim.refusal("node-a", new) is None  # GPU 0 holds nothing
    sim.publish(inventory(new, previous=before))
    assert sim.assigned("node-a") == ids  # GPU 2's device kept its ID and its pod


def test_the_mig_manager_is_refused_a_gpu_in_use(sim: PodResourcesSim) -> None:
    kube = cast(FakeKube, sim.kube)
    sim.publish(inventory([None, None]))
    held = pod("held", "node-a", {"nvidia.com/gpu": 1})
    kube.pods["held"] = held
    sim.observe("ADDED", held)
    why = sim.refusal("node-a", [{"7g.80gb": 1}, {"7g.80gb": 1}])
    assert (
        why == "GPU 0: unable to destroy GPU instances: In use by another client (held by ns/held)"
    )
    assert sim.refusal("node-a", [None, {"7g.80gb": 1}]) is None
    del kube.pods["held"]  # gone from the API, its DELETED event not seen yet
    assert sim.refusal("node-a", [{"7g.80gb": 1}, None]) is None
    assert sim.holders("node-a") == {}


def test_a_relist_frees_the_pods_it_no_longer_has(sim: PodResourcesSim) -> None:
    sim.publish(inventory([None, None]))
    sim.observe("ADDED", pod("kept", "node-a", {"nvidia.com/gpu": 1}))
    sim.observe("ADDED", pod("lost", "node-a", {"nvidia.com/gpu": 1}))
    sim.informer.on_listing()
    sim.observe("SYNC", pod("kept", "node-a", {"nvidia.com/gpu": 1}))
    sim.informer.on_synced()
    assert sim.holders("node-a") == {"ns/kept": {0}}


# -- the gRPC endpoint -----------------------------------------------------------------------


def test_the_endpoint_answers_list_allocatable_and_get(sim: PodResourcesSim) -> None:
    inv = inventory([None, {"3g.40gb": 2}], config=TIME_SLICED)
    sim.publish(inv)
    sim.observe("ADDED", pod("a", "node-a", {"nvidia.com/gpu": 2}, {}))
    sim.observe("ADDED", pod("b", "node-a", {"nvidia.com/mig-3g.40gb": 1}))
    socket, smi = sim.paths("node-a")
    assert socket.is_socket() and smi.exists()
    assert client.listed(socket) == {
        "ns/a": {
            "c0": {"nvidia.com/gpu": [f"{inv.gpus[0].uuid}::0", f"{inv.gpus[0].uuid}::1"]},
            "c1": {},
        },
        "ns/b": {"c0": {"nvidia.com/mig-3g.40gb": [min(m.uuid for m in inv.gpus[1].migs)]}},
    }
    listed = client.call(socket, "List")
    devices = listed.pod_resources[1].containers[0].devices
    assert [(len(d.device_ids), d.topology.nodes[0].ID) for d in devices] == [(1, 1)]  # one ID each
    allocatable = client.call(socket, "GetAllocatableResources")
    assert [d.device_ids[0] for d in allocatable.devices] == [d.id for d in inv.devices]
    assert list(allocatable.cpu_ids) == []
    request = proto.message("GetPodResourcesRequest")(pod_name="b", pod_namespace="ns")
    got = client.call(socket, "Get", request).pod_resources
    assert (got.name, got.containers[0].devices[0].resource_name) == ("b", "nvidia.com/mig-3g.40gb")
    missing = proto.message("GetPodResourcesRequest")(pod_name="zz", pod_namespace="ns")
    with pytest.raises(grpc.RpcError, match="pod zz in namespace ns not found"):
        client.call(socket, "Get", missing)


def test_the_descriptor_keeps_upstreams_field_numbers() -> None:
    numbers = {
        m.name: {f.name: f.number for f in m.field} for m in proto.file_descriptor().message_type
    }
    assert numbers["ContainerResources"] == {
        "name": 1, "devices": 2, "cpu_ids": 3, "memory": 4, "dynamic_resources": 5,
    }  # fmt: skip
    assert numbers["ContainerDevices"] == {"resource_name": 1, "device_ids": 2, "topology": 3}
    assert numbers["DynamicResource"] == {
        "claim_name": 2,
        "claim_namespace": 3,
        "claim_resources": 4,
    }
    assert numbers["GetPodResourcesRequest"] == {"pod_name": 1, "pod_namespace": 2}
    wire = proto.message("ContainerDevices")(resource_name="r", device_ids=["x"])
    assert wire.SerializeToString() == b"\x0a\x01r\x12\x01x"  # field 1 and 2, length-delimited
