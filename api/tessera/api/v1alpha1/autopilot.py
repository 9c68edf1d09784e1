"""``spec.autopilot`` of a NodePoolGeometry: the bounds within which Tessera chooses layouts.

The person declares in Git which MIG profiles each GPU model of the pool may carry, with a
minimum and a maximum count per profile (instances in the whole pool), how long a pod must
pend before its demand counts, at most how many times a day each GPU may be repartitioned,
and an off switch. Tessera records what it chooses in ``status.autopilot`` and never writes
the spec (docs/autopilot.md). What no cluster could make right is refused here, by the API
server: a model or profile no catalog has, a profile the model named cannot host, a minimum
above its maximum, an autopilot on a pool whose pods do not ask for profiles by name.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from tessera.api.v1alpha1 import mig_profiles
from tessera.api.v1alpha1.common import (
    DURATION_PATTERN,
    MIG_PROFILE_PATTERN,
    ApiModel,
    cel,
    keys_matching,
    validations,
)
from tessera.api.v1alpha1.layouts import MigLayout

MIN_ABOVE_MAX = "min must not be above max: the pool cannot hold more of a profile than it may"
UNKNOWN_MODEL = (
    "autopilot.profiles is keyed by GPU model id: "
    + ", ".join(mig_profiles.BY_MODEL)
    + " (tessera geometry models)"
)
CANNOT_HOST = (
    "a GPU model cannot host a profile listed under it in autopilot.profiles "
    "(tessera geometry models lists each model's)"
)
MIG_POOLS_ONLY = (
    "autopilot chooses MIG layouts of a device-plugin pool with migStrategy mixed, whose pods "
    "ask for nvidia.com/mig-<profile>: set spec.mig, and no allocation DRA or migStrategy single"
)
MAX_MODELS = len(mig_profiles.BY_MODEL)
MAX_PROFILES = max(len(p) for p in mig_profiles.BY_MODEL.values())

_KNOWN_MODEL_RULE = "self.all(m, m in [" + ", ".join(f"'{m}'" for m in mig_profiles.BY_MODEL) + "])"
_TABLE = (
    "{"
    + ", ".join(
        f"'{m}': [" + ", ".join(f"'{p}'" for p in names) + "]"
        for m, names in mig_profiles.BY_MODEL.items()
    )
    + "}"
)
_KNOWN = "[" + ", ".join(f"'{n}'" for n in mig_profiles.KNOWN) + "]"
# a name no model has is the known-profile rule's to refuse, not this one's
_HOSTS_RULE = (
    f"self.all(m, !(m in {_TABLE}) || self[m].all(p, p in {_TABLE}[m] || !(p in {_KNOWN})))"
)


class ProfileBounds(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("!has(self.max) || !has(self.min) || self.min <= self.max", MIN_ABOVE_MAX)
        )
    )

    min: int = Field(
        default=0,
        ge=0,
        le=16 * 7 * 10000,
        description="Instances of this profile the pool keeps at least: the autopilot never "
        "repartitions a GPU away from it below this count.",
    )
    max: int | None = Field(
        default=None,
        ge=0,
        le=16 * 7 * 10000,
        description="Instances of this profile the pool holds at most; absent: no limit.",
    )


Allowed = Annotated[
    dict[str, ProfileBounds],
    Field(
        json_schema_extra={
            **keys_matching(
                MIG_PROFILE_PATTERN,
                "MIG profile names look like 1g.10gb, 3g.40gb or 1g.10gb+me",
                MAX_PROFILES,
            ),
            **validations(cel(mig_profiles.KNOWN_RULE, mig_profiles.UNKNOWN)),
            "minProperties": 1,
        }
    ),
]


class AutopilotSpec(ApiModel):
    enabled: bool = Field(
        default=True,
        description="The off switch. false: Tessera decides nothing and the pool runs the "
        "layouts of spec.mig only (a choice recorded in status is dropped).",
    )
    profiles: dict[str, Allowed] = Field(
        min_length=1,
        description="GPU model id (tessera geometry models) -> the MIG profiles it may carry, "
        "each with its min and max count in the pool. A profile not listed is never added; "
        "one the current layout has but the list lacks is kept until its GPU changes.",
        json_schema_extra={
            "maxProperties": MAX_MODELS,
            **validations(cel(_KNOWN_MODEL_RULE, UNKNOWN_MODEL), cel(_HOSTS_RULE, CANNOT_HOST)),
        },
    )
    pending_for: str = Field(
        default="5m",
        pattern=DURATION_PATTERN,
        description="How long a pod must have been Unschedulable before its demand counts "
        "(e.g. 5m, 90s): shorter waits are served by the scheduler's next pass or by pods ending.",
    )
    max_reconfigurations_per_gpu_per_day: int = Field(
        default=1,
        ge=1,
        le=24,
        alias="maxReconfigurationsPerGPUPerDay",
        description="At most this many layout changes per GPU per UTC day (a GPU index of "
        "every node of the pool): the last bound against flapping.",
    )


AUTOPILOT_RULE = cel(
    "!has(self.autopilot) || (has(self.mig) && (!has(self.allocation) || "
    "self.allocation == 'DevicePlugin') && (!has(self.migStrategy) || self.migStrategy == 'mixed'))",
    MIG_POOLS_ONLY,
    ".autopilot",
)


class GpuReconfigurations(ApiModel):
    gpu: int = Field(ge=0, le=15, description="The GPU index (on every node of the pool).")
    count: int = Field(ge=0, description="Layout changes the autopilot chose for it today (UTC).")


class AutopilotStatus(ApiModel):
    """What the autopilot chose, and why; the rollout runs spec.mig overridden by ``layouts``."""

    layouts: list[MigLayout] = Field(
        default_factory=list,
        max_length=16,
        description="The chosen per-GPU layouts, in spec.mig.layouts' form (a static spec for "
        "Git: tessera suggest --from-status); empty: the pool runs spec.mig.layouts.",
    )
    basis: str = Field(
        default="",
        description="A hash of the spec.mig.layouts the choice was made from: once Git's "
        "layouts change, the choice is dropped and Git's layouts rule.",
    )
    outcome: str = Field(
        default="",
        description="The last decision: Changed, NothingFits, Served, Waiting, Idle, Busy, "
        "UsageUnknown, Off or Invalid.",
    )
    reason: str = Field(default="", max_length=4096, description="Why, for a person.")
    decided_at: str = Field(default="", description="When the last decision was taken (RFC 3339).")
    day: str = Field(default="", description="The UTC day reconfigurations count (YYYY-MM-DD).")
    reconfigurations: list[GpuReconfigurations] = Field(
        default_factory=list,
        max_length=16,
        description="Per GPU index, the layout changes chosen on that day "
        "(at most spec.autopilot.maxReconfigurationsPerGPUPerDay).",
    )
    held: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Outcome Busy: the busy GPUs (node/index) the choice was withdrawn for and "
        "the nodes that wait (node), as decided; the same ones pass after pass are one "
        "decision, announced once.",
    )
