"""Deleting a NodePoolGeometry: the nodes it holds and the layout each one keeps.

The nodes are observed as ``nodepoolgeometry.finalize`` observes them
(``cluster.objects.pool_view`` with no sharing undone, kept when ``touched_by`` the
pool) and each one is handed to ``rollout.backout``, whose actions are what
the finalizer writes. ``backout`` writes no layout label and the finalizer
leaves the agent ConfigMap alone, so every node keeps the layout it runs
(listed as ``kept``). ``release_of`` says what holds a node and what the
finalizer writes to it, for this and for a deleted SharingPolicy (``prune_sharing``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import rollout
from tessera.domain.base import selectors
from tessera.domain.cluster import objects as observe
from tessera.domain.cluster import pools
from tessera.domain.geometry.layouts import config_name
from tessera.domain.preview.geometry_configs import current_configs, describe, unlabelled
from tessera.domain.preview.model import Cluster, Locations, Raw
from tessera.domain.preview.results import Deletion, ObjectPreview, Release
from tessera.domain.rollout.releasing import release


def release_of(
    view: rollout.NodeView,
    target: str,
    actions: Sequence[rollout.Action],
    waits: str = "",
    warnings: Sequence[str] = (),
) -> Release:
    """``view`` as a person reads it: what holds it (``target``: the layout or config its
    rollout state is for) and the finalizer's ``actions`` on it, state bookkeeping left out."""
    s, holds = view.state, []
    if view.state_error:
        holds.append(f"unreadable rollout state ({view.state_error})")
    elif s is not None:
        toward = f" rolling back to {target}" if s.rollback_of else f" toward {target}"
        holds.append(f"rollout {s.phase.value}" + (toward if target else ""))
    if view.has_taint(rollout.GEOMETRY_PENDING):
        holds.append(f"taint {rollout.GEOMETRY_PENDING.key}")
    if view.unschedulable and view.state_error:
        holds.append("cordoned, by whom is unknown")
    elif view.unschedulable:
        holds.append(
            "cordoned by Tessera" if s is not None and not s.orig else "cordoned, not by Tessera"
        )
    then = []
    for action in actions:
        match action:
            case rollout.RemoveTaint(taint=t):
                then.append(f"remove taint {t.key}")
            case rollout.Uncordon():
                then.append("uncordon")
            case rollout.ClearNodeState():
                then.append("clear its rollout state")
    if view.unschedulable and not any(isinstance(a, rollout.Uncordon) for a in actions):
        then.append("leave it cordoned")
    return Release(view.name, tuple(holds), tuple(then), waits, tuple(warnings))


def deletion(
    before: Cluster, after: Cluster, obj: Raw, now: datetime, loc: Locations
) -> ObjectPreview:
    """What deleting the NodePoolGeometry ``obj`` does: ``nodepoolgeometry.finalize``'s writes."""
    name = obj["metadata"]["name"]
    owner = observe.geometry_owner(name)
    spec: NodePoolGeometrySpec | None
    try:
        spec = NodePoolGeometrySpec.model_validate(obj.get("spec") or {})
    except ValidationError:
        spec = None  # the finalizer backs out with the default rollout settings
    policy = spec.rollout if spec is not None else RolloutSpec()
    views = [observe.pool_view(n, {}) for n in before.nodes]
    configs = current_configs(before, spec, loc) if spec is not None else {}
    label = pools.config_label(spec) if spec is not None else c.MIG_CONFIG_LABEL
    released: list[Release] = []
    for view in sorted((v for v in views if observe.touched_by(v, owner)), key=lambda v: v.name):
        done = rollout.backout(owner, policy, [view], now)
        then, waits = done.actions, ""
        if done.waiting and view.state is not None:
            target = _layout(configs, view.state.target.labels.get(label), view.state.target.id)
            waits = (
                f"layout {target} finishes first (verified, failed, or after verifyTimeout "
                f"{policy.verify_timeout})"
            )
            why = f"{owner} is being deleted"
            then = tuple(release(view, view.state, now, why).emit(view.state))
        target = _layout(configs, _target_label(view, label), "")
        released.append(release_of(view, target, then, waits, done.warnings))
    kept = {
        v.name: _layout(configs, v.labels.get(label), unlabelled(spec))
        for v in views
        if spec is not None and selectors.matches(spec.node_selector, v.labels)
    }
    effects = [
        "no node is repartitioned: the finalizer writes no layout label, each node keeps "
        "the layout it runs"
    ]
    prefix = config_name(name, None).rsplit("-", 1)[0] + "-"
    mine = sorted(k for k in configs if k.startswith(prefix))
    if mine:
        effects.append(f"its config(s) {', '.join(mine)} stay in the agent ConfigMap")
    for policy_name, sp in sorted(after.of_kind("SharingPolicy").items()):
        if ((sp.get("spec") or {}).get("poolRef") or {}).get("name") == name:
            effects.append(
                f"sharingpolicy/{policy_name} selects nodes by spec.poolRef {name}: it then "
                "selects none (PoolNotFound), see its changes"
            )
    problems = () if spec is not None else ("spec unreadable: backed out with default settings",)
    return ObjectPreview(
        kind="NodePoolGeometry",
        name=name,
        action="delete",
        nodes_total=len(kept),
        problems=problems,
        deletion=Deletion(released=tuple(released), kept=kept, effects=tuple(effects)),
    )


def _target_label(view: rollout.NodeView, label: str) -> str | None:
    s = view.state
    return s.target.labels.get(label) if s is not None else view.labels.get(label)


def _layout(configs: Mapping[str, Any], config: str | None, otherwise: str) -> str:
    if not config:
        return otherwise
    return describe(configs[config]) if config in configs else config
