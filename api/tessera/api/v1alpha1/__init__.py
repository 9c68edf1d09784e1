"""tessera.io/v1alpha1: the three cluster-scoped kinds and how they appear in kubectl."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from tessera.api.v1alpha1.common import Condition, LabelSelector, RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec, NodePoolGeometryStatus
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec, SharingPolicyStatus
from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec, TenantQuotaStatus

__all__ = [
    "KINDS",
    "Condition",
    "KindInfo",
    "LabelSelector",
    "NodePoolGeometrySpec",
    "NodePoolGeometryStatus",
    "PrinterColumn",
    "RolloutSpec",
    "SharingPolicySpec",
    "SharingPolicyStatus",
    "TenantQuotaSpec",
    "TenantQuotaStatus",
]


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0


def _condition_column(name: str, type_: str, part: str, priority: int = 0) -> PrinterColumn:
    return PrinterColumn(
        name, "string", f'.status.conditions[?(@.type=="{type_}")].{part}', priority=priority
    )


READY = _condition_column("Ready", "Ready", "status")
REASON = _condition_column("Reason", "Ready", "reason")
MESSAGE = _condition_column("Message", "Ready", "message", priority=1)
AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp")


@dataclass(frozen=True)
class KindInfo:
    """Everything about one kind that is not its schema."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    description: str
    spec: type[BaseModel]
    status: type[BaseModel]
    columns: tuple[PrinterColumn, ...] = field(default=())

    @property
    def singular(self) -> str:
        return self.kind.lower()


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        kind="NodePoolGeometry",
        plural="nodepoolgeometries",
        short_names=("npg",),
        description="NodePoolGeometry declares the hard partitioning (NVIDIA MIG layouts, Ascend "
        "vNPU templates) of a pool of nodes; Tessera rolls changes out node by node with cordon, "
        "PDB-respecting drain, verification and uncordon.",
        spec=NodePoolGeometrySpec,
        status=NodePoolGeometryStatus,
        columns=(
            PrinterColumn("Updated", "integer", ".status.nodes.updated"),
            PrinterColumn("Total", "integer", ".status.nodes.total"),
            PrinterColumn("Allocation", "string", ".spec.allocation", priority=1),
            READY,
            REASON,
            PrinterColumn("Plan", "string", ".status.plan.hash", priority=1),
            MESSAGE,
            AGE,
        ),
    ),
    KindInfo(
        kind="SharingPolicy",
        plural="sharingpolicies",
        short_names=("sp",),
        description="SharingPolicy declares how the devices of matching nodes are shared "
        "(exclusive, time-slicing, MPS or HAMi-core); Tessera renders device-plugin and HAMi "
        "configs and points each node at its config.",
        spec=SharingPolicySpec,
        status=SharingPolicyStatus,
        columns=(
            PrinterColumn("Backend", "string", ".spec.backend"),
            PrinterColumn("Nodes", "integer", ".status.nodes.matched"),
            PrinterColumn("Applied", "integer", ".status.nodes.applied"),
            READY,
            REASON,
            PrinterColumn("Config", "string", ".status.configKey", priority=1),
            MESSAGE,
            AGE,
        ),
    ),
    KindInfo(
        kind="TenantQuota",
        plural="tenantquotas",
        short_names=("tq",),
        description="TenantQuota limits the accelerator resources a tenant's namespaces may "
        "request, per namespace (ResourceQuota) and in total.",
        spec=TenantQuotaSpec,
        status=TenantQuotaStatus,
        columns=(
            PrinterColumn("Namespaces", "integer", ".status.namespaces"),
            # Overcommitted is reported beside Ready, never as a failure: a column of its own.
            _condition_column("Overcommitted", "Overcommitted", "status"),
            READY,
            REASON,
            MESSAGE,
            AGE,
        ),
    ),
)
