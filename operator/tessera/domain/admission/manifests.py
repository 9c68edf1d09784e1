"""A contract as objects: a ValidatingAdmissionPolicy and its binding, both Tessera's own.

Both carry ``app.kubernetes.io/managed-by: tessera`` and ``tessera.io/declared-by:
SharingPolicy/<name>``, by which Tessera recognises what it may update or delete; the
binding's ``validationActions`` is the policy's ``podContract`` (``[Warn]`` or ``[Deny]``).
``failurePolicy: Fail`` makes an expression that cannot be evaluated count as a failed check,
under the same action (a warning under Warn). Names: ``<policy>.pod-contract.tessera.io``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tessera.api import constants as c
from tessera.domain.admission import cel
from tessera.domain.admission.contract import Contract
from tessera.domain.dra.naming import DECLARED_BY_ANNOTATION, declarer

API = "admissionregistration.k8s.io/v1"
DECLARED_BY = DECLARED_BY_ANNOTATION
POLICIES = f"/apis/{API}/validatingadmissionpolicies"
BINDINGS = f"/apis/{API}/validatingadmissionpolicybindings"
KIND = "SharingPolicy"
SUFFIX = ".pod-contract.tessera.io"
MAX_NAME = 253
_WORKLOADS = [
    {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
    },
    {
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["jobs", "cronjobs"],
    },
]
_PODS = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}


def name_of(policy: str) -> str:
    """``<policy>.pod-contract.tessera.io``; a name too long for that keeps a hash instead."""
    name = policy + SUFFIX
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(policy.encode()).hexdigest()[:10]
    return f"{policy[: MAX_NAME - len(SUFFIX) - 11]}-{digest}{SUFFIX}"


def metadata(policy: str) -> dict[str, Any]:
    return {
        "name": name_of(policy),
        "labels": {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
        "annotations": {DECLARED_BY: declarer(KIND, policy)},
    }


def policy(contract: Contract) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": metadata(contract.policy),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "resourceRules": [_PODS, *_WORKLOADS],
            },
            "matchConditions": [cel.match_condition(contract)],
            "variables": cel.variables(contract),
            "validations": cel.validations(contract),
        },
    }


def binding(contract: Contract) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata(contract.policy),
        "spec": {
            "policyName": name_of(contract.policy),
            "validationActions": [contract.action],
        },
    }
