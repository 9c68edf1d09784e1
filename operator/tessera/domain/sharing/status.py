"""A SharingPolicy's status: its nodes, what they advertise, and one Verdict.

Advertised capacity is what the device plugin registers once the config is in
force: devices x replicas per node (GFD ``gpu.count`` for whole GPUs, the MIG
counts under ``mixed``), summed over the nodes the policy governs, and HAMi's
Ascend plugin under soft slicing ``vDeviceCount`` slots per physical card
(``NodeFacts.npus`` counts cards, not the slots allocatable already shows).

HAMi's NVIDIA plugin is observed, not predicted: a node under ``backend:
HAMiCore`` counts with the ``nvidia.com/gpu`` it advertises now. In hami-core
mode that must be GPUs x ``deviceSplitCount`` (the GPUs the plugin lists in its
``hami.io/node-nvidia-register`` annotation, as ``filterdevices`` may leave some
out; GFD's count without it); until it is, the node is not applied (HAMi's
plugin reads ``config.json`` when it starts), so the policy is never Ready on
capacity it does not have. MIG mode's count comes from NVML
discovery on the node: observed, never checked against a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tessera.domain.base.conditions import Status, Verdict
from tessera.domain.base.rules import summary
from tessera.domain.sharing import vcannrt
from tessera.domain.sharing.assignment import AssignmentConflict
from tessera.domain.sharing.device_plugin import GPU
from tessera.domain.sharing.nodes import NodeFacts, hami_gpus
from tessera.domain.sharing.planning import SharingPlan
from tessera.domain.sharing.rendering import PolicyResult


@dataclass(frozen=True)
class Summary:
    verdict: Verdict
    config_key: str = ""
    matched: int = 0  # nodes it governs or contends for at the top priority
    applied: int = 0
    conflicted: int = 0
    advertised: Mapping[str, str] = field(default_factory=dict)


def advertised(result: PolicyResult, node: NodeFacts) -> dict[str, int]:
    """Resources ``node`` advertises under ``result``'s config."""
    out: Counter[str] = Counter()
    if node.vendor == "nvidia" and result.config is not None:
        cfg = result.config
        if node.gpus:
            out[cfg.advertised_as(GPU)] += node.gpus * cfg.replicas_of(GPU)
        for resource, count in sorted(node.mig_devices.items()):
            out[cfg.advertised_as(resource)] += count * cfg.replicas_of(resource)
    hami = result.hami_fields or {}
    if node.vendor == "nvidia" and hami.get("operatingmode") == "hami-core" and node.gpus:
        out[GPU] += node.gpus * int(hami["devicesplitcount"])  # a preview's prediction
    soft = result.ascend_fields or {}
    if node.vendor == "ascend" and soft.get("hami-vnpu-core") and node.npu_resource:
        out[node.npu_resource] += node.npus * int(soft["vDeviceCount"])
    if node.vendor == "ascend" and vcannrt.governs(result):
        out.update(vcannrt.allocatable("on", node) or {})
    return dict(out)


def hami_observed(result: PolicyResult, node: NodeFacts) -> dict[str, int] | None:
    """What a node under HAMi's NVIDIA plugin advertises now; ``None`` for other nodes."""
    if node.vendor != "nvidia" or result.hami_fields is None:
        return None
    return {GPU: node.allocatable.get(GPU, 0)}


def unregistered(result: PolicyResult, node: NodeFacts) -> str:
    """Why a hami-core node does not advertise GPUs x deviceSplitCount yet, or ``""``."""
    hami = result.hami_fields or {}
    if node.vendor != "nvidia" or hami.get("operatingmode") != "hami-core":
        return ""
    registered = hami_gpus(node.annotations)  # fewer than GFD's when filterdevices says so
    gpus = node.gpus if registered is None else registered
    want, have = gpus * int(hami["devicesplitcount"]), node.allocatable.get(GPU, 0)
    if have == want:
        return ""
    return (
        f"node {node.name} advertises {have} {GPU}, want {want} ({gpus} GPUs x "
        f"deviceSplitCount {hami['devicesplitcount']}): HAMi's device plugin has not "
        "registered the config; it reads config.json when it starts (restart its pod)"
    )


def summarize(plan: SharingPlan, policy: str, nodes: Iterable[NodeFacts]) -> Summary:
    result = plan.results[policy]
    nodes = list(nodes)
    governed = set(plan.assignment.nodes_of(policy))
    conflicts = plan.assignment.conflicts_of(policy)
    contended = {n for c in conflicts for n in c.nodes}
    pending = _pending(plan, governed, result)
    total: Counter[str] = Counter()
    waiting: dict[str, str] = {}  # node -> why HAMi's plugin does not advertise it yet
    for node in nodes:
        if node.name in governed and node.name not in pending:
            observed = hami_observed(result, node)
            total.update(advertised(result, node) if observed is None else observed)
            if why := unregistered(result, node):
                waiting[node.name] = why
    applied = len(governed - pending - set(waiting))
    return Summary(
        config_key=result.key or "",
        matched=len(governed | contended),
        applied=applied,
        conflicted=len(contended),
        advertised={k: str(v) for k, v in sorted(total.items()) if v},
        verdict=_verdict(
            plan, result, governed, applied, conflicts, waiting, _extra(result, nodes, governed)
        ),
    )


def _extra(
    result: PolicyResult, nodes: Iterable[NodeFacts], governed: set[str]
) -> tuple[tuple[str, Status, str, str], ...]:
    """The conditions a policy carries beside Ready: HAMi's MPS fallback; vCANN-RT's
    reference-only notice and what its nodes say of the prerequisites."""
    true: Status = "True"
    extra = tuple(("BackendFallback", true, "HAMiHasNoMPS", n) for n in result.notices)
    if not vcannrt.governs(result):
        return extra
    mine = [n for n in nodes if n.name in governed]
    found = vcannrt.prerequisites(mine)
    if found.wrong:
        pre: tuple[str, Status, str, str] = (
            "Prerequisites",
            "False",
            "WrongVersion",
            found.message,
        )
    elif found.unverified or not mine:
        pre = ("Prerequisites", "Unknown", "Unverified", found.message or "no node governed")
    else:
        pre = ("Prerequisites", true, "Verified", f"every node publishes {vcannrt.NEEDS}")
    notice = ("ReferenceOnly", true, "NotForCommercialUse", vcannrt.REFERENCE_ONLY)
    return (*extra, notice, pre)


def _pending(plan: SharingPlan, governed: set[str], result: PolicyResult) -> set[str]:
    """Governed nodes that do not run this policy's config after this pass."""
    moving = {c.node for c in plan.device_plugin.labels}
    moving |= {e.node for e in result.node_errors if e.node}
    moving |= set(plan.awaiting_rollout)
    moving |= set(plan.changes)  # until the next pass observes the write
    return (moving & governed) if result.valid else set(governed)


def _verdict(
    plan: SharingPlan,
    result: PolicyResult,
    governed: set[str],
    applied: int,
    conflicts: Iterable[AssignmentConflict],
    unregistered: Mapping[str, str],
    extra: tuple[tuple[str, Status, str, str], ...] = (),
) -> Verdict:
    if result.errors:
        return Verdict("stalled", "InvalidSpec", summary(result.errors), extra)
    found = tuple(conflicts)
    if found:
        text = "; ".join(c.message for c in found)
        return Verdict("stalled", "Conflict", text, extra)
    if result.node_errors:
        reasons = {e.reason for e in result.node_errors}
        reason = reasons.pop() if len(reasons) == 1 and "" not in reasons else "InvalidSpec"
        return Verdict("stalled", reason, summary(result.node_errors), extra)
    if not governed and result.name not in plan.assignment.selecting:
        # "0 node(s) run it" is no success: a typo in the selector looks exactly like this
        message = "its nodeSelector (or poolRef's pool) matches no node: no node runs this policy"
        return Verdict("stalled", "NoNodes", message, extra)
    waiting = sorted(set(plan.awaiting_rollout) & governed)
    if waiting:
        why = plan.awaiting_rollout[waiting[0]].reason
        message = f"{len(waiting)} node(s) wait for the cordon/drain rollout ({why})"
        return Verdict("progressing", "RollingOut", message, extra)
    if unregistered:
        first = unregistered[min(unregistered)]
        message = f"{len(unregistered)} node(s) wait for HAMi's device plugin: {first}"
        return Verdict("progressing", "RollingOut", message, extra)
    if applied < len(governed):
        message = f"applied on {applied} of {len(governed)} nodes"
        return Verdict("progressing", "RollingOut", message, extra)
    message = f"{applied} node(s) run {result.key or result.backend}"
    return Verdict("ready", "Applied", message, extra)
