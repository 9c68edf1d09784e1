"""Every field Tessera puts into a DeviceClass's opaque config, against NVIDIA's DRA driver.

A class's config reaches the driver with every claim of the class, so it must hold for any
allocation: here claims of 1 and 4 whole GPUs and of 1 and 3 MIG devices. ``prepare`` is this
test's own reading of what the driver (v0.4.0) does with a class config when it prepares a
claim (docs/dra.md §What each field means to the driver): strict decoding, the kind against
the device type, Normalize (implied defaults), Validate, then what it applies with the claim's
devices (the time slice on whole GPUs; MPS limits resolved against the claim's device UUIDs,
sorted, an index being a place in that list). It never asks ``tessera.domain``.

Each row is one value of one field. What reaches the driver is what Tessera writes when it
accepts the policy, and the policy's block as asked when it refuses it; the row says on which
claims the driver fails that. Tessera must refuse, naming the field, whenever some claim
fails — and what it writes must never fail a claim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from dra_builders import policy

from tessera.api.v1alpha1.nodepoolgeometry import DraFeatureGates
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.dra import sharing

API = "resource.nvidia.com/v1beta1"
TS_GATE, MPS_GATE = "TimeSlicingSettings", "MPSSupport"
BOTH = frozenset({TS_GATE, MPS_GATE})
INTERVALS = ("Default", "Short", "Medium", "Long")


@dataclass(frozen=True)
class Device:
    type: str  # "gpu" or "mig", the driver's device type
    uuid: str


def _gpu(i: int) -> Device:
    return Device("gpu", f"GPU-{i:08x}-1111-2222-3333-444444444444")


def _mig(i: int) -> Device:
    return Device("mig", f"MIG-{i:08x}-5555-6666-7777-888888888888")


CLAIMS: Mapping[str, Mapping[str, Sequence[Device]]] = {
    "gpu": {"1 gpu": (_gpu(1),), "4 gpus": tuple(_gpu(i) for i in range(4))},
    "mig": {"1 mig": (_mig(1),), "3 migs": tuple(_mig(i) for i in range(3))},
}
"""The claims a class may get, by what it selects (a class selects one device type)."""
GPU0 = _gpu(0).uuid  # in the 4-GPU claim only

# --- this test's reading of the driver -------------------------------------------------------

_TOP = {"apiVersion", "kind", "sharing"}
_SHARING = {
    "GpuConfig": {"strategy", "timeSlicingConfig", "mpsConfig"},
    "MigDeviceConfig": {"strategy", "mpsConfig"},  # MigDeviceSharing has no timeSlicingConfig
}
_MPS = {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit"}
_MPS |= {"defaultPerDevicePinnedMemoryLimit"}
_TYPE_OF = {"GpuConfig": "gpu", "MigDeviceConfig": "mig"}
_QUANTITY = re.compile(r"^([+-]?[0-9]*\.?[0-9]*)([KMGTPE]i|[eE][+-]?[0-9]+|[mkMGTPE])?$")
_SCALE: dict[str, Decimal] = {"": Decimal(1), "m": Decimal("0.001")}
_SCALE |= {s + "i": Decimal(2) ** (10 * (n + 1)) for n, s in enumerate("KMGTPE")}
_SCALE |= {s: Decimal(10) ** (3 * (n + 1)) for n, s in enumerate("kMGTPE")}


def _limit_ok(value: str) -> bool:
    """A pinned limit the driver takes: Quantity.Value() (bytes rounded up, as a signed 64-bit
    integer), then whole MiB, must be above 0."""
    found = _QUANTITY.match(value)
    assert found, value
    number, suffix = found.group(1), found.group(2) or ""
    exponent = re.fullmatch(r"[eE][+-]?[0-9]+", suffix)
    scale = Decimal(10) ** int(suffix[1:]) if exponent else _SCALE[suffix]
    exact = math.ceil(Decimal(number) * scale)
    wrapped = (exact + 2**63) % 2**64 - 2**63  # a big.Int's low 64 bits read as an int64
    return wrapped // 2**20 > 0


def _unknown(got: Mapping[str, Any], known: set[str], where: str) -> str | None:
    extra = sorted(set(got) - known)
    return f'strict decoding error: unknown field "{where}{extra[0]}"' if extra else None


def prepare(
    config: Mapping[str, Any] | None, claim: Sequence[Device], gates: frozenset[str]
) -> str | None:
    """None when the driver prepares ``claim`` with this class config, else its error."""
    if config is None:
        return None
    kind = config["kind"]
    if config["apiVersion"] != API or kind not in _SHARING:
        return f"unknown config {config['apiVersion']}/{kind}"
    sharing_in = config.get("sharing")
    for got, known, where in (
        (config, _TOP, ""),
        (sharing_in or {}, _SHARING[kind], "sharing."),
        ((sharing_in or {}).get("mpsConfig") or {}, _MPS, "sharing.mpsConfig."),
        ((sharing_in or {}).get("timeSlicingConfig") or {}, {"interval"}, "timeSlicingConfig."),
    ):
        if error := _unknown(got, known, where):
            return error
    for device in claim:
        if _TYPE_OF[kind] != device.type:
            return f"cannot apply {kind} to device {device.uuid} of type {device.type}"
    # Normalize
    if sharing_in is None:
        if TS_GATE not in gates:
            return None
        sharing_in = {"strategy": "TimeSlicing"}
    shared = dict(sharing_in)
    strategy = shared["strategy"]
    if kind == "GpuConfig" and TS_GATE in gates and strategy == "TimeSlicing":
        shared.setdefault("timeSlicingConfig", {"interval": "Default"})
    if MPS_GATE in gates and strategy == "MPS":
        shared.setdefault("mpsConfig", {})
    # Validate
    gate = {"TimeSlicing": TS_GATE, "MPS": MPS_GATE}.get(strategy)
    if gate is None:
        return f"unknown GPU sharing strategy: {strategy}"
    if gate not in gates:
        return f'"{strategy}" is selected, but the "{gate}" feature gate is not enabled'
    if kind == "GpuConfig" and strategy == "TimeSlicing":
        interval = shared["timeSlicingConfig"].get("interval")
        if interval not in INTERVALS:  # absent: a nil interval, dereferenced
            return f"unknown time-slice interval: {interval}"
        if "mpsConfig" in shared:
            return "cannot use MpsConfig with the 'TimeSlicing' strategy"
    if strategy != "MPS":
        return None
    if kind == "GpuConfig" and "timeSlicingConfig" in shared:
        return "cannot use TimeSlicingConfig with the 'MPS' strategy"
    mps = shared["mpsConfig"]
    percentage = mps.get("defaultActiveThreadPercentage")
    if percentage is not None and not 0 <= percentage <= 100:
        return "active thread percentage must be 0..100"
    # Apply: the MPS daemon's limits, per device of this claim
    uuids = sorted(d.uuid for d in claim)
    default = mps.get("defaultPinnedDeviceMemoryLimit")
    if default is not None and not _limit_ok(default):
        return f"invalid limit: default value set too low: {default}"
    for key, value in (mps.get("defaultPerDevicePinnedMemoryLimit") or {}).items():
        if key not in uuids:
            if not re.fullmatch(r"[+-]?[0-9]+", key):
                return f"invalid device: unable to parse key as an integer: {key}"
            if not 0 <= int(key) < len(uuids):
                return f"invalid device: invalid device index: {int(key)}"
        if not _limit_ok(value):
            return f"invalid limit: value set too low: {key}: {value}"
    return None


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One value of one field, on a pool providing ``selects`` (``gpu`` or ``mig``) only."""

    field: str  # the opaque config's field (docs/dra.md)
    backend: str
    dra: Mapping[str, Any]
    selects: str = "gpu"
    gates: frozenset[str] = BOTH
    refused: str | None = None  # the SharingPolicy field Tessera names, or None (accepted)
    fails_on: tuple[str, ...] = ()  # the claims (CLAIMS) the driver fails with it
    unchecked: Mapping[str, Any] = field(default_factory=dict)
    """MPS values set past the model's bounds (the CRD's too): what a hand-made spec could
    hold; Tessera checks them anyway."""


ALL_GPU = ("1 gpu", "4 gpus")
ALL_MIG = ("1 mig", "3 migs")
MPS = "spec.dra.mps"
LIMIT = f"{MPS}.defaultPinnedDeviceMemoryLimit"
PER_DEVICE = f"{MPS}.defaultPerDevicePinnedMemoryLimit"
PERCENT = f"{MPS}.defaultActiveThreadPercentage"
INTERVAL = "spec.dra.timeSlicing.interval"


def _rows() -> Iterator[Any]:
    def row(id_: str, *args: Any, **kw: Any) -> Any:
        return pytest.param(Row(*args, **kw), id=id_)

    yield row("kind-exclusive-no-config", "kind", "Exclusive", {}, gates=frozenset())
    yield row("kind-exclusive-mig-no-config", "kind", "Exclusive", {}, "mig", gates=frozenset())
    # sharing.strategy: known, and its driver gate on
    yield row("strategy-ts", "sharing.strategy", "TimeSlicing", {})
    yield row("strategy-ts-mig", "sharing.strategy", "TimeSlicing", {}, "mig")
    yield row("strategy-mps", "sharing.strategy", "MPS", {})
    yield row("strategy-mps-mig", "sharing.strategy", "MPS", {}, "mig")
    for selects, claims in (("gpu", ALL_GPU), ("mig", ALL_MIG)):
        off = frozenset({MPS_GATE})
        yield row(
            f"strategy-ts-gate-off-{selects}",
            "sharing.strategy",
            "TimeSlicing",
            {},
            selects,
            gates=off,
            refused="spec.backend",
            fails_on=claims,
        )
        yield row(
            f"strategy-mps-gate-off-{selects}",
            "sharing.strategy",
            "MPS",
            {"mps": {"defaultActiveThreadPercentage": 10}},
            selects,
            gates=frozenset({TS_GATE}),
            refused=MPS,
            fails_on=claims,
        )
    # sharing.timeSlicingConfig.interval: whole GPUs only
    for interval in INTERVALS:
        yield row(
            f"interval-{interval}",
            "sharing.timeSlicingConfig.interval",
            "TimeSlicing",
            {"timeSlicing": {"interval": interval}},
        )
    yield row(
        "interval-default-on-mig-not-written",
        "sharing.timeSlicingConfig.interval",
        "TimeSlicing",
        {"timeSlicing": {"interval": "Default"}},
        "mig",
    )
    yield row(
        "interval-long-on-mig",
        "sharing.timeSlicingConfig.interval",
        "TimeSlicing",
        {"timeSlicing": {"interval": "Long"}},
        "mig",
        refused=INTERVAL,
        fails_on=ALL_MIG,
    )
    # sharing.mpsConfig.defaultActiveThreadPercentage: 0..100
    for percent in (0, 50, 100):
        for selects in ("gpu", "mig"):
            yield row(
                f"percentage-{percent}-{selects}",
                "defaultActiveThreadPercentage",
                "MPS",
                {"mps": {"defaultActiveThreadPercentage": percent}},
                selects,
            )
    for percent in (-1, 101):
        yield row(
            f"percentage-{percent}",
            "defaultActiveThreadPercentage",
            "MPS",
            {"mps": {"defaultActiveThreadPercentage": percent}},
            refused=PERCENT,
            fails_on=ALL_GPU,
            unchecked={"default_active_thread_percentage": percent},
        )
    # sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: the same on every device of a claim
    for value in ("1Mi", "10Gi", "1e9", "1048575.5", "1048576000m", "7Ei"):
        for selects in ("gpu", "mig"):
            yield row(
                f"limit-{value}-{selects}",
                "defaultPinnedDeviceMemoryLimit",
                "MPS",
                {"mps": {"defaultPinnedDeviceMemoryLimit": value}},
                selects,
            )
    for value in ("1048575", "512Ki", "0", "-1Gi", "8Ei", "16Ei"):
        for selects, claims in (("gpu", ALL_GPU), ("mig", ALL_MIG)):
            yield row(
                f"limit-{value}-{selects}",
                "defaultPinnedDeviceMemoryLimit",
                "MPS",
                {"mps": {"defaultPinnedDeviceMemoryLimit": value}},
                selects,
                refused=LIMIT,
                fails_on=claims,
            )
    # sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: keys resolved per claim
    per_device: list[tuple[str, str, dict[str, str], tuple[str, ...]]] = [
        ("index-1", "gpu", {"1": "5Gi"}, ("1 gpu",)),
        ("index-3", "gpu", {"3": "5Gi"}, ("1 gpu",)),
        ("index-4", "gpu", {"4": "5Gi"}, ALL_GPU),
        ("uuid-of-one-gpu", "gpu", {GPU0: "5Gi"}, ("1 gpu",)),
        ("gpu-uuid-on-mig", "mig", {GPU0: "5Gi"}, ALL_MIG),
        ("index-1-mig", "mig", {"1": "5Gi"}, ("1 mig",)),
        ("not-a-key", "gpu", {"gpu0": "5Gi"}, ALL_GPU),
        # "0" resolves on every claim, to whichever device has the lowest UUID: no
        # device a class could mean (defaultPinnedDeviceMemoryLimit sets every device)
        ("index-0", "gpu", {"0": "5Gi"}, ()),
        ("index-0-mig", "mig", {"0": "5Gi"}, ()),
    ]
    for id_, selects, limits, claims in per_device:
        yield row(
            f"per-device-{id_}",
            "defaultPerDevicePinnedMemoryLimit",
            "MPS",
            {"mps": {"defaultPerDevicePinnedMemoryLimit": limits}},
            selects,
            refused=PER_DEVICE,
            fails_on=claims,
        )


ROWS = list(_rows())
WRITTEN_FIELDS = {
    "kind",
    "sharing.strategy",
    "sharing.timeSlicingConfig.interval",
    "defaultActiveThreadPercentage",
    "defaultPinnedDeviceMemoryLimit",
}
"""Every field of an opaque config Tessera writes (``apiVersion`` goes with ``kind``)."""


def _spec(row: Row) -> SharingPolicySpec:
    if not row.unchecked:
        return policy("p", row.backend, **row.dra)
    spec = policy("p", row.backend, mps={})
    assert spec.dra is not None and spec.dra.mps is not None
    mps = spec.dra.mps.model_copy(update=dict(row.unchecked))
    return spec.model_copy(update={"dra": spec.dra.model_copy(update={"mps": mps})})


def _asked(row: Row) -> dict[str, Any]:
    """The policy's block as the driver's config, as a renderer copying it would write it."""
    shared: dict[str, Any] = {"strategy": row.backend}
    if "timeSlicing" in row.dra:
        shared["timeSlicingConfig"] = dict(row.dra["timeSlicing"])
    if "mps" in row.dra:
        shared["mpsConfig"] = dict(row.dra["mps"])
    kind = "GpuConfig" if row.selects == "gpu" else "MigDeviceConfig"
    return {"apiVersion": API, "kind": kind, "sharing": shared}


def _leaves(config: Mapping[str, Any] | None) -> set[str]:
    if config is None:
        return set()
    shared = config["sharing"]
    found = {"kind", "sharing.strategy"}
    found |= {f"sharing.timeSlicingConfig.{k}" for k in shared.get("timeSlicingConfig", {})}
    return found | set(shared.get("mpsConfig", {}))


@pytest.mark.parametrize("row", ROWS)
def test_a_class_config_holds_for_every_claim_or_is_refused(row: Row) -> None:
    gates = DraFeatureGates(
        time_slicing_settings=TS_GATE in row.gates, mps_support=MPS_GATE in row.gates
    )
    spec = _spec(row)
    issues = sharing.validate(spec, "p", gates, row.selects == "gpu")
    assert [f for f, _ in issues] == ([row.refused] if row.refused else []), issues
    selects = "gpu" if row.selects == "gpu" else "1g.10gb"
    reaches = sharing.parameters(spec, selects) if not issues else _asked(row)
    failed = {n: prepare(reaches, c, row.gates) for n, c in CLAIMS[row.selects].items()}
    assert tuple(n for n, error in failed.items() if error) == row.fails_on, failed
    if row.refused is None:
        assert not row.fails_on  # what Tessera writes fails no claim
    elif row.field != "defaultPerDevicePinnedMemoryLimit":  # its key "0": see the table
        assert row.fails_on, "a refusal the driver would not make"


def test_every_field_tessera_writes_has_rows_and_only_those_are_written() -> None:
    rows = [p.values[0] for p in ROWS]
    written: set[str] = set()
    for row in rows:
        if row.refused is None:
            selects = "gpu" if row.selects == "gpu" else "1g.10gb"
            written |= _leaves(sharing.parameters(_spec(row), selects))
    assert written == WRITTEN_FIELDS
    assert {r.field for r in rows} == WRITTEN_FIELDS | {"defaultPerDevicePinnedMemoryLimit"}


def test_tessera_never_writes_per_device_keys_even_when_asked() -> None:
    spec = policy("p", "MPS", mps={"defaultPerDevicePinnedMemoryLimit": {"0": "5Gi"}})
    for selects in ("gpu", "1g.10gb"):
        config = sharing.parameters(spec, selects)
        assert config is not None
        assert "defaultPerDevicePinnedMemoryLimit" not in config["sharing"].get("mpsConfig", {})


@pytest.mark.parametrize(
    ("config", "claim", "want"),
    [
        pytest.param(
            {"apiVersion": API, "kind": "GpuConfig", "sharing": {"strategy": "MPS"}},
            (_mig(0),),
            "cannot apply GpuConfig",
            id="gpu-config-on-a-mig-device",
        ),
        pytest.param(
            {
                "apiVersion": API,
                "kind": "MigDeviceConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {}},
            },
            (_mig(0),),
            "unknown field",
            id="mig-takes-no-time-slicing-config",
        ),
        pytest.param(
            {
                "apiVersion": API,
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {}},
            },
            (_gpu(0),),
            "unknown time-slice interval",
            id="time-slicing-config-without-interval",
        ),
        pytest.param(
            {
                "apiVersion": API,
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}},
            },
            (_gpu(0),),
            "cannot use MpsConfig",
            id="mps-config-on-time-slicing",
        ),
        pytest.param(
            {
                "apiVersion": API,
                "kind": "GpuConfig",
                "sharing": {
                    "strategy": "MPS",
                    "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"1": "1Gi"}},
                },
            },
            (_gpu(0), _gpu(1)),
            None,
            id="index-within-the-claim",
        ),
    ],
)
def test_the_drivers_reading_itself(
    config: dict[str, Any], claim: tuple[Device, ...], want: str | None
) -> None:
    """The oracle's own rules that no row of the table reaches (Tessera writes none of these)."""
    got = prepare(config, claim, BOTH)
    assert (got is None) if want is None else (want in (got or "")), got
