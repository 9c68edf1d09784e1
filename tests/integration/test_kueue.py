"""Issue 30: TenantQuota in Kueue's language, played by a platform engineer on real parts.

The real Kueue v0.17.0 controller manager (built from Go modules, webhooks on 127.0.0.1),
the real control plane, KWOK nodes, the simulated MIG manager, and the operator under its own
ServiceAccount (config/rbac, which now grants the Kueue verbs it needs):

* without Kueue installed, ``enforcement: Kueue`` is a clear Stalled condition, not a crash;
* a tenant's Jobs sent to Tessera's LocalQueues are admitted by Kueue only up to the slices the
  pool holds; the pool changes 7g.80gb -> 7 x 1g.10gb mid-way and the ClusterQueues follow the
  ledger (nothing of a node being changed is promised); an outside watcher of every Workload
  and Node checks that at no instant more is admitted than the nodes advertise; a hand-made
  ClusterQueue is never touched;
* a hand-made ClusterQueue holding the name Tessera would write is a Stalled condition naming it.
"""

from __future__ import annotations

from typing import Any

from builders import LAYOUT_B, TenantQuotaWrapper, custom
from devcluster import fleet
from devcluster.kueue import Kueue
from tessera.adapters.kube import Kube, Obj, path_of

from .conftest import OperatorProcess
from .faults import NPG, agents, pool_spec, wait_ready
from .helpers import condition, eventually, namespace
from .kueue_support import (
    KUEUE,
    Admissions,
    admitted,
    cluster_queue,
    job,
    kueue,
    nominal,
    workloads,
)

__all__ = ["agents", "kueue"]  # module-scoped fixtures
TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
POOL = "kq"
MIG_7G = "nvidia.com/mig-7g.80gb"
MIG_1G = "nvidia.com/mig-1g.10gb"
WHOLE_7G: dict[str, Any] = {"mig": {"layouts": [{"profiles": {"7g.80gb": 1}}]}}
TENANT = "kueue-story.example.com/tenant"
FLAVOR = f"tessera-{POOL}"


def tenant_quota(kube: Kube, name: str, enforcement: str, **limits: dict[str, int]) -> None:
    built = TenantQuotaWrapper(name).namespaces(**{TENANT: name}).spec(enforcement=enforcement)
    for field, values in limits.items():
        built.spec(**{field: values})
    kube.create(TQ, built.obj())


def verdict(kube: Kube, name: str, type_: str, reason: str) -> dict[str, Any] | None:
    obj = kube.get_or_none(f"{TQ}/{name}") or {}
    fresh = (obj.get("status") or {}).get("observedGeneration") == obj.get("metadata", {}).get(
        "generation"
    )
    cond = condition(obj, type_) or {}
    return cond if fresh and cond.get("status") == "True" and cond.get("reason") == reason else None


BACKGROUND = {"propagationPolicy": "Background"}


def finish_jobs(kube: Kube, ns: str) -> None:
    """Delete every Job of ``ns`` and wait until Kueue has let their Workloads go."""
    for made in kube.list(path_of("batch/v1", "jobs", namespace=ns)):
        kube.delete(path_of("batch/v1", "jobs", made["metadata"]["name"], ns), BACKGROUND)
    eventually(lambda: not workloads(kube, ns), 60, f"the Workloads of {ns} gone")


def delete_quota(kube: Kube, name: str) -> None:
    kube.delete(f"{TQ}/{name}")
    eventually(lambda: kube.get_or_none(f"{TQ}/{name}") is None, 60, f"TenantQuota {name} gone")


def test_without_kueue_enforcement_kueue_is_a_clear_condition(
    kube: Kube, operator: OperatorProcess
) -> None:
    assert kube.get_or_none(KUEUE) is None, "Kueue's CRDs are installed before this story"
    namespace(kube, "kq-none", {TENANT: "kq-none"})
    tenant_quota(kube, "kq-none", "Kueue", hard={MIG_1G: 1})
    cond = eventually(
        lambda: verdict(kube, "kq-none", "Stalled", "KueueNotInstalled"), 60, "KueueNotInstalled"
    )
    assert "does not serve kueue.x-k8s.io/v1beta2" in cond["message"], cond
    assert "set spec.enforcement: ResourceQuota" in cond["message"], cond
    assert operator.proc is not None and operator.proc.poll() is None  # no crash
    delete_quota(kube, "kq-none")


def hand_made(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"team": "research"}},
        "spec": {
            "namespaceSelector": {"matchLabels": {"team": "research"}},
            "resourceGroups": [
                {
                    "coveredResources": [MIG_1G],
                    "flavors": [
                        {"name": FLAVOR, "resources": [{"name": MIG_1G, "nominalQuota": "50"}]}
                    ],
                }
            ],
        },
    }


def untouched(kube: Kube, made: Obj) -> None:
    now = cluster_queue(kube, made["metadata"]["name"])
    assert now is not None
    assert now["spec"] == made["spec"] and now["metadata"]["labels"] == made["metadata"]["labels"]
    managers = {m.get("manager") for m in now["metadata"].get("managedFields") or []}
    assert "tessera" not in managers, managers


def in_state(kube: Kube, namespaces: tuple[str, ...], resource: str) -> tuple[int, int]:
    """(admitted, waiting) Workloads asking for ``resource``."""
    found = [
        w
        for ns in namespaces
        for w in workloads(kube, ns)
        if resource in str(w["spec"]["podSets"][0]["template"]["spec"]["containers"])
    ]
    held = sum(admitted(w) for w in found)
    return held, len(found) - held


def test_jobs_are_admitted_only_up_to_the_slices_through_a_7g_to_7x1g_change(
    kube: Kube, operator: OperatorProcess, agents: None, kueue: Kueue
) -> None:
    fleet.create_nodes(kube, fleet.pool(POOL, "H100-80GB", 2, 1))  # one GPU each
    kube.create(NPG, custom("NodePoolGeometry", POOL, pool_spec(POOL, WHOLE_7G)))
    wait_ready(kube, POOL, 180, f"{POOL} on 7g.80gb")
    research = kube.create(f"{KUEUE}/clusterqueues", hand_made("research"))
    spaces = ("kq-a", "kq-b")
    for ns in spaces:
        namespace(kube, ns, {TENANT: "kq"})
    tenant_quota(kube, "kq", "Kueue", total={MIG_7G: 2, MIG_1G: 14})
    eventually(lambda: verdict(kube, "kq", "Ready", "QueuesApplied"), 60, "kq QueuesApplied")
    for ns in spaces:  # one 7g each, none of the slices that do not exist yet
        queue = cluster_queue(kube, f"tessera-{ns}")
        assert (nominal(queue, FLAVOR, MIG_7G), nominal(queue, FLAVOR, MIG_1G)) == (1, 0), queue

    with Admissions(kube, POOL, (MIG_7G, MIG_1G)) as seen:
        for ns, name in (("kq-a", "a7-0"), ("kq-a", "a7-1"), ("kq-b", "b7-0")):
            kube.create(path_of("batch/v1", "jobs", namespace=ns), job(ns, name, MIG_7G))
        eventually(lambda: in_state(kube, spaces, MIG_7G) == (2, 1), 60, "two 7g Jobs admitted")
        for ns in spaces:  # the 7g work is done: the waiting one first, so none is admitted late
            for w in sorted(workloads(kube, ns), key=admitted):
                owner = w["metadata"]["ownerReferences"][0]["name"]
                kube.delete(path_of("batch/v1", "jobs", owner, ns), BACKGROUND)
        eventually(lambda: in_state(kube, spaces, MIG_7G) == (0, 0), 60, "7g Workloads gone")

        for i in range(16):  # 16 x 1g.10gb, none there yet
            ns = spaces[i % 2]
            kube.create(path_of("batch/v1", "jobs", namespace=ns), job(ns, f"g1-{i}", MIG_1G))
        eventually(lambda: in_state(kube, spaces, MIG_1G) == (0, 16), 60, "16 1g Jobs waiting")
        kube.patch(f"{NPG}/{POOL}", {"spec": LAYOUT_B})
        eventually(  # the change starts: its nodes count neither the 7g going nor the 1g to come
            lambda: all(
                nominal(cluster_queue(kube, f"tessera-{ns}"), FLAVOR, MIG_7G) == 0 for ns in spaces
            ),
            60,
            "ClusterQueues without 7g once the change starts",
        )
        wait_ready(kube, POOL, 300, f"{POOL} on 7 x 1g.10gb")
        eventually(lambda: in_state(kube, spaces, MIG_1G) == (14, 2), 120, "14 1g Jobs admitted")
        for ns in spaces:
            assert nominal(cluster_queue(kube, f"tessera-{ns}"), FLAVOR, MIG_1G) == 7
    assert not seen.excess, seen.excess
    assert seen.most == {MIG_7G: 2, MIG_1G: 14}, seen.most
    untouched(kube, research)

    for ns in spaces:  # the work is done: Kueue keeps a queue while it holds Workloads
        finish_jobs(kube, ns)
    delete_quota(kube, "kq")  # its queues and cohort go; the hand-made queue stays
    for path in ("clusterqueues/tessera-kq-a", "clusterqueues/tessera-kq-b", "cohorts/tessera-kq"):
        eventually(lambda p=path: kube.get_or_none(f"{KUEUE}/{p}") is None, 60, f"{path} gone")
    untouched(kube, research)
    kube.delete(f"{KUEUE}/clusterqueues/research")
    operator.assert_clean_log()  # every Kueue call allowed by config/rbac, no traceback


def test_a_name_taken_by_a_hand_made_cluster_queue_is_stalled_naming_it(
    kube: Kube, operator: OperatorProcess, kueue: Kueue
) -> None:
    theirs = kube.create(f"{KUEUE}/clusterqueues", hand_made("tessera-kq-c"))
    namespace(kube, "kq-c", {TENANT: "kq-c"})
    tenant_quota(kube, "kq-c", "Both", hard={MIG_1G: 1})
    cond = eventually(lambda: verdict(kube, "kq-c", "Stalled", "NameClash"), 60, "NameClash")
    assert cond["message"].startswith(
        "ClusterQueue tessera-kq-c exists and is not Tessera's: Tessera leaves it as it is"
    ), cond
    assert kube.get_or_none(f"{KUEUE}/namespaces/kq-c/localqueues/tessera") is None
    untouched(kube, theirs)
    delete_quota(kube, "kq-c")
    untouched(kube, theirs)
    kube.delete(f"{KUEUE}/clusterqueues/tessera-kq-c")
