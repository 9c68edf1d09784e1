"""The GPU node agent's step: the kubelet's PodResources answer -> the Node's holders record.

A fake kubelet serves ``v1.PodResourcesLister`` in this process on a unix socket, with the
agent's own runtime-built messages; the Kube is a fake that keeps one Node.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from tessera.adapters.kube import ApiError, Kube
from tessera.agent import podresources
from tessera.agent.gpus import GpuAgent
from tessera.agent.podresources import MESSAGES, PodResourcesError
from tessera.api.constants import GPU_HOLDERS_ANNOTATION
from tessera.domain.rollout import holders

G0, G1 = "GPU-aaaa-0000", "GPU-bbbb-1111"
M0 = "MIG-cccc-2222"
LISTING = f"""\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: {G0})
GPU 1: NVIDIA H100 80GB HBM3 (UUID: {G1})
  MIG 3g.40gb     Device  0: (UUID: {M0})
"""
T0 = datetime(2026, 12, 7, 7, 0, tzinfo=UTC)


class Kubelet:
    """The pods' devices and the node's allocatable devices, served over gRPC."""

    def __init__(self, path: str) -> None:
        self.pods: dict[str, list[tuple[str, str]]] = {}  # "ns/name" -> [(resource, id)]
        self.allocatable = [("nvidia.com/gpu", G0), ("nvidia.com/mig-3g.40gb", M0)]
        self.calls: list[str] = []
        handlers = {
            "List": self._handler(self._list, "ListPodResourcesRequest"),
            "GetAllocatableResources": self._handler(
                self._allocatable, "AllocatableResourcesRequest"
            ),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(podresources.SERVICE, handlers),)
        )
        self.server.add_insecure_port(f"unix://{path}")
        self.server.start()

    @staticmethod
    def _handler(fn: Any, request: str) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=MESSAGES[request].FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )

    def _list(self, _request: Any, _context: Any) -> Any:
        self.calls.append("List")
        pods = []
        for key, devices in self.pods.items():
            ns, name = key.split("/")
            container = MESSAGES["ContainerResources"](
                name="main",
                devices=[
                    MESSAGES["ContainerDevices"](resource_name=r, device_ids=[i])
                    for r, i in devices
                ],
                cpu_ids=[2, 3],
            )
            pods.append(MESSAGES["PodResources"](name=name, namespace=ns, containers=[container]))
        return MESSAGES["ListPodResourcesResponse"](pod_resources=pods)

    def _allocatable(self, _request: Any, _context: Any) -> Any:
        self.calls.append("GetAllocatableResources")
        return MESSAGES["AllocatableResourcesResponse"](
            devices=[
                MESSAGES["ContainerDevices"](resource_name=r, device_ids=[i])
                for r, i in self.allocatable
            ]
        )


class FakeKube(Kube):
    """One Node, read with GET and changed by merge patches of its annotations."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        super().__init__(cast(Any, None))
        self.node: dict[str, Any] = {"metadata": {"name": "gpu-1", "annotations": annotations}}
        self.patches: list[Any] = []
        self.fail: ApiError | None = None

    def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        assert path == "/api/v1/nodes/gpu-1", path
        if self.fail is not None:
            raise self.fail
        if method == "PATCH":
            self.patches.append(kw["body"])
            assert set(kw["body"]) == {"metadata"} and set(kw["body"]["metadata"]) == {
                "annotations"
            }
            meta = self.node["metadata"]
            meta["annotations"] = {
                **(meta["annotations"] or {}),
                **kw["body"]["metadata"]["annotations"],
            }
        return json.loads(json.dumps(self.node))

    def record(self) -> holders.Holders | None:
        return holders.decode(
            (self.node["metadata"]["annotations"] or {}).get(GPU_HOLDERS_ANNOTATION)
        )


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=10)
        return self.now


@pytest.fixture
def socket() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="pr-", dir="/tmp")  # unix socket paths: 107 bytes at most
    yield f"{folder}/kubelet.sock"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def kubelet(socket: str) -> Iterator[Kubelet]:
    served = Kubelet(socket)
    yield served
    served.server.stop(None)


class Smi:
    def __init__(self, text: str = LISTING) -> None:
        self.text, self.runs = text, 0

    def __call__(self) -> str:
        self.runs += 1
        return self.text


def _agent(kube: FakeKube, socket: str, smi: Smi | None = None) -> GpuAgent:
    return GpuAgent(kube, "gpu-1", socket=socket, nvidia_smi=smi or Smi(), clock=Clock())


def test_publishes_once_and_not_again_while_the_holders_stay(kubelet: Kubelet, socket: str) -> None:
    kubelet.pods = {
        "serving/llm-0": [("nvidia.com/gpu", G0)],
        "batch/tune": [("nvidia.com/mig-3g.40gb", f"{M0}::1")],
        "batch/cpu": [("example.com/nic", "eth1")],
    }
    kube, smi = FakeKube({"other": "kept"}), Smi()
    agent = _agent(kube, socket, smi)
    assert agent.step() is True
    record = kube.record()
    assert record is not None
    assert dict(record.pods) == {"serving/llm-0": (0,), "batch/tune": (1,)}
    assert record.read == T0 + timedelta(seconds=10) and not record.overflow
    assert kube.node["metadata"]["annotations"]["other"] == "kept"
    # once more a second later, so that a pod started in the second of the first read counts
    assert agent.step() is True
    settled = kube.record()
    assert settled is not None and settled.pods == record.pods
    assert settled.read == T0 + timedelta(seconds=20)
    assert agent.step() is False and agent.step() is False
    assert len(kube.patches) == 2
    assert smi.runs == 1  # the allocatable devices did not change
    kubelet.pods["serving/llm-1"] = [("nvidia.com/gpu", G0)]
    assert agent.step() is True
    record = kube.record()
    assert record is not None and record.gpus_of("serving/llm-1") == (0,)
    assert record.read == T0 + timedelta(seconds=50)


def test_a_record_already_on_the_node_is_not_rewritten(kubelet: Kubelet, socket: str) -> None:
    kubelet.pods = {"serving/llm-0": [("nvidia.com/gpu", G0)]}
    earlier = holders.bounded(T0, {"serving/llm-0": [0]}, [])
    kube = FakeKube({GPU_HOLDERS_ANNOTATION: holders.encode(earlier)})
    assert _agent(kube, socket).step() is False
    assert kube.patches == []


def test_nvidia_smi_runs_again_when_the_allocatable_devices_change(
    kubelet: Kubelet, socket: str
) -> None:
    kubelet.pods = {"a/x": [("nvidia.com/gpu", G1)]}
    smi = Smi(LISTING.replace(G1, "GPU-not-yet"))
    kube = FakeKube()
    agent = _agent(kube, socket, smi)
    agent.step()
    record = kube.record()
    assert record is not None and record.unmapped == ("a/x",) and record.gpus_of("a/x") is None
    kubelet.allocatable.append(("nvidia.com/gpu", G1))  # the plugin advertises GPU 1 now
    smi.text = LISTING
    assert agent.step() is True
    record = kube.record()
    assert record is not None and dict(record.pods) == {"a/x": (1,)} and not record.unmapped
    assert smi.runs == 2
    agent.step()
    assert smi.runs == 2


def test_an_allocatable_device_nvidia_smi_does_not_name_reruns_it_next_time(
    kubelet: Kubelet, socket: str
) -> None:
    smi = Smi("")
    agent = _agent(FakeKube(), socket, smi)
    agent.step()
    agent.step()
    assert smi.runs == 2


def test_more_holders_than_the_record_keeps_publish_overflow(kubelet: Kubelet, socket: str) -> None:
    kubelet.pods = {
        f"a/p{i}": [("nvidia.com/gpu", f"{G0}::{i}")] for i in range(holders.MAX_PODS + 1)
    }
    kube = FakeKube()
    agent = _agent(kube, socket)
    assert agent.step() is True
    raw = kube.node["metadata"]["annotations"][GPU_HOLDERS_ANNOTATION]
    assert json.loads(raw) == {"v": 1, "read": "2026-12-07T07:00:10Z", "overflow": True}
    assert agent.step() is True  # the settling write
    assert agent.step() is False
    del kubelet.pods["a/p0"]  # exactly MAX_PODS: listed again
    assert agent.step() is True
    record = kube.record()
    assert record is not None and len(record.pods) == holders.MAX_PODS


def test_no_kubelet_publishes_nothing_and_the_loop_goes_on(socket: str) -> None:
    kube = FakeKube()
    agent = _agent(kube, socket)
    with pytest.raises(PodResourcesError, match=socket):
        agent.kubelet.held()
    assert agent.step() is False
    assert kube.patches == []
    stop = threading.Event()
    steps: list[bool] = []
    original = agent.step

    def counted() -> bool:
        steps.append(original())
        if len(steps) == 3:
            stop.set()
        return steps[-1]

    agent.step = counted  # type: ignore[method-assign]
    agent.run(0.01, stop)
    assert steps == [False, False, False]
    assert kube.patches == []


def test_a_failed_nvidia_smi_or_write_publishes_nothing(
    kubelet: Kubelet, socket: str, tmp_path: Path
) -> None:
    kubelet.pods = {"a/x": [("nvidia.com/gpu", G0)]}
    kube = FakeKube()
    missing = GpuAgent(kube, "gpu-1", socket=socket, nvidia_smi=str(tmp_path / "nvidia-smi"))
    assert missing.step() is False
    failing = tmp_path / "failing-smi"
    failing.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    failing.chmod(0o755)
    assert GpuAgent(kube, "gpu-1", socket=socket, nvidia_smi=str(failing)).step() is False
    assert kube.patches == []
    agent = _agent(kube, socket)
    kube.fail = ApiError(503, "ServiceUnavailable", "down")
    assert agent.step() is False
    kube.fail = None
    assert agent.step() is True  # read the Node again, then wrote
    assert agent.step() is True  # and once more, settled
    assert agent.step() is False


def test_the_nvidia_smi_path_is_run_with_dash_l(
    kubelet: Kubelet, socket: str, tmp_path: Path
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\n[ "$1" = -L ] || exit 2\ncat <<EOF\n{LISTING}EOF\n')
    smi.chmod(0o755)
    kubelet.pods = {"a/x": [("nvidia.com/gpu", G0)]}
    kube = FakeKube()
    assert GpuAgent(kube, "gpu-1", socket=socket, nvidia_smi=str(smi)).step() is True
    record = kube.record()
    assert record is not None and dict(record.pods) == {"a/x": (0,)}
