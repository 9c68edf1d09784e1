"""Views, for unit tests of the rollout engine: a node, a pod, a PDB as ``tessera.domain.rollout``
reads them, in one line each.

The node is in the middle of a MIG change from layout ``OLD`` to ``NEW`` (its agent reported
``success`` on ``OLD`` unless told otherwise), which is what every rollout table starts from.
"""

from __future__ import annotations

from typing import Any

from tessera.api.constants import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.rollout.state import NodeState
from tessera.domain.rollout.views import GEOMETRY_PENDING, NodeView, PdbView, PodView

OLD, NEW = "tessera-old", "tessera-new"  # the MIG configs a pool moves between
OLD_ALLOC = {"nvidia.com/mig-1g.10gb": 56, "nvidia.com/mig-3g.40gb": 0}
NEW_ALLOC = {"nvidia.com/mig-1g.10gb": 0, "nvidia.com/mig-3g.40gb": 16}
ALLOC = {OLD: OLD_ALLOC, NEW: NEW_ALLOC}  # what a node advertises once its config is live


def node(
    name: str = "gpu-1",
    *,
    config: str | None = OLD,
    agent: str | None = "success",
    st: NodeState | None = None,
    cordoned: bool = False,
    ready: bool = True,
    tainted: bool = False,
    alloc: dict[str, int] | None = None,
    **kw: Any,
) -> NodeView:
    """Node ``name`` with MIG config ``config`` whose agent says ``agent``; it advertises the
    config's devices once the agent said ``success`` (``alloc`` overrides); ``st`` is its
    rollout state, ``tainted`` the pending taint."""
    labels = {}
    if config is not None:
        labels[MIG_CONFIG_LABEL] = config
    if agent is not None:
        labels[MIG_CONFIG_STATE_LABEL] = agent
    if alloc is None:
        alloc = dict(ALLOC.get(config or "", {})) if agent == "success" else {}
    return NodeView(
        name=name,
        labels=labels,
        unschedulable=cordoned,
        ready=ready,
        allocatable=alloc,
        taints=(GEOMETRY_PENDING,) if tainted else (),
        state=st,
        **kw,
    )


def gpu_pod(name: str, on: str = "gpu-1", *, ns: str = "ml", **kw: Any) -> PodView:
    """Pod ``ns/name`` on node ``on``, using an accelerator, with uid ``uid-<name>``."""
    kw.setdefault("requests_accelerator", True)
    kw.setdefault("uid", f"uid-{name}")
    return PodView(namespace=ns, name=name, node=on, **kw)


def pdb(name: str, allowed: int, *, ns: str = "ml", **match: str) -> PdbView:
    """PDB ``ns/name`` over the pods labelled ``match``, allowing ``allowed`` disruptions."""
    return PdbView(ns, name, LabelSelector(match_labels=match), allowed)
