"""Ascend vNPU layouts of a pool: validation per node, the node agent's config, and capacity.

The Ascend counterpart of ``capacity`` + ``migparted``. Tessera's node agent
(``tessera agent vnpu``) reads a named config, destroys the chip's vNPUs and
creates the listed ones with ``npu-smi set -t create-vnpu`` (static
virtualization). Its format mirrors mig-parted so both agents are operated the
same way::

    version: v1
    vnpu-configs:
      tessera-<pool>-<hash>:
        - devices: all                  # or NPU indexes; entries never overlap
          vnpu-enabled: true            # false (no vnpu-devices): the NPU is used whole
          vnpu-devices: {vir04: 1, vir02: 2}
          create:                       # creation order; vgroup only on 310P chips
            - {template: vir04, vgroup: 0}

Capacity uses the names the Ascend device plugin gives static vNPUs:
``huawei.com/<vNPU type>`` (``huawei.com/Ascend310P-2c``,
``huawei.com/Ascend910-5c.1cpu.8g``), and ``huawei.com/Ascend310P`` /
``huawei.com/Ascend910`` for an NPU left whole (docs/facts/ascend.md §Resource names, MindCluster
static vNPU). HAMi's dynamic template mode uses other names and is configured
by SharingPolicy, not here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tessera.api.v1alpha1.nodepoolgeometry import VnpuLayout
from tessera.domain.geometry import ascend
from tessera.domain.geometry.layouts import (
    GeometryError,
    config_name,
    entries,
    index_ranges,
    indexes,
    per_device,
)
from tessera.domain.geometry.migparted import CONFIG_KEY, RenderedConfigs

RESOURCE_PREFIX = "huawei.com/"


@dataclass(frozen=True, slots=True)
class VnpuNodeVerdict:
    """The answer for one Ascend node: valid or not, a reason naming NPUs, each NPU's verdict."""

    valid: bool
    reason: str
    npus: tuple[ascend.TemplateVerdict, ...]  # one per NPU index


def validate_vnpu_node(
    chip: ascend.Chip, npu_count: int, layouts: Sequence[VnpuLayout]
) -> VnpuNodeVerdict:
    """Check every NPU of a node; the reason names the NPU indexes and the broken rule."""
    try:
        counts = per_device([(lay.devices, lay.templates) for lay in layouts], npu_count)
    except GeometryError as err:
        return VnpuNodeVerdict(False, str(err), ())
    verdicts = tuple(ascend.check_templates(chip, dict(c)) for c in counts)
    bad: dict[str, list[int]] = {}
    for index, verdict in enumerate(verdicts):
        if not verdict.valid:
            bad.setdefault(verdict.reason, []).append(index)
    if bad:
        reason = "; ".join(
            f"NPU {index_ranges(ix)} ({chip.chip}): {why}" for why, ix in bad.items()
        )
        return VnpuNodeVerdict(False, reason, verdicts)
    return VnpuNodeVerdict(True, f"{npu_count} x {chip.chip}: every NPU's templates fit", verdicts)


def vnpu_capacity(
    chip: ascend.Chip, npu_count: int, layouts: Sequence[VnpuLayout]
) -> dict[str, int]:
    """Resource name -> count once the layouts are applied; raises GeometryError if invalid."""
    node = validate_vnpu_node(chip, npu_count, layouts)
    if not node.valid:
        raise GeometryError(node.reason)
    out: dict[str, int] = {}
    for verdict in node.npus:
        names = [chip.by_name[i.template].resource for i in verdict.instances]
        for name in names or [chip.whole_resource]:
            key = RESOURCE_PREFIX + name
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def vnpu_entries(
    layouts: Sequence[VnpuLayout], chip: ascend.Chip | None = None
) -> list[dict[str, Any]]:
    """The agent entries of one layout set; ``create`` needs the chip (vGroups)."""
    out: list[dict[str, Any]] = []
    for entry in entries([(lay.devices, lay.templates) for lay in layouts]):
        devices: Any = entry.devices if isinstance(entry.devices, str) else list(entry.devices)
        if not entry.counts:
            out.append({"devices": devices, "vnpu-enabled": False})
            continue
        item: dict[str, Any] = {
            "devices": devices,
            "vnpu-enabled": True,
            "vnpu-devices": dict(entry.counts),
        }
        if chip is not None:
            verdict = ascend.check_templates(chip, dict(entry.counts))
            item["create"] = [
                {"template": i.template, **({"vgroup": i.vgroup} if i.vgroup is not None else {})}
                for i in verdict.instances
            ]
        out.append(item)
    return out


def render_vnpu_config(
    pool: str, layout_sets: Sequence[Sequence[VnpuLayout]], chips: Iterable[ascend.Chip]
) -> RenderedConfigs:
    """One named agent config per layout set; raises GeometryError when a chip cannot hold it.

    The name hashes the layouts only (not the chips present), so a node joining
    with another chip does not rename a config that other nodes point at.
    """
    present = sorted(set(chips), key=lambda c: c.chip)
    configs: dict[str, list[dict[str, Any]]] = {}
    names: list[str] = []
    for layouts in layout_sets:
        for layout in layouts:
            for chip in present:
                verdict = ascend.check_templates(chip, layout.templates)
                if not verdict.valid:
                    listed = indexes(layout.devices)
                    where = "all" if listed is None else list(listed)
                    raise GeometryError(f"layout devices: {where} on {chip.chip}: {verdict.reason}")
        name = config_name(pool, vnpu_entries(layouts))
        configs[name] = vnpu_entries(layouts, present[0] if present else None)
        names.append(name)
    document = {"version": "v1", "vnpu-configs": dict(sorted(configs.items()))}
    text = yaml.safe_dump(document, sort_keys=False, default_flow_style=None)
    return RenderedConfigs({CONFIG_KEY: text}, tuple(names))
