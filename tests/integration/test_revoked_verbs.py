"""A verb taken from the operator's ClusterRole mid-run shows in the object's status.

A platform team tightens RBAC by hand (or an install drifts): the operator,
running under its ServiceAccount with exactly config/rbac, can no longer make a
write its next pass needs. The object must say so — ``Stalled``, with the API
server's own 403 message naming the verb and the resource, and a Warning Event —
not stay Ready on a stale generation while the refusal sits in a log nobody reads.
Once the verb is given back the object goes Ready again on its own: the failed
passes back off (capped here at a few seconds by ``--retry-cap-seconds``), the
first pass that succeeds resets that backoff, and nobody has to touch the object.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builders import LAYOUT_A, LAYOUT_B, custom
from builders.dra import dra_pool as dra_pool_of
from devcluster import fleet, identity
from devcluster.controlplane import free_port
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .faults import NPG, agents, assert_released, events, pool_spec, stalled, wait_ready
from .helpers import condition, eventually, namespace

__all__ = ["agents"]  # the module-scoped fixture (simulated GPU agents)

ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/tessera-manager"
TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
MIG = "nvidia.com/mig-1g.10gb"
USER = f"system:serviceaccount:{identity.OPERATOR.namespace}:{identity.OPERATOR.name}"


def _allowed(kube: Kube, verb: str, group: str, resource: str, namespace: str = "") -> bool:
    """What the API server's authorizer answers the operator's ServiceAccount right now;
    ``resource`` may name a subresource (``tenantquotas/status``)."""
    name, _, sub = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": name, "subresource": sub}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": USER, "resourceAttributes": {**attributes, "namespace": namespace}},
    }
    answer = kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def without(
    rules: list[dict[str, Any]], verb: str, group: str, resource: str
) -> list[dict[str, Any]]:
    """``rules`` with ``verb`` on ``resource`` taken out, every other grant kept: a rule that
    also names other resources is split in two."""
    out = []
    for rule in rules:
        if group not in rule.get("apiGroups", []) or resource not in rule.get("resources", []):
            out.append(rule)
            continue
        others = [r for r in rule["resources"] if r != resource]
        verbs = [v for v in rule["verbs"] if v != verb]
        out += [{**rule, "resources": others}] if others else []
        out += [{**rule, "resources": [resource], "verbs": verbs}] if verbs else []
    return out


@contextmanager
def revoked(
    kube: Kube, verb: str, group: str, resource: str, namespace: str = ""
) -> Iterator[None]:
    """``verb`` on ``resource`` taken out of config/rbac's ClusterRole, as an admin would
    edit it; the role is put back as it was on the way out, whatever happened."""
    role = kube.get(ROLE)
    original = copy.deepcopy(role["rules"])
    role["rules"] = without(role["rules"], verb, group, resource)
    kube.replace(ROLE, role)
    try:
        eventually(
            lambda: not _allowed(kube, verb, group, resource, namespace),
            30,
            f"the authorizer refusing {verb} {resource}",
        )
        yield
    finally:
        restore(kube, original)


def restore(kube: Kube, rules: list[dict[str, Any]]) -> None:
    role = kube.get(ROLE)
    if role["rules"] != rules:
        role["rules"] = rules
        kube.replace(ROLE, role)


@contextmanager
def alone(operator: OperatorProcess, log: Path, metrics_port: int = 0) -> Iterator[OperatorProcess]:
    """An operator of this test's own (same ServiceAccount token, its own log, a backoff
    capped at 4 s); the session's is stopped meanwhile so it cannot log this test's refusals."""
    private = OperatorProcess(
        operator.plane,
        log,
        "--retry-cap-seconds=4",
        kubeconfig=operator.kubeconfig,
        metrics_port=metrics_port,
    )
    operator.kill()
    try:
        yield private.start()
    finally:
        private.stop()
        operator.start()


def assert_refusals_only_while_revoked(private: OperatorProcess, marks: tuple[int, int]) -> None:
    """``marks``: log offsets when the verb was revoked and when the object was Ready again.
    No denial before the revocation nor after recovery; the refusal itself is logged too; no
    traceback anywhere."""
    revoked_at, ready_at = marks
    log = private.log()
    assert "forbidden" not in log[:revoked_at], log[:revoked_at][-3000:]
    assert "forbidden" in log[revoked_at:ready_at]
    private.assert_clean_log(denials_from=ready_at)


def _stalled(kube: Kube, path: str) -> dict[str, Any] | None:
    obj = kube.get(path)
    cond = condition(obj, "Stalled")
    current = obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    return cond if cond and cond["status"] == "True" and current else None


def _ready(kube: Kube, path: str) -> dict[str, Any] | None:
    obj = kube.get(path)
    cond = condition(obj, "Ready")
    current = obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    stalled = condition(obj, "Stalled")
    return obj if cond and cond["status"] == "True" and current and not stalled else None


def _hard(kube: Kube, ns: str, tenant: str) -> str | None:
    quota = kube.get_or_none(path_of("v1", "resourcequotas", f"tessera-{tenant}", ns))
    return None if quota is None else quota["spec"]["hard"].get(f"requests.{MIG}")


def test_a_revoked_verb_stalls_the_tenant_quota_with_the_api_message_until_given_back(
    kube: Kube, operator: OperatorProcess, tmp_path: Path
) -> None:
    tenant, ns = "rv", "rv-1"
    path = f"{TQ}/{tenant}"
    with alone(operator, tmp_path / "operator.log") as private:
        namespace(kube, ns, {"tessera.io/tenant": tenant})
        spec = {"namespaceSelector": {"matchLabels": {"tessera.io/tenant": tenant}}}
        kube.create(TQ, custom("TenantQuota", tenant, {**spec, "hard": {MIG: 2}}))
        eventually(lambda: _ready(kube, path), 60, f"TenantQuota {tenant} Ready")
        assert _hard(kube, ns, tenant) == "2"
        revoked_at = len(private.log())

        with revoked(kube, "patch", "", "resourcequotas", ns):
            # The platform engineer raises the limit: the quota in rv-1 needs a patch.
            kube.patch(path, {"spec": {"hard": {MIG: 3}}})
            cond = eventually(lambda: _stalled(kube, path), 60, f"{tenant} Stalled")
            assert cond["reason"] == "Forbidden", cond
            assert 'cannot patch resource "resourcequotas"' in cond["message"], cond
            assert USER in cond["message"], cond
            ready = condition(kube.get(path), "Ready")
            assert ready is not None and ready["status"] == "False", ready
            assert _hard(kube, ns, tenant) == "2"  # nothing written: the API said no
            warned = eventually(lambda: events(kube, tenant, "Forbidden"), 30, "the Event")
            assert warned[0]["type"] == "Warning", warned[0]
            assert 'cannot patch resource "resourcequotas"' in warned[0]["message"], warned[0]

        # The verb is back (revoked() restored the role); nobody touches the TenantQuota.
        eventually(lambda: _allowed(kube, "patch", "", "resourcequotas", ns), 30, "patch allowed")
        eventually(lambda: _ready(kube, path), 60, f"{tenant} Ready again without a touch")
        assert _hard(kube, ns, tenant) == "3"
        ready_at = len(private.log())
        kube.delete(path)
    assert_refusals_only_while_revoked(private, (revoked_at, ready_at))


def test_a_revoked_node_patch_stalls_the_pool_with_the_api_message_until_given_back(
    kube: Kube, operator: OperatorProcess, agents: None, tmp_path: Path
) -> None:
    """A write of the rollout's plan (the node's cordon and state) is refused: the pass's
    writes did not all land, and the pool says why instead of re-planning silently."""
    pool = "rv-pool"
    (name,) = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    with alone(operator, tmp_path / "operator.log") as private:
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        wait_ready(kube, pool, 120, f"{pool} Ready at layout A")
        revoked_at = len(private.log())

        with revoked(kube, "patch", "", "nodes"):
            kube.patch(f"{NPG}/{pool}", {"spec": LAYOUT_B})  # the node must be cordoned first
            cond = eventually(lambda: stalled(kube, pool), 60, f"{pool} Stalled")
            assert cond["reason"] == "Forbidden", cond
            assert 'cannot patch resource "nodes"' in cond["message"], cond
            assert f'nodes "{name}" is forbidden' in cond["message"], cond
            node = kube.get(path_of("v1", "nodes", name))
            assert not node["spec"].get("unschedulable"), node["spec"]  # nothing landed
            assert c.NODE_STATE_ANNOTATION not in node["metadata"].get("annotations", {})
            warned = eventually(lambda: events(kube, pool, "Forbidden"), 30, "the Event")
            assert warned[0]["type"] == "Warning", warned[0]

        eventually(lambda: _allowed(kube, "patch", "", "nodes"), 30, "patch on nodes allowed")
        obj = wait_ready(kube, pool, 120, f"{pool} Ready at layout B without a touch")
        ready_at = len(private.log())
        assert obj["status"]["nodes"]["updated"] == 1, obj["status"]
        assert_released(kube, pool)
        kube.delete(f"{NPG}/{pool}")
    assert_refusals_only_while_revoked(private, (revoked_at, ready_at))


def test_two_refused_nodes_stall_the_pool_with_one_stable_message_and_one_event(
    kube: Kube, operator: OperatorProcess, agents: None, tmp_path: Path
) -> None:
    """Both nodes of a stage are written at once and both refused: whichever finished first,
    every pass reports the same message (counted, first node by name), so the status is not
    rewritten and no new Warning is posted on each retry."""
    pool = "rv-two"
    names = sorted(fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 2)))
    with alone(operator, tmp_path / "operator.log") as private:
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        wait_ready(kube, pool, 120, f"{pool} Ready at layout A")
        revoked_at = len(private.log())

        with revoked(kube, "patch", "", "nodes"):
            kube.patch(f"{NPG}/{pool}", {"spec": {**LAYOUT_B, "rollout": {"maxUnavailable": 2}}})
            cond = eventually(lambda: stalled(kube, pool), 60, f"{pool} Stalled")
            assert cond["message"].startswith("2 writes refused; first: "), cond
            assert f'nodes "{names[0]}" is forbidden' in cond["message"], cond
            refusals = private.log()[revoked_at:].count("is forbidden")
            eventually(  # two more passes, each refused on both nodes
                lambda: private.log()[revoked_at:].count("is forbidden") >= refusals + 4,
                60,
                "two more refused passes",
            )
            assert stalled(kube, pool) == cond  # not rewritten: same message and time
            warned = events(kube, pool, "Forbidden")
            assert len(warned) == 1, [e["message"] for e in warned]

        eventually(lambda: _allowed(kube, "patch", "", "nodes"), 30, "patch on nodes allowed")
        wait_ready(kube, pool, 180, f"{pool} Ready at layout B without a touch")
        ready_at = len(private.log())
        assert_released(kube, pool)
        kube.delete(f"{NPG}/{pool}")
    assert_refusals_only_while_revoked(private, (revoked_at, ready_at))


def _status_write_failures(private: OperatorProcess) -> float:
    found = re.search(
        r'^tessera_status_write_failures_total\{kind="TenantQuota"\} (\S+)$', private.scrape(), re.M
    )
    return float(found.group(1)) if found else 0.0


def test_a_status_that_cannot_be_written_is_logged_and_counted_and_the_work_goes_on(
    kube: Kube, operator: OperatorProcess, tmp_path: Path
) -> None:
    """The status verb itself revoked: nothing can report it on the object, so the log and
    /metrics do; the loop lives on, the quotas are still written, and the status catches up
    once the verb is back."""
    tenant, ns = "rvs", "rvs-1"
    path = f"{TQ}/{tenant}"
    with alone(operator, tmp_path / "operator.log", free_port()) as private:
        namespace(kube, ns, {"tessera.io/tenant": tenant})
        spec = {"namespaceSelector": {"matchLabels": {"tessera.io/tenant": tenant}}}
        kube.create(TQ, custom("TenantQuota", tenant, {**spec, "hard": {MIG: 2}}))
        eventually(lambda: _ready(kube, path), 60, f"TenantQuota {tenant} Ready")
        revoked_at = len(private.log())

        with revoked(kube, "patch", "tessera.io", "tenantquotas/status"):
            kube.patch(path, {"spec": {"hard": {MIG: 3}}})
            eventually(lambda: _hard(kube, ns, tenant) == "3", 60, "the quota raised regardless")
            eventually(lambda: _status_write_failures(private) > 0, 60, "the failure counted")
            assert "could not write status" in private.log()[revoked_at:]
            obj = kube.get(path)
            assert obj["status"]["observedGeneration"] < obj["metadata"]["generation"]
            assert private.proc is not None and private.proc.poll() is None  # still running

        eventually(lambda: _ready(kube, path), 60, f"{tenant}'s status caught up")
        ready_at = len(private.log())
        kube.delete(path)
    assert_refusals_only_while_revoked(private, (revoked_at, ready_at))


def test_a_refused_device_class_write_stalls_the_dra_pool_only(
    kube: Kube, operator: OperatorProcess, agents: None, tmp_path: Path
) -> None:
    """Every pass syncs the shared DeviceClasses; with ``create deviceclasses`` revoked the
    DRA pool that declares one is Stalled with the API's message, while a device-plugin
    pool's passes (it declares no class) go on and stay Ready."""
    pool, dra_pool = "rv-dp", "rv-dra"
    fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1))
    with alone(operator, tmp_path / "operator.log") as private:
        kube.create(NPG, custom("NodePoolGeometry", pool, pool_spec(pool, LAYOUT_A)))
        wait_ready(kube, pool, 120, f"{pool} Ready at layout A")
        with revoked(kube, "create", "resource.k8s.io", "deviceclasses"):
            layout = {"mig": {"layouts": [{"profiles": {"3g.40gb": 2}}]}}
            kube.create(NPG, dra_pool_of(dra_pool).layout(layout).rollout(paused=True).obj())
            cond = eventually(lambda: stalled(kube, dra_pool), 60, f"{dra_pool} Stalled")
            assert cond["reason"] == "Forbidden", cond
            assert 'cannot create resource "deviceclasses"' in cond["message"], cond
            # the device-plugin pool's next pass (a new generation) ends Ready all the same
            kube.patch(f"{NPG}/{pool}", {"spec": {"rollout": {"verifyTimeout": "2m"}}})
            wait_ready(kube, pool, 60, f"{pool} Ready at its new generation")
            assert stalled(kube, pool) is None
        eventually(lambda: kube.get_or_none(f"{CLASSES}/mig-3g.40gb.tessera.io"), 60, "written")
        kube.delete(f"{NPG}/{dra_pool}")
        eventually(
            lambda: kube.get_or_none(f"{CLASSES}/mig-3g.40gb.tessera.io") is None, 60, "gone"
        )
        kube.delete(f"{NPG}/{pool}")
        eventually(lambda: kube.get_or_none(f"{NPG}/{pool}") is None, 120, f"{pool} deleted")
    private.assert_clean_log(denials_from=len(private.log()))
