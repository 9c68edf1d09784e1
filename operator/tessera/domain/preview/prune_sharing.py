"""Deleting a SharingPolicy: the nodes it governs return to the default config at once.

``preview.sharing`` has planned the policies left, which is what
``sharingpolicy.finalize`` converges to; the nodes the deleted policy governed
and no other policy wins are returned to the default config at once
(``rollout_targets.cleared``: no policy's rollout is left to drain them), and
the nodes its rollout holds are released like ``controllers.sharing.rollout.release_all``
does, with ``releasing.release``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from tessera.api import constants as c
from tessera.domain.cluster import objects as observe
from tessera.domain.preview.model import Cluster, Locations, Raw
from tessera.domain.preview.prune_pools import release_of
from tessera.domain.preview.results import Deletion, NodeChange, ObjectPreview, Release
from tessera.domain.preview.sharing import SharingPreviews
from tessera.domain.preview.sharing_configs import describe_now
from tessera.domain.quota.quantities import accelerators
from tessera.domain.rollout.releasing import release
from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import observing, rollout_targets, states


def deletion(
    before: Cluster,
    obj: Raw,
    shared: SharingPreviews,
    allocatable: Mapping[str, Mapping[str, int]],
    now: datetime,
    loc: Locations,
) -> ObjectPreview:
    """What deleting the SharingPolicy ``obj`` does: ``sharingpolicy.finalize``'s writes."""
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
    released = _released(before, rollout_targets.owner_id(name), now)
    effects += _cleaned_up(shared, governed, loc)
    problems: list[str] = []
    if unsafe:
        problems.append(
            f"{_names(unsafe)} switch without a drain (a policy changing this would drain "
            "them): pods running there are not evicted first"
        )
    cap_before, cap_after = _capacity(before, governed, allocatable)
    return ObjectPreview(
        kind="SharingPolicy",
        name=name,
        action="delete",
        nodes_total=len(governed),
        changes=tuple(changes),
        capacity_before=dict(sorted(cap_before.items())),
        capacity_after=dict(sorted(cap_after.items())),
        problems=tuple(problems),
        deletion=Deletion(released=released, hami=lost, effects=tuple(effects)),
    )


def _released(before: Cluster, owner: str, now: datetime) -> tuple[Release, ...]:
    """The nodes the policy's rollout holds, released as ``controllers.sharing.rollout.release_all`` does."""
    why = f"{owner} is being deleted"
    released: list[Release] = []
    for raw in sorted(before.nodes, key=lambda n: n["metadata"]["name"]):
        view = observe.node_view(raw)
        s = view.state
        if s is not None and s.owner == owner:
            released.append(release_of(view, s.target.id, release(view, s, now, why).emit(s)))
    return tuple(released)


def _cleaned_up(shared: SharingPreviews, governed: Iterable[str], loc: Locations) -> list[str]:
    """The HAMi mode labels and device-plugin config keys that leave with the policy."""
    plan, facts, mine = shared.plan, shared.facts, set(governed)
    effects = []
    stale = set(rollout_targets.stale_mode_labels(plan.assignment, facts)) & mine
    if stale:
        effects.append(f"label {rollout_targets.HAMI_MODE_LABEL} removed from {_names(stale)}")
    used = {facts[n].plugin_config for n in mine if n in facts}
    dropped = {*plan.device_plugin.delete, *plan.device_plugin.delete_after_labels}
    keys = sorted(k for k in dropped if k in used)
    if keys:
        ns, cm = loc.device_plugin
        effects.append(f"config key(s) {', '.join(keys)} removed from {ns}/{cm}")
    return effects


def _capacity(
    before: Cluster, governed: Iterable[str], allocatable: Mapping[str, Mapping[str, int]]
) -> tuple[dict[str, int], dict[str, int]]:
    """The governed nodes' accelerator allocatable now, and once back on the default config."""
    mine = set(governed)
    cap_before: dict[str, int] = {}
    cap_after: dict[str, int] = {}
    for raw in before.nodes:
        node = raw["metadata"]["name"]
        if node in mine:
            _add(cap_before, accelerators((raw.get("status") or {}).get("allocatable") or {}))
            _add(cap_after, allocatable.get(node) or {})
    return cap_before, cap_after


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
