"""A DRA pool's DeviceTaintRules: written before a node's pods on changed GPUs are evicted,
removed once it is verified or backed out (``tessera.domain.rollout.dra.taints`` decides).

A pass syncs twice: before its writes, from the records the nodes carry (a node that
entered its window gets its rules before the pass evicts anything; a failed create fails
the pass, so nothing is evicted), and after them, from the records they will carry (a node
released this pass loses its rules in the same pass, so a Ready pool has none left). Where
the API server does not serve DeviceTaintRules the pool says so in its ``DeviceTaints``
condition and the node is held by its cordon and taint alone, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from tessera.adapters import dra as api
from tessera.adapters.events import Ref
from tessera.api import constants as c
from tessera.controllers.runtime import Context
from tessera.domain.base.conditions import Status, Verdict
from tessera.domain.dra.slices import SlicePool
from tessera.domain.rollout.dra import taints
from tessera.domain.rollout.views import NodeView

CONDITION = "DeviceTaints"
TAINTED = "DevicesTainted"
NONE_CHANGING = "NoDeviceChanging"
NOT_SERVED = "DeviceTaintRulesNotServed"
WRITTEN = "DeviceTaintsWritten"
REMOVED = "DeviceTaintsRemoved"
SELECTOR = f"{c.MANAGED_BY_LABEL}={c.MANAGED_BY_VALUE},{taints.OWNER_LABEL}"


@dataclass(frozen=True)
class Synced:
    """What one sync left: whether the API serves the rules, the devices held per node."""

    served: bool = True
    held: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def condition(self) -> tuple[str, Status, str, str]:
        if not self.served:
            why = (
                "the API server does not serve resource.k8s.io/v1alpha3 devicetaintrules "
                "(feature gate DRADeviceTaints, --runtime-config=resource.k8s.io/v1alpha3=true): "
                "a node whose layout changes is held by its cordon and taint only, so a pod "
                "tolerating both may still be allocated a device that changes"
            )
            return (CONDITION, "False", NOT_SERVED, why)
        if not self.held:
            return (CONDITION, "True", NONE_CHANGING, "no device of the pool is changing")
        text = (
            f"NoSchedule DeviceTaintRules on the devices that change: {taints.summary(self.held)}"
        )
        return (CONDITION, "True", TAINTED, text)

    def report(self, verdict: Verdict) -> Verdict:
        """``verdict`` with the ``DeviceTaints`` condition."""
        extra = (*(e for e in verdict.extra if e[0] != CONDITION), self.condition())
        return Verdict(verdict.state, verdict.reason, verdict.message, extra)


def sync(
    ctx: Context,
    ref: Ref,
    owner: str,
    views: Iterable[NodeView],
    pools: Mapping[str, SlicePool],
    owners: Collection[str] | None = None,
    *,
    remove: bool = True,
) -> Synced:
    """Leave exactly the devices ``views``' records say change tainted for ``owner``;
    deletes first (a rule whose spec drifted is written again), then creates."""
    raw = api.list_taint_rules(ctx.kube, SELECTOR)
    if raw is None:
        return Synced(served=False)
    rules = taints.listed(raw)
    want = taints.wanted(views, pools, rules, owner)
    plan = taints.plan(owner, want, rules, owners, remove=remove)
    gone: dict[str, list[str]] = {}
    by_name = {r.name: r for r in rules}
    for name, version in plan.delete:
        api.delete_taint_rule(ctx.kube, name, version)
        if (old := by_name.get(name)) is not None:
            gone.setdefault(old.node, []).append(old.device)
    added: dict[str, list[str]] = {}
    for body in plan.create:
        api.create_taint_rule(ctx.kube, body)
        selector = body["spec"]["deviceSelector"]
        added.setdefault(selector["pool"], []).append(selector["device"])
    _announce(ctx, ref, REMOVED, "removed the NoSchedule DeviceTaintRules of", gone)
    _announce(ctx, ref, WRITTEN, "NoSchedule DeviceTaintRules keep new claims off", added)
    return Synced(held=plan.held or {})


def _announce(
    ctx: Context, ref: Ref, reason: str, what: str, devices: Mapping[str, list[str]]
) -> None:
    for node, names in sorted(devices.items()):
        text = f"{what} {len(names)} device(s) of node {node}: {', '.join(sorted(names))}"
        for where in (ref, Ref("v1", "Node", node)) if node else (ref,):
            ctx.events.post(where, reason, text, ctx.clock())
