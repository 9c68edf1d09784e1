"""Building blocks shared by the three kinds: selectors, conditions, rollout policy.

Every model forbids unknown fields and describes every field, because the
descriptions become ``kubectl explain`` output and the CEL rules attached with
``cel()`` become API-server validation (see ``hack/gen_crds.py``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tessera.api.v1alpha1 import quantity

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
MIG_PROFILE_PATTERN = r"^[1-7]g\.[0-9]+gb(\+(me|me\.all|gfx)|-me)?$"
VNPU_TEMPLATE_PATTERN = r"^vir[0-9]{2}(_[0-9]+c)?(_[0-9]+g)?(_[a-z]+)?$"
# A Kubernetes quantity (resource.ParseQuantity's grammar), e.g. 10Gi, 512Mi, 1e9.
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE])?$"
RESOURCE_NAME_PATTERN = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$"


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One ``x-kubernetes-validations`` entry."""
    entry = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


def message_expression(rule: str, expression: str) -> dict[str, str]:
    """An ``x-kubernetes-validations`` entry whose message is computed, e.g. to show the value.

    The API server prints a CEL failure as ``<field>: Invalid value: "<schema type>"`` (``""``
    for int-or-string), never the value itself; only the message can show it.
    """
    return {"rule": rule, "messageExpression": expression}


def keys_matching(pattern: str, message: str, max_keys: int) -> dict[str, Any]:
    """Schema extras for a map whose keys must match ``pattern``.

    OpenAPI v3 in CRDs has no ``propertyNames``; ``hack/gen_crds.py`` turns
    this into a CEL rule carrying ``message`` and a ``maxProperties`` bound.
    """
    return {
        "propertyNames": {"pattern": pattern, "description": message},
        "maxProperties": max_keys,
    }


def validations(*rules: dict[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": list(rules)}


class ApiModel(BaseModel):
    """Base for every API type: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


IntOrString = Annotated[int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True})]

Count = Annotated[
    int | str,
    AfterValidator(quantity.validated),
    Field(
        json_schema_extra={
            "x-kubernetes-int-or-string": True,
            "minimum": 0,
            "maxLength": quantity.MAX_LENGTH,
            **validations(message_expression(quantity.CEL_RULE, quantity.CEL_MESSAGE)),
        }
    ),
]


class LabelSelectorRequirement(ApiModel):
    key: str = Field(description="The label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: list[str] = Field(
        default_factory=list,
        description="Values for In and NotIn; must be empty for Exists and DoesNotExist.",
    )


class LabelSelector(ApiModel):
    """A metav1.LabelSelector: all requirements must hold (AND)."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels that must be present with exactly these values."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Set-based requirements, all of which must hold."
    )


class Condition(ApiModel):
    """A metav1.Condition."""

    type: str = Field(
        max_length=316, description="Ready, Reconciling, Stalled or a kind-specific type."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    observed_generation: int = Field(
        default=0, ge=0, description="The metadata.generation this condition was computed from."
    )
    last_transition_time: str = Field(
        description="When status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )
    reason: str = Field(min_length=1, max_length=1024, description="One CamelCase word saying why.")
    message: str = Field(
        default="",
        max_length=32768,
        description="What happened, for a person: names the node, pod, PDB or rule involved.",
    )


class DrainSpec(ApiModel):
    pod_selector: LabelSelector | None = Field(
        default=None,
        description="Pods to evict before changing a node. Default: pods requesting accelerator "
        "resources (nvidia.com/*, huawei.com/*). DaemonSet and mirror pods are never evicted.",
    )
    timeout: str = Field(
        default="30m",
        pattern=DURATION_PATTERN,
        description="How long one node may take to drain before it is marked Blocked "
        "(e.g. 30m, 1h30m). Nothing is forced unless force is true.",
    )
    delete_empty_dir_data: bool = Field(
        default=False, description="Also evict pods that use emptyDir volumes (their data is lost)."
    )
    force: bool = Field(
        default=False,
        description="Also delete pods that no controller will recreate, and delete pods whose "
        "eviction stays blocked past the timeout.",
    )


class MaintenanceWindow(ApiModel):
    days: list[Literal["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]] = Field(
        default_factory=list,
        description="Days on which disruptive changes may start; empty = every day.",
    )
    start: str = Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$", description="Start, HH:MM.")
    end: str = Field(
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="End, HH:MM; earlier than start means the window crosses midnight.",
    )
    time_zone: str = Field(default="UTC", description="IANA time zone of start and end.")


class RolloutSpec(ApiModel):
    """How a disruptive change is rolled out over the matching nodes."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? "
                "self.maxUnavailable >= 1 : self.maxUnavailable.matches('^(100|[1-9][0-9]?)%$'))",
                "maxUnavailable must be a whole number >= 1 or a percentage between 1% and 100%",
                ".maxUnavailable",
            ),
        )
    )

    max_unavailable: IntOrString = Field(
        default=1,
        description="How many nodes of the pool may be disrupted at once, as a number or a "
        "percentage of the pool. Every unavailable node of the pool counts against it, whoever "
        "made it so: NotReady, cordoned (by anyone, also once Tessera is done with it), carrying "
        "Tessera's taint or another NoSchedule/NoExecute taint.",
    )
    drain: DrainSpec = Field(
        default_factory=DrainSpec, description="Which pods are evicted and how long that may take."
    )
    verify_timeout: str = Field(
        default="15m",
        pattern=DURATION_PATTERN,
        description="How long the node agent may take to report success and the node's "
        "allocatable to match, before the node is marked Failed.",
    )
    on_failure: Literal["Hold", "Rollback"] = Field(
        default="Hold",
        description="Hold: keep a failed node cordoned and report Stalled. Rollback: re-apply the "
        "last layout that succeeded.",
    )
    paused: bool = Field(default=False, description="Start no new node; nodes in flight finish.")
    window: MaintenanceWindow | None = Field(
        default=None, description="When disruptive changes may start; absent = any time."
    )
    approval: Literal["Automatic", "Manual"] = Field(
        default="Automatic",
        description="Manual: wait until annotation tessera.io/approve-plan equals status.plan.hash.",
    )


class NodeCounts(ApiModel):
    total: int = Field(default=0, description="Nodes in the pool.")
    updated: int = Field(default=0, description="Nodes that match this generation.")
    in_progress: int = Field(default=0, description="Nodes being changed now.")
    pending: int = Field(default=0, description="Nodes waiting for their turn.")
    blocked: int = Field(default=0, description="Nodes whose drain cannot finish.")
    failed: int = Field(default=0, description="Nodes whose change failed.")


class NodeProblem(ApiModel):
    node: str = Field(description="The node's name.")
    phase: str = Field(description="The node's rollout phase.")
    reason: str = Field(description="One CamelCase word.")
    message: str = Field(description="What is wrong, for a person.")
    since: str = Field(default="", description="When the problem started (RFC 3339).")


class NodeScope(ApiModel):
    node: str = Field(description="The node's name.")
    phase: str = Field(description="The node's rollout phase.")
    gpus: str = Field(
        default="",
        max_length=64,
        description="The GPUs the change repartitions (0-3,6); only the pods on them leave. "
        "Empty when the whole node is drained.",
    )
    whole: str = Field(
        default="",
        max_length=512,
        description="Why the whole node is drained although its pool changes GPU by GPU.",
    )


class RolloutPlan(ApiModel):
    hash: str = Field(description="Identifies this plan; approve it with tessera.io/approve-plan.")
    nodes_to_change: int = Field(default=0, description="Nodes whose configuration changes.")
    pods_to_evict: int = Field(default=0, description="Pods that the change will evict.")
    blocking_pdbs: list[str] = Field(
        default_factory=list,
        description="PodDisruptionBudgets (namespace/name) that allow no disruption now.",
    )


STATUS_COMMON_DOC = "Written by Tessera; never set it yourself."
