"""One reconcile of all SharingPolicies: observed cluster in, every write out.

The controller reads the Nodes, the device-plugin ConfigMap and HAMi's two
node configs, calls ``plan`` once, and applies the result in order
(ConfigMap keys, then node labels, then HAMi patches). Nodes are *held* (keep
what they run) when their policy is invalid, when the rule that fails depends
on the node, when two policies tie on them, or when their change is
disruptive and the rollout engine has not yet cleared them (``cleared``).

The device-plugin ConfigMap is planned only once an NVIDIA node exists or the
map does: a cluster of Ascend nodes has no GPU Operator to read it (and usually
no namespace to write it in).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tessera.domain.base.rules import Note, RuleError
from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import (
    ascend_rules,
    changes,
    configmap,
    device_plugin,
    node_rules,
    states,
    vcannrt,
)
from tessera.domain.sharing.assignment import Assignment, Policy, assign
from tessera.domain.sharing.changes import Change
from tessera.domain.sharing.nodes import NodeFacts
from tessera.domain.sharing.rendering import PolicyResult, result_of


@dataclass(frozen=True)
class SharingObserved:
    """What the controller read this pass; documents are parsed, absent = None."""

    nodes: tuple[NodeFacts, ...]
    plugin_data: Mapping[str, str] | None = None  # None: the device-plugin ConfigMap is absent
    plugin_annotations: Mapping[str, str] | None = None
    hami_nvidia: Mapping[str, Any] | None = None
    hami_nvidia_managed: Mapping[str, str] = field(default_factory=dict)  # node -> digest
    hami_ascend: Mapping[str, Any] | None = None
    hami_ascend_managed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SharingSettings:
    plugin_map: configmap.ConfigMapRef = field(default_factory=configmap.ConfigMapRef)
    hami_nvidia_where: str = "kube-system/hami-device-plugin (config.json)"
    hami_ascend_where: str = "kube-system/hami-device-node-config (node-config.yaml)"
    mps_root: str = device_plugin.MPS_ROOT


@dataclass(frozen=True)
class SharingPlan:
    assignment: Assignment
    results: Mapping[str, PolicyResult]
    device_plugin: configmap.ConfigMapPlan
    hami_nvidia: hami.EntriesPlan
    hami_ascend: hami.EntriesPlan
    changes: Mapping[str, Change]  # node -> what changes there this pass
    awaiting_rollout: Mapping[str, Change]  # disruptive, held until cleared

    @property
    def restorations(self) -> tuple[str, ...]:
        """One message per hand edit being undone; empty for a converged cluster."""
        return tuple(n.message for n in self.notes if n.restores)

    @property
    def notes(self) -> tuple[Note, ...]:
        """Every write's note, each naming the policy whose plan made it (if any)."""
        return (*self.device_plugin.notes, *self.hami_nvidia.notes, *self.hami_ascend.notes)


def plan(
    policies: Sequence[Policy],
    seen: SharingObserved,
    settings: SharingSettings | None = None,
    cleared: frozenset[str] = frozenset(),
) -> SharingPlan:
    cfg = settings or SharingSettings()
    ref = cfg.plugin_map
    data = dict(seen.plugin_data or {})
    assignment = assign(policies, seen.nodes)
    results = {p.name: result_of(p, cfg.mps_root) for p in policies}
    nv_now = states.owned_entries(seen.hami_nvidia, hami.NVIDIA_LIST, hami.NVIDIA_FIELDS)
    asc_now = states.owned_entries(seen.hami_ascend, hami.ASCEND_LIST, hami.ASCEND_FIELDS)
    targets: dict[str, configmap.Target] = {}
    nv_want: dict[str, Mapping[str, Any]] = {}
    asc_want: dict[str, Mapping[str, Any]] = {}
    node_changes: dict[str, Change] = {}
    waiting: dict[str, Change] = {}
    failed: dict[str, list[RuleError]] = defaultdict(list)
    for node in sorted(seen.nodes, key=lambda n: n.name):
        nv_old = nv_now.get(node.name) if node.name in seen.hami_nvidia_managed else None
        asc_old = asc_now.get(node.name) if node.name in seen.hami_ascend_managed else None
        owner = assignment.owner.get(node.name)
        result = results.get(owner) if owner else None
        failures = _node_failures(node, result)
        if result is not None:
            failed[result.name].extend(failures)
        invalid = result is not None and not result.valid
        hold = node.name in assignment.held or invalid or bool(failures)
        target, nv_new, asc_new = _wanted(node, result, ref)
        if not hold:
            old = states.now(node, data, ref, nv_old, asc_old)
            new = states.after(
                target=target, nv=nv_new, asc=asc_new, nv_old=nv_old, data=data, result=result
            )
            change = vcannrt.change(result, node) or changes.classify(old, new, node.name)
            if change.disruptive and node.name not in cleared:
                waiting[node.name] = change
                hold = True
            elif change.kind != "none":
                node_changes[node.name] = change
        if hold:
            target, nv_new, asc_new = None, nv_old, asc_old
        if target is not None:
            targets[node.name] = target
        if nv_new:
            nv_want[node.name] = nv_new
        if asc_new:
            asc_want[node.name] = asc_new
    results = {n: replace(r, node_errors=tuple(failed[n])) for n, r in results.items()}
    cm, nv, asc = _maps(seen, cfg, data, results, targets, nv_want, asc_want, assignment)
    return SharingPlan(assignment, results, cm, nv, asc, node_changes, waiting)


def _node_failures(node: NodeFacts, result: PolicyResult | None) -> list[RuleError]:
    """What the policy's config asks that this node cannot give: an NVIDIA node's device-plugin
    rules, an Ascend node's chip and the mode (the support matrix)."""
    if result is None or not result.valid:
        return []
    if node.vendor == "ascend" and result.ascend is not None:
        return list(ascend_rules.check(result.ascend, node))
    if result.config is None or node.vendor != "nvidia":
        return []
    return list(node_rules.check(result.config, node))


def _maps(
    seen: SharingObserved,
    cfg: SharingSettings,
    data: dict[str, str],
    results: Mapping[str, PolicyResult],
    targets: Mapping[str, configmap.Target],
    nv_want: Mapping[str, Mapping[str, Any]],
    asc_want: Mapping[str, Mapping[str, Any]],
    assignment: Assignment,
) -> tuple[configmap.ConfigMapPlan, hami.EntriesPlan, hami.EntriesPlan]:
    """The device-plugin map's plan and the two HAMi node-config maps' plans."""
    ref = cfg.plugin_map
    contents = {r.key: r.content for r in results.values() if r.valid and r.key and r.content}
    managed = configmap.managed_keys(seen.plugin_annotations)
    cm = configmap.ConfigMapPlan(ref)  # no NVIDIA node and no map yet: no plugin reads one
    if seen.plugin_data is not None or any(n.vendor == "nvidia" for n in seen.nodes):
        keys = {r.key: r.name for r in results.values() if r.key}
        cm = configmap.plan(
            ref,
            data,
            managed=managed,
            contents=contents,
            nodes=seen.nodes,
            targets=targets,
            owners=keys,
        )
    nv = hami.plan_entries(
        seen.hami_nvidia,
        list_key=hami.NVIDIA_LIST,
        owned=hami.NVIDIA_FIELDS,
        desired=nv_want,
        managed=seen.hami_nvidia_managed,
        where=cfg.hami_nvidia_where,
        owners=assignment.owner,
    )
    asc = hami.plan_entries(
        seen.hami_ascend,
        list_key=hami.ASCEND_LIST,
        owned=hami.ASCEND_FIELDS,
        desired=asc_want,
        managed=seen.hami_ascend_managed,
        where=cfg.hami_ascend_where,
        owners=assignment.owner,
    )
    return cm, nv, asc


def _wanted(
    node: NodeFacts, result: PolicyResult | None, ref: configmap.ConfigMapRef
) -> tuple[configmap.Target | None, Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """Label target, HAMi NVIDIA fields and Ascend fields the node should get."""
    release = configmap.Target(ref.default_key) if node.applied_config is not None else None
    if result is None:
        return release, None, None
    if node.vendor == "ascend":
        return None, None, result.ascend_fields
    if node.vendor != "nvidia":
        return None, None, None
    if result.hami_fields is not None:
        return release, result.hami_fields, None
    if result.key is None:
        return release, None, None
    return configmap.Target(result.key, result.name), None, None
