"""Deleting a NodePoolGeometry or a SharingPolicy: the nodes it holds and where they end up.

NodePoolGeometry: the nodes are observed as ``nodepoolgeometry.finalize``
observes them (``cluster.pool_view`` with no sharing undone, kept when
``touched_by`` the pool) and each one is handed to ``rollout.backout``, whose
actions are what the finalizer writes. ``backout`` writes no layout label and
the finalizer leaves the agent ConfigMap alone, so every node keeps the layout
it runs (listed as ``kept``).

SharingPolicy: ``preview_sharing`` has planned the policies left, which is
what ``sharingpolicy.finalize`` converges to; the nodes the deleted policy
governed and no other policy wins are returned to the default config at once
(``rollout_targets.cleared``: no policy's rollout is left to drain them), and
the nodes its rollout holds are released like ``sharing_rollout.release_all``
does, with ``releasing.release``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tessera.api import constants as c
from tessera.api.v1alpha1.common import RolloutSpec
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain import cluster as observe
from tessera.domain import pools, rollout, selectors
from tessera.domain.geometry.layouts import config_name
from tessera.domain.rollout.releasing import release
from tessera.domain.sharing import hami, observing, rollout_targets, states

from .preview import Cluster, Locations, NodeChange, ObjectPreview, Raw
from .preview_geometry import current_configs, describe
from .preview_prune import Deletion, Release, release_of
from .preview_sharing import SharingPreviews, describe_now
from .quota.quantities import accelerators


def geometry(
    before: Cluster, after: Cluster, obj: Raw, now: datetime, loc: Locations
) -> ObjectPreview:
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
    label = (
        c.VNPU_CONFIG_LABEL if spec is not None and pools.is_ascend(spec) else c.MIG_CONFIG_LABEL
    )
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
        v.name: _layout(configs, v.labels.get(label), "no layout yet")
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


def sharing(
    before: Cluster,
    obj: Raw,
    shared: SharingPreviews,
    allocatable: Mapping[str, Mapping[str, int]],
    now: datetime,
    loc: Locations,
) -> ObjectPreview:
    name = obj["metadata"]["name"]
    plan, facts = shared.plan, shared.facts
    data = dict((before.configmap(loc.device_plugin) or {}).get("data") or {})
    governed = shared.earlier.nodes_of(name)
    hami_fields = _hami_fields(before, loc)
    lost = tuple(
        n
        for n in governed
        if any(n in old and n not in new for old, new in _managed(before, shared, loc))
    )
    changes: list[NodeChange] = []
    effects: list[str] = []
    unsafe: list[str] = []
    for node in governed:
        winner = plan.assignment.owner.get(node)
        if winner is not None:
            effects.append(f"{node} moves to sharingpolicy/{winner} (see its changes)")
            continue
        change = plan.changes.get(node)
        if change is None:
            continue
        was = _hami_text(hami_fields[node]) if node in hami_fields else None
        after = "HAMi's own defaults (Tessera's fields removed)" if node in lost else "default"
        if change.disruptive:
            unsafe.append(node)
        was = was or describe_now(facts[node], data)
        changes.append(NodeChange(node, was, after, False, (), change.reason))
    owner = rollout_targets.owner_id(name)
    why = f"{owner} is being deleted"
    released: list[Release] = []
    for raw in sorted(before.nodes, key=lambda n: n["metadata"]["name"]):
        view = observe.node_view(raw)
        s = view.state
        if s is not None and s.owner == owner:
            released.append(release_of(view, s.target.id, release(view, s, now, why).emit(s)))
    stale = set(rollout_targets.stale_mode_labels(plan.assignment, facts)) & set(governed)
    if stale:
        effects.append(f"label {rollout_targets.HAMI_MODE_LABEL} removed from {_names(stale)}")
    used = {facts[n].plugin_config for n in governed if n in facts}
    dropped = {*plan.device_plugin.delete, *plan.device_plugin.delete_after_labels}
    keys = sorted(k for k in dropped if k in used)
    if keys:
        ns, cm = loc.device_plugin
        effects.append(f"config key(s) {', '.join(keys)} removed from {ns}/{cm}")
    problems: list[str] = []
    if unsafe:
        problems.append(
            f"{_names(unsafe)} switch without a drain (a policy changing this would drain "
            "them): pods running there are not evicted first"
        )
    cap_before: dict[str, int] = {}
    cap_after: dict[str, int] = {}
    for raw in before.nodes:
        node = raw["metadata"]["name"]
        if node in governed:
            _add(cap_before, accelerators((raw.get("status") or {}).get("allocatable") or {}))
            _add(cap_after, allocatable.get(node) or {})
    return ObjectPreview(
        kind="SharingPolicy",
        name=name,
        action="delete",
        nodes_total=len(governed),
        changes=tuple(changes),
        capacity_before=dict(sorted(cap_before.items())),
        capacity_after=dict(sorted(cap_after.items())),
        problems=tuple(problems),
        deletion=Deletion(released=tuple(released), hami=lost, effects=tuple(effects)),
    )


# -- shared --------------------------------------------------------------------------------------


def _target_label(view: rollout.NodeView, label: str) -> str | None:
    s = view.state
    return s.target.labels.get(label) if s is not None else view.labels.get(label)


def _layout(configs: Mapping[str, Any], config: str | None, otherwise: str) -> str:
    if not config:
        return otherwise
    return describe(configs[config]) if config in configs else config


def _hami_fields(before: Cluster, loc: Locations) -> dict[str, dict[str, Any]]:
    """Tessera's fields in HAMi's NVIDIA node config, for the nodes it manages."""
    cm = before.configmap((loc.hami_namespace, c.HAMI_NVIDIA_CONFIGMAP_NAME))
    doc = observing.hami_document(cm, c.HAMI_NVIDIA_CONFIGMAP_KEY)
    entries = states.owned_entries(doc.parsed, hami.NVIDIA_LIST, hami.NVIDIA_FIELDS)
    return {n: f for n, f in entries.items() if n in doc.managed and f}


def _managed(
    before: Cluster, shared: SharingPreviews, loc: Locations
) -> list[tuple[Mapping[str, str], Mapping[str, str]]]:
    """(managed now, managed once applied) for HAMi's NVIDIA and Ascend node configs."""
    out = []
    for name, key, planned in (
        (c.HAMI_NVIDIA_CONFIGMAP_NAME, c.HAMI_NVIDIA_CONFIGMAP_KEY, shared.plan.hami_nvidia),
        (c.HAMI_ASCEND_CONFIGMAP_NAME, c.HAMI_ASCEND_CONFIGMAP_KEY, shared.plan.hami_ascend),
    ):
        doc = observing.hami_document(before.configmap((loc.hami_namespace, name)), key)
        out.append((doc.managed, planned.managed))
    return out


def _hami_text(fields: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in fields.items() if k != "operatingmode"}
    extra = ", ".join(f"{k}={v}" for k, v in sorted(rest.items()))
    return f"HAMi {fields.get('operatingmode', 'hami-core')}" + (f" ({extra})" if extra else "")


def _names(nodes: Iterable[str], limit: int = 5) -> str:
    shown = sorted(nodes)
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def _add(total: dict[str, int], alloc: Mapping[str, int]) -> None:
    for resource, n in alloc.items():
        total[resource] = total.get(resource, 0) + n
