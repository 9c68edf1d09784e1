"""A DRA pool's members as the controller sees them, from objects read once: what the driver
publishes on each node and its kubelet-plugin pods (``through_driver``), and who holds which
GPU from the ResourceClaims (``held``). ``tessera plan`` and ``tessera suggest POOL`` read a
DRA pool through these; the controller reads the same objects through its adapter
(``controllers.dra.pool``) into the same ``rollout.dra`` functions. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from tessera.api.v1alpha1.nodepoolgeometry import DraPool, NodePoolGeometrySpec
from tessera.domain.cluster.objects import PoolObservation
from tessera.domain.dra.slices import slice_pools
from tessera.domain.rollout.dra import claims as dra_claims
from tessera.domain.rollout.dra import observe as dra_observe
from tessera.domain.rollout.views import PluginPod, PodView

Raw = Mapping[str, Any]


def through_driver(
    seen: PoolObservation, spec: NodePoolGeometrySpec, slices: Sequence[Raw], pods: Sequence[Raw]
) -> PoolObservation:
    """A DRA pool's nodes as the controller sees them: what the driver publishes on each
    and its kubelet-plugin pods (``rollout.dra.observe``), the members keeping the layout
    they run now."""
    published = slice_pools(slices)
    plugin = (spec.dra or DraPool()).kubelet_plugin
    default = f"{plugin.namespace}/{plugin.daemon_set}"
    plugins: dict[str, dict[str, tuple[PluginPod, ...]]] = {}
    for ds in dra_observe.plugin_daemon_sets(default, seen.involved, published):
        namespace, name = ds.split("/", 1)
        mine = [p for p in pods if p["metadata"].get("namespace") == namespace]
        for node, found in dra_observe.plugin_pods(mine, name).items():
            plugins.setdefault(node, {})[ds] = found
    views = {v.name: v for v in dra_observe.with_devices(seen.views.values(), published, plugins)}
    involved = tuple(replace(views[v.name], layout=v.layout) for v in seen.involved)
    return replace(seen, views=views, involved=involved)


def held(
    seen: PoolObservation,
    pods: Sequence[PodView],
    claims: Sequence[Raw],
    slices: Sequence[Raw],
    now: datetime,
) -> tuple[PoolObservation, list[PodView]]:
    """Who holds which GPU on a DRA pool's members, from the ResourceClaims read with the
    pods (``rollout.dra.claims``), and the pods holding devices marked so: a change takes
    the GPUs it repartitions, as the operator's would, or the whole node and says why."""
    published = slice_pools(slices)
    marked = dra_observe.with_claims(pods, dra_observe.allocations(claims), published)
    found = dra_claims.claims(claims)
    involved = dra_claims.with_holders(seen.involved, marked, found, published, now)
    return replace(seen, involved=tuple(involved)), marked
