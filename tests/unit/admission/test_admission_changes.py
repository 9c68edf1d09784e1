"""Tessera's admission objects of one policy: desired against observed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import admission
from tessera.domain.base.conditions import Verdict

KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
WHO = "SharingPolicy/p"


def wanted() -> list[dict[str, Any]]:
    spec = SharingPolicySpec.model_validate(
        {
            "nodeSelector": {"matchLabels": {"pool": "p"}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": True},
            "scheduler": {"name": "Volcano", "volcano": {}},
        }
    )
    found = admission.contract_of("p", spec, ["310P3"])
    assert found is not None
    return [admission.policy(found), admission.binding(found)]


def stored(
    obj: dict[str, Any], *, who: str = WHO, mine: bool = True, **spec: Any
) -> dict[str, Any]:
    """``obj`` as the API server returns it: a version, defaulted fields, others' labels."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta["resourceVersion"] = "7"
    meta["labels"] = {**(meta["labels"] if mine else {}), "team": "ml"}
    meta["annotations"] = {"tessera.io/declared-by": who} if mine else {}
    out["spec"].update(spec)
    if out["kind"] == KINDS[0]:
        out["spec"]["matchConstraints"]["namespaceSelector"] = {}  # a default
    return out


POLICY, BINDING = wanted()


@pytest.mark.parametrize(
    ("desired", "observed", "verbs", "conflicts"),
    [
        pytest.param([POLICY, BINDING], [], ["create VAP", "create Binding"], [], id="create"),
        pytest.param(
            [POLICY, BINDING], [stored(POLICY), stored(BINDING)], [], [], id="converged-defaults"
        ),
        pytest.param(
            [POLICY, BINDING],
            [stored(POLICY, validations=[]), stored(BINDING)],
            ["update VAP"],
            [],
            id="spec-drift",
        ),
        pytest.param(
            [POLICY, BINDING],
            [stored(POLICY), stored(BINDING, validationActions=["Deny"])],
            ["update Binding"],
            [],
            id="action-changed",
        ),
        pytest.param(
            [], [stored(POLICY), stored(BINDING)], ["delete Binding", "delete VAP"], [], id="off"
        ),
        pytest.param(
            [POLICY, BINDING],
            [stored(POLICY, mine=False)],
            [],
            ["ValidatingAdmissionPolicy p.pod-contract.tessera.io"],
            id="foreign-policy: no binding to it",
        ),
        pytest.param(
            [POLICY, BINDING],
            [stored(POLICY, mine=False), stored(BINDING)],
            ["delete Binding"],
            ["ValidatingAdmissionPolicy p.pod-contract.tessera.io"],
            id="foreign-policy: own binding goes",
        ),
        pytest.param(
            [], [stored(POLICY, who="SharingPolicy/other")], [], [], id="another-declarer-kept"
        ),
    ],
)
def test_diff(
    desired: list[dict[str, Any]],
    observed: list[dict[str, Any]],
    verbs: list[str],
    conflicts: list[str],
) -> None:
    found = admission.diff(WHO, desired, observed, KINDS)
    short = {KINDS[0]: "VAP", KINDS[1]: "Binding"}
    assert [f"{c.verb} {short[c.kind]}" for c in found.writes] == verbs
    assert list(found.conflicts) == conflicts


def test_an_update_keeps_others_labels_and_names_the_version_read() -> None:
    found = admission.diff(WHO, [POLICY], [stored(POLICY, validations=[])], KINDS[:1])
    (change,) = found.writes
    assert change.resource_version == "7" and change.body is not None
    assert change.body["metadata"]["labels"]["team"] == "ml"
    assert change.body["spec"]["validations"] == POLICY["spec"]["validations"]


@pytest.mark.parametrize(
    ("base", "state", "reason", "says_both"),
    [
        pytest.param(Verdict("ready", "Applied", "ok"), "stalled", "Conflict", False, id="ready"),
        pytest.param(
            Verdict("progressing", "WaitingForScheduler", "no map"),
            "stalled",
            "Conflict",
            False,
            id="progressing",
        ),
        pytest.param(
            Verdict("stalled", "SchedulerTrap", "trap"),
            "stalled",
            "SchedulerTrap",
            True,
            id="stalled",
        ),
    ],
)
def test_a_foreign_object_stalls_the_policy(
    base: Verdict, state: str, reason: str, says_both: bool
) -> None:
    taken = ("ValidatingAdmissionPolicy p.pod-contract.tessera.io",)
    found = admission.with_conflicts(base, taken, WHO)
    assert (found.state, found.reason) == (state, reason)
    assert taken[0] in found.message and "not Tessera's" in found.message
    assert (base.message in found.message) == says_both
    assert admission.with_conflicts(base, (), WHO) is base
