"""A client of the kubelet's PodResources API (v1): which devices each container holds.

The kubelet serves ``v1.PodResourcesLister`` over gRPC on a unix socket (by default
``/var/lib/kubelet/pod-resources/kubelet.sock``): ``List`` answers the device-plugin devices
of every container of every pod on the node, ``GetAllocatableResources`` every device the
node's device plugins advertise (GA since Kubernetes 1.28).

No generated code: the messages are built at runtime from a descriptor written here with the
field numbers of upstream's ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``. Only what
Tessera reads is declared (the DRA part down to the claim names); the parser keeps any other
field as unknown, so a newer kubelet's additions change nothing. ``SERVICE`` and the method
paths are the wire names; the unit tests serve the same messages from a fake kubelet.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "v1.PodResourcesLister"
LIST = f"/{SERVICE}/List"
ALLOCATABLE = f"/{SERVICE}/GetAllocatableResources"
MAX_MESSAGE = 64 << 20  # a node's List answer; gRPC's default limit (4 MiB) is per message

_F = descriptor_pb2.FieldDescriptorProto
_REPEATED, _OPTIONAL = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
# message -> (field, number, type, label, message type): upstream's numbers, not renumbered.
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _F.TYPE_MESSAGE, _REPEATED, "PodResources")],
    "PodResources": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("namespace", 2, _F.TYPE_STRING, _OPTIONAL, ""),
        ("containers", 3, _F.TYPE_MESSAGE, _REPEATED, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("devices", 2, _F.TYPE_MESSAGE, _REPEATED, "ContainerDevices"),
        ("cpu_ids", 3, _F.TYPE_INT64, _REPEATED, ""),
        ("memory", 4, _F.TYPE_MESSAGE, _REPEATED, "ContainerMemory"),
        ("dynamic_resources", 5, _F.TYPE_MESSAGE, _REPEATED, "DynamicResource"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("device_ids", 2, _F.TYPE_STRING, _REPEATED, ""),
        ("topology", 3, _F.TYPE_MESSAGE, _OPTIONAL, "TopologyInfo"),
    ],
    "ContainerMemory": [
        ("memory_type", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("size", 2, _F.TYPE_UINT64, _OPTIONAL, ""),
        ("topology", 3, _F.TYPE_MESSAGE, _OPTIONAL, "TopologyInfo"),
    ],
    "TopologyInfo": [("nodes", 1, _F.TYPE_MESSAGE, _REPEATED, "NUMANode")],
    "NUMANode": [("ID", 1, _F.TYPE_INT64, _OPTIONAL, "")],
    # class_name (1) was dropped upstream; the claim is named by 2 and 3.
    "DynamicResource": [
        ("claim_name", 2, _F.TYPE_STRING, _OPTIONAL, ""),
        ("claim_namespace", 3, _F.TYPE_STRING, _OPTIONAL, ""),
        ("claim_resources", 4, _F.TYPE_MESSAGE, _REPEATED, "ClaimResource"),
    ],
    "ClaimResource": [("cdi_devices", 1, _F.TYPE_MESSAGE, _REPEATED, "CDIDevice")],
    "CDIDevice": [("name", 1, _F.TYPE_STRING, _OPTIONAL, "")],
    "AllocatableResourcesRequest": [],
    "AllocatableResourcesResponse": [
        ("devices", 1, _F.TYPE_MESSAGE, _REPEATED, "ContainerDevices"),
        ("cpu_ids", 2, _F.TYPE_INT64, _REPEATED, ""),
        ("memory", 3, _F.TYPE_MESSAGE, _REPEATED, "ContainerMemory"),
    ],
}


def _classes() -> dict[str, Any]:
    """The message classes, in a pool of their own (nothing else registers package v1 here)."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="tessera/agent/podresources/v1/api.proto", package="v1", syntax="proto3"
    )
    for message, fields in _MESSAGES.items():
        desc = proto.message_type.add(name=message)
        for name, number, kind, label, type_name in fields:
            field = desc.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".v1.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}"))
        for name in _MESSAGES
    }


MESSAGES = _classes()


class PodResourcesError(RuntimeError):
    """The kubelet did not answer: no socket, refused, timed out, or an error status."""


class HeldDevice(NamedTuple):
    """One device a container holds: its pod as ``namespace/name``, its resource, its ID."""

    pod: str
    resource: str
    device_id: str


class PodResources:
    """``List`` and ``GetAllocatableResources`` of the kubelet at ``socket``, a channel per call
    (the kubelet recreates its socket when it restarts; the agent asks every few seconds)."""

    def __init__(self, socket: str = DEFAULT_SOCKET, *, timeout: float = 10.0) -> None:
        self.socket = socket
        self.timeout = timeout

    def held(self) -> list[HeldDevice]:
        """Every device-plugin device held by a container on this node."""
        answer = self._call(LIST, "ListPodResourcesRequest", "ListPodResourcesResponse")
        return [
            HeldDevice(f"{pod.namespace}/{pod.name}", devices.resource_name, device_id)
            for pod in answer.pod_resources
            for container in pod.containers
            for devices in container.devices
            for device_id in devices.device_ids
        ]

    def allocatable(self) -> set[tuple[str, str]]:
        """(resource, device ID) of every device the node's device plugins advertise."""
        answer = self._call(
            ALLOCATABLE, "AllocatableResourcesRequest", "AllocatableResourcesResponse"
        )
        return {(d.resource_name, i) for d in answer.devices for i in d.device_ids}

    def _call(self, method: str, request: str, response: str) -> Any:
        target = f"unix://{Path(self.socket).absolute()}"
        options = [("grpc.max_receive_message_length", MAX_MESSAGE)]
        try:
            with grpc.insecure_channel(target, options=options) as channel:
                call: Callable[..., Any] = channel.unary_unary(
                    method,
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=MESSAGES[response].FromString,
                )
                return call(MESSAGES[request](), timeout=self.timeout)
        except grpc.RpcError as err:
            code, details = _status(err)
            raise PodResourcesError(
                f"kubelet PodResources API at {self.socket}: {method}: {code}: {details}"
            ) from err


def _status(err: grpc.RpcError) -> tuple[str, str]:
    """The status of a failed call (a grpc.Call); the bare error where it is not one."""
    code, details = getattr(err, "code", None), getattr(err, "details", None)
    if callable(code) and callable(details):
        return str(getattr(code(), "name", code())), str(details())
    return "error", str(err)
