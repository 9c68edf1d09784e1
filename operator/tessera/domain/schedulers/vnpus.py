"""HAMi's ``vnpus`` entries: one per Ascend chip, as HAMi's chart ships them, per version.

HAMi's scheduler (and its Ascend device plugin, which reads the same file) knows a chip only
through its ``vnpus`` entry in ``hami-scheduler-device``: ``chipName`` as the node reports it,
the ``commonWord`` its resources are named after (``huawei.com/Ascend310P``), the memory it
accounts and the templates memory requests are rounded to. The values are HAMi's own
(docs/facts/hami.md §HAMi's scheduler device config); a chip is found by any name
Tessera's Ascend catalog knows for it (``310P3``, ``Ascend310P3``...), and the unit tests hold
the templates to the catalog's numbers.

Shapes by HAMi version: a list of entries up to v2.8, ``{hamiVnpuCore, configs}`` from v2.9
(``MAP_FORM_SINCE``). Per-version differences of the entries themselves: the 910B4-1
templates were renamed in v2.10 (memory doubled in v2.8), the 910C (``chipName: Ascend910``)
arrived in v2.9 and got templates and ``superPod`` in v2.10, and ``resourceCoreName`` (hami-core
requests) is written from v2.9. HAMi before v2.7 named chips differently (``910B`` for the
910A): ``OLDEST``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.domain.geometry.ascend import UnknownChipError, resolve_chip
from tessera.domain.schedulers.versions import Version

MAP_FORM_SINCE = Version(2, 9, 0)
OLDEST = Version(2, 7, 0)
Template = tuple[str, int, int, int | None]  # name, memory MB, aiCore, aiCPU


@dataclass(frozen=True)
class HamiChip:
    chip_name: str
    common_word: str
    memory_allocatable: int
    memory_capacity: int
    ai_core: int
    ai_cpu: int | None
    templates: tuple[Template, ...]
    super_pod: bool = False


SHIPPED: Mapping[str, HamiChip] = {  # HAMi v2.10's chart, in its order
    c.chip_name: c
    for c in (
        HamiChip("910A", "Ascend910A", 32768, 32768, 30, None,
                 (("vir02", 2184, 2, None), ("vir04", 4369, 4, None),
                  ("vir08", 8738, 8, None), ("vir16", 17476, 16, None))),
        HamiChip("910B2", "Ascend910B2", 65536, 65536, 24, 6,
                 (("vir03_1c_8g", 8192, 3, 1), ("vir06_1c_16g", 16384, 6, 1),
                  ("vir12_3c_32g", 32768, 12, 3))),
        HamiChip("910B3", "Ascend910B3", 65536, 65536, 20, 7,
                 (("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3))),
        HamiChip("910B4-1", "Ascend910B4-1", 65536, 65536, 20, 7,
                 (("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3))),
        HamiChip("910B4", "Ascend910B4", 32768, 32768, 20, 7,
                 (("vir05_1c_8g", 8192, 5, 1), ("vir10_3c_16g", 16384, 10, 3))),
        HamiChip("310P3", "Ascend310P", 21527, 24576, 8, 7,
                 (("vir01", 3072, 1, 1), ("vir02", 6144, 2, 2), ("vir04", 12288, 4, 4))),
        HamiChip("Ascend910", "Ascend910C", 65536, 65536, 20, 7,
                 (("vir05_1c_16g", 16384, 5, 1), ("vir10_3c_32g", 32768, 10, 3)),
                 super_pod=True),
    )
}  # fmt: skip
_B4_1_BEFORE_2_10 = {  # names "fixed by Ascend runtime" until v2.10; memory doubled in v2.8
    "vir05_1c_16g": "vir05_1c_8g",
    "vir10_3c_32g": "vir10_3c_16g",
}


def hami_chip(name: str) -> str | None:
    """HAMi's ``chipName`` for a chip as a node or the catalog names it; None if HAMi ships
    no entry for it."""
    try:
        names = {(c := resolve_chip(name)).chip, *c.aliases}
    except UnknownChipError:
        names = {name}
    wanted = {n.upper() for n in names}
    return next((chip for chip in SHIPPED if chip.upper() in wanted), None)


def entry(chip_name: str, version: Version) -> dict[str, Any] | None:
    """The entry HAMi ``version``'s chart ships for ``chip_name``; None if it ships none."""
    chip = SHIPPED.get(chip_name)
    if chip is None or version < OLDEST:
        return None
    if chip.chip_name == "Ascend910" and version < MAP_FORM_SINCE:
        return None  # the 910C arrived in v2.9
    cw = chip.common_word
    out: dict[str, Any] = {
        "chipName": chip.chip_name,
        "commonWord": cw,
        "resourceName": f"huawei.com/{cw}",
        "resourceMemoryName": f"huawei.com/{cw}-memory",
    }
    if version >= MAP_FORM_SINCE:
        out["resourceCoreName"] = f"huawei.com/{cw}-core"
    out |= {"memoryAllocatable": chip.memory_allocatable, "memoryCapacity": chip.memory_capacity}
    if not chip.super_pod:
        out["memoryFactor"] = 1
    out["aiCore"] = chip.ai_core
    if chip.ai_cpu is not None:
        out["aiCPU"] = chip.ai_cpu
    out |= {"runtimeClassName": "", "overwriteEnv": False}
    newest = version >= Version(2, 10, 0)
    if chip.super_pod and newest:
        out["superPod"] = True
    if chip.chip_name == "Ascend910" and not newest:
        return out  # no templates before v2.10
    out["templates"] = [_template(chip.chip_name, t, version) for t in chip.templates]
    return out


def _template(chip: str, template: Template, version: Version) -> dict[str, Any]:
    name, memory, ai_core, ai_cpu = template
    if chip == "910B4-1" and version < Version(2, 10, 0):
        name = _B4_1_BEFORE_2_10[name]
        memory = memory if version >= Version(2, 8, 0) else memory // 2
    out: dict[str, Any] = {"name": name, "memory": memory, "aiCore": ai_core}
    if ai_cpu is not None:
        out["aiCPU"] = ai_cpu
    return out


def map_form(version: Version) -> bool:
    """Whether HAMi ``version`` reads ``vnpus`` as ``{hamiVnpuCore, configs}``."""
    return version >= MAP_FORM_SINCE


def section(
    entries: Sequence[Mapping[str, Any]], version: Version, hami_vnpu_core: bool | None
) -> list[Any] | dict[str, Any]:
    """A whole ``vnpus`` section in the shape ``version`` reads (``hamiVnpuCore`` only in the
    map form, and only when given)."""
    configs = [dict(e) for e in entries]
    if not map_form(version):
        return configs
    out: dict[str, Any] = {}
    if hami_vnpu_core is not None:
        out["hamiVnpuCore"] = hami_vnpu_core
    out["configs"] = configs
    return out
