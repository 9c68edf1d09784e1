"""Backend switches through the cordon/drain/verify rollout engine.

``planning`` holds a disruptive node (``awaiting_rollout``) until it is
*cleared*; this module runs ``tessera.domain.rollout`` for one policy over its
disruptive and in-flight nodes, so the engine cordons and drains them
(evictions through the Eviction API, PDBs respected), the next sharing pass
writes their config, and the engine verifies and uncordons. A node whose
rollout finished carries no state and sits at its target, so planning sees no
change left and holds it no more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from tessera.adapters.kube import Obj
from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers.rollout import driver as rollout_driver
from tessera.controllers.rollout import evictions
from tessera.controllers.runtime import Context, ref_of
from tessera.domain import rollout
from tessera.domain.base.conditions import landed
from tessera.domain.rollout.releasing import release
from tessera.domain.sharing import planning, rollout_targets
from tessera.domain.sharing.nodes import NodeFacts


def views(nodes: Mapping[str, Obj]) -> dict[str, rollout.NodeView]:
    return {name: rollout_driver.node_view(node) for name, node in nodes.items()}


def run(
    ctx: Context,
    obj: Obj,
    spec: SharingPolicySpec,
    plan: planning.SharingPlan,
    facts: Mapping[str, NodeFacts],
    nodes: Mapping[str, Obj],
) -> rollout.Plan | None:
    """One rollout pass for the policy ``obj``; ``None`` when it has nothing to roll."""
    name = obj["metadata"]["name"]
    owner = rollout_targets.owner_id(name)
    all_views = views(nodes)
    mine = {n for n, v in all_views.items() if v.state is not None and v.state.owner == owner}
    governed = set(plan.assignment.nodes_of(name))
    wanted = (set(plan.awaiting_rollout) | mine) & governed
    if not wanted and not mine:
        return None
    result = plan.results[name]
    desired = (
        {n: rollout_targets.desired_node(result, facts[n]) for n in sorted(wanted)}
        if result.valid
        else {}
    )
    seen = [all_views[n] for n in sorted(wanted | mine)]
    # its other nodes need no rollout, but one unavailable holds the budget all the same
    bystanders = [all_views[n] for n in sorted(governed - wanted - mine) if n in all_views]
    pods = rollout_driver.pods_for(ctx, seen, desired)
    approved = (obj["metadata"].get("annotations") or {}).get(c.APPROVE_PLAN_ANNOTATION)
    decided = rollout.plan(
        owner,
        spec.rollout,
        desired,
        seen,
        pods,
        rollout_driver.pdbs(ctx),
        ctx.clock(),
        approved,
        rollout_driver.room(ctx, nodes.values(), seen, desired),
        bystanders=bystanders,
    )
    applied = rollout_driver.apply(ctx, ref_of(obj), decided.stages, all_views)
    evictions.announce_held(ctx, ref_of(obj), decided.nodes)
    return replace(decided, verdict=landed(decided.verdict, applied))


def release_all(ctx: Context, obj: Obj, nodes: Mapping[str, Obj]) -> bool:
    """On deletion: give back every node this policy's rollout holds, at once.

    The nodes have just been returned to the default config (they are
    *cleared*), so there is no target left to verify against; waiting for one,
    as ``rollout.backout`` does for geometry, would keep them cordoned until
    the verify timeout. Tessera's taint and cordon go; a cordon someone else
    set stays. True when every release write succeeded.
    """
    owner = rollout_targets.owner_id(obj["metadata"]["name"])
    why = f"{owner} is being deleted"
    actions: list[rollout.Action] = []
    all_views = views(nodes)
    for view in all_views.values():
        s = view.state
        if s is not None and s.owner == owner:
            actions.extend(release(view, s, ctx.clock(), why).emit(s))
    return rollout_driver.apply(ctx, ref_of(obj), [actions], all_views)
