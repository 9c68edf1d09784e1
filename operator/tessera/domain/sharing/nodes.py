"""What the sharing rules need to know about one node, read once from its labels.

The device plugin's own rules depend on the node (MPS is refused on MIG nodes
and under ``migStrategy: mixed``; MIG resources exist only under ``mixed``;
MPS allows 48 clients per GPU from compute capability 7.5, 16 below). GFD
publishes all of that as labels, so the controller builds ``NodeFacts`` from
the Node object and every decision below stays a pure function of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tessera.api import constants as c

MigStrategy = Literal["none", "single", "mixed"]
Vendor = Literal["nvidia", "ascend", "none"]

_MIG_PREFIX = "nvidia.com/mig-"
_COUNT_SUFFIX = ".count"
_ASCEND_LABELS = (c.HAMI_ASCEND_NODE_LABEL, c.NPU_PRODUCT_LABEL, c.NPU_CHIP_NAME_LABEL)


@dataclass(frozen=True)
class NodeFacts:
    """One node as the sharing rules see it.

    ``gpus`` counts the devices the plugin advertises as ``nvidia.com/gpu``
    before sharing (GFD ``gpu.count``); ``mig_devices`` maps each MIG resource
    advertised under ``mixed`` to its count. ``compute_capability`` is
    ``None`` when GFD has not said, in which case the lenient MPS limit (48) is
    assumed and the daemon's own check remains the last word. ``allocatable`` is
    what the node advertises now (its ``nvidia.com/*`` and ``huawei.com/*``
    resources): what a plugin really registered, where ``gpus`` is the hardware.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    vendor: Vendor = "nvidia"
    gpus: int = 0
    mig_strategy: MigStrategy = "none"
    mig_enabled: bool = False
    mig_devices: Mapping[str, int] = field(default_factory=dict)
    compute_capability: tuple[int, int] | None = None
    npus: int = 0
    npu_resource: str | None = None
    allocatable: Mapping[str, int] = field(default_factory=dict)  # accelerators, as observed

    @property
    def plugin_config(self) -> str | None:
        """The device-plugin config key the node's label points at now."""
        return self.labels.get(c.DEVICE_PLUGIN_CONFIG_LABEL)

    @property
    def applied_config(self) -> str | None:
        """The key Tessera last wrote on this node (its own annotation mirror)."""
        return self.annotations.get(c.DEVICE_PLUGIN_CONFIG_APPLIED_ANNOTATION)


def from_node(
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    *,
    npus: int = 0,
    npu_resource: str | None = None,
    allocatable: Mapping[str, int] | None = None,
) -> NodeFacts:
    """Read GFD (and Ascend) labels into ``NodeFacts``.

    NPU counts come from the Node's allocatable and annotations, not labels, so
    the caller passes them (see ``physical_npus``).
    """
    strategy = labels.get(c.MIG_STRATEGY_LABEL, "none")
    mig_strategy: MigStrategy = strategy if strategy in ("single", "mixed") else "none"  # type: ignore[assignment]
    mig_devices = {
        key.removesuffix(_COUNT_SUFFIX): _int(value)
        for key, value in labels.items()
        if key.startswith(_MIG_PREFIX) and key.endswith(_COUNT_SUFFIX)
    }
    product = labels.get(c.GPU_PRODUCT_LABEL, "")
    single_mig = mig_strategy == "single" and "-MIG-" in product
    vendor: Vendor = "none"
    if c.GPU_PRODUCT_LABEL in labels or c.GPU_COUNT_LABEL in labels:
        vendor = "nvidia"
    elif any(key in labels for key in _ASCEND_LABELS):
        vendor = "ascend"
    return NodeFacts(
        name=name,
        labels=dict(labels),
        annotations=dict(annotations or {}),
        vendor=vendor,
        gpus=_int(labels.get(c.GPU_COUNT_LABEL, "0")),
        mig_strategy=mig_strategy,
        mig_enabled=bool(mig_devices) or single_mig,
        mig_devices=mig_devices,
        compute_capability=_capability(labels),
        npus=npus,
        npu_resource=npu_resource,
        allocatable=dict(allocatable or {}),
    )


def physical_npus(annotations: Mapping[str, str], resource: str | None, allocatable: int) -> int:
    """The physical NPUs behind ``resource`` (``huawei.com/<CW>``), ``allocatable`` of them.

    HAMi's Ascend device plugin registers ``vDeviceCount`` kubelet devices per
    card, so there allocatable is already cards x slots; the cards themselves
    are listed in its ``hami.io/node-register-<CW>`` annotation, one object
    each. Without that annotation the node runs a plugin that advertises whole
    cards, and allocatable is the count. An annotation that does not parse as a
    list of objects counts as absent: a broken annotation must not fail a pass.
    """
    if not resource:
        return allocatable
    raw = annotations.get(c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + resource.partition("/")[2])
    if raw is None:
        return allocatable
    try:
        cards = json.loads(raw)
    except (ValueError, RecursionError):
        return allocatable
    if not isinstance(cards, list) or not all(isinstance(card, dict) for card in cards):
        return allocatable
    if not cards:  # registered nothing (yet): no better count than allocatable
        return allocatable
    return len(cards)


def hami_gpus(annotations: Mapping[str, str]) -> int | None:
    """The GPUs HAMi's NVIDIA plugin registered (its ``hami.io/node-nvidia-register`` list);
    ``None`` when it wrote none, or nothing that parses as a list of objects."""
    raw = annotations.get(c.HAMI_NVIDIA_REGISTER_ANNOTATION)
    if raw is None:
        return None
    try:
        gpus = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
        return None
    return len(gpus)


def _capability(labels: Mapping[str, str]) -> tuple[int, int] | None:
    major = labels.get(c.GPU_COMPUTE_MAJOR_LABEL)
    minor = labels.get(c.GPU_COMPUTE_MINOR_LABEL)
    if major is None or minor is None or not (major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def _int(value: str) -> int:
    return int(value) if value.isdigit() else 0
