"""Which fields of HAMi's ``device-config.yaml`` Tessera owns, remembered on the ConfigMap.

People write most of that file, so ownership is per field, as for HAMi's per-node maps
(``hami.nodes``): the ``vnpus`` entries Tessera added (by ``chipName``),
``vnpus.hamiVnpuCore``, and ``deviceSplitCount``/``deviceMemoryScaling``/``deviceCoreScaling``
in ``nvidia:``. For a scalar Tessera set over a person's value, the value it replaced is kept
too, so releasing the field gives that value back; a section Tessera created (``vnpus:``,
``nvidia:``) goes when nothing is left in it. The record is JSON in the annotation
``tessera.io/managed-fields``; one that does not parse counts as empty (Tessera then owns
nothing there and touches only what policies ask for, never releasing a person's field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

Prior = tuple[Any, ...]
"""What a field held before Tessera set it: ``()`` absent, ``(value,)`` present."""


@dataclass(frozen=True)
class Owned:
    chips: tuple[str, ...] = ()
    """``chipName`` of each ``vnpus`` entry Tessera wrote."""
    vnpus_section: bool = False
    """Tessera created ``vnpus:`` (it goes with Tessera's last entry)."""
    hami_vnpu_core: Prior | None = None
    """Owned ``vnpus.hamiVnpuCore`` (None: not owned) and what it held before."""
    nvidia: Mapping[str, Prior] = field(default_factory=dict)
    """Owned ``nvidia:`` fields and what each held before."""
    nvidia_section: bool = False

    def annotation(self) -> str | None:
        """The annotation's value; None when Tessera owns nothing (the annotation goes)."""
        if self == Owned():
            return None
        body: dict[str, Any] = {}
        if self.chips:
            body["chips"] = sorted(self.chips)
        if self.vnpus_section:
            body["vnpusSection"] = True
        if self.hami_vnpu_core is not None:
            body["hamiVnpuCore"] = _prior(self.hami_vnpu_core)
        if self.nvidia:
            body["nvidia"] = {k: _prior(v) for k, v in sorted(self.nvidia.items())}
        if self.nvidia_section:
            body["nvidiaSection"] = True
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    def with_chip(self, chip: str, owned: bool) -> Owned:
        chips = {*self.chips, chip} if owned else set(self.chips) - {chip}
        return replace(self, chips=tuple(sorted(chips)))

    def with_nvidia(self, key: str, prior: Prior | None) -> Owned:
        fields = {k: v for k, v in self.nvidia.items() if k != key}
        if prior is not None:
            fields[key] = prior
        return replace(self, nvidia=fields)


def parse(annotations: Mapping[str, str] | None, key: str) -> Owned:
    raw = (annotations or {}).get(key)
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        return Owned()
    if not isinstance(body, dict):
        return Owned()
    found = body.get("nvidia")
    nvidia: dict[str, Any] = found if isinstance(found, dict) else {}
    core = body.get("hamiVnpuCore")
    return Owned(
        chips=tuple(sorted(str(c) for c in body.get("chips") or ())),
        vnpus_section=bool(body.get("vnpusSection")),
        hami_vnpu_core=_from(core) if isinstance(core, dict) else None,
        nvidia={str(k): _from(v) for k, v in nvidia.items() if isinstance(v, dict)},
        nvidia_section=bool(body.get("nvidiaSection")),
    )


def _prior(prior: Prior) -> dict[str, Any]:
    return {"was": prior[0]} if prior else {}


def _from(raw: Mapping[str, Any]) -> Prior:
    return (raw["was"],) if "was" in raw else ()
