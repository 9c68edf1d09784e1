"""Raw objects for preview tests: simulated nodes, pods, PDBs and Tessera manifests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from devcluster import fleet
from tessera.api import constants as c
from tessera.domain import cluster, pools
from tessera.domain.preview import Cluster, ObjectPreview, Preview, Raw

T0 = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)
LAYOUT_A = {"mig": {"layouts": [{"profiles": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]}}
LAYOUT_B = {"mig": {"layouts": [{"profiles": {"1g.10gb": 7}}]}}


def npg(name: str, layout: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    return manifest(
        "NodePoolGeometry",
        name,
        {"nodeSelector": {"matchLabels": {c.POOL_LABEL: name}}, **layout, "rollout": rollout},
    )


def manifest(kind: str, name: str, spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def gpu_nodes(pool: str, count: int, model: str = "H100-80GB", devices: int = 8) -> list[Raw]:
    return [fleet.node_manifest(s) for s in fleet.pool(pool, model, count, devices)]


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
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def pdb(name: str, allowed: int, ns: str = "ml", **match: str) -> Raw:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns, "generation": 1},
        "spec": {"selector": {"matchLabels": match}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": allowed},
    }


def namespace(name: str, **labels: str) -> Raw:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def world(*items: Raw) -> Cluster:
    return Cluster.of(items)


def whole_gpu_nodes(pool: str, count: int) -> list[Raw]:
    """A30s without MIG: what sharing policies share."""
    nodes = gpu_nodes(pool, count, "A30-24GB", 4)
    for n in nodes:
        n["metadata"]["labels"][c.MIG_STRATEGY_LABEL] = "none"
    return nodes


def sharing_applied(items: list[Raw], *policies: Raw) -> list[Raw]:
    """The cluster once the sharing controller converged ``policies``: device-plugin keys
    and labels, HAMi's node config with Tessera's managed-nodes mark, the HAMi mode label,
    and the allocatable the device plugins advertise."""
    import json

    from tessera.domain.preview import sharing as preview_sharing
    from tessera.domain.sharing import hami, planning, rollout_targets
    from tessera.domain.sharing.status import advertised

    world_ = Cluster.of([*items, *policies])
    facts = {n["metadata"]["name"]: cluster.sharing_facts(n) for n in world_.nodes}
    plan = planning.plan(
        preview_sharing.policies(world_),
        planning.Observed(tuple(facts.values())),
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
    spec = {"nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}}, "backend": backend}
    return manifest("SharingPolicy", name, {**spec, "priority": priority, **section})


def tenant_quota(name: str, *teams: str, total: int | None = None, gpus: int = 2) -> Raw:
    """A TenantQuota over the namespaces labelled ``team`` in ``teams``."""
    spec: dict[str, Any] = {
        "namespaceSelector": {
            "matchExpressions": [{"key": "team", "operator": "In", "values": list(teams)}]
        },
        "hard": {"nvidia.com/gpu": gpus},
    }
    if total is not None:
        spec["total"] = {"nvidia.com/gpu": total}
    return manifest("TenantQuota", name, spec)


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
