"""vGPU layouts of a NodePoolGeometry: NVIDIA vGPU types per GPU, for VM nodes.

NVIDIA's vGPU Device Manager creates the vGPU (mdev) devices a node's VMs use
from a named config; Tessera renders one config per layout set and rolls it out
like a MIG layout. Type names follow the device manager's two grammars:
time-sliced ``<board>-<GB><series>`` (``A100D-20C``, ``L40S-12Q``) and
MIG-backed ``<board>-<g>-<GB><series>[ME|NOME|MEALL|GFX]`` (``A100-1-5C``).
Whether a type exists on a board, and how many fit, is per model and lives in
Tessera's catalog (``tessera.domain.geometry``), not in the schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from tessera.api.v1alpha1 import devices as grammar
from tessera.api.v1alpha1.common import ApiModel, cel, keys_matching, validations
from tessera.api.v1alpha1.layouts import LAYOUTS_RULES, Devices, no_index_twice

TIME_SLICED_PATTERN = r"^[A-Z0-9]+(-[a-zA-Z]+)*-(0|[1-9][0-9]*)[ABCQ]$"
MIG_BACKED_PATTERN = r"^[A-Z0-9]+-[1-9]-(0|[1-9][0-9]*)[ABCQ](ME|NOME|MEALL|GFX)?$"
VGPU_TYPE_PATTERN = f"^(({TIME_SLICED_PATTERN[1:-1]})|({MIG_BACKED_PATTERN[1:-1]}))$"
TYPE_NAMES = (
    "vGPU type names look like A100D-20C, L40S-12Q (time-sliced) or A100-1-5C, "
    "A100-1-5CME (MIG-backed)"
)
NO_MIXING = "time-sliced and MIG-backed vGPU types cannot be mixed on one GPU"
VGPU_ALONE = (
    "vgpu is exclusive with mig and vnpu: a GPU is partitioned by MIG for containers or into "
    "vGPU devices for VMs (MIG-backed vGPU types set MIG themselves)"
)
VGPU_NO_FORCE = (
    "drain.force cannot be set on a vgpu pool: a VM's virt-launcher pod leaves by live "
    "migration after its eviction, and deleting it would kill the VM"
)
VGPU_NOT_DRA = (
    "a vgpu pool serves VMs through the sandbox device plugin; allocation DRA is for containers"
)


def _layout_rules() -> dict[str, Any]:
    return validations(
        cel(
            f"self.types.all(t, t.matches('{TIME_SLICED_PATTERN}')) || "
            f"self.types.all(t, t.matches('{MIG_BACKED_PATTERN}'))",
            NO_MIXING,
            ".types",
        ),
    )


class VgpuLayout(ApiModel):
    model_config = ConfigDict(json_schema_extra=_layout_rules())

    devices: Devices = Field(
        default="all",
        description=f"Which GPUs of each node this layout applies to: {grammar.FORMS}; "
        '"all" is the default.',
    )
    types: dict[str, Annotated[int, Field(ge=1, le=64)]] = Field(
        min_length=1,
        description='vGPU type → devices per GPU, e.g. {"A100D-20C": 4} (time-sliced) or '
        '{"A100-1-5C": 7} (MIG-backed). Types are named per board (A100, A100D, H100XM...).',
        json_schema_extra=keys_matching(
            VGPU_TYPE_PATTERN,
            TYPE_NAMES,
            8,
        ),
    )


class VgpuGeometry(ApiModel):
    model_config = ConfigDict(json_schema_extra=LAYOUTS_RULES)

    layouts: list[VgpuLayout] = Field(
        min_length=1,
        max_length=16,
        description="Layouts by device; a layout with explicit indexes overrides devices: all. "
        "No index may be named by two layouts.",
    )

    @model_validator(mode="after")
    def _indexes_named_once(self) -> VgpuGeometry:
        no_index_twice(self.layouts)
        return self
