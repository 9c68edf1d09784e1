"""A NodePoolGeometry with ``allocation: DRA``: its nodes seen through the DRA driver.

The rollout engine is the same; for a DRA pool each node's view also carries the devices
its ResourceSlices publish (``domain.dra.slices``) and its kubelet-plugin pods
(``rollout.views.DraNode``), and pods
holding GPU devices through ResourceClaims count as accelerator pods
(``domain.rollout.dra.observe``). A device-plugin pool reads none of this.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime

from tessera.adapters import dra as api
from tessera.adapters.kube import Obj
from tessera.api.v1alpha1.nodepoolgeometry import DraPool, NodePoolGeometrySpec
from tessera.controllers.runtime import Context
from tessera.domain import rollout
from tessera.domain.cluster import objects as cluster
from tessera.domain.dra import naming
from tessera.domain.dra.slices import SlicePool, slice_pools
from tessera.domain.rollout.dra import claims as dra_claims
from tessera.domain.rollout.dra import observe as dra_rollout
from tessera.domain.rollout.views import PluginPod


@dataclass(frozen=True)
class DraObserved:
    """The driver's ResourceSlices as listed once this pass (``slices``; the class sync's
    device counts read the same list), each node's pool from them, and (once pods are read)
    every claim's allocated devices."""

    slices: list[Obj]
    pools: dict[str, SlicePool]
    claims: dra_rollout.Allocations | None = None
    found: dra_claims.Claims | None = None
    """Every claim as who-holds-what reads it (``domain.rollout.dra.claims``)."""

    def pods(self, pods: Sequence[rollout.PodView]) -> list[rollout.PodView]:
        """``pods`` with those holding GPU devices through claims marked so."""
        if self.claims is None:
            return list(pods)
        return dra_rollout.with_claims(pods, self.claims, self.pools)

    def held(
        self, views: Sequence[rollout.NodeView], pods: Sequence[rollout.PodView], now: datetime
    ) -> list[rollout.NodeView]:
        """``views`` with who holds which GPU on each, from the claims (once they are read)."""
        if self.found is None:
            return list(views)
        return dra_claims.with_holders(views, pods, self.found, self.pools, now)

    def node(self, view: rollout.NodeView) -> rollout.NodeView:
        """A node for the room check: its published devices counted as room."""
        return dra_rollout.room_view(view, self.pools.get(view.name))


_PASS: ContextVar[list[list[Obj]] | None] = ContextVar("tessera_dra_pass_slices", default=None)


@contextmanager
def one_slice_list() -> Iterator[None]:
    """Within one pass, ResourceSlices are listed once: the skip check's list (``inputs``)
    is the one the pass observes, so both see the same slices and the API server one list."""
    token = _PASS.set([])
    try:
        yield
    finally:
        _PASS.reset(token)


def slices(ctx: Context) -> list[Obj]:
    """The driver's ResourceSlices, listed at most once in a pass (``one_slice_list``)."""
    held = _PASS.get()
    if held:
        return held[0]
    listed = api.list_slices(ctx.kube, naming.DRIVER)
    if held is not None:
        held.append(listed)
    return listed


def is_dra(spec: NodePoolGeometrySpec) -> bool:
    return spec.allocation == "DRA"


def observe(
    ctx: Context, spec: NodePoolGeometrySpec, seen: cluster.PoolObservation
) -> tuple[cluster.PoolObservation, DraObserved]:
    """``seen`` with every view's ``dra`` filled in (plugin pods only while a node is in
    flight or publishes no complete pool: a converged pool reads the slices, nothing more)."""
    published = slices(ctx)
    pools = slice_pools(published)
    filled = fill(ctx, spec.dra, list(seen.views.values()), pools, seen.involved)
    views = {v.name: v for v in filled}
    # the members keep the layout they run now (``observe_pool`` read it for them only)
    involved = tuple(replace(views[v.name], layout=v.layout) for v in seen.involved)
    return replace(seen, views=views, involved=involved), DraObserved(published, pools)


def fill(
    ctx: Context,
    plugin_of: DraPool | None,
    views: Sequence[rollout.NodeView],
    pools: dict[str, SlicePool] | None = None,
    involved: Sequence[rollout.NodeView] | None = None,
) -> list[rollout.NodeView]:
    """``views`` with what the driver publishes and its plugin pods (those of the pool's
    DaemonSet, ``plugin_of`` or the default, and of any DaemonSet a record in flight names)
    when ``involved`` (default: ``views``) has a node in flight or one without a complete pool
    (is its driver there?)."""
    if pools is None:
        pools = slice_pools(slices(ctx))
    plugin = (plugin_of or DraPool()).kubelet_plugin
    default = f"{plugin.namespace}/{plugin.daemon_set}"
    pods: dict[str, dict[str, tuple[PluginPod, ...]]] = {}
    for ds in dra_rollout.plugin_daemon_sets(
        default, views if involved is None else involved, pools
    ):
        namespace, name = ds.split("/", 1)
        by_node = dra_rollout.plugin_pods(api.list_pods_in(ctx.kube, namespace), name)
        for node, found in by_node.items():
            pods.setdefault(node, {})[ds] = found
    return dra_rollout.with_devices(views, pools, pods)


def with_claims(ctx: Context, observed: DraObserved) -> DraObserved:
    """``observed`` with every claim's allocation: read once a pass reads pods."""
    raw = api.list_claims(ctx.kube)
    return replace(observed, claims=dra_rollout.allocations(raw), found=dra_claims.claims(raw))
