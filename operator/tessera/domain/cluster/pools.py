"""What each node of a NodePoolGeometry should become, and the agent configs that say so.

The rollout engine is kind-agnostic: it needs, per node, a target id, the
labels that hand the target to the node agent, the agent's state label, and
the allocatable to verify. This module derives them from a pool's spec and a
node's labels (GPU model and count from GPU Feature Discovery, NPU chip from
the Ascend device plugin), using the geometry engine for validity and
capacity. It also maintains the pool's entries in the shared agent
ConfigMaps (mig-parted's ``mig-configs``, the vNPU agent's ``vnpu-configs``,
the vGPU Device Manager's ``vgpu-configs``) without touching anyone else's
entries, keeping every config a node still points at or may roll back to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tessera.api import constants as c
from tessera.api.v1alpha1 import ascend_support
from tessera.api.v1alpha1.nodepoolgeometry import DraPool, MigLayout, NodePoolGeometrySpec
from tessera.domain.dra.naming import geometry_class
from tessera.domain.geometry import ascend, capacity, catalog, migparted, vgpu, vgpu_catalog, vnpu
from tessera.domain.geometry.layouts import HASH_LEN, GeometryError, config_name, per_device
from tessera.domain.rollout import DesiredNode
from tessera.domain.rollout.dra import observe as dra_rollout
from tessera.domain.rollout.views import Layout
from tessera.domain.sharing.device_plugin import DevicePluginConfig

WHOLE_GPUS = (MigLayout(devices="all", profiles={}),)


@dataclass(frozen=True)
class NodeTarget:
    """One node's target and what the pool's configs must contain for it."""

    desired: DesiredNode
    config: tuple[str, list[dict[str, Any]]] | None  # (name, agent entries); None when invalid
    capacity: Mapping[str, int]


def is_ascend(spec: NodePoolGeometrySpec) -> bool:
    return spec.vnpu is not None


def is_vgpu(spec: NodePoolGeometrySpec) -> bool:
    return spec.vgpu is not None


def config_label(spec: NodePoolGeometrySpec) -> str:
    """The node label that names the pool's agent config."""
    if is_ascend(spec):
        return c.VNPU_CONFIG_LABEL
    return c.VGPU_CONFIG_LABEL if is_vgpu(spec) else c.MIG_CONFIG_LABEL


def target_for(
    pool: str,
    spec: NodePoolGeometrySpec,
    labels: Mapping[str, str],
    allocatable: Mapping[str, int],
) -> NodeTarget:
    """The node's target; ``allocatable`` (physical) tells which resources must disappear."""
    try:
        if is_ascend(spec):
            return _ascend(pool, spec, labels)
        if is_vgpu(spec):
            return _vgpu(pool, spec, labels, allocatable)
        return _nvidia(pool, spec, labels, allocatable)
    except (GeometryError, catalog.UnknownModelError, ascend.UnknownChipError, ValueError) as err:
        return NodeTarget(DesiredNode(target="invalid", invalid=str(err)), None, {})


def targets_for(
    pool: str,
    spec: NodePoolGeometrySpec,
    nodes: Iterable[tuple[str, Mapping[str, str], Mapping[str, int]]],
) -> dict[str, NodeTarget]:
    """``target_for`` of each ``(name, labels, allocatable)``: nodes alike (``target_key``)
    share one computation, so a pass over a thousand identical nodes validates one layout."""
    known: dict[tuple[object, ...], NodeTarget] = {}
    out: dict[str, NodeTarget] = {}
    for name, labels, allocatable in nodes:
        key = target_key(labels, allocatable)
        if key not in known:
            known[key] = target_for(pool, spec, labels, allocatable)
        out[name] = known[key]
    return out


def target_key(labels: Mapping[str, str], allocatable: Mapping[str, int]) -> tuple[object, ...]:
    """All ``target_for`` reads of a node: its model, count and workload labels, and which
    NVIDIA resources it advertises (those the target does not expect must go)."""
    return (
        labels.get(c.GPU_PRODUCT_LABEL),
        labels.get(c.GPU_WORKLOAD_CONFIG_LABEL),
        labels.get(c.GPU_COUNT_LABEL),
        labels.get(c.NPU_CHIP_NAME_LABEL),
        labels.get(c.NPU_COUNT_LABEL),
        tuple(sorted(r for r in allocatable if r.startswith("nvidia.com/"))),
    )


def _product(labels: Mapping[str, str]) -> str:
    product = labels.get(c.GPU_PRODUCT_LABEL)
    if not product:
        raise ValueError(
            f"node has no {c.GPU_PRODUCT_LABEL} label (is GPU Feature Discovery running?)"
        )
    return product


def _nvidia(
    pool: str, spec: NodePoolGeometrySpec, labels: Mapping[str, str], allocatable: Mapping[str, int]
) -> NodeTarget:
    model = catalog.resolve(_product(labels))
    count = int(labels.get(c.GPU_COUNT_LABEL, "0"))
    layouts = tuple(spec.mig.layouts) if spec.mig else WHOLE_GPUS
    verdict = capacity.validate_mig_node(model, count, layouts, spec.mig_strategy)
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    entries = migparted.mig_entries(layouts)
    name = config_name(pool, entries)
    layout = per_device([(lay.devices, lay.profiles) for lay in layouts], count)
    if spec.allocation == "DRA":
        devices = dra_rollout.expected_devices(model, count, layouts)
        return _dra(spec, name, entries, devices, layout)
    expected = capacity.mig_capacity(model, count, layouts, spec.mig_strategy)
    gone = {r: 0 for r in allocatable if r.startswith("nvidia.com/") and r not in expected}
    desired = DesiredNode(
        target=name,
        labels={c.MIG_CONFIG_LABEL: name},
        watch_label=c.MIG_CONFIG_STATE_LABEL,
        expected_allocatable={**gone, **expected},
        layout=layout,
    )
    return NodeTarget(desired, (name, entries), expected)


def current_layout(
    labels: Mapping[str, str], configs: Mapping[str, Any]
) -> tuple[tuple[tuple[str, int], ...], ...] | None:
    """What a GPU node runs now, per GPU: its MIG manager reports ``success`` for the config
    its label names, and that config (``mig-configs``, a person's or Tessera's) says it plainly
    (``migparted.layout_of``). Anything else is not known."""
    name = labels.get(c.MIG_CONFIG_LABEL)
    count = labels.get(c.GPU_COUNT_LABEL, "")
    if not name or labels.get(c.MIG_CONFIG_STATE_LABEL) != "success" or not count.isdigit():
        return None
    return migparted.layout_of(configs.get(name), int(count))


def _vgpu(
    pool: str, spec: NodePoolGeometrySpec, labels: Mapping[str, str], allocatable: Mapping[str, int]
) -> NodeTarget:
    """A VM node: the vGPU Device Manager's config, verified by the sandbox device plugin's
    resources (``NVIDIA_<type>``, or ``GRID_<type>`` where the node already shows that)."""
    assert spec.vgpu is not None
    workload = labels.get(c.GPU_WORKLOAD_CONFIG_LABEL)
    if workload != "vm-vgpu":  # absent: the GPU Operator's default workload, container
        raise ValueError(
            f"node's {c.GPU_WORKLOAD_CONFIG_LABEL} is {workload or 'unset (container)'}: the GPU "
            "Operator runs the vGPU Device Manager only on vm-vgpu nodes"
        )
    product, count = labels.get(c.GPU_PRODUCT_LABEL), labels.get(c.GPU_COUNT_LABEL, "")
    if not product or not count.isdigit():
        missing = c.GPU_PRODUCT_LABEL if not product else c.GPU_COUNT_LABEL
        raise ValueError(
            f"node has no {missing} label: GPU Feature Discovery is a container-stack operand "
            f"the GPU Operator does not run on vm-vgpu nodes; label the node with "
            f"{c.GPU_PRODUCT_LABEL} (a board's product label, tessera geometry list --vgpu) "
            f"and {c.GPU_COUNT_LABEL}"
        )
    boards = vgpu_catalog.resolve(product)
    if len(boards) != 1:
        raise ValueError(f"{product} names {len(boards)} vGPU boards, not one board")
    layouts = tuple(spec.vgpu.layouts)
    verdict = vgpu.validate_vgpu_node(boards[0], int(count), layouts)
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    entries = vgpu.vgpu_entries(layouts)
    name = config_name(pool, entries)
    prefix = vgpu.resource_prefix(allocatable)
    expected = vgpu.vgpu_capacity(boards[0], int(count), layouts, prefix)
    gone = {r: 0 for r in allocatable if r.startswith("nvidia.com/") and r not in expected}
    desired = DesiredNode(
        target=name,
        labels={c.VGPU_CONFIG_LABEL: name},
        watch_label=c.VGPU_CONFIG_STATE_LABEL,
        expected_allocatable={**gone, **expected},
    )
    return NodeTarget(desired, (name, entries), expected)


def _dra(
    spec: NodePoolGeometrySpec,
    name: str,
    entries: list[dict[str, Any]],
    devices: dict[str, int],
    layout: Layout,
) -> NodeTarget:
    """A DRA node: the same MIG config and agent, verified from its ResourceSlices; changed
    GPU by GPU like a device-plugin MIG node, its claims saying who holds what."""
    plugin = (spec.dra or DraPool()).kubelet_plugin
    desired = DesiredNode(
        target=name,
        labels={c.MIG_CONFIG_LABEL: name},
        watch_label=c.MIG_CONFIG_STATE_LABEL,
        expected_devices=devices,
        plugin=f"{plugin.namespace}/{plugin.daemon_set}",
        layout=layout,
    )
    return NodeTarget(desired, (name, entries), {geometry_class(k): n for k, n in devices.items()})


def _ascend(pool: str, spec: NodePoolGeometrySpec, labels: Mapping[str, str]) -> NodeTarget:
    assert spec.vnpu is not None
    chip_name = labels.get(c.NPU_CHIP_NAME_LABEL)
    if not chip_name:
        raise ValueError(
            f"node has no {c.NPU_CHIP_NAME_LABEL} label (is the Ascend device plugin running?)"
        )
    refused = ascend_support.check(chip_name, "DriverTemplates")
    if refused:
        raise GeometryError(f"{c.NPU_CHIP_NAME_LABEL}={chip_name}: {refused}")
    declared = spec.vnpu.chip
    if declared is not None and ascend_support.row_of(chip_name) != ascend_support.MATRIX[declared]:
        raise GeometryError(
            f"spec.vnpu.chip is {declared}, and the node's {c.NPU_CHIP_NAME_LABEL} says "
            f"{chip_name}: the pool selects a node of another chip"
        )
    chip = ascend.resolve_chip(chip_name)
    count = int(labels.get(c.NPU_COUNT_LABEL, "0"))
    layouts = tuple(spec.vnpu.layouts)
    verdict = vnpu.validate_vnpu_node(chip, count, layouts)
    if not verdict.valid:
        raise GeometryError(verdict.reason)
    entries = vnpu.vnpu_entries(layouts, chip)
    name = config_name(pool, vnpu.vnpu_entries(layouts))
    expected = vnpu.vnpu_capacity(chip, count, layouts)
    desired = DesiredNode(
        target=name,
        labels={c.VNPU_CONFIG_LABEL: name},
        watch_label=c.VNPU_CONFIG_STATE_LABEL,
        expected_allocatable=expected,
    )
    return NodeTarget(desired, (name, entries), expected)


def configs_in(text: str, section: str) -> dict[str, Any]:
    """The configs of ``section`` in an agent ConfigMap's text, ``{}`` when it holds none or
    does not parse: what a node's config label means (``current_layout``), never a write."""
    try:
        doc = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return {}
    configs = doc.get(section) if isinstance(doc, dict) else None
    return dict(configs) if isinstance(configs, dict) else {}


def configs_document(
    existing: str,
    pool: str,
    section: str,
    wanted: Mapping[str, list[dict[str, Any]]],
    keep: Iterable[str],
) -> str | None:
    """The agent ConfigMap text with this pool's configs updated, or None when unchanged.

    ``section`` is ``mig-configs``, ``vnpu-configs`` or ``vgpu-configs``. The pool's configs are
    ``wanted`` plus those in ``keep`` (still named by a node label or a
    rollback record); other pools' and people's configs are left as they are.
    """
    doc = yaml.safe_load(existing) if existing else None
    doc = doc if isinstance(doc, dict) else {}
    configs = dict(doc.get(section) or {})
    keep = set(keep)
    updated = {k: v for k, v in configs.items() if not owns(pool, k) or k in keep or k in wanted}
    updated.update(wanted)
    if updated == configs and (doc.get("version") == "v1" or not updated):
        return None  # unchanged; or nothing to hold and nothing there
    # No configs left: no section at all. The agents' parsers refuse an empty one ("at least
    # one entry in 'vgpu-configs' is required") but accept a file with only ``version``.
    sections = {section: dict(sorted(updated.items()))} if updated else {}
    return yaml.safe_dump({"version": "v1", **sections}, sort_keys=False, default_flow_style=None)


def owns(pool: str, name: str) -> bool:
    """Whether ``name`` is one of ``pool``'s configs: exactly ``config_name``'s shape for it
    (``tessera-<pool>-<hash>``), so pool ``vms`` never claims pool ``vms-big``'s configs."""
    stem = config_name(pool, None).rsplit("-", 1)[0]
    return re.fullmatch(rf"{re.escape(stem)}-[0-9a-f]{{{HASH_LEN}}}", name) is not None


def physical_allocatable(
    allocatable: Mapping[str, int], sharing: DevicePluginConfig | None
) -> dict[str, int]:
    """Allocatable as whole devices: undo the device plugin's replicas and ``.shared`` renames.

    A geometry rollout verifies the partitioning, whatever sharing policy then
    multiplies it; time-slicing a MIG device must not make verification fail.
    """
    out = dict(allocatable)
    if sharing is None:
        return out
    for rule in sharing.resources:
        advertised = sharing.advertised_as(rule.name)
        if advertised in allocatable:
            out.pop(advertised, None)
            out[rule.name] = allocatable[advertised] // max(rule.replicas, 1)
    return out
