"""Device taints for a DRA pool's rollout: no new claim is allocated a device that changes.

While a DRA node's layout changes, Tessera writes one ``DeviceTaintRule`` (KEP-5055,
``resource.k8s.io/v1alpha3`` on 1.34 behind ``DRADeviceTaints``) per device on the GPUs the
change repartitions (the node's record, ``NodeState.gpus``; every device of the node when it
is drained whole), selecting exactly that device (driver, pool, device). Its taint is
``tessera.io/geometry-pending=<owner>:NoSchedule``: kube-scheduler's allocator skips a device
whose taints the request does not tolerate, DeviceTaintRules applied
(``k8s.io/dynamic-resource-allocation`` ``structured``, ``allTaintsTolerated``), so a pod that
tolerates the node's cordon and taint still gets no changing device, and claims already
allocated keep running. Never ``NoExecute``: kube-controller-manager's device taint eviction
controller deletes the pods using such a device, not through the Eviction API, so no
PodDisruptionBudget holds it (docs/rollout.md); the pods on changed GPUs leave through
Tessera's drain.

A node is held from ``Cordoned`` (before any eviction) until its record reaches
``Uncordoning`` (verified, or backed out) or goes; ``Failed`` holds too: the layout is not
what was asked for. ``plan`` compares the rules wanted with those listed and says what to
create and delete; a rule of this owner that nothing wants (the node finished, left the
pool, or a crash left it behind) goes, and so does a Tessera rule whose owner no longer
exists. Names are deterministic and bounded: ``tessera.<node>.<device>`` (a device name is
a DNS label, so it has no dot and the name reads back unambiguously), or with the node cut
and hashed where that would pass 253 characters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tessera.api import constants as c
from tessera.domain.dra.naming import DRIVER
from tessera.domain.dra.slices import SlicePool
from tessera.domain.rollout import actions as act
from tessera.domain.rollout.dra.claims import indices
from tessera.domain.rollout.state import NodeState, Phase
from tessera.domain.rollout.views import NodeView, owner_token

Raw = Mapping[str, Any]
Obj = dict[str, Any]

API_VERSION = "resource.k8s.io/v1alpha3"
KIND = "DeviceTaintRule"
EFFECT = "NoSchedule"
KEY = c.GEOMETRY_PENDING_TAINT
OWNER_LABEL = "tessera.io/rollout-owner"
NODE_LABEL = "tessera.io/node"
DEVICE_ANNOTATION = "tessera.io/device"
"""``<node>/<device>`` in full, whatever the name had to cut."""
HOLDING = frozenset(
    {
        Phase.CORDONED,
        Phase.DRAINING,
        Phase.BLOCKED,
        Phase.APPLYING,
        Phase.VERIFYING,
        Phase.FAILED,
    }
)
NAME_LIMIT = 253


def holds(state: NodeState | None) -> bool:
    """Whether a node with ``state`` keeps its changing devices tainted."""
    return state is not None and state.phase in HOLDING


def changing(view: NodeView, pool: SlicePool | None, kept: Collection[str] = ()) -> tuple[str, ...]:
    """The devices of ``view`` to taint now (sorted): those on the GPUs its record says change.

    Every device the node's slices list when it is drained whole. When the slices cannot
    say which device is which GPU (a pool incomplete while the plugin restarts), the devices
    it already has rules for (``kept``) stay tainted, or, when it has none, all of them:
    never a guess that leaves a changing device free.
    """
    state = view.state
    if not holds(state) or state is None:
        return ()
    listed = sorted(set(pool.kinds) | set(pool.buses)) if pool is not None else []
    if state.gpus is None:
        return tuple(listed)
    count = view.labels.get(c.GPU_COUNT_LABEL, "")
    index = indices(view.name, pool, int(count)) if count.isdigit() else "no GPU count"
    if isinstance(index, str):
        return tuple(sorted(kept)) if kept else tuple(listed)
    gpus = set(state.gpus)
    return tuple(sorted(device for device, i in index.items() if i in gpus))


def rule_name(node: str, device: str) -> str:
    """``tessera.<node>.<device>``, at most 253 characters."""
    name = f"tessera.{node}.{device}"
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    room = NAME_LIMIT - len(f"tessera..{device}") - len(digest) - 1
    return f"tessera.{node[:room].rstrip('.-')}-{digest}.{device}"


def node_token(node: str) -> str:
    """``node`` as a label value (63 characters)."""
    if len(node) <= 63:
        return node
    return f"{node[:52].rstrip('.-')}.{hashlib.sha256(node.encode()).hexdigest()[:10]}"


def rule(owner: str, node: str, device: str) -> Obj:
    """The DeviceTaintRule that keeps new claims off ``device`` of ``node``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": rule_name(node, device),
            "labels": {
                c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE,
                OWNER_LABEL: owner_token(owner),
                NODE_LABEL: node_token(node),
            },
            "annotations": {DEVICE_ANNOTATION: f"{node}/{device}"},
        },
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": node, "device": device},
            "taint": {"key": KEY, "value": owner_token(owner), "effect": EFFECT},
        },
    }


@dataclass(frozen=True)
class Listed:
    """A Tessera DeviceTaintRule as read: whose, for which device, as of which version."""

    name: str
    owner: str
    node: str
    device: str
    resource_version: str
    selector: Mapping[str, Any]
    taint: Mapping[str, Any]


def listed(raw: Iterable[Raw]) -> list[Listed]:
    """The rules ``raw`` holds that Tessera manages (its label), sorted by name."""
    out = []
    for item in raw:
        meta, spec = item.get("metadata") or {}, item.get("spec") or {}
        labels = meta.get("labels") or {}
        if labels.get(c.MANAGED_BY_LABEL) != c.MANAGED_BY_VALUE or OWNER_LABEL not in labels:
            continue
        where = str((meta.get("annotations") or {}).get(DEVICE_ANNOTATION, ""))
        node, _, device = where.rpartition("/")
        out.append(
            Listed(
                str(meta.get("name", "")),
                str(labels[OWNER_LABEL]),
                node,
                device,
                str(meta.get("resourceVersion", "")),
                spec.get("deviceSelector") or {},
                spec.get("taint") or {},
            )
        )
    return sorted(out, key=lambda r: r.name)


@dataclass(frozen=True)
class RulePlan:
    """What to write: rules to create, rules to delete (name, resourceVersion), and the
    devices held per node once both land (for status and Events)."""

    create: tuple[Obj, ...] = ()
    delete: tuple[tuple[str, str], ...] = ()
    held: Mapping[str, tuple[str, ...]] | None = None

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def wanted(
    views: Iterable[NodeView], pools: Mapping[str, SlicePool], rules: Iterable[Listed], owner: str
) -> dict[str, tuple[str, ...]]:
    """Node → the devices ``owner`` keeps tainted on it (nodes with none left out)."""
    token = owner_token(owner)
    kept: dict[str, set[str]] = {}
    for each in rules:
        if each.owner == token:
            kept.setdefault(each.node, set()).add(each.device)
    out = {}
    for view in views:
        if view.state is None or view.state.owner != owner:
            continue
        devices = changing(view, pools.get(view.name), kept.get(view.name, set()))
        if devices:
            out[view.name] = devices
    return out


def plan(
    owner: str,
    want: Mapping[str, tuple[str, ...]],
    rules: Iterable[Listed],
    owners: Collection[str] | None = None,
    *,
    remove: bool = True,
) -> RulePlan:
    """The writes that leave exactly ``want`` tainted for ``owner``.

    A rule of ``owner`` for a device ``want`` does not name, or one whose spec is not what
    Tessera writes, is deleted (the latter then created again); with ``owners`` (every
    rollout owner that exists), so is any Tessera rule whose owner is not among them.
    ``remove=False`` creates only: after a pass whose writes did not all land, a node may
    still be held.
    """
    token = owner_token(owner)
    alive = None if owners is None else {owner_token(o) for o in owners} | {token}
    present: set[str] = set()
    delete: list[tuple[str, str]] = []
    wanted_names = {
        rule_name(node, device): (node, device)
        for node, devices in want.items()
        for device in devices
    }
    for each in rules:
        if each.owner != token:
            if alive is not None and each.owner not in alive and remove:
                delete.append((each.name, each.resource_version))
            continue
        where = wanted_names.get(each.name)
        if where is None:
            if remove:
                delete.append((each.name, each.resource_version))
            continue
        body = rule(owner, *where)["spec"]
        if dict(each.selector) != body["deviceSelector"] or _taint(each.taint) != body["taint"]:
            delete.append((each.name, each.resource_version))
            continue
        present.add(each.name)
    create = tuple(
        rule(owner, *where) for name, where in sorted(wanted_names.items()) if name not in present
    )
    return RulePlan(create, tuple(delete), dict(sorted(want.items())))


def after(views: Iterable[NodeView], actions: Iterable[act.Action]) -> list[NodeView]:
    """``views`` with the record each will carry once ``actions`` (a pass's plan) landed."""
    states: dict[str, NodeState | None] = {}
    for action in actions:
        if isinstance(action, act.SetNodeState):
            states[action.node] = action.state
        elif isinstance(action, act.ClearNodeState):
            states[action.node] = None
    return [replace(v, state=states[v.name]) if v.name in states else v for v in views]


def _taint(taint: Mapping[str, Any]) -> dict[str, Any]:
    """A stored taint as Tessera writes it (the API server adds ``timeAdded``)."""
    return {k: taint.get(k) for k in ("key", "value", "effect")}


def summary(held: Mapping[str, tuple[str, ...]]) -> str:
    """``dra-1: gpu-0, gpu-1`` per node, or that nothing is tainted."""
    if not held:
        return "no device tainted"
    return "; ".join(f"{node}: {', '.join(devices)}" for node, devices in sorted(held.items()))
