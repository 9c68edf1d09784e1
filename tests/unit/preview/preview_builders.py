"""Raw objects for preview tests, built with ``builders``: the shorthands these tests share
(a Running GPU replica, a PDB as the disruption controller reports it, a pool and its nodes)
and the cluster as Tessera's controllers leave it (converged, sharing applied, mid-rollout)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from builders import (
    LAYOUT_A,
    LAYOUT_B,
    GeometryWrapper,
    NamespaceWrapper,
    NodeWrapper,
    PdbWrapper,
    PodWrapper,
    SharingPolicyWrapper,
    TenantQuotaWrapper,
)
from devcluster import fleet
from tessera.api import constants as c
from tessera.domain.cluster import objects as cluster
from tessera.domain.cluster import pools
from tessera.domain.preview import Cluster, ObjectPreview, Preview, Raw

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)


def npg(name: str, layout: Mapping[str, Any], **rollout: Any) -> dict[str, Any]:
    """Pool ``name`` (its nodes labelled ``tessera.io/pool=<name>``) with ``layout``."""
    return GeometryWrapper(name).layout(layout).rollout(**rollout).obj()


def gpu_nodes(pool: str, count: int, model: str = "H100-80GB", devices: int = 8) -> list[Raw]:
    """The pool's simulated nodes, as the dev cluster creates them."""
    return [NodeWrapper.simulated(s).obj() for s in fleet.pool(pool, model, count, devices)]


def converged(nodes: list[Raw], pool_manifest: dict[str, Any]) -> tuple[list[Raw], Raw]:
    """The nodes as the agents leave them once the pool's layout is live, and the ConfigMap."""
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec

    name = pool_manifest["metadata"]["name"]
    spec = NodePoolGeometrySpec.model_validate(pool_manifest["spec"])
    seen = cluster.observe_pool(name, spec, nodes, {})
    out = []
    for node in nodes:
        target = seen.targets[node["metadata"]["name"]]
        assert target.config is not None
        labels = {
            **node["metadata"]["labels"],
            c.MIG_CONFIG_LABEL: target.config[0],
            c.MIG_CONFIG_STATE_LABEL: "success",
        }
        alloc = {"cpu": "64", "pods": "110", **{k: str(v) for k, v in target.capacity.items()}}
        out.append(
            {
                **node,
                "metadata": {**node["metadata"], "labels": labels},
                "status": {**node["status"], "allocatable": alloc},
            }
        )
    wanted, keep = cluster.pool_configs(spec, seen)
    text = pools.configs_document("", name, "mig-configs", wanted, keep)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.MIG_PARTED_CONFIGMAP_NAME, "namespace": "gpu-operator"},
        "data": {c.MIG_PARTED_CONFIGMAP_KEY: text},
    }
    return out, cm


def pod(name: str, node: str, ns: str = "ml", **labels: str) -> Raw:
    """A Running replica (owned by a ReplicaSet) on ``node`` using one GPU."""
    built = PodWrapper(name).namespace(ns).labels(labels).owner().node(node)
    return built.limits({"nvidia.com/gpu": 1}).phase("Running").obj()


def pdb(name: str, allowed: int, ns: str = "ml", **match: str) -> Raw:
    """A PDB over the pods labelled ``match`` allowing ``allowed`` disruptions."""
    built = PdbWrapper(name).namespace(ns).meta(generation=1).match(**match)
    return built.allowed(allowed).obj()


def namespace(name: str, **labels: str) -> Raw:
    return NamespaceWrapper(name).labels(labels).obj()


def world(*items: Raw) -> Cluster:
    return Cluster.of(items)


def whole_gpu_nodes(pool: str, count: int) -> list[Raw]:
    """A30s without MIG: what sharing policies share."""
    specs = fleet.pool(pool, "A30-24GB", count, 4)
    return [NodeWrapper.simulated(s).label(c.MIG_STRATEGY_LABEL, "none").obj() for s in specs]


def sharing_applied(items: list[Raw], *policies: Raw) -> list[Raw]:
    """The cluster once the sharing controller converged ``policies``: device-plugin keys
    and labels, HAMi's node config with Tessera's managed-nodes mark, the HAMi mode label,
    and the allocatable the device plugins advertise."""
    import json

    from tessera.domain.preview import sharing as preview_sharing
    from tessera.domain.schedulers.hami import nodes as hami
    from tessera.domain.sharing import planning, rollout_targets
    from tessera.domain.sharing.status import advertised

    world_ = Cluster.of([*items, *policies])
    facts = {n["metadata"]["name"]: cluster.sharing_facts(n) for n in world_.nodes}
    plan = planning.plan(
        preview_sharing.policies(world_),
        planning.SharingObserved(tuple(facts.values())),
        cleared=frozenset(facts),
    )
    moved = {ch.node: ch.patch()["metadata"] for ch in plan.device_plugin.labels}
    out: list[Raw] = []
    for raw in items:
        if raw["kind"] != "Node":
            out.append(raw)
            continue
        name = raw["metadata"]["name"]
        meta = moved.get(name) or {"labels": {}, "annotations": {}}
        labels = {**raw["metadata"]["labels"], **meta["labels"]}
        alloc = dict(raw["status"]["allocatable"])
        owner = plan.assignment.owner.get(name)
        if owner is not None:
            result = plan.results[owner]
            wanted = rollout_targets.desired_node(result, facts[name]).labels
            labels.update({k: v for k, v in wanted.items() if v is not None})
            alloc.update({k: str(v) for k, v in advertised(result, facts[name]).items()})
        annotations = {**(raw["metadata"].get("annotations") or {}), **meta["annotations"]}
        out.append(
            {
                **raw,
                "metadata": {**raw["metadata"], "labels": labels, "annotations": annotations},
                "status": {**raw["status"], "allocatable": alloc},
            }
        )
    plugin = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": c.DEVICE_PLUGIN_CONFIGMAP_NAME,
            "namespace": c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
            "annotations": plan.device_plugin.data_patch()["metadata"]["annotations"],
        },
        "data": dict(plan.device_plugin.put),
    }
    out.append(plugin)
    if plan.hami_nvidia.managed:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": c.HAMI_NVIDIA_CONFIGMAP_NAME,
                    "namespace": c.HAMI_NAMESPACE,
                    "annotations": {
                        c.MANAGED_NODES_ANNOTATION: hami.managed_annotation(
                            plan.hami_nvidia.managed
                        )
                    },
                },
                "data": {
                    c.HAMI_NVIDIA_CONFIGMAP_KEY: json.dumps(plan.hami_nvidia.document, indent=2)
                },
            }
        )
    return [*out, *policies]


def holding(
    node: Raw,
    owner: str,
    phase: str | None,
    target: str = "",
    *,
    orig: bool = False,
    cordoned: bool = True,
    taint: str | None = None,
    label: str = c.MIG_CONFIG_LABEL,
    since: datetime = T0,
    state: str | None = None,
    agent: str | None = None,
) -> Raw:
    """``node`` as a rollout of ``owner`` leaves it mid-flight: its state annotation (phase,
    target config; ``state`` is the raw annotation instead), its cordon, the pending taint
    (``taint``: its value) and, with ``agent``, the target requested and the agent's verdict."""
    from tessera.domain.rollout import NodeState, Phase, TargetSpec, encode

    annotations = dict(node["metadata"].get("annotations") or {})
    if state is not None:
        annotations[c.NODE_STATE_ANNOTATION] = state
    elif phase is not None:
        spec_ = TargetSpec(target, {label: target}, c.MIG_CONFIG_STATE_LABEL)
        annotations[c.NODE_STATE_ANNOTATION] = encode(
            NodeState(Phase(phase), owner, spec_, orig, since)
        )
    labels = dict(node["metadata"].get("labels") or {})
    if agent is not None:
        labels.update({label: target, c.MIG_CONFIG_STATE_LABEL: agent})
    spec = dict(node.get("spec") or {})
    if cordoned:
        spec["unschedulable"] = True
    if taint is not None:
        spec["taints"] = [{"key": c.GEOMETRY_PENDING_TAINT, "effect": "NoSchedule", "value": taint}]
    meta = {**node["metadata"], "annotations": annotations, "labels": labels}
    return {**node, "metadata": meta, "spec": spec}


def resource_quota(ns: str, tenant: str, used: int = 0, **hard: int) -> Raw:
    """A ResourceQuota the TenantQuota controller wrote (``nvidia_gpu=2``: requests.nvidia.com/gpu)."""
    from tessera.domain.quota import objects

    limits = {f"requests.{k.replace('nvidia_', 'nvidia.com/')}": str(v) for k, v in hard.items()}
    first = next(iter(limits), None)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": objects.quota_name(tenant),
            "namespace": ns,
            "labels": objects.labels(tenant),
        },
        "spec": {"hard": limits},
        "status": {"hard": limits, "used": {first: str(used)} if first and used else {}},
    }


def sharing_policy(name: str, pool: str, backend: str, priority: int = 0, **section: Any) -> Raw:
    built = SharingPolicyWrapper(name).pool(pool).backend(backend)
    return built.spec(priority=priority, **section).obj()


def tenant_quota(name: str, *teams: str, total: int | None = None, gpus: int = 2) -> Raw:
    """A TenantQuota over the namespaces labelled ``team`` in ``teams``."""
    built = (
        TenantQuotaWrapper(name).namespaces_in("team", list(teams)).hard({"nvidia.com/gpu": gpus})
    )
    return (built.total({"nvidia.com/gpu": total}) if total is not None else built).obj()


def deleted(p: Preview, name: str) -> ObjectPreview:
    """The ``delete`` preview of ``name`` in the Preview ``p``."""
    [obj] = [o for o in p.objects if o.name == name]
    assert obj.action == "delete" and obj.deletion is not None
    return obj


def pool_world() -> tuple[list[Raw], Raw, str, str]:
    """Three nodes of pool ``inf`` converged on layout A; the agent ConfigMap also holds
    layout B. Returns (objects, the pool, layout A's config name, layout B's)."""
    from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec

    pool = npg("inf", LAYOUT_A)
    nodes, cm = converged(gpu_nodes("inf", 3), pool)
    spec_b = NodePoolGeometrySpec.model_validate(npg("inf", LAYOUT_B)["spec"])
    wanted, _ = cluster.pool_configs(spec_b, cluster.observe_pool("inf", spec_b, nodes, {}))
    layout_a = nodes[0]["metadata"]["labels"][c.MIG_CONFIG_LABEL]
    [layout_b] = wanted
    text = pools.configs_document(
        cm["data"][c.MIG_PARTED_CONFIGMAP_KEY], "inf", "mig-configs", wanted, {layout_a}
    )
    cm = {**cm, "data": {c.MIG_PARTED_CONFIGMAP_KEY: text}}
    return [*nodes, cm, pool], pool, layout_a, layout_b
