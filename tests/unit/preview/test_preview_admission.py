"""Pod contracts in a preview: each SharingPolicy's ValidatingAdmissionPolicy and binding,
created, updated, deleted, or a name Tessera does not own (exit 1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from preview_builders import T0, world

from builders import NodeWrapper, SharingPolicyWrapper
from devcluster import fleet
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain import admission, preview

VAP = "asc.pod-contract.tessera.io"


def _policy(contract: str = "Warn") -> dict[str, Any]:
    sched = {"name": "Volcano", "volcano": {}, "podContract": contract}
    built = SharingPolicyWrapper("asc").pool("npu").backend("Exclusive")
    return built.spec(ascend={"softSlicing": True}, scheduler=sched).obj()


def _nodes() -> list[dict[str, Any]]:
    specs = [fleet.NodeSpec(f"npu-{i}", "Ascend310P3", 2, pool="npu") for i in range(2)]
    return [NodeWrapper.simulated(s).obj() for s in specs]


def _stored(manifest: dict[str, Any], *, mine: bool = True) -> list[dict[str, Any]]:
    """The pod contract as the operator left it for ``manifest`` (or someone else's)."""
    spec = SharingPolicySpec.model_validate(manifest["spec"])
    found = admission.contract_of("asc", spec, ["310P3"])
    assert found is not None
    out = [copy.deepcopy(admission.policy(found)), copy.deepcopy(admission.binding(found))]
    for obj in out:
        obj["metadata"]["resourceVersion"] = "3"
        if not mine:
            obj["metadata"]["labels"] = {}
    return out if mine else out[:1]


def _changes(p: preview.Preview) -> list[tuple[str, str]]:
    return [(x.action, x.kind) for x in p.admission]


@pytest.mark.parametrize(
    ("live", "manifest", "changes"),
    [
        pytest.param(
            [],
            _policy(),
            [
                ("create", "ValidatingAdmissionPolicy"),
                ("create", "ValidatingAdmissionPolicyBinding"),
            ],
            id="new-policy",
        ),
        pytest.param([_policy()], _policy(), [], id="converged"),
        pytest.param(
            [_policy()],
            _policy("Deny"),
            [("update", "ValidatingAdmissionPolicyBinding")],
            id="deny",
        ),
        pytest.param(
            [_policy()],
            _policy("Off"),
            [
                ("delete", "ValidatingAdmissionPolicyBinding"),
                ("delete", "ValidatingAdmissionPolicy"),
            ],
            id="off",
        ),
    ],
)
def test_pod_contract_writes(
    live: list[dict[str, Any]], manifest: dict[str, Any], changes: list[tuple[str, str]]
) -> None:
    stored = [o for m in live for o in _stored(m)]
    result = preview.preview(world(*_nodes(), *live, *stored), [manifest], T0)
    assert _changes(result) == changes
    text = preview.render(result)
    for action, kind in changes:
        assert f"{action} {kind} {VAP}" in text
    if changes and changes[0][0] != "delete":
        assert "pods requesting huawei.com/Ascend310P" in text


def test_pruning_the_policy_deletes_its_pod_contract() -> None:
    live = _policy()
    cluster = world(*_nodes(), live, *_stored(live))
    result = preview.preview(cluster, [], T0, prune=True)
    assert _changes(result) == [
        ("delete", "ValidatingAdmissionPolicyBinding"),
        ("delete", "ValidatingAdmissionPolicy"),
    ]


def test_a_name_tessera_does_not_own_is_a_conflict() -> None:
    theirs = _stored(_policy(), mine=False)
    result = preview.preview(world(*_nodes(), *theirs), [_policy()], T0)
    assert result.admission == ()
    ours = [c for c in result.conflicts if c.startswith("ValidatingAdmissionPolicy")]
    assert ours == [
        f"ValidatingAdmissionPolicy {VAP} exists and is not Tessera's: SharingPolicy/asc would "
        "be Stalled, reason Conflict",
    ]  # (the world has no scheduler: the policy also waits for one, another line)


def test_a_second_policy_contradicting_the_first_removes_both_contracts() -> None:
    """A HAMi policy on the same chips as the Volcano one: both would be Stalled (Conflict),
    the written contract is deleted and none created."""
    live = _policy()
    other = SharingPolicyWrapper("asc-hami").pool("npu").backend("Exclusive")
    hami = other.spec(ascend={"softSlicing": True}, scheduler={"name": "HAMi"}).obj()
    result = preview.preview(world(*_nodes(), live, *_stored(live)), [live, hami], T0)
    assert _changes(result) == [
        ("delete", "ValidatingAdmissionPolicyBinding"),
        ("delete", "ValidatingAdmissionPolicy"),
    ]
    ours = [c for c in result.conflicts if "guards huawei.com/Ascend310P" in c]
    assert [c.split(":")[0] for c in ours] == [
        "SharingPolicy/asc would be Stalled, reason Conflict",
        "SharingPolicy/asc-hami would be Stalled, reason Conflict",
    ]
    assert "SharingPolicy asc-hami guards" in ours[0] and "schedulerName volcano here" in ours[0]
