"""Between the rollout engine and the API: observations in, actions out.

NodePoolGeometry changes and SharingPolicy backend switches both roll out
through ``tessera.domain.rollout``. This module builds the engine's views from
raw Nodes, Pods and PDBs and executes the actions it returns — stage by stage,
each node's actions in order and different nodes side by side, stopping a
node at its first failure so the next pass re-plans from what really
happened. Evictions go through the Eviction API only; 429 (a PDB said no),
404 (already gone) and 409 (replaced) are ordinary answers, not errors.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from tessera.adapters.events import Ref
from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.controllers import skeleton
from tessera.controllers.rollout import evictions, node_patch
from tessera.controllers.runtime import Context, stopping
from tessera.domain import rollout
from tessera.domain.cluster import objects as cluster
from tessera.observability import metrics
from tessera.observability.tracing import span

log = logging.getLogger("tessera.rollout")
# A wave of 100 nodes admitted, handed their layout or released four at a time waited for
# 25 round trips in turn (seconds on a busy API server, for every wave); the client keeps
# 32 connections (``Kube``), shared with the Events and the other daemons.
POD_LISTS_AT_ONCE = 16
WRITES_AT_ONCE = 16


# -- observe -------------------------------------------------------------------------------------


# The views are built in the domain, shared with ``tessera plan``.
node_view = cluster.node_view
pod_view = cluster.pod_view
pdb_view = cluster.pdb_view


def pods_on(
    ctx: Context, fresh: Iterable[str], waiting: Iterable[str] = ()
) -> list[rollout.PodView]:
    """Pods on the nodes a pass looks at: a converged pool lists no pods at all.

    Nodes in flight (``fresh``) get one list per node, fresh every pass: the
    recount before a layout change must not read a cache that may lag. Nodes
    still waiting for their turn are only ranked and pre-checked by their pods,
    so they come from the pod index when ``tessera run`` keeps one (a pass over
    a 100-node pool used to spend a third of its time listing them one by one).
    Lists go out ``POD_LISTS_AT_ONCE`` at a time.
    """
    listed = sorted(set(fresh))
    rest = sorted(set(waiting) - set(listed))
    cached = ctx.pod_index.get(rest) if ctx.pod_index is not None else None
    out = [p for pods in (cached or {}).values() for p in pods]
    if cached is None:
        listed += rest

    def on(name: str) -> list[Obj]:
        return ctx.kube.list("/api/v1/pods", field_selector=f"spec.nodeName={name}")

    if listed:
        with ThreadPoolExecutor(min(POD_LISTS_AT_ONCE, len(listed))) as pool:
            out += [pod_view(p) for pods in pool.map(on, listed) for p in pods]
    return out


def pods_for(
    ctx: Context, nodes: Sequence[rollout.NodeView], desired: Mapping[str, rollout.DesiredNode]
) -> list[rollout.PodView]:
    """The pods a plan over ``nodes`` reads: fresh where they decide a write, else indexed."""
    reads = cluster.pod_reads(nodes, desired)
    return pods_on(ctx, reads.fresh, reads.ranked)


class DraRoom(Protocol):
    """How a DRA pool counts devices (``controllers.dra.pool.DraObserved``): nodes' slices, pods' claims."""

    def node(self, view: rollout.NodeView) -> rollout.NodeView: ...

    def pods(self, pods: Sequence[rollout.PodView]) -> list[rollout.PodView]: ...


def room(
    ctx: Context,
    nodes: Iterable[Obj],
    pool: Sequence[rollout.NodeView],
    desired: Mapping[str, rollout.DesiredNode],
    dra: DraRoom | None = None,
) -> rollout.Room | None:
    """Every node and the accelerators its pods hold, for the check before a cordon.

    Read only while a node of the pool waits for its turn (a converged pool
    reads nothing more); from the pod index when ``tessera run`` keeps one, else
    one list of every bound pod. The nodes as they advertise themselves (their
    sharing config included): that is what the pods request.
    """
    if not cluster.pod_reads(pool, desired).ranked:
        return None
    views = [node_view(n) for n in nodes]
    cached = ctx.pod_index.get([v.name for v in views]) if ctx.pod_index is not None else None
    if cached is not None:
        bound = [p for pods in cached.values() for p in pods]
    else:
        raw = ctx.kube.list("/api/v1/pods", field_selector="spec.nodeName!=")
        bound = [pod_view(p) for p in raw]
    if dra is not None:  # DRA devices count as room, and what pods' claims hold as used
        views, bound = [dra.node(v) for v in views], dra.pods(bound)
    return rollout.room(views, bound)


def pdbs(ctx: Context) -> list[rollout.PdbView]:
    return [pdb_view(p) for p in ctx.kube.list("/apis/policy/v1/poddisruptionbudgets")]


# -- apply ---------------------------------------------------------------------------------------


def apply(
    ctx: Context,
    owner: Ref,
    stages: Sequence[Sequence[rollout.Action]],
    nodes: Mapping[str, rollout.NodeView],
    then: Callable[[str, Obj], object] | None = None,
) -> bool:
    """Execute a plan's stages; True when every action landed. ``then`` is called, on the
    node's own worker, with each Node as the API server returned it once all of that node's
    actions of a stage have landed (the recount after a cordon, ``recount``)."""

    def chain(actions: Sequence[rollout.Action]) -> bool:
        """One node's actions in order, a run of node patches as one write; stop at a failure."""
        patched: dict[str, Obj] = {}
        runs = node_patch.runs(actions)
        if not all(_run(ctx, owner, run, nodes.get(run[0].node), patched) for run in runs):
            return False
        if then is not None:
            for name, node in patched.items():
                try:
                    then(name, node)
                except Exception:  # what follows a write is the next pass's to redo: never lost
                    log.exception("%s/%s: after writing %s", owner.kind, owner.name, name)
        return True

    def proceed() -> bool:
        if stopping():
            log.info("%s/%s: stopping; later stages left to the next pass", owner.kind, owner.name)
            return False
        return True

    return run_stages(stages, chain, proceed=proceed)


def run_stages(
    stages: Sequence[Sequence[rollout.Action]],
    chain: Callable[[Sequence[rollout.Action]], bool],
    at_once: int = WRITES_AT_ONCE,
    proceed: Callable[[], bool] = lambda: True,
) -> bool:
    """Each stage only after the one before fully landed; within one, nodes concurrently.

    ``chain`` runs one node's actions of a stage, in order, and says whether
    all landed; it stops at the first failure (the next pass re-plans from
    what really happened) while other nodes carry on. A pass that releases ten
    nodes and admits ten more costs the time of the slowest node's writes, not
    of all of them one after another. ``proceed`` is asked before every stage
    after the first: a replica that is stopping (or pausing for a peer with a
    higher priority) finishes what is in flight but admits no new node.
    """
    for number, stage in enumerate(stages):
        if number and not proceed():
            return False
        chains: dict[str, list[rollout.Action]] = {}
        for action in stage:
            chains.setdefault(action.node, []).append(action)
        if len(chains) <= 1:
            landed = [chain(actions) for actions in chains.values()]
        else:
            with ThreadPoolExecutor(min(at_once, len(chains))) as pool:
                # each in a copy of this context, so the writes' spans keep their parent
                runs = [
                    pool.submit(contextvars.copy_context().run, chain, actions)
                    for actions in chains.values()
                ]
                landed = [run.result() for run in runs]
        if not all(landed):
            return False
    return True


def _run(
    ctx: Context,
    owner: Ref,
    run: Sequence[rollout.Action],
    node: rollout.NodeView | None,
    patched: MutableMapping[str, Obj] | None = None,
) -> bool:
    """One write (a run of node patches, an eviction, a delete), then its logs and Events."""
    first = run[0]
    names = ",".join(type(a).__name__ for a in run)
    with span(names, node=first.node, reason="; ".join(a.reason for a in run)):
        try:
            refused = _execute(ctx, run, patched)
        except ApiError as err:
            texts = "; ".join(rollout.describe(a) for a in run)
            log.warning("%s/%s: %s failed: %s", owner.kind, owner.name, texts, err)
            skeleton.refused(err)  # the pass reports it in the object's status
            return False
    for action in run:
        text = rollout.describe(action)
        log.info("%s/%s: %s", owner.kind, owner.name, text)
        _observe(ctx, owner, action, node)
        if refused is None and not isinstance(
            action, rollout.SetNodeState | rollout.ClearNodeState
        ):
            kind = type(action).__name__
            ctx.events.post(owner, kind, text, ctx.clock())
            ctx.events.post(Ref("v1", "Node", action.node), kind, text, ctx.clock())
    if refused is not None and isinstance(first, rollout.Evict):
        ref = f"{first.namespace}/{first.name}"
        evictions.held(ctx, owner, first.node, ref, first.uid, refused)
    return True


def _observe(
    ctx: Context, owner: Ref, action: rollout.Action, node: rollout.NodeView | None
) -> None:
    """Phase durations and rollbacks, from the state a node leaves and the one it enters."""
    before = node.state if node is not None else None
    if before is None:
        return
    leaving = isinstance(action, rollout.ClearNodeState) or (
        isinstance(action, rollout.SetNodeState) and action.state.phase != before.phase
    )
    if leaving:
        seconds = (ctx.clock() - before.since).total_seconds()
        metrics.PHASE_SECONDS.labels(before.phase.value).observe(max(seconds, 0.0))
    if (
        isinstance(action, rollout.SetNodeState)
        and action.state.rollback_of is not None
        and before.rollback_of is None
    ):
        metrics.ROLLBACKS.labels(owner.name).inc()


def _execute(
    ctx: Context, run: Sequence[rollout.Action], patched: MutableMapping[str, Obj] | None = None
) -> str | None:
    """Do one write; for an eviction the API server refused (429), why it did."""
    first = run[0]
    match first:
        case rollout.Evict():
            return evictions.evict(ctx, first)
        case rollout.DeletePod():
            body: dict[str, Any] = {"preconditions": {"uid": first.uid}} if first.uid else {}
            try:
                ctx.kube.delete(path_of("v1", "pods", first.name, first.namespace), body)
            except ApiError as err:
                if not err.conflict:
                    raise
        case _:
            after = _patch_node(ctx, first.node, run)
            if after is not None and patched is not None:
                patched[first.node] = after
    return None


def _patch_node(ctx: Context, name: str, run: Sequence[rollout.Action]) -> Obj | None:
    path = path_of("v1", "nodes", name)
    if not node_patch.edits_taints(run):
        patch = node_patch.compose(run)
    else:  # a list is replaced whole: read it fresh and guard the write with its version
        current = ctx.kube.get(path)
        patch = node_patch.compose(run, (current.get("spec") or {}).get("taints") or [])
        if patch:
            version = current["metadata"]["resourceVersion"]
            patch.setdefault("metadata", {})["resourceVersion"] = version
    return ctx.kube.patch(path, patch) if patch else None
