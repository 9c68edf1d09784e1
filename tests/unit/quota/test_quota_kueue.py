"""TenantQuota in Kueue's language (issue 30): shares of the ledger, the objects, the writes."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.api import constants as c
from tessera.api.v1alpha1.common import LabelSelector
from tessera.domain.quota.kueue import objects as k
from tessera.domain.quota.kueue import plan as kplan
from tessera.domain.quota.kueue import shares
from tessera.domain.quota.kueue.shares import Quota
from tessera.domain.quota.ledger import CapacityLedger

MIG_1G = "nvidia.com/mig-1g.10gb"
MIG_7G = "nvidia.com/mig-7g.80gb"


def ledger(pools: dict[str, dict[str, int]], **offered: set[str]) -> CapacityLedger:
    seen = {p: frozenset(offered.get(p, set(row))) for p, row in pools.items()}
    return CapacityLedger(pools, {}, seen, {})


@pytest.mark.parametrize(
    ("commitments", "pools", "want"),
    [
        pytest.param(
            {"a": {MIG_1G: 4}, "b": {MIG_1G: 4}},
            {"p": {MIG_1G: 7}},
            {"a": {"p": {MIG_1G: 4}}, "b": {"p": {MIG_1G: 3}}},
            id="overcommitted-pool-split-equally-odd-unit-to-first",
        ),
        pytest.param(
            {"a": {MIG_1G: 2}, "b": {MIG_1G: 10}},
            {"p": {MIG_1G: 7}},
            {"a": {"p": {MIG_1G: 2}}, "b": {"p": {MIG_1G: 5}}},
            id="a-small-promise-leaves-the-rest-to-others",
        ),
        pytest.param(
            {"a": {MIG_1G: 9}},
            {"p": {MIG_1G: 7}, "q": {MIG_1G: 7}},
            {"a": {"p": {MIG_1G: 7}, "q": {MIG_1G: 2}}},
            id="pools-in-name-order",
        ),
        pytest.param({"a": {MIG_7G: 1}}, {"p": {MIG_1G: 7}}, {"a": {}}, id="nothing-offers-it"),
        pytest.param(
            {"a": {MIG_1G: 3}}, {"": {MIG_1G: 8}}, {"a": {}}, id="nodes-in-no-pool-are-not-shared"
        ),
    ],
)
def test_tenant_shares_never_pass_the_pool(
    commitments: dict[str, dict[str, int]],
    pools: dict[str, dict[str, int]],
    want: dict[str, Any],
) -> None:
    got = shares.tenants(commitments, ledger(pools))
    assert got == want
    for pool, row in pools.items():
        for resource, n in row.items():
            assert sum(s.get(pool, {}).get(resource, 0) for s in got.values()) <= n


@pytest.mark.parametrize(
    ("units", "hard", "want"),
    [
        pytest.param(7, {}, {"x": Quota(4, 3), "y": Quota(3, 4)}, id="borrow-up-to-the-share"),
        pytest.param(7, {MIG_1G: 5}, {"x": Quota(4, 1), "y": Quota(3, 2)}, id="borrow-up-to-hard"),
        pytest.param(7, {MIG_1G: 2}, {"x": Quota(2, 0), "y": Quota(2, 0)}, id="hard-below-share"),
        pytest.param(0, {}, {"x": Quota(0, 0), "y": Quota(0, 0)}, id="nothing-left"),
    ],
)
def test_a_tenants_share_splits_over_its_namespaces(
    units: int, hard: dict[str, int], want: dict[str, Quota]
) -> None:
    got = shares.namespaces({"p": {MIG_1G: units}}, ["y", "x"], hard)
    assert {ns: got[ns]["p"][MIG_1G] for ns in got} == want
    assert sum(q.nominal for q in want.values()) <= units


SELECT = {"p": LabelSelector.model_validate({"matchLabels": {c.POOL_LABEL: "p"}})}


def desired(
    pools: dict[str, dict[str, int]], members: tuple[str, ...] = ("ns-1", "ns-2")
) -> kplan.Desired:
    taints = {"p": frozenset({("dedicated", "gpu", "NoSchedule")})}
    seen = CapacityLedger(pools, {}, {p: frozenset({MIG_1G, MIG_7G}) for p in pools}, taints)
    return kplan.desired("team", members, {"team": {MIG_1G: 7}}, {}, seen, SELECT)


def test_the_objects_of_a_tenant() -> None:
    want = desired({"p": {MIG_1G: 7}})
    assert [(o["kind"], o["metadata"]["name"]) for o in want.objects] == [
        ("ResourceFlavor", "tessera-p"),
        ("Cohort", "tessera-team"),
        ("ClusterQueue", "tessera-ns-1"),
        ("ClusterQueue", "tessera-ns-2"),
        ("LocalQueue", "tessera"),
        ("LocalQueue", "tessera"),
    ]
    flavor, _, queue, *_ = want.objects
    assert flavor["spec"] == {
        "nodeLabels": {c.POOL_LABEL: "p"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
        ],
    }
    assert queue["spec"] == {
        "cohortName": "tessera-team",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ns-1"}},
        "resourceGroups": [
            {
                "coveredResources": [MIG_1G],
                "flavors": [
                    {
                        "name": "tessera-p",
                        "resources": [{"name": MIG_1G, "nominalQuota": "4", "borrowingLimit": "3"}],
                    }
                ],
            }
        ],
    }


def test_a_pool_mid_change_keeps_its_flavor_at_zero_quota() -> None:
    """7g.80gb -> 7 x 1g.10gb: the changing nodes count nothing, the flavor stays listed."""
    want = desired({"p": {}})
    queue = next(o for o in want.objects if o["kind"] == "ClusterQueue")
    (quota,) = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert (quota["nominalQuota"], quota["borrowingLimit"]) == ("0", "0")


def observed(*objs: dict[str, Any]) -> dict[kplan.Key, dict[str, Any]]:
    return {kplan.key_of(o): o for o in objs}


def as_stored(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server returns: Kueue's defaults added, quantities canonical."""
    stored = {**obj, "spec": dict(obj["spec"])}
    if obj["kind"] == "ClusterQueue":
        stored["spec"] |= {"queueingStrategy": "BestEffortFIFO", "stopPolicy": "None"}
    return stored


def test_nothing_there_creates_all_in_order_and_a_converged_tenant_writes_nothing() -> None:
    want = desired({"p": {MIG_1G: 7}})
    first = kplan.plan("team", want, {})
    assert [a.verb for a in first.actions] == ["create"] * 6
    converged = kplan.plan("team", want, observed(*(as_stored(o) for o in want.objects)))
    assert converged.actions == () and converged.unchanged == 6 and not converged.clashes


def test_a_geometry_change_patches_only_the_queues_whose_quota_moved() -> None:
    before = desired({"p": {MIG_7G: 1}})
    after = desired({"p": {MIG_1G: 7}})
    result = kplan.plan("team", after, observed(*(as_stored(o) for o in before.objects)))
    assert [(a.verb, a.name) for a in result.actions] == [
        ("patch", "tessera-ns-1"),
        ("patch", "tessera-ns-2"),
    ]
    patch = result.actions[0].body
    assert patch is not None and set(patch["spec"]) == {"resourceGroups"}


def test_a_hand_made_cluster_queue_of_the_same_name_is_a_clash_never_touched() -> None:
    want = desired({"p": {MIG_1G: 7}})
    mine = [as_stored(o) for o in want.objects if o["metadata"]["name"] != "tessera-ns-1"]
    theirs = {
        "kind": "ClusterQueue",
        "metadata": {"name": "tessera-ns-1", "labels": {"team": "ml"}},
        "spec": {"cohortName": "ml"},
    }
    result = kplan.plan("team", want, observed(*mine, theirs))
    assert result.clashes == (
        "ClusterQueue tessera-ns-1 exists and is not Tessera's: Tessera leaves it as it is; "
        "rename or delete it to let Tessera write its own",
    )
    touched = {(a.kind.kind, a.namespace, a.name) for a in result.actions}
    assert ("ClusterQueue", "", "tessera-ns-1") not in touched
    assert ("LocalQueue", "ns-1", "tessera") not in touched  # it would point at theirs


def test_a_namespace_leaving_deletes_its_queues_local_first_and_nothing_of_others() -> None:
    both = desired({"p": {MIG_1G: 7}})
    one = desired({"p": {MIG_1G: 7}}, members=("ns-2",))
    other = {
        "kind": "ClusterQueue",
        "metadata": {"name": "other", "labels": k.tenant_labels("someone-else")},
        "spec": {},
    }
    result = kplan.plan("team", one, observed(*(as_stored(o) for o in both.objects), other))
    deletes = [(a.kind.kind, a.namespace, a.name) for a in result.actions if a.verb == "delete"]
    assert deletes == [("LocalQueue", "ns-1", "tessera"), ("ClusterQueue", "", "tessera-ns-1")]


def test_enforcement_kueue_alone_deletes_the_tenants_resource_quotas() -> None:
    from quota_builders import members, seen, spec

    from tessera.domain.quota.planning import plan

    kueue_only = spec({MIG_1G: 2}).model_copy(update={"enforcement": "Kueue"})
    result = plan("team-a", kueue_only, members("team-a", "a"), [seen("a", {MIG_1G: 2})])
    assert [(a.verb, a.namespace) for a in result.wave1] == [("delete", "a")]
    assert result.targets == {"a": {}} and not result.wave2


@pytest.mark.parametrize(
    ("quotas", "queues", "both", "want"),
    [
        pytest.param("ready", "ready", False, ("ready", "QueuesApplied", "queues"), id="kueue"),
        pytest.param(
            "ready", "ready", True, ("ready", "QueuesApplied", "quotas; queues"), id="both"
        ),
        pytest.param("ready", "stalled", True, ("stalled", "NameClash", "queues"), id="clash"),
        pytest.param(
            "progressing", "ready", True, ("progressing", "ApplyingQuotas", "quotas"), id="rq"
        ),
    ],
)
def test_the_verdict_is_the_worse_of_quotas_and_queues(
    quotas: str, queues: str, both: bool, want: tuple[str, str, str]
) -> None:
    from tessera.domain.base.conditions import Verdict
    from tessera.domain.quota.reporting import combined

    over = ("Overcommitted", "False", "WithinCapacity", "")
    rq = Verdict(
        quotas, "QuotasApplied" if quotas == "ready" else "ApplyingQuotas", "quotas", (over,)
    )  # type: ignore[arg-type]
    kq = Verdict(queues, "QueuesApplied" if queues == "ready" else "NameClash", "queues")  # type: ignore[arg-type]
    got = combined(rq, kq, both=both)
    assert (got.state, got.reason, got.message) == want and got.extra == (over,)
