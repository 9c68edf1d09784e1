"""In place or disruptive: what a config change does to the pods already running.

Within the NVIDIA device plugin, moving between whole GPUs and time-slicing
only changes what is advertised: the plugin re-registers, running pods keep
their devices, nothing needs a drain. A backend switch is different: MPS
puts GPUs in EXCLUSIVE_PROCESS mode behind a control daemon, HAMi replaces
the device plugin altogether, and HAMi's MIG mode resets idle GPUs. Those go
through the cordon/drain/verify rollout (``tessera.domain.rollout``). So does
any change of an MPS config, because the MPS daemon restarts to apply it and
waits for its running clients to exit first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tessera.domain.sharing.device_plugin import DevicePluginConfig

Backend = Literal["exclusive", "time-slicing", "mps", "hami-core", "hami-mig"]
Kind = Literal["none", "in-place", "disruptive"]
_NVIDIA_PLUGIN = frozenset({"exclusive", "time-slicing"})


@dataclass(frozen=True)
class Effective:
    """The sharing a node runs (or should run), reduced to what classification needs."""

    backend: Backend
    settings: tuple[tuple[str, Any], ...] = ()
    ascend_soft: bool | None = None  # None: no Ascend config from Tessera
    ascend_slots: int | None = None


@dataclass(frozen=True)
class Change:
    kind: Kind
    reason: str

    @property
    def disruptive(self) -> bool:
        return self.kind == "disruptive"


def of_device_plugin(config: DevicePluginConfig) -> Effective:
    backend: Backend = "exclusive" if config.strategy == "none" else config.strategy
    settings: tuple[tuple[str, Any], ...] = tuple(
        (f"{r.name} replicas", r.replicas) for r in config.resources
    )
    settings += (("renameByDefault", config.rename_by_default),)
    settings += (("failRequestsGreaterThanOne", config.fail_requests_greater_than_one),)
    return Effective(backend, settings)


def of_hami(fields: Mapping[str, Any]) -> Effective:
    backend: Backend = "hami-mig" if fields.get("operatingmode") == "mig" else "hami-core"
    settings = tuple(sorted((k, v) for k, v in fields.items() if k != "operatingmode"))
    return Effective(backend, settings)


def with_ascend(effective: Effective, fields: Mapping[str, Any] | None) -> Effective:
    if not fields:
        return effective
    soft = bool(fields.get("hami-vnpu-core"))
    slots = fields.get("vDeviceCount")
    return Effective(effective.backend, effective.settings, soft, slots)


def classify(old: Effective | None, new: Effective, node: str = "") -> Change:
    """How ``old`` becomes ``new`` on ``node``; the reason is written for a person."""
    on = f" on node {node}" if node else ""
    if old is None:
        return Change("in-place", f"first sharing config{on}")
    flipped = None not in (old.ascend_soft, new.ascend_soft) and old.ascend_soft != new.ascend_soft
    if flipped:
        modes = {True: "hami-vnpu-core soft slicing", False: "template slicing"}
        why = f"Ascend {modes[bool(old.ascend_soft)]} -> {modes[bool(new.ascend_soft)]}{on}"
        return Change("disruptive", f"{why}: running vNPUs were allocated the other way")
    if old.backend != new.backend:
        switch = f"backend {old.backend} -> {new.backend}{on}"
        if {old.backend, new.backend} <= _NVIDIA_PLUGIN:
            return Change("in-place", f"{switch}: the plugin re-advertises, pods keep devices")
        return Change("disruptive", f"{switch}: {_why_disruptive(old.backend, new.backend)}")
    diff = _diff(dict(old.settings), dict(new.settings))
    if old.ascend_slots != new.ascend_slots:
        diff.append(f"vDeviceCount {old.ascend_slots} -> {new.ascend_slots}")
    if not diff:
        return Change("none", f"unchanged{on}")
    what = ", ".join(diff) + on
    if new.backend == "mps":
        return Change(
            "disruptive",
            f"{what}: the MPS control daemon restarts to apply it and waits for clients to exit",
        )
    if new.backend == "hami-core":
        return Change("in-place", f"{what}: HAMi's device plugin rereads its node config")
    return Change("in-place", f"{what}: the device plugin re-advertises, pods keep devices")


def _why_disruptive(old: Backend, new: Backend) -> str:
    if "mps" in (old, new):
        return "MPS changes the GPU compute mode and the daemon serving running pods"
    if "hami-mig" in (old, new):
        return "HAMi's MIG mode creates MIG instances and resets idle GPUs"
    return "a different device plugin takes over the GPUs of running pods"


def _diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [
        f"{k} {old.get(k)} -> {new.get(k)}"
        for k in sorted({*old, *new})
        if old.get(k) != new.get(k)
    ]
