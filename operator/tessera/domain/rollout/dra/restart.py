"""Restarting the DRA driver's kubelet plugin on a node whose MIG layout just changed.

NVIDIA's DRA driver enumerates static MIG devices once, when its kubelet plugin starts
(its GPU kubelet plugin reads them "once upon startup"), so after the MIG manager reports success the plugin's pod on
that node is deleted (its DaemonSet recreates it) and the node is verified from the
ResourceSlices the new pod publishes. Once per requested layout, crash-safe: the uid of the
pod to replace is written to the node's state (``NodeState.restarted``) *before* the
delete, so a pass that stopped in between deletes it again (the delete names the uid: a
pod already replaced is never touched), and a pass after the delete only waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tessera.domain.rollout import actions as act
from tessera.domain.rollout.state import NodeState
from tessera.domain.rollout.views import NodeView, PluginPod


@dataclass(frozen=True)
class Restart:
    """What the plugin restart needs this pass: a state to write, a delete, or a wait."""

    state: NodeState
    actions: list[act.Action] = field(default_factory=list)
    pending: str = ""
    """Why verification must still wait for the plugin (``""``: the new pod runs)."""


def step(node: NodeView, s: NodeState) -> Restart:
    """The restart, for a node whose agent reported success for ``s.target``."""
    plugin = s.target.plugin
    if plugin is None:
        return Restart(s)
    pods = node.dra.plugin_pods(plugin) if node.dra is not None else ()
    where = f"kubelet-plugin pod of DaemonSet {plugin} on node {node.name}"
    if s.restarted is None:
        old = [p for p in pods if not p.terminating] or list(pods)
        if not old:  # none runs: the next one to start enumerates the new devices anyway
            return Restart(replace(s, restarted=""), pending=f"no {where}")
        first = old[0]
        why = f"restart {where} ({first.ref}): it enumerates MIG devices only when it starts"
        return Restart(
            replace(s, restarted=first.uid), [_delete(node, first, s, why)], f"restarting {where}"
        )
    stale = [p for p in pods if p.uid == s.restarted and not p.terminating]
    if stale and s.restarted:
        why = f"restart {where} ({stale[0].ref}) again: it is still running"
        return Restart(s, [_delete(node, stale[0], s, why)], f"restarting {where}")
    fresh = [p for p in pods if p.uid != s.restarted and not p.terminating and p.ready]
    if not fresh:
        return Restart(s, pending=f"no ready {where} since the restart")
    return Restart(s)


def _delete(node: NodeView, pod: PluginPod, s: NodeState, why: str) -> act.DeletePod:
    return act.DeletePod(
        node.name, pod.namespace, pod.name, pod.uid, f"{why} (layout {s.target.id})"
    )
