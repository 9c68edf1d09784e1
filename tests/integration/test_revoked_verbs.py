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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devcluster import identity
from tessera.adapters.kube import Kube, path_of

from .conftest import OperatorProcess
from .helpers import condition, custom, eventually, namespace

ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/tessera-manager"
TQ = "/apis/tessera.io/v1alpha1/tenantquotas"
MIG = "nvidia.com/mig-1g.10gb"
USER = f"system:serviceaccount:{identity.OPERATOR.namespace}:{identity.OPERATOR.name}"


def _allowed(kube: Kube, verb: str, resource: str, namespace: str = "") -> bool:
    """What the API server's authorizer answers the operator's ServiceAccount right now."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": USER,
            "resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace},
        },
    }
    answer = kube.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


@contextmanager
def revoked(kube: Kube, verb: str, resource: str, namespace: str = "") -> Iterator[None]:
    """``verb`` on core ``resource`` taken out of config/rbac's ClusterRole, as an admin
    would edit it; the role is put back as it was on the way out, whatever happened."""
    role = kube.get(ROLE)
    original = copy.deepcopy(role["rules"])
    for rule in role["rules"]:
        if rule.get("apiGroups") == [""] and resource in rule.get("resources", []):
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    kube.replace(ROLE, role)
    try:
        eventually(
            lambda: not _allowed(kube, verb, resource, namespace),
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


def _events(kube: Kube, name: str, reason: str) -> list[dict[str, Any]]:
    events = kube.list(path_of("v1", "events", namespace="default"))
    return [
        e
        for e in events
        if e["involvedObject"]["name"] == name
        and e["involvedObject"]["kind"] == "TenantQuota"
        and e["reason"] == reason
    ]


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
    private = OperatorProcess(
        operator.plane,
        tmp_path / "operator.log",
        "--retry-cap-seconds=4",
        kubeconfig=operator.kubeconfig,
    )
    operator.kill()  # one operator at a time: the session's must not log this test's refusals
    try:
        private.start()
        namespace(kube, ns, {"tessera.io/tenant": tenant})
        spec = {"namespaceSelector": {"matchLabels": {"tessera.io/tenant": tenant}}}
        kube.create(TQ, custom("TenantQuota", tenant, {**spec, "hard": {MIG: 2}}))
        eventually(lambda: _ready(kube, path), 60, f"TenantQuota {tenant} Ready")
        assert _hard(kube, ns, tenant) == "2"
        clean_until = len(private.log())

        with revoked(kube, "patch", "resourcequotas", ns):
            refused_from = len(private.log())
            # The platform engineer raises the limit: the quota in rv-1 needs a patch.
            kube.patch(path, {"spec": {"hard": {MIG: 3}}})
            cond = eventually(lambda: _stalled(kube, path), 60, f"{tenant} Stalled")
            assert cond["reason"] == "Forbidden", cond
            assert 'cannot patch resource "resourcequotas"' in cond["message"], cond
            assert USER in cond["message"], cond
            ready = condition(kube.get(path), "Ready")
            assert ready is not None and ready["status"] == "False", ready
            assert _hard(kube, ns, tenant) == "2"  # nothing written: the API said no
            events = eventually(lambda: _events(kube, tenant, "Forbidden"), 30, "the Event")
            assert events[0]["type"] == "Warning", events[0]
            assert 'cannot patch resource "resourcequotas"' in events[0]["message"], events[0]

        # The verb is back (revoked() restored the role); nobody touches the TenantQuota.
        eventually(lambda: _allowed(kube, "patch", "resourcequotas", ns), 30, "patch allowed")
        eventually(lambda: _ready(kube, path), 60, f"{tenant} Ready again without a touch")
        assert _hard(kube, ns, tenant) == "3"
        ready_again = len(private.log())
    finally:
        private.stop()
        operator.start()
        kube.delete(path)
    log = private.log()
    assert "forbidden" not in log[:clean_until], log[:clean_until][-3000:]
    assert "forbidden" in log[refused_from:ready_again]  # the refusal was logged as well
    private.assert_clean_log(denials_from=ready_again)
