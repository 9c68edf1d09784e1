"""The simulated vGPU Device Manager and sandbox device plugin, driven by labels alone.

No Tessera here: the test plays the protocol a platform engineer (or Tessera) would, on the real
control plane — a vGPU ConfigMap written by hand, a vm-vgpu node of two A100 80GB PCIe GPUs, its
``nvidia.com/vgpu.config`` label changed — and checks that the simulator answers like NVIDIA's
``nvidia-k8s-vgpu-dm``: ``pending`` with the sandbox operands paused, every vGPU of a changed
GPU deleted, ``success`` or ``failed`` decided from its own board table, the operands back, the
sandbox device plugin's ``nvidia.com/NVIDIA_<type>`` in allocatable, VM pods placed on them by
kube-scheduler; a config its parser refuses fails before anything is paused; only a change of
the label's value wakes it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devcluster import vgpufleet, vgpunode
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c

from .helpers import eventually, namespace, wait_running

pytestmark = pytest.mark.integration
NAMES = vgpunode.Names(name="sim-vgpu-manager-test")  # not the ConfigMap Tessera writes
NODE = "simvgpu-a100d-0"
NS = "simvgpu-vms"
QUARTERS = {"A100D-20C": 4}
CONFIGS: dict[str, list[dict[str, Any]]] = {
    "quarters": [{"devices": "all", "vgpu-devices": QUARTERS}],
    "halves": [{"devices": "all", "vgpu-devices": {"A100D-40C": 2}}],
    "mixed-sizes": [{"devices": "all", "vgpu-devices": {"A100D-40C": 1, "A100D-20C": 2}}],
    "too-many": [{"devices": [1], "vgpu-devices": {"A100D-40C": 3}}],
    "wrong-board": [{"devices": "all", "vgpu-devices": {"H100-20C": 4}}],
}
CM = path_of("v1", "configmaps", NAMES.name, NAMES.namespace)


class Recorder:
    """Every (state label, sandbox plugin deploy label) the node shows, in order."""

    def __init__(self, kube: Kube) -> None:
        self.seen: list[tuple[str | None, str | None]] = []
        self.lock = threading.Lock()
        field = f"metadata.name={NODE}"
        self.informer = Informer(kube, "/api/v1/nodes", self._on, name="rec", field_selector=field)

    def _on(self, kind: str, node: Obj) -> None:
        labels = node["metadata"].get("labels") or {}
        now = (labels.get(c.VGPU_CONFIG_STATE_LABEL), labels.get(vgpufleet.SANDBOX_PLUGIN_LABEL))
        with self.lock:
            if not self.seen or self.seen[-1] != now:
                self.seen.append(now)

    def __enter__(self) -> Recorder:
        self.informer.start()
        eventually(self.informer.synced.is_set, 30, "recorder synced")
        return self

    def __exit__(self, *_: object) -> None:
        self.informer.stop()


def write_configs(kube: Kube, text: str) -> None:
    body = {
        "metadata": {"name": NAMES.name, "namespace": NAMES.namespace},
        "data": {"config.yaml": text},
    }
    try:
        kube.create(path_of("v1", "configmaps", namespace=NAMES.namespace), body)
    except ApiError as err:
        if not err.conflict:
            raise
        kube.patch(CM, {"data": body["data"]})


@pytest.fixture(scope="module")
def node(kube: Kube) -> Iterator[str]:
    namespace(kube, NAMES.namespace)
    write_configs(kube, yaml.safe_dump({"version": "v1", "vgpu-configs": CONFIGS}))
    vgpufleet.create_nodes(kube, [vgpufleet.node_spec(NODE, "A100-PCIE-80GB", gpus=2)])
    agents = vgpunode.VgpuNodeAgents(kube, reconfigure_seconds=0.3, names=NAMES).start()
    try:
        yield NODE
    finally:
        agents.stop()
        for path in (path_of("v1", "nodes", NODE), CM, path_of("v1", "namespaces", NS)):
            try:
                kube.delete(path)
            except ApiError as err:
                if not err.not_found:
                    raise


def select(kube: Kube, config: str) -> Obj:
    """Point the node at ``config``; wait for the device manager's verdict on it."""
    labels = {c.VGPU_CONFIG_LABEL: config, c.VGPU_CONFIG_STATE_LABEL: None}  # as Tessera does
    meta = {"labels": labels, "annotations": {vgpunode.APPLIED: None}}
    kube.patch(path_of("v1", "nodes", NODE), {"metadata": meta})

    def verdict() -> Obj | None:
        obj = kube.get(path_of("v1", "nodes", NODE))
        state = obj["metadata"]["labels"].get(c.VGPU_CONFIG_STATE_LABEL)
        done = obj["metadata"].get("annotations", {}).get(vgpunode.APPLIED) == config
        return obj if done and state in ("success", "failed") else None

    return eventually(verdict, 30, f"the vGPU device manager's verdict on {config}")


def devices(obj: Obj) -> list[dict[str, int]]:
    return list(json.loads(obj["metadata"]["annotations"][vgpunode.DEVICES]))


def vgpu_allocatable(kube: Kube) -> dict[str, str]:
    alloc = kube.get(path_of("v1", "nodes", NODE))["status"]["allocatable"]
    return {k: v for k, v in alloc.items() if k.startswith("nvidia.com/")}


def test_a_fresh_node_applies_the_default_config_and_fails_when_the_file_lacks_it(
    kube: Kube, node: str
) -> None:
    def started() -> Obj | None:
        obj = kube.get(path_of("v1", "nodes", node))
        return obj if obj["metadata"]["labels"].get(c.VGPU_CONFIG_STATE_LABEL) else None

    obj = eventually(started, 30, "the device manager's start-up verdict")
    assert obj["metadata"]["labels"][c.VGPU_CONFIG_STATE_LABEL] == "failed"
    assert (
        "selected vgpu-config not present: default"
        in obj["metadata"]["annotations"][vgpunode.ERROR]
    )
    assert c.VGPU_CONFIG_LABEL not in obj["metadata"]["labels"]  # it never writes the config label


def test_a_config_change_pauses_the_plugin_creates_the_devices_and_vms_land_on_them(
    kube: Kube, node: str
) -> None:
    with Recorder(kube) as rec:
        obj = select(kube, "quarters")
        assert obj["metadata"]["labels"][c.VGPU_CONFIG_STATE_LABEL] == "success"
        eventually(lambda: vgpu_allocatable(kube) == {"nvidia.com/NVIDIA_A100D-20C": "8"}, 30)
    assert ("pending", vgpufleet.PAUSED) in rec.seen and rec.seen[-1] == ("success", "true"), (
        rec.seen
    )  # the operands paused while the devices changed, then restored
    assert devices(obj) == [QUARTERS, QUARTERS]
    for label in (vgpufleet.SANDBOX_PLUGIN_LABEL, vgpufleet.SANDBOX_VALIDATOR_LABEL):
        assert obj["metadata"]["labels"][label] == "true"

    namespace(kube, NS)
    vgpufleet.deploy_vms(kube, NS, vgpufleet.vms("vm", "A100D-20C", 3, kind="StatefulSet"))
    pods = wait_running(kube, NS, "vm", 3, 60)
    assert {p["spec"]["nodeName"] for p in pods} == {NODE}, "kube-scheduler placed the VMs"
    assert all(p["metadata"]["labels"]["kubevirt.io"] == "virt-launcher" for p in pods)
    kube.delete(path_of("v1", "namespaces", NS))


def test_only_a_change_of_the_label_value_wakes_it(kube: Kube, node: str) -> None:
    before = kube.get(path_of("v1", "nodes", node))
    edited = {**CONFIGS, "quarters": [{"devices": "all", "vgpu-devices": {"A100D-10C": 8}}]}
    write_configs(kube, yaml.safe_dump({"version": "v1", "vgpu-configs": edited}))
    marker = {"metadata": {"annotations": {"sim.tessera.io/test-marker": "edited"}}}
    kube.patch(path_of("v1", "nodes", node), marker)  # a node event after the edit
    eventually(
        lambda: kube.get(path_of("v1", "nodes", node))["metadata"]["annotations"].get(
            "sim.tessera.io/test-marker"
        ),
        10,
    )
    after = kube.get(path_of("v1", "nodes", node))
    assert devices(after) == devices(before) == [QUARTERS, QUARTERS]  # the edit is not applied
    obj = select(kube, "halves")
    assert devices(obj) == [{"A100D-40C": 2}, {"A100D-40C": 2}]
    obj = select(kube, "quarters")  # back: a change of value, read from the edited file
    assert devices(obj) == [{"A100D-10C": 8}, {"A100D-10C": 8}]
    write_configs(kube, yaml.safe_dump({"version": "v1", "vgpu-configs": CONFIGS}))


HALVES = [{"A100D-40C": 2}] * 2


@pytest.mark.parametrize(
    ("start", "config", "why", "left"),
    [
        # GPU 0 wiped; equal-size mode: once it holds 20C devices there is no room for a 40C
        (
            "halves",
            "mixed-sizes",
            "failed to create 1 A100D-40C vGPU devices on the GPU",
            [{"A100D-20C": 2}, {"A100D-40C": 2}],
        ),
        # GPU 1 wiped and refilled to the type's maximum; GPU 0, not selected, untouched
        (
            "quarters",
            "too-many",
            "ensure '3' does not exceed the maximum supported instances for 'A100D-40C'",
            [QUARTERS, {"A100D-40C": 2}],
        ),
        # checked before anything is deleted
        ("halves", "wrong-board", "vgpu type H100-20C is not supported on GPU (index=0", HALVES),
    ],
)
def test_what_the_parser_lets_through_fails_on_the_node(
    kube: Kube, node: str, start: str, config: str, why: str, left: list[dict[str, int]]
) -> None:
    select(kube, start)
    obj = select(kube, config)
    meta = obj["metadata"]
    assert meta["labels"][c.VGPU_CONFIG_STATE_LABEL] == "failed"
    assert why in meta["annotations"][vgpunode.ERROR], meta["annotations"]
    assert meta["labels"][vgpufleet.SANDBOX_PLUGIN_LABEL] == "true"  # restored after a failure too
    assert devices(obj) == left


def test_a_config_the_parser_refuses_fails_before_anything_is_paused(kube: Kube, node: str) -> None:
    select(kube, "halves")
    bad = {
        **CONFIGS,
        "strict": [{"devices": "all", "vgpu-devices": {"A100D-20C": 4}, "mig-enabled": False}],
    }
    write_configs(kube, yaml.safe_dump({"version": "v1", "vgpu-configs": bad}))
    with Recorder(kube) as rec:
        obj = select(kube, "strict")
    assert "unexpected field: mig-enabled" in obj["metadata"]["annotations"][vgpunode.ERROR]
    assert ("pending", vgpufleet.PAUSED) not in rec.seen, rec.seen
    assert devices(obj) == HALVES
    write_configs(kube, yaml.safe_dump({"version": "v1", "vgpu-configs": CONFIGS}))


def test_the_fault_hook_fails_one_apply_after_deleting_the_first_gpus_devices(
    kube: Kube, node: str
) -> None:
    select(kube, "halves")
    kube.patch(path_of("v1", "nodes", node), {"metadata": {"annotations": {vgpunode.FAIL: "once"}}})
    obj = select(kube, "quarters")
    assert obj["metadata"]["labels"][c.VGPU_CONFIG_STATE_LABEL] == "failed"
    assert "injected fault" in obj["metadata"]["annotations"][vgpunode.ERROR]
    assert devices(obj) == [{}, {"A100D-40C": 2}]
    assert vgpunode.FAIL not in obj["metadata"]["annotations"]  # "once": used up
    obj = select(kube, "halves")  # the rollback: back to what the node had
    assert obj["metadata"]["labels"][c.VGPU_CONFIG_STATE_LABEL] == "success"
    eventually(lambda: vgpu_allocatable(kube) == {"nvidia.com/NVIDIA_A100D-40C": "4"}, 30)
