"""The kubelet's PodResources API v1, as message classes built at run time (no generated code).

Transcribed from kubernetes ``staging/src/k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``
(package ``v1``, proto3; field names and numbers as there, ``DynamicResource`` field 1 is a
tombstone since 1.31): service ``v1.PodResourcesLister`` with ``List``,
``GetAllocatableResources`` and ``Get``. The descriptor goes into a pool of its own, so nothing
else in the process named ``v1.*`` can clash with it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "v1"
SERVICE = f"{PACKAGE}.PodResourcesLister"
_F = descriptor_pb2.FieldDescriptorProto
# name: [(field, number, type, repeated, message type)]
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str]]] = {
    "AllocatableResourcesRequest": [],
    "AllocatableResourcesResponse": [
        ("devices", 1, _F.TYPE_MESSAGE, True, "ContainerDevices"),
        ("cpu_ids", 2, _F.TYPE_INT64, True, ""),
        ("memory", 3, _F.TYPE_MESSAGE, True, "ContainerMemory"),
    ],
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [
        ("pod_resources", 1, _F.TYPE_MESSAGE, True, "PodResources"),
    ],
    "PodResources": [
        ("name", 1, _F.TYPE_STRING, False, ""),
        ("namespace", 2, _F.TYPE_STRING, False, ""),
        ("containers", 3, _F.TYPE_MESSAGE, True, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _F.TYPE_STRING, False, ""),
        ("devices", 2, _F.TYPE_MESSAGE, True, "ContainerDevices"),
        ("cpu_ids", 3, _F.TYPE_INT64, True, ""),
        ("memory", 4, _F.TYPE_MESSAGE, True, "ContainerMemory"),
        ("dynamic_resources", 5, _F.TYPE_MESSAGE, True, "DynamicResource"),
    ],
    "ContainerMemory": [
        ("memory_type", 1, _F.TYPE_STRING, False, ""),
        ("size", 2, _F.TYPE_UINT64, False, ""),
        ("topology", 3, _F.TYPE_MESSAGE, False, "TopologyInfo"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _F.TYPE_STRING, False, ""),
        ("device_ids", 2, _F.TYPE_STRING, True, ""),
        ("topology", 3, _F.TYPE_MESSAGE, False, "TopologyInfo"),
    ],
    "TopologyInfo": [("nodes", 1, _F.TYPE_MESSAGE, True, "NUMANode")],
    "NUMANode": [("ID", 1, _F.TYPE_INT64, False, "")],
    "DynamicResource": [
        ("claim_name", 2, _F.TYPE_STRING, False, ""),
        ("claim_namespace", 3, _F.TYPE_STRING, False, ""),
        ("claim_resources", 4, _F.TYPE_MESSAGE, True, "ClaimResource"),
    ],
    "ClaimResource": [
        ("cdi_devices", 1, _F.TYPE_MESSAGE, True, "CDIDevice"),
        ("driver_name", 2, _F.TYPE_STRING, False, ""),
        ("pool_name", 3, _F.TYPE_STRING, False, ""),
        ("device_name", 4, _F.TYPE_STRING, False, ""),
    ],
    "CDIDevice": [("name", 1, _F.TYPE_STRING, False, "")],
    "GetPodResourcesRequest": [
        ("pod_name", 1, _F.TYPE_STRING, False, ""),
        ("pod_namespace", 2, _F.TYPE_STRING, False, ""),
    ],
    "GetPodResourcesResponse": [
        ("pod_resources", 1, _F.TYPE_MESSAGE, False, "PodResources"),
    ],
}
# method: (request, response)
METHODS = {
    "List": ("ListPodResourcesRequest", "ListPodResourcesResponse"),
    "GetAllocatableResources": ("AllocatableResourcesRequest", "AllocatableResourcesResponse"),
    "Get": ("GetPodResourcesRequest", "GetPodResourcesResponse"),
}


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="api.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = fdp.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind)
            field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
    service = fdp.service.add(name="PodResourcesLister")
    for method, (request, response) in METHODS.items():
        service.method.add(
            name=method, input_type=f".{PACKAGE}.{request}", output_type=f".{PACKAGE}.{response}"
        )
    return fdp


@cache
def _pool() -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    return pool


def message(name: str) -> Any:
    """The class of message ``name`` (``ListPodResourcesResponse`` …) of package ``v1``."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"{PACKAGE}.{name}"))


def path(method: str) -> str:
    """The gRPC method path, ``/v1.PodResourcesLister/List``."""
    return f"/{SERVICE}/{method}"
