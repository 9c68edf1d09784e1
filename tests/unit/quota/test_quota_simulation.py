"""Random histories of pods, quota-controller syncs and reconciles against a fake cluster.

The controller loop is the documented one: observe, plan, write ``next_wave``.
``quota_cluster.Cluster`` checks after every single write that the tenant's
limits fit the total and that nothing was lowered below usage.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from quota_builders import spec
from quota_cluster import RESOURCES, Cluster

from tessera.api.v1alpha1.tenantquota import TenantQuotaSpec
from tessera.domain.quota.planning import Action

NAMESPACES = ("ns-a", "ns-b", "ns-c", "ns-d")
pods = st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(RESOURCES), st.integers(1, 3))
admit = st.tuples(st.just("admit"), pods)
reconcile = st.tuples(st.just("reconcile"), st.lists(pods, max_size=2))
steps = st.one_of(  # repeated entries weight the mix towards pods and reconciles
    admit,
    admit,
    admit,
    st.tuples(st.just("release"), pods),
    reconcile,
    reconcile,
    # a pass that finds some namespaces busy with admission (``settling``): moves there wait
    st.tuples(st.just("busy"), st.frozensets(st.sampled_from(NAMESPACES))),
    st.tuples(st.just("sync"), st.sampled_from(NAMESPACES)),
    st.tuples(st.just("settle"), st.none()),
    st.tuples(st.just("join"), st.sampled_from(NAMESPACES)),
    st.tuples(st.just("leave"), st.sampled_from(NAMESPACES)),
)
tenants = st.builds(
    lambda total, hard: spec(hard=hard, total=total),
    total=st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 12), min_size=1),
    hard=st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 8) | st.just(2000)),
)


@settings(max_examples=400, deadline=None)
@given(
    tenants,
    st.sets(st.sampled_from(NAMESPACES), min_size=1),
    st.lists(steps, min_size=10, max_size=60),
)
def test_random_histories_never_exceed_total_and_converge(
    tenant: TenantQuotaSpec, start: set[str], history: list[tuple[str, Any]]
) -> None:
    cluster = Cluster(tenant, set(start))
    cluster.converge()
    left: set[str] = set()
    for kind, arg in history:
        if kind == "admit" and arg[0] in cluster.members:
            cluster.admit(*arg)
        elif kind == "release":
            cluster.release(*arg)
        elif kind == "sync":
            cluster.sync(arg)
        elif kind == "reconcile":
            cluster.reconcile([p for p in arg if p[0] in cluster.members])
        elif kind == "busy":
            cluster.reconcile(busy=arg)
        elif kind == "settle":
            cluster.converge()
        elif kind == "join" and arg not in left and arg not in cluster.used:
            cluster.members.add(arg)  # a fresh namespace: nothing runs in it yet
        elif kind == "leave" and arg in cluster.members:
            cluster.members.discard(arg)
            left.add(arg)
        cluster.assert_within_total()
    cluster.converge()
    resync = cluster.reconcile()
    assert resync.settled and resync.next_wave == ()
    for ns in left:
        assert ns not in cluster.quotas


@settings(deadline=None)
@given(tenants, st.sets(st.sampled_from(NAMESPACES), min_size=1), st.lists(pods, max_size=12))
def test_both_waves_of_one_plan_keep_every_instant_within_total(
    tenant: TenantQuotaSpec, namespaces: set[str], load: list[tuple[str, str, int]]
) -> None:
    cluster = Cluster(tenant, set(namespaces))
    cluster.converge()
    for pod in load:
        cluster.admit(*pod)
    result = cluster.observe()
    for action in result.wave1:
        cluster.write(action)
        cluster.assert_within_total()
    for ns in list(cluster.quotas):
        cluster.sync(ns)
    for action in result.wave2:
        # Wave 2 comes from the same observation; the resourceVersion is the one the
        # controller reads back after confirming wave 1.
        cluster.write(
            Action(action.verb, action.namespace, action.name, action.reason, action.manifest, None)
        )
        cluster.assert_within_total()
    for ns in list(cluster.quotas):
        cluster.sync(ns)
    assert cluster.reconcile().settled  # wave 2 landed exactly on the targets
