"""Ascend vNPU templates and the rules for combining them on one chip.

Ascend chips are split by templates (``vir02``, ``vir10_3c_16g`` ...) rather
than placements, so validity is arithmetic over the chip's AI cores, AI CPUs,
memory, instance limit, vGroups (310P) and DVPP (docs/facts/ascend.md §Combining templates).
Facts live in ``ascend_catalog.yaml``; which vNPU paths each chip takes (driver templates,
vCANN-RT, HAMi templates, HAMi-core, Volcano MindCluster) is its row of the support matrix
(``Chip.support``, ``tessera.api.v1alpha1.ascend_support``, which the CRDs' rules need too); where a source is missing (template
memory of ``vir04_3c``, 910B instance limit) the value is ``None`` and that
rule is skipped rather than guessed. Pure: reads only its packaged data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from tessera.api.v1alpha1 import ascend_support
from tessera.domain.geometry.explaining import fmt_counts

_DATA_FILE = "ascend_catalog.yaml"


class UnknownChipError(ValueError):
    """An NPU chip name no catalog entry answers to; the message lists the known chips."""


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    ai_core: int
    ai_cpu: int
    memory_mb: int | None  # None: not found in any source
    dvpp: str  # shared | all | none
    resource: str  # static vNPU type, advertised as huawei.com/<resource>


@dataclass(frozen=True, slots=True)
class Chip:
    chip: str
    name: str
    aliases: tuple[str, ...]
    ai_core: int
    ai_cpu: int
    memory_mb: int
    max_instances: int | None
    vgroups: int | None
    whole_resource: str
    templates: tuple[Template, ...]
    by_name: dict[str, Template] = field(repr=False, compare=False, hash=False)

    @property
    def support(self) -> ascend_support.ChipRow:
        """The chip's row of the support matrix: which vNPU paths it takes."""
        row = ascend_support.row_of(self.chip)
        if row is None:  # tests/unit/geometry/test_ascend_support.py: every chip has one
            raise UnknownChipError(f"chip {self.chip} has no row in the support matrix")
        return row


@dataclass(frozen=True, slots=True)
class VnpuInstance:
    template: str
    vgroup: int | None  # 310P: the vGroup to pass to create-vnpu -g


@dataclass(frozen=True, slots=True)
class TemplateVerdict:
    valid: bool
    chip: str
    instances: tuple[VnpuInstance, ...]  # creation order, biggest first
    reason: str


def _template(row: dict[str, Any]) -> Template:
    mem = row.get("memory_mb")
    return Template(
        str(row["name"]),
        int(row["ai_core"]),
        int(row["ai_cpu"]),
        None if mem is None else int(mem),
        str(row["dvpp"]),
        str(row["resource"]),
    )


@cache
def chips() -> tuple[Chip, ...]:
    """Every chip in catalog order."""
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    out = []
    for row in yaml.safe_load(text)["chips"]:
        templates = tuple(_template(t) for t in row["templates"])
        out.append(
            Chip(
                chip=str(row["chip"]),
                name=str(row["name"]),
                aliases=tuple(str(a) for a in row.get("aliases", ())),
                ai_core=int(row["ai_core"]),
                ai_cpu=int(row["ai_cpu"]),
                memory_mb=int(row["memory_mb"]),
                max_instances=row.get("max_instances"),
                vgroups=row.get("vgroups"),
                whole_resource=str(row["whole_resource"]),
                templates=templates,
                by_name={t.name: t for t in templates},
            )
        )
    return tuple(out)


def resolve_chip(name: str) -> Chip:
    """The chip a DCMI chip name (``node.kubernetes.io/npu.chip.name``) or alias names."""
    wanted = name.strip().upper()
    for chip in chips():
        if wanted in {n.upper() for n in (chip.chip, *chip.aliases)}:
            return chip
    known = ", ".join(c.chip for c in chips())
    raise UnknownChipError(f"unknown NPU chip {name!r}: known chips are {known}")


def check_templates(chip: Chip, templates: Mapping[str, int]) -> TemplateVerdict:
    """Can these templates live on one chip together? Valid answers carry a creation order."""
    counts = sorted((n, c) for n, c in templates.items() if c)
    asked = fmt_counts(counts)
    if not counts:
        return TemplateVerdict(True, chip.chip, (), "no templates: the NPU is used whole")
    unknown = [n for n, _ in counts if n not in chip.by_name]
    if unknown:
        known = ", ".join(t.name for t in chip.templates)
        reason = f"{chip.chip} has no template {', '.join(unknown)}; its templates are {known}"
        return TemplateVerdict(False, chip.chip, (), reason)
    problems = _problems(chip, [(chip.by_name[n], c) for n, c in counts])
    if problems:
        reason = f"{asked} does not fit on one {chip.chip}: {'; '.join(problems)}. " + _instead(
            chip, [(chip.by_name[n], c) for n, c in counts]
        )
        return TemplateVerdict(False, chip.chip, (), reason)
    instances = _order(chip, [(chip.by_name[n], c) for n, c in counts])
    used = sum(chip.by_name[n].ai_core * c for n, c in counts)
    return TemplateVerdict(
        True, chip.chip, instances, f"fits: {asked} uses {used} of {chip.ai_core} AI cores"
    )


def _problems(chip: Chip, items: list[tuple[Template, int]]) -> list[str]:
    out = []
    cores = sum(t.ai_core * c for t, c in items)
    if cores > chip.ai_core:
        out.append(f"they need {cores} AI cores, the chip has {chip.ai_core}")
    cpus = sum(t.ai_cpu * c for t, c in items)
    if cpus > chip.ai_cpu:
        out.append(f"they need {cpus} AI CPUs, the chip has {chip.ai_cpu}")
    memory = sum((t.memory_mb or 0) * c for t, c in items)
    if memory > chip.memory_mb:
        out.append(f"they need {memory} MB of memory, the chip has {chip.memory_mb}")
    total = sum(c for _, c in items)
    if chip.max_instances is not None and total > chip.max_instances:
        out.append(f"{total} vNPUs exceed the {chip.max_instances} a chip supports")
    if chip.vgroups is not None and (groups := _groups_needed(items)) > chip.vgroups:
        out.append(
            f"they need {groups} vGroups (two vir01 share one, every other vNPU takes its own), "
            f"the chip has {chip.vgroups}"
        )
    owners = [(t.name, c) for t, c in items if t.dvpp == "all"]
    if sum(c for _, c in owners) > 1:
        out.append(f"{fmt_counts(owners)} each reserve every DVPP module, only one vNPU can")
    return out


def _instead(chip: Chip, items: list[tuple[Template, int]]) -> str:
    """Greedy: keep the biggest requested vNPUs while every rule still holds."""
    kept: dict[Template, int] = {}
    for template in sorted((t for t, c in items for _ in range(c)), key=lambda t: -t.ai_core):
        kept[template] = kept.get(template, 0) + 1
        if _problems(chip, list(kept.items())):
            kept[template] -= 1
    fits = fmt_counts(sorted((t.name, c) for t, c in kept.items() if c))
    return f"Fits instead: {fits}."


def _groups_needed(items: list[tuple[Template, int]]) -> int:
    singles = sum(c for t, c in items if t.ai_core == 1)
    return sum(c for t, c in items if t.ai_core > 1) + math.ceil(singles / 2)


def _order(chip: Chip, items: list[tuple[Template, int]]) -> tuple[VnpuInstance, ...]:
    """Biggest first; on vGroup chips every multi-core vNPU gets its own group, vir01 pairs share."""
    flat = sorted((t for t, c in items for _ in range(c)), key=lambda t: (-t.ai_core, t.name))
    if chip.vgroups is None:
        return tuple(VnpuInstance(t.name, None) for t in flat)
    big = [t for t in flat if t.ai_core > 1]
    small = [t for t in flat if t.ai_core == 1]
    return tuple(VnpuInstance(t.name, g) for g, t in enumerate(big)) + tuple(
        VnpuInstance(t.name, len(big) + k // 2) for k, t in enumerate(small)
    )
