"""Named histories of one tenant on the fake cluster, step by step."""

from quota_builders import MIG, spec
from quota_cluster import Cluster


def limits(cluster: Cluster) -> dict[str, int]:
    return {ns: q.hard.get(MIG, -1) for ns, q in sorted(cluster.quotas.items())}


def settled_tenant(total: int, *namespaces: str) -> Cluster:
    cluster = Cluster(spec(total={MIG: total}), set(namespaces))
    cluster.converge()
    return cluster


def test_headroom_moves_to_the_busy_namespace_in_two_confirmed_waves() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b")
    assert limits(cluster) == {"ns-a": 3, "ns-b": 3}
    cluster.admit("ns-a", MIG, 2)  # used half its share: pressed
    cluster.reconcile()
    assert limits(cluster) == {"ns-a": 3, "ns-b": 2}  # wave 1: the idle namespace gives
    held = cluster.reconcile()  # ns-b's new limit is not enforced yet
    assert held.wave2 and held.next_wave == () and limits(cluster)["ns-a"] == 3
    cluster.sync("ns-b")
    cluster.reconcile()
    assert limits(cluster) == {"ns-a": 4, "ns-b": 2}
    assert cluster.converge() == 0  # once the quota controller syncs, nothing is left


def test_a_decrease_computed_from_stale_usage_is_refused_and_recomputed() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b")
    cluster.admit("ns-a", MIG, 2)
    cluster.reconcile(meanwhile=[("ns-b", MIG, 3)])  # ns-b fills up before the write lands
    assert limits(cluster) == {"ns-a": 3, "ns-b": 3}  # 409: nothing lowered below usage
    cluster.converge()  # recomputed from fresh usage: now ns-b is the one pressed
    assert limits(cluster) == {"ns-a": 2, "ns-b": 4}


def test_lowering_the_total_takes_headroom_back_down_to_usage() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b")
    cluster.admit("ns-a", MIG, 2)
    cluster.spec = spec(total={MIG: 2})
    cluster.reconcile()
    assert limits(cluster) == {"ns-a": 2, "ns-b": 0}
    cluster.converge()
    assert cluster.observe().settled


def test_usage_above_a_lowered_total_freezes_every_namespace_at_its_usage() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b")
    cluster.admit("ns-a", MIG, 2)
    cluster.admit("ns-b", MIG, 2)
    cluster.spec = spec(total={MIG: 3})
    cluster.reconcile()
    assert limits(cluster) == {"ns-a": 2, "ns-b": 2}
    assert cluster.observe().over_total == (MIG,)
    cluster.release("ns-b", MIG, 2)
    cluster.converge()
    assert limits(cluster) == {"ns-a": 3, "ns-b": 0}  # the spare unit goes to the busier


def test_a_joining_namespace_is_pinned_first_then_given_its_share() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b")
    cluster.members.add("ns-c")
    cluster.reconcile()
    assert limits(cluster) == {"ns-a": 2, "ns-b": 2, "ns-c": 0}
    cluster.converge()
    assert limits(cluster) == {"ns-a": 2, "ns-b": 2, "ns-c": 2}


def test_a_leaving_namespace_loses_its_quota_and_its_share_returns() -> None:
    cluster = settled_tenant(6, "ns-a", "ns-b", "ns-c")
    cluster.members.discard("ns-c")
    cluster.converge()
    assert limits(cluster) == {"ns-a": 3, "ns-b": 3}
