"""No pod moved twice: the nodes still waiting for their turn are marked ``PreferNoSchedule``.

A pod evicted from a node under change is replaced by its controller, and kube-scheduler
would place the replacement anywhere, a node the rollout drains later included; that pod
then moves twice. While a pool rolls out (its gates are open and a node of it is in flight
or starts), every member still waiting for its turn carries ``QUEUED`` with the pool's name,
so kube-scheduler prefers the nodes that are done or not changing. The taint is soft: when
only queued nodes have room, pods still land there, and a queued node counts as available.

The taint comes off as the node starts (the cordon and the NoSchedule taint then hold it),
when it needs no change any more, when the pool pauses or waits for a window or approval,
when the node leaves the pool, and when the pool is deleted (``backout``): nothing of it
outlives the rollout. Only a NodePoolGeometry queues; a SharingPolicy switch does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from tessera.domain.rollout import actions as act
from tessera.domain.rollout.views import NodeView, queued_taint


def tidy(
    owner: str, nodes: Sequence[NodeView], waiting: set[str], under_way: bool
) -> list[act.Action]:
    """The writes that make exactly the ``waiting`` nodes queued while ``under_way``."""
    out: list[act.Action] = []
    taint = queued_taint(owner)
    for node in sorted(nodes, key=lambda n: n.name):
        want, has = under_way and node.name in waiting, node.queued_by(owner)
        if want and not has:
            out.append(act.AddTaint(node.name, taint, f"{node.name} waits for its turn in {owner}"))
        elif has and not want:
            out.append(act.RemoveTaint(node.name, taint, _why(owner, node, waiting, under_way)))
    return out


def _why(owner: str, node: NodeView, waiting: set[str], under_way: bool) -> str:
    if not under_way:
        return f"{owner} is not rolling out"
    if node.state is not None and node.state.owner == owner:
        return f"{node.name} is being changed by {owner}"
    return f"{node.name} no longer waits for {owner}"
