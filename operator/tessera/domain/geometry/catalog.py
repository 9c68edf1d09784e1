"""The NVIDIA MIG device catalog: which GPU models exist and what their profiles look like.

Every geometry decision starts here, so the facts live in one data file
(``mig_catalog.yaml``, with a source for each row) and this module only turns
them into frozen values and resolves the names people and nodes use for a GPU
(canonical ids, GPU Feature Discovery ``nvidia.com/gpu.product`` labels,
aliases). It reads nothing but its own packaged data file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

_DATA_FILE = "mig_catalog.yaml"
# GFD appends these to the product label; they say nothing about the model.
_LABEL_SUFFIXES = re.compile(r"(-MIG-.*|-SHARED)$", re.IGNORECASE)


class UnknownModelError(ValueError):
    """A GPU name that no catalog entry answers to; the message lists the known models."""


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one model, e.g. 3g.40gb on H100-80GB."""

    name: str
    profile_id: int
    compute_slices: int
    memory_slices: int
    memory_gib: float | None
    max_instances: int
    starts: tuple[int, ...]
    size: int
    status: str
    sources: tuple[str, ...]
    media_extension: bool
    masks: tuple[int, ...] = field(repr=False)

    def slots(self, start: int) -> str:
        """Human form of the grid units a placement at ``start`` occupies, e.g. ``4-7``."""
        end = start + self.size - 1
        return str(start) if end == start else f"{start}-{end}"


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A MIG-capable GPU model: its placement grid, instance limit and profiles."""

    id: str
    name: str
    grid: int
    compute_slices: int
    memory_slices: int
    max_instances: int
    pci_device_ids: tuple[str, ...]
    product_labels: tuple[str, ...]
    aliases: tuple[str, ...]
    labels_status: str
    profiles: tuple[MigProfile, ...]
    by_name: dict[str, MigProfile] = field(repr=False, compare=False, hash=False)

    def profile(self, name: str) -> MigProfile | None:
        return self.by_name.get(name)

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


def _profile(row: dict[str, Any], media_suffixes: tuple[str, ...]) -> MigProfile:
    size = int(row["size"])
    starts = tuple(int(s) for s in row["starts"])
    return MigProfile(
        name=str(row["name"]),
        profile_id=int(row["id"]),
        compute_slices=int(row["c"]),
        memory_slices=int(row["m"]),
        memory_gib=None if row.get("gib") is None else float(row["gib"]),
        max_instances=int(row["max"]),
        starts=starts,
        size=size,
        status=str(row["status"]),
        sources=tuple(str(s) for s in row.get("src", ())),
        media_extension=str(row["name"]).endswith(media_suffixes),
        masks=tuple(((1 << size) - 1) << s for s in starts),
    )


def _model(row: dict[str, Any], media_suffixes: tuple[str, ...]) -> GpuModel:
    profiles = tuple(_profile(p, media_suffixes) for p in row["profiles"])
    return GpuModel(
        id=str(row["id"]),
        name=str(row["name"]),
        grid=int(row["grid"]),
        compute_slices=int(row["compute_slices"]),
        memory_slices=int(row["memory_slices"]),
        max_instances=int(row["max_instances"]),
        pci_device_ids=tuple(str(i) for i in row.get("pci_device_ids", ())),
        product_labels=tuple(str(label) for label in row.get("product_labels", ())),
        aliases=tuple(str(a) for a in row.get("aliases", ())),
        labels_status=str(row.get("labels_status", "seen")),
        profiles=profiles,
        by_name={p.name: p for p in profiles},
    )


@cache
def _load() -> tuple[tuple[GpuModel, ...], dict[str, GpuModel]]:
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    media_suffixes = tuple(str(s) for s in data["media_extension_suffixes"])
    catalog = tuple(_model(row, media_suffixes) for row in data["models"])
    index: dict[str, GpuModel] = {}
    for model in catalog:
        for name in (model.id, *model.aliases, *model.product_labels):
            for key in _keys(name):
                other = index.setdefault(key, model)
                if other is not model:
                    raise ValueError(f"{_DATA_FILE}: {name!r} names both {other.id} and {model.id}")
    return catalog, index


def _keys(name: str) -> tuple[str, ...]:
    key = _LABEL_SUFFIXES.sub("", name.strip()).upper().replace(" ", "-").replace("_", "-")
    bare = key.removeprefix("NVIDIA-").removeprefix("TESLA-")
    return (key, bare) if bare != key else (key,)


def models() -> tuple[GpuModel, ...]:
    """Every model in catalog order."""
    return _load()[0]


def resolve(name: str) -> GpuModel:
    """The model a canonical id, alias or GFD product label names (case-insensitive).

    Raises UnknownModelError, whose message lists the known models.
    """
    index = _load()[1]
    for key in _keys(name):
        if key in index:
            return index[key]
    known = ", ".join(m.id for m in models())
    raise UnknownModelError(
        f"unknown GPU model {name!r}: known models are {known} "
        "(GPU Feature Discovery product labels such as NVIDIA-H100-80GB-HBM3 work too)"
    )
