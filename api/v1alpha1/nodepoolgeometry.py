"""NodePoolGeometry: the hard partitioning (MIG, Ascend vNPU) of a pool of nodes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from .common import (
    MIG_PROFILE_PATTERN,
    VNPU_TEMPLATE_PATTERN,
    ApiModel,
    Condition,
    LabelSelector,
    NodeCounts,
    NodeProblem,
    RolloutPlan,
    RolloutSpec,
    cel,
    keys_matching,
    validations,
)

_INDEX = "([0-9]|1[0-5])"
_INDEX_RANGE = f"{_INDEX}(-{_INDEX})?"
DEVICES_PATTERN = f"^(all|{_INDEX_RANGE}(,{_INDEX_RANGE})*)$"

Devices = Annotated[
    int | str | list[int],
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "maxLength": 64,
            **validations(
                cel(
                    "type(self) == int ? (self >= 0 && self <= 15) : "
                    f"self.matches('{DEVICES_PATTERN}')",
                    'devices must be "all", one index (0-15) or a list of indexes and ranges '
                    'such as "0,1,4-7"',
                )
            ),
        }
    ),
]


def device_indexes(devices: int | str | list[int], device_count: int) -> tuple[int, ...]:
    """The device indexes ``devices`` selects on a node with ``device_count`` devices.

    ``"all"`` selects every device; otherwise an index, a list of indexes, or a
    string of indexes and ranges such as ``"0,1,4-7"``. Indexes the node does
    not have are dropped (the pool may mix 4- and 8-GPU nodes).
    """
    if devices == "all":
        return tuple(range(device_count))
    if isinstance(devices, int):
        wanted: set[int] = {devices}
    elif isinstance(devices, list):
        wanted = set(devices)
    else:
        wanted = set()
        for part in devices.split(","):
            low, _, high = part.partition("-")
            wanted.update(range(int(low), int(high or low) + 1))
    return tuple(sorted(i for i in wanted if 0 <= i < device_count))


class MigLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description='"all" (the default), one GPU index, or indexes and ranges such as "0,1,4-7".',
    )
    profiles: dict[str, Annotated[int, Field(ge=1, le=7)]] = Field(
        default_factory=dict,
        description='MIG profile → instances per GPU, e.g. {"3g.40gb": 1, "1g.10gb": 2}. '
        "Empty disables MIG on these GPUs.",
        json_schema_extra=keys_matching(
            MIG_PROFILE_PATTERN, "MIG profile names look like 1g.10gb, 3g.40gb or 1g.10gb+me", 8
        ),
    )


class VnpuLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description='"all" (the default), one NPU index, or indexes and ranges such as "0-3".',
    )
    templates: dict[str, Annotated[int, Field(ge=1, le=16)]] = Field(
        default_factory=dict,
        description='Ascend vNPU template → instances per NPU, e.g. {"vir02": 2}. Empty = whole NPU.',
        json_schema_extra=keys_matching(
            VNPU_TEMPLATE_PATTERN,
            "vNPU template names look like vir01, vir04_3c or vir10_3c_16g",
            8,
        ),
    )


LAYOUTS_RULES = validations(
    cel(
        "self.layouts.filter(l, !has(l.devices) || "
        "(type(l.devices) == string && l.devices == 'all')).size() <= 1",
        "at most one layout may apply to devices: all",
        ".layouts",
    ),
)


class MigGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[MigLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all.",
    )


class VnpuGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[VnpuLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all.",
    )


class NodePoolGeometrySpec(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "!(has(self.mig) && has(self.vnpu))",
                "mig and vnpu are mutually exclusive: a pool is either NVIDIA or Ascend",
            ),
        )
    )

    node_selector: LabelSelector = Field(
        description="The nodes of the pool. A node may belong to one pool only."
    )
    mig: MigGeometry | None = Field(
        default=None, description="NVIDIA MIG layouts. Omit both mig and vnpu for whole GPUs."
    )
    vnpu: VnpuGeometry | None = Field(default=None, description="Ascend vNPU template layouts.")
    mig_strategy: Literal["single", "mixed"] = Field(
        default="mixed",
        description="How the device plugin advertises MIG devices: mixed (nvidia.com/mig-<profile>) "
        "or single (nvidia.com/gpu, one profile per node).",
    )
    rollout: RolloutSpec = Field(
        default_factory=RolloutSpec, description="How a change is rolled out over the pool."
    )


class NodePoolGeometryStatus(ApiModel):
    observed_generation: int = Field(default=0, description="The generation this status describes.")
    plan: RolloutPlan | None = Field(default=None, description="What the current change does.")
    nodes: NodeCounts = Field(default_factory=NodeCounts, description="Nodes by rollout state.")
    problems: list[NodeProblem] = Field(
        default_factory=list, max_length=20, description="Nodes that need attention (at most 20)."
    )
    capacity: dict[str, str] = Field(
        default_factory=dict, description="What the pool advertises once updated, per resource."
    )
    last_good_layout: str = Field(
        default="", description="Config name of the last layout that rolled out cleanly."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Reconciling, Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
