"""A tiny PodResources v1 client, for tests only: the messages of ``devcluster.podresources_proto``
over a unix socket, as a node agent would call the kubelet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from devcluster import podresources_proto as proto


def call(socket: Path, method: str, request: Any = None, timeout: float = 5.0) -> Any:
    """``/v1.PodResourcesLister/<method>`` on ``socket``; the request defaults to an empty one."""
    request_type, response_type = proto.METHODS[method]
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        stub = channel.unary_unary(
            proto.path(method),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=proto.message(response_type).FromString,
        )
        return stub(
            request if request is not None else proto.message(request_type)(), timeout=timeout
        )


def listed(socket: Path) -> dict[str, dict[str, dict[str, list[str]]]]:
    """``List``: ``namespace/name`` -> container -> resource -> device IDs (every pod listed)."""
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for pod in call(socket, "List").pod_resources:
        containers = out.setdefault(f"{pod.namespace}/{pod.name}", {})
        for container in pod.containers:
            held = containers.setdefault(container.name, {})
            for devices in container.devices:
                held.setdefault(devices.resource_name, []).extend(devices.device_ids)
    return out
