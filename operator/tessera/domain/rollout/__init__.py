"""tessera.domain.rollout: the pure, crash-safe, node-by-node rollout engine.

Public surface (import the modules, or these names):

- ``planning.plan(pool, policy, desired, nodes, pods, pdbs, now, approved_hash) -> Plan``
- ``backout.backout(pool, policy, nodes, now) -> Backout`` (deletion / finalizer)
- ``views``: ``NodeView``, ``PodView``, ``PdbView``, ``DesiredNode``, ``Taint``, ``Toleration``
- ``capacity.room(nodes, pods) -> Room``: what ``plan(..., room=)`` checks a drain against
- ``state``: ``NodeState``, ``Phase`` (persisted), ``ReportPhase`` (reported), ``TRANSITIONS``,
  ``encode``, ``decode``, ``StateError``
- ``actions``: the action dataclasses and ``describe``
"""

from tessera.domain.rollout.actions import (
    Action,
    AddTaint,
    ClearNodeState,
    Cordon,
    DeletePod,
    Evict,
    RemoveTaint,
    SetNodeLabels,
    SetNodeState,
    Uncordon,
    describe,
)
from tessera.domain.rollout.backout import Backout, backout
from tessera.domain.rollout.capacity import Room, room
from tessera.domain.rollout.planning import Plan, plan
from tessera.domain.rollout.reporting import NodeReport
from tessera.domain.rollout.state import (
    NodeState,
    Phase,
    ReportPhase,
    StateError,
    TargetSpec,
    decode,
    encode,
)
from tessera.domain.rollout.views import (
    GEOMETRY_PENDING,
    DesiredNode,
    NodeView,
    PdbView,
    PodView,
    Taint,
    Toleration,
)

__all__ = [
    "GEOMETRY_PENDING",
    "Action",
    "AddTaint",
    "Backout",
    "ClearNodeState",
    "Cordon",
    "DeletePod",
    "DesiredNode",
    "Evict",
    "NodeReport",
    "NodeState",
    "NodeView",
    "PdbView",
    "Phase",
    "Plan",
    "PodView",
    "RemoveTaint",
    "ReportPhase",
    "Room",
    "SetNodeLabels",
    "SetNodeState",
    "StateError",
    "Taint",
    "TargetSpec",
    "Toleration",
    "Uncordon",
    "backout",
    "decode",
    "describe",
    "encode",
    "plan",
    "room",
]
