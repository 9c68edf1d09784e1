"""Reading the cluster for SharingPolicy: policies, Nodes and the three ConfigMaps.

Every SharingPolicy pass plans the whole cluster (a node can be governed by
only one policy, so no policy can be planned alone). This module turns raw
objects into the domain's ``SharingObserved`` and ``Policy`` values. A HAMi document
a person broke (invalid JSON/YAML) is reported, not overwritten: the plan sees
no document there and the apply step skips that ConfigMap.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from tessera.adapters.events import Ref
from tessera.adapters.kube import Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers import skipping
from tessera.controllers.dra import classes as dra_classes
from tessera.controllers.runtime import Context, custom_path, list_nodes, ref_of
from tessera.controllers.schedulers import sync as schedulers
from tessera.controllers.sharing import pod_contract
from tessera.domain.cluster import objects as cluster
from tessera.domain.sharing import nodes as node_facts
from tessera.domain.sharing import observing, planning
from tessera.domain.sharing.assignment import Policy
from tessera.domain.sharing.configmap import ConfigMapRef

PLURAL = "sharingpolicies"
log = logging.getLogger("tessera.sharingpolicy")


@dataclass(frozen=True)
class ConfigDocument:
    """One HAMi ConfigMap: where it is, the parsed key, and whether it could be read."""

    namespace: str
    name: str
    key: str
    obj: Obj | None
    parsed: Mapping[str, Any] | None = None
    error: str = ""
    managed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshot:
    policies: tuple[Policy, ...]
    nodes: Mapping[str, Obj]
    facts: Mapping[str, node_facts.NodeFacts]
    plugin_map: Obj | None
    nvidia: ConfigDocument
    ascend: ConfigDocument
    missing_pools: Mapping[str, str]  # policy -> poolRef name that does not exist
    refs: Mapping[str, Ref] = field(default_factory=dict)  # policy -> what its Events name

    def observed(self) -> planning.SharingObserved:
        return observing.sharing_observed(
            self.facts.values(), self.plugin_map, self.nvidia, self.ascend
        )


def settings_of(ctx: Context) -> planning.SharingSettings:
    namespace, name = ctx.settings.device_plugin_configmap
    hns = ctx.settings.hami_namespace
    return planning.SharingSettings(
        plugin_map=ConfigMapRef(namespace, name),
        hami_nvidia_where=f"{hns}/{c.HAMI_NVIDIA_CONFIGMAP_NAME} ({c.HAMI_NVIDIA_CONFIGMAP_KEY})",
        hami_ascend_where=f"{hns}/{c.HAMI_ASCEND_CONFIGMAP_NAME} ({c.HAMI_ASCEND_CONFIGMAP_KEY})",
    )


def snapshot(ctx: Context, *, without: str | None = None) -> Snapshot:
    """Everything one pass reads; ``without`` leaves out a policy being deleted."""
    policies, missing, refs = _policies(ctx, without)
    raw = {n["metadata"]["name"]: n for n in list_nodes(ctx)}
    facts = {name: facts_of(node) for name, node in raw.items()}
    namespace, name = ctx.settings.device_plugin_configmap
    plugin = ctx.kube.get_or_none(path_of("v1", "configmaps", name, namespace))
    hns = ctx.settings.hami_namespace
    nvidia = _document(ctx, hns, c.HAMI_NVIDIA_CONFIGMAP_NAME, c.HAMI_NVIDIA_CONFIGMAP_KEY)
    ascend = _document(ctx, hns, c.HAMI_ASCEND_CONFIGMAP_NAME, c.HAMI_ASCEND_CONFIGMAP_KEY)
    return Snapshot(tuple(policies), raw, facts, plugin, nvidia, ascend, missing, refs)


def inputs(ctx: Context, obj: Obj) -> tuple[Hashable, ...]:
    """What a pass reads besides the Nodes (``skipping``): the policy as written (status
    too, should a hand clear it), every policy's and pool's spec, the three ConfigMaps, and
    the DeviceClasses (a class deleted or made by hand re-runs the class sync), and the
    policy's pod-contract objects (one edited or deleted by hand is restored)."""
    hns, kube = ctx.settings.hami_namespace, ctx.kube
    return (
        obj["metadata"].get("resourceVersion"),
        skipping.generations(kube, custom_path(PLURAL)),
        skipping.generations(kube, custom_path("nodepoolgeometries")),
        skipping.configmap(kube, ctx.settings.device_plugin_configmap),
        skipping.configmap(kube, (hns, c.HAMI_NVIDIA_CONFIGMAP_NAME)),
        skipping.configmap(kube, (hns, c.HAMI_ASCEND_CONFIGMAP_NAME)),
        dra_classes.inputs(ctx, slices=False),
        schedulers.inputs(ctx, _specs(ctx)),
        pod_contract.inputs(ctx, obj["metadata"]["name"]),
    )


def _specs(ctx: Context) -> list[SharingPolicySpec]:
    """Every policy's spec that parses (one that does not reports its own InvalidSpec)."""
    out: list[SharingPolicySpec] = []
    for item in ctx.kube.list(custom_path(PLURAL)):
        try:
            out.append(spec_of(item))
        except ValidationError:
            continue
    return out


facts_of = cluster.sharing_facts  # shared with ``tessera plan``


def spec_of(obj: Obj) -> SharingPolicySpec:
    return SharingPolicySpec.model_validate(obj.get("spec") or {})


def _policies(
    ctx: Context, without: str | None
) -> tuple[list[Policy], dict[str, str], dict[str, Ref]]:
    out: list[Policy] = []
    missing: dict[str, str] = {}
    refs: dict[str, Ref] = {}
    for item in ctx.kube.list(custom_path(PLURAL)):
        meta = item["metadata"]
        if meta["name"] == without or meta.get("deletionTimestamp"):
            continue
        refs[meta["name"]] = ref_of(item)
        try:
            spec = spec_of(item)
        except ValidationError:
            continue  # that policy reports its own InvalidSpec
        pool: LabelSelector | None = None
        dra = False
        if spec.pool_ref is not None:
            pool, dra = _pool_selector(ctx, spec.pool_ref.name)
            if pool is None:
                missing[meta["name"]] = spec.pool_ref.name
        out.append(Policy(meta["name"], spec, pool, dra))
    return out, missing, refs


def _pool_selector(ctx: Context, pool: str) -> tuple[LabelSelector | None, bool]:
    """The pool's nodeSelector, and whether the pool has ``allocation: DRA``."""
    obj = ctx.kube.get_or_none(custom_path("nodepoolgeometries", pool))
    spec = (obj or {}).get("spec") or {}
    selector = spec.get("nodeSelector")
    found = LabelSelector.model_validate(selector) if selector is not None else None
    return found, spec.get("allocation") == "DRA"


def _document(ctx: Context, namespace: str, name: str, key: str) -> ConfigDocument:
    obj = ctx.kube.get_or_none(path_of("v1", "configmaps", name, namespace))
    if obj is None:
        return ConfigDocument(namespace, name, key, None)
    doc = observing.hami_document(obj, key)
    return ConfigDocument(namespace, name, key, obj, doc.parsed, doc.error, doc.managed)


def serialize(key: str, document: Mapping[str, Any]) -> str:
    if key.endswith(".json"):
        return json.dumps(document, indent=2)
    return yaml.safe_dump(dict(document), sort_keys=False)
