"""Between the rollout engine and the API: observations in, actions out.

NodePoolGeometry changes and SharingPolicy backend switches both roll out
through ``tessera.domain.rollout``. This module builds the engine's views from
raw Nodes, Pods and PDBs and executes the actions it returns — in order,
stopping at the first failure so the next pass re-plans from what really
happened. Evictions go through the Eviction API only; 429 (a PDB said no),
404 (already gone) and 409 (replaced) are ordinary answers, not errors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain import rollout
from tessera.observability import metrics
from tessera.observability.events import Ref
from tessera.observability.tracing import span

from .runtime import Context

log = logging.getLogger("tessera.rollout")


# -- observe -------------------------------------------------------------------------------------


def node_view(node: Obj) -> rollout.NodeView:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    annotations = meta.get("annotations") or {}
    state, error = None, ""
    raw = annotations.get(c.NODE_STATE_ANNOTATION)
    if raw:
        try:
            state = rollout.decode(raw)
        except rollout.StateError as err:
            error = str(err)
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in status.get("conditions") or []
    )
    return rollout.NodeView(
        name=meta["name"],
        labels=meta.get("labels") or {},
        annotations=annotations,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        allocatable={
            k: int(v) for k, v in (status.get("allocatable") or {}).items() if str(v).isdigit()
        },
        taints=tuple(
            rollout.Taint(t["key"], t.get("effect", "NoSchedule"), t.get("value", ""))
            for t in spec.get("taints") or []
        ),
        state=state,
        state_error=error,
    )


def pod_view(pod: Obj) -> rollout.PodView:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    owners = meta.get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    wants: set[str] = set()
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        resources = container.get("resources") or {}
        wants |= set(resources.get("limits") or {}) | set(resources.get("requests") or {})
    deletion = meta.get("deletionTimestamp")
    return rollout.PodView(
        namespace=meta["namespace"],
        name=meta["name"],
        node=spec.get("nodeName", ""),
        labels=meta.get("labels") or {},
        owner_kind=controller.get("kind") if controller else None,
        is_mirror="kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
        requests_accelerator=any(w.startswith(c.ACCELERATOR_RESOURCE_PREFIXES) for w in wants),
        uses_empty_dir=any("emptyDir" in v for v in spec.get("volumes") or []),
        deletion_timestamp=datetime.fromisoformat(deletion.replace("Z", "+00:00"))
        if deletion
        else None,
        phase=status.get("phase", "Pending"),
        uid=meta.get("uid", ""),
    )


def pdb_view(pdb: Obj) -> rollout.PdbView:
    meta, spec, status = pdb["metadata"], pdb.get("spec") or {}, pdb.get("status") or {}
    selector = spec.get("selector")
    fresh = status.get("observedGeneration", -1) >= meta.get("generation", 0)
    return rollout.PdbView(
        namespace=meta["namespace"],
        name=meta["name"],
        selector=LabelSelector.model_validate(selector) if selector is not None else None,
        disruptions_allowed=int(status.get("disruptionsAllowed", 0)) if fresh else 0,
    )


def pods_on(ctx: Context, nodes: Iterable[str]) -> list[rollout.PodView]:
    """Pods on the given nodes only: a converged pool lists no pods at all."""
    views: list[rollout.PodView] = []
    for name in sorted(set(nodes)):
        pods = ctx.kube.list("/api/v1/pods", field_selector=f"spec.nodeName={name}")
        views.extend(pod_view(p) for p in pods)
    return views


def pdbs(ctx: Context) -> list[rollout.PdbView]:
    return [pdb_view(p) for p in ctx.kube.list("/apis/policy/v1/poddisruptionbudgets")]


def needs_pods(
    nodes: Sequence[rollout.NodeView], desired: dict[str, rollout.DesiredNode]
) -> list[str]:
    """Nodes whose pods the plan may look at: in flight, or not yet at their target."""
    out = []
    for node in nodes:
        want = desired.get(node.name)
        state = node.state
        if (state is not None and state.phase != rollout.Phase.UPDATED) or (
            want is not None and (state is None or state.target.id != want.target)
        ):
            out.append(node.name)
    return out


# -- apply ---------------------------------------------------------------------------------------


def apply(
    ctx: Context, owner: Ref, actions: Sequence[rollout.Action], nodes: dict[str, rollout.NodeView]
) -> int:
    """Execute ``actions`` in order; returns how many ran before one failed (or all)."""
    done = 0
    for action in actions:
        text = rollout.describe(action)
        with span(type(action).__name__, node=action.node, reason=action.reason):
            try:
                _execute(ctx, action, nodes.get(action.node))
            except ApiError as err:
                log.warning("%s/%s: %s failed: %s", owner.kind, owner.name, text, err)
                return done
        log.info("%s/%s: %s", owner.kind, owner.name, text)
        if not isinstance(action, rollout.SetNodeState | rollout.ClearNodeState):
            ctx.events.post(owner, type(action).__name__, text, ctx.clock())
            ctx.events.post(
                Ref("v1", "Node", action.node), type(action).__name__, text, ctx.clock()
            )
        done += 1
    return done


def _execute(ctx: Context, action: rollout.Action, node: rollout.NodeView | None) -> None:
    node_path = path_of("v1", "nodes", action.node)
    match action:
        case rollout.SetNodeState() | rollout.ClearNodeState():
            ctx.kube.patch(node_path, {"metadata": {"annotations": action.annotations}})
        case rollout.Cordon():
            ctx.kube.patch(node_path, {"spec": {"unschedulable": True}})
        case rollout.Uncordon():
            ctx.kube.patch(node_path, {"spec": {"unschedulable": None}})
        case rollout.SetNodeLabels():
            ctx.kube.patch(node_path, {"metadata": {"labels": dict(action.labels)}})
        case rollout.AddTaint() | rollout.RemoveTaint():
            _set_taints(ctx, action, node)
        case rollout.Evict():
            _evict(ctx, action)
        case rollout.DeletePod():
            body: dict[str, Any] = {"preconditions": {"uid": action.uid}} if action.uid else {}
            try:
                ctx.kube.delete(path_of("v1", "pods", action.name, action.namespace), body)
            except ApiError as err:
                if not err.conflict:
                    raise


def _evict(ctx: Context, action: rollout.Evict) -> None:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": action.name, "namespace": action.namespace},
    }
    if action.uid:
        body["deleteOptions"] = {"preconditions": {"uid": action.uid}}
    try:
        ctx.kube.create(path_of("v1", "pods", action.name, action.namespace) + "/eviction", body)
        metrics.EVICTIONS.labels("evicted").inc()
    except ApiError as err:
        if err.too_many_requests:
            metrics.EVICTIONS.labels("blocked").inc()
            log.info("eviction of %s/%s refused: %s", action.namespace, action.name, err.message)
        elif not (err.not_found or err.conflict):
            raise


def _set_taints(
    ctx: Context, action: rollout.AddTaint | rollout.RemoveTaint, node: rollout.NodeView | None
) -> None:
    """Replace the taint list with a JSON-patch ``test`` on the old one (no lost updates)."""
    current = ctx.kube.get(path_of("v1", "nodes", action.node))
    taints = list((current.get("spec") or {}).get("taints") or [])
    key, effect = action.taint.key, action.taint.effect
    kept = [t for t in taints if not (t.get("key") == key and t.get("effect") == effect)]
    wanted = (
        [*kept, {"key": key, "effect": effect}] if isinstance(action, rollout.AddTaint) else kept
    )
    if wanted == taints:
        return
    ops: list[dict[str, Any]] = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": current["metadata"]["resourceVersion"],
        },
        {"op": "add", "path": "/spec/taints", "value": wanted},
    ]
    ctx.kube.patch(path_of("v1", "nodes", action.node), ops, kind="json")
