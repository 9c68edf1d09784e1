"""The layouts of a NodePoolGeometry: which devices of each node get which partitions.

MIG and Ascend vNPU layouts share one shape: a ``devices`` selector (the
grammar in ``devices.py``) and a map of partition → instances per device.
The vGPU layouts (``vgpu.py``) reuse the selector and the list rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Protocol

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from tessera.api.v1alpha1 import ascend_support, mig_profiles
from tessera.api.v1alpha1 import devices as grammar
from tessera.api.v1alpha1.common import (
    MIG_PROFILE_PATTERN,
    VNPU_TEMPLATE_PATTERN,
    ApiModel,
    cel,
    keys_matching,
    message_expression,
    validations,
)

Devices = Annotated[
    int | str,
    AfterValidator(grammar.validated),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            # integers are checked by the schema, whose error shows the value (CEL's shows none)
            "minimum": 0,
            "maximum": grammar.MAX_INDEX,
            "maxLength": grammar.MAX_LENGTH,
            **validations(message_expression(grammar.CEL_RULE, grammar.CEL_MESSAGE)),
        }
    ),
]


class MigLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description=f"Which GPUs of each node this layout applies to: {grammar.FORMS}; "
        '"all" is the default.',
    )
    profiles: dict[str, Annotated[int, Field(ge=1, le=7)]] = Field(
        default_factory=dict,
        description='MIG profile → instances per GPU, e.g. {"3g.40gb": 1, "1g.10gb": 2}. '
        "Empty disables MIG on these GPUs.",
        json_schema_extra={
            **keys_matching(
                MIG_PROFILE_PATTERN, "MIG profile names look like 1g.10gb, 3g.40gb or 1g.10gb+me", 8
            ),
            **validations(cel(mig_profiles.KNOWN_RULE, mig_profiles.UNKNOWN)),
        },
    )


class VnpuLayout(ApiModel):
    devices: Devices = Field(
        default="all",
        description=f"Which NPUs of each node this layout applies to: {grammar.FORMS}; "
        '"all" is the default.',
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


class HasDevices(Protocol):
    @property
    def devices(self) -> int | str: ...


LIST_RULES = (
    cel(
        "self.layouts.filter(l, !has(l.devices) || "
        "(type(l.devices) == string && l.devices == 'all')).size() <= 1",
        "at most one layout may apply to devices: all",
        ".layouts",
    ),
    cel(grammar.LAYOUTS_RULE, grammar.LAYOUTS_MESSAGE, ".layouts"),
)
LAYOUTS_RULES = validations(*LIST_RULES)


def no_index_twice(layouts: Sequence[HasDevices]) -> None:
    problem = grammar.shared_message([layout.devices for layout in layouts])
    if problem:
        raise ValueError(problem)


class MigGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[MigLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all. "
        "No index may be named by two layouts.",
    )

    @model_validator(mode="after")
    def _indexes_named_once(self) -> MigGeometry:
        no_index_twice(self.layouts)
        return self


class VnpuGeometry(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            *LIST_RULES,
            message_expression(ascend_support.cel_vnpu_rule(), ascend_support.cel_vnpu_message()),
        )
    )

    chip: ascend_support.ChipName | None = Field(
        default=None,
        description="The Ascend chip of the pool's nodes, when known: the API server refuses a "
        "chip without driver vNPU templates (the support matrix, docs/facts/ascend.md). Absent "
        "or not: the operator checks each node's node.kubernetes.io/npu.chip.name label.",
    )

    layouts: list[VnpuLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all. "
        "No index may be named by two layouts.",
    )

    @model_validator(mode="after")
    def _indexes_named_once(self) -> VnpuGeometry:
        no_index_twice(self.layouts)
        return self
