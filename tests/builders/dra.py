"""DRA objects: pools and policies with ``allocation: DRA``, DeviceClasses, ResourceSlices.

``dra_pool("a", mps=True).layout(LAYOUT_B)`` is a GeometryWrapper; ``DeviceClassWrapper`` and
``ResourceSliceWrapper`` build the ``resource.k8s.io/v1`` objects as the API server or the
driver would hold them (a hand-made class has no Tessera label).
"""

from __future__ import annotations

from typing import Any, Self

from .base import Raw, Wrapper
from .tessera import GeometryWrapper, SharingPolicyWrapper

DRIVER = "gpu.nvidia.com"


def dra_pool(name: str, *, time_slicing: bool = False, mps: bool = False) -> GeometryWrapper:
    """A pool of whole GPUs (until ``layout``) whose nodes run NVIDIA's DRA driver."""
    gates = {"timeSlicingSettings": time_slicing, "mpsSupport": mps}
    return GeometryWrapper(name).spec(allocation="DRA", dra={"featureGates": gates})


def dra_policy(name: str, pool: str, backend: str, **dra: Any) -> SharingPolicyWrapper:
    """A SharingPolicy on DRA pool ``pool``; ``dra`` holds ``timeSlicing`` / ``mps`` blocks."""
    built = SharingPolicyWrapper(name).backend(backend)
    built._obj["spec"].pop("nodeSelector", None)
    built.spec(poolRef={"name": pool})
    return built.spec(dra=dra) if dra else built


class DeviceClassWrapper(Wrapper):
    api_version = "resource.k8s.io/v1"
    kind = "DeviceClass"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._obj["spec"] = {"selectors": [{"cel": {"expression": "device.driver == 'x'"}}]}

    def selector(self, expression: str) -> Self:
        self._obj["spec"]["selectors"] = [{"cel": {"expression": expression}}]
        return self

    def spec(self, spec: Raw) -> Self:
        self._obj["spec"] = spec
        return self


class ResourceSliceWrapper(Wrapper):
    """One node's slice of the driver: ``ResourceSliceWrapper("n1").gpu(0).mig(1, "1g.10gb")``."""

    api_version = "resource.k8s.io/v1"
    kind = "ResourceSlice"

    def __init__(self, node: str, driver: str = DRIVER, generation: int = 1) -> None:
        super().__init__(f"{node}-{driver}")
        pool = {"name": node, "generation": generation, "resourceSliceCount": 1}
        self._obj["spec"] = {"driver": driver, "pool": pool, "nodeName": node, "devices": []}

    def _device(self, name: str, attributes: dict[str, Any]) -> Self:
        values = {key: {"string": value} for key, value in attributes.items()}
        self._obj["spec"]["devices"].append({"name": name, "attributes": values})
        return self

    def gpu(self, minor: int) -> Self:
        return self._device(f"gpu-{minor}", {"type": "gpu", "uuid": f"GPU-{minor:08d}"})

    def mig(self, parent: int, profile: str, start: int = 0) -> Self:
        short = profile.replace(".", "").replace("+", "-")
        name = f"gpu-{parent}-mig-{short}-19-{start}"
        return self._device(name, {"type": "mig", "profile": profile, "uuid": f"MIG-{start}"})


def _bus(i: int) -> dict[str, dict[str, str]]:
    # bus numbers not in index order as text: 0x08 < 0x18 < 0x28 ..., as a real board's are
    return {"resource.kubernetes.io/pciBusID": {"string": f"0000:{0x08 + 0x10 * i:02x}:00.0"}}


def board_gpu(i: int) -> dict[str, Any]:
    """Slice device of whole GPU ``i`` of a simulated H100 board, with its PCI bus ID."""
    return {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, **_bus(i)}}


def board_mig(i: int, start: int) -> dict[str, Any]:
    """Slice device of a 3g.40gb MIG device at ``start`` on GPU ``i`` of that board."""
    attrs = {"type": {"string": "mig"}, "profile": {"string": "3g.40gb"}, **_bus(i)}
    return {"name": f"gpu-{i}-mig-3g40gb-9-{start}", "attributes": attrs}


def allocated_claim(
    name: str, node: str, devices: list[str], reserved: list[str], namespace: str = "ml"
) -> dict[str, Any]:
    """A ResourceClaim as kube-scheduler leaves it: ``devices`` of ``node``'s pool allocated,
    reserved for the pods of uid ``reserved``."""
    results = [{"driver": DRIVER, "pool": node, "device": d, "request": "gpu"} for d in devices]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": u, "uid": u} for u in reserved],
        },
    }
