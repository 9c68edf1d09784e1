"""Opaque sharing configs and the NVIDIA driver's Validate rules, field by field."""

from __future__ import annotations

from typing import Any

import pytest
from dra_builders import policy

from tessera.api.v1alpha1.nodepoolgeometry import DraFeatureGates
from tessera.domain.dra import sharing

ON = DraFeatureGates(time_slicing_settings=True, mps_support=True)
OFF = DraFeatureGates()
API = "resource.nvidia.com/v1beta1"


@pytest.mark.parametrize(
    ("backend", "dra", "selects", "want"),
    [
        pytest.param("Exclusive", {}, "gpu", None, id="exclusive-no-config"),
        pytest.param(
            "TimeSlicing",
            {"timeSlicing": {"interval": "Long"}},
            "gpu",
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
            id="gpu-time-slicing-interval",
        ),
        pytest.param(
            "TimeSlicing",
            {},
            "gpu",
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}},
            id="gpu-time-slicing-driver-default",
        ),
        pytest.param(
            "TimeSlicing",
            {"timeSlicing": {"interval": "Long"}},
            "1g.10gb",
            {"strategy": "TimeSlicing"},
            id="mig-time-slicing-takes-no-config",
        ),
        pytest.param(
            "MPS",
            {
                "mps": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                }
            },
            "1g.10gb",
            {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 50,
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                },
            },
            id="mig-mps-limits",
        ),
        pytest.param(
            "MPS",
            {
                "mps": {
                    "defaultPinnedDeviceMemoryLimit": "10Gi",
                    "defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"},
                }
            },
            "gpu",
            {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "10Gi"}},
            id="per-device-keys-never-in-a-class",
        ),
        pytest.param("MPS", {}, "gpu", {"strategy": "MPS"}, id="mps-driver-defaults"),
    ],
)
def test_parameters(backend: str, dra: dict[str, Any], selects: str, want: Any) -> None:
    got = sharing.parameters(policy("p", backend, **dra), selects)
    if want is None:
        assert got is None
        return
    kind = "GpuConfig" if selects == "gpu" else "MigDeviceConfig"
    assert got == {"apiVersion": API, "kind": kind, "sharing": want}


@pytest.mark.parametrize(
    ("backend", "dra", "gates", "whole", "want"),
    [
        pytest.param("Exclusive", {}, OFF, True, [], id="exclusive-needs-no-gate"),
        pytest.param("MPS", {}, ON, True, [], id="mps-gate-on"),
        pytest.param(
            "MPS",
            {"mps": {"defaultActiveThreadPercentage": 10}},
            OFF,
            True,
            [("spec.dra.mps", '"MPSSupport" feature gate is not enabled on pool p')],
            id="mps-gate-off-names-block-and-gate",
        ),
        pytest.param(
            "TimeSlicing",
            {},
            OFF,
            True,
            [("spec.backend", '"TimeSlicingSettings" feature gate is not enabled')],
            id="time-slicing-gate-off-no-block",
        ),
        pytest.param(
            "TimeSlicing",
            {"timeSlicing": {"interval": "Short"}},
            ON,
            False,
            [("spec.dra.timeSlicing.interval", "TimeSlicing on MIG takes no config")],
            id="interval-on-mig-only-pool",
        ),
        pytest.param(
            "TimeSlicing", {"timeSlicing": {"interval": "Default"}}, ON, False, [], id="default-ok"
        ),
        pytest.param(
            "MPS",
            {"mps": {"defaultPinnedDeviceMemoryLimit": "512Ki"}},
            ON,
            True,
            [("spec.dra.mps.defaultPinnedDeviceMemoryLimit", "512Ki value set too low")],
            id="pinned-under-1Mi",
        ),
        pytest.param(
            "MPS", {"mps": {"defaultPinnedDeviceMemoryLimit": "1Mi"}}, ON, True, [], id="1Mi-ok"
        ),
        pytest.param(
            "MPS",
            {"mps": {"defaultPinnedDeviceMemoryLimit": "1048575.5"}},
            ON,
            True,
            [],
            id="rounded-up-to-1Mi-ok",
        ),
        pytest.param(
            "MPS",
            {"mps": {"defaultPinnedDeviceMemoryLimit": "8Ei"}},
            ON,
            True,
            [("spec.dra.mps.defaultPinnedDeviceMemoryLimit", "over the driver's 64-bit")],
            id="pinned-over-int64",
        ),
        pytest.param(
            "MPS",
            {
                "mps": {
                    "defaultPerDevicePinnedMemoryLimit": {
                        "GPU-12345678-1234-1234-1234-123456789abc": "2Gi",
                        "3": "1e9",
                    }
                }
            },
            ON,
            True,
            [
                (
                    "spec.dra.mps.defaultPerDevicePinnedMemoryLimit",
                    "cannot be set: a SharingPolicy's config goes into DeviceClasses",
                )
            ],
            id="per-device-uuid-and-index-refused-in-a-class",
        ),
        pytest.param(
            "MPS",
            {"mps": {"defaultPerDevicePinnedMemoryLimit": {"1": "5Gi", "0": "1Gi"}}},
            ON,
            False,
            [("spec.dra.mps.defaultPerDevicePinnedMemoryLimit", "keys set: 0, 1")],
            id="per-device-refused-names-the-keys",
        ),
        pytest.param(
            "MPS",
            {"mps": {"defaultPerDevicePinnedMemoryLimit": {}}},
            ON,
            True,
            [],
            id="per-device-empty-ok",
        ),
    ],
)
def test_validate(
    backend: str,
    dra: dict[str, Any],
    gates: DraFeatureGates,
    whole: bool,
    want: list[tuple[str, str]],
) -> None:
    found = sharing.validate(policy("p", backend, **dra), "p", gates, whole)
    assert len(found) == len(want), found
    for (field, message), (want_field, want_text) in zip(found, want, strict=True):
        assert field == want_field
        assert want_text in message


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("1Mi", 2**20),
        ("10Gi", 10 * 2**30),
        ("1e6", 10**6),
        ("1E", 10**18),
        ("1Ei", 2**60),
        ("x", None),
    ],
)
def test_quantity_bytes(value: str, want: int | None) -> None:
    assert sharing.quantity_bytes(value) == want
