"""The pool decides the path: a policy on a DRA pool writes no device-plugin key nor label."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sharing_builders import gpu_node, policy

from builders import SharingPolicyWrapper
from tessera.api.v1alpha1.common import LabelSelector
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.sharing import planning, status
from tessera.domain.sharing.assignment import Policy


@pytest.mark.parametrize(
    ("backend", "applied", "labels"),
    [
        pytest.param("MPS", None, [], id="fresh-dra-node-untouched"),
        pytest.param("TimeSlicing", None, [], id="time-slicing-untouched"),
        pytest.param(
            "Exclusive", "ts-old", [("n1", "default")], id="tessera-old-label-released-only"
        ),
    ],
)
def test_policy_on_dra_pool_writes_no_device_plugin_config(
    backend: str, applied: str | None, labels: list[tuple[str, str]]
) -> None:
    on_dra = replace(policy("s", backend), dra_pool=True)
    node = gpu_node("n1", config=applied, applied=applied)
    plan = planning.plan([on_dra], planning.SharingObserved((node,), {}), cleared=frozenset({"n1"}))
    cm = plan.device_plugin
    assert plan.results["s"].key is None
    assert plan.results["s"].content is None
    assert all(not key.startswith("s-") for key in cm.data_patch()["data"])
    assert [(c.node, c.patch()["metadata"]["labels"][
        "nvidia.com/device-plugin.config"
    ]) for c in cm.labels] == labels  # fmt: skip
    assert plan.hami_nvidia.patch == ()
    assert status.summarize(plan, "s", [node]).config_key == ""


def test_same_policy_on_a_device_plugin_pool_writes_its_key_and_label() -> None:
    seen = planning.SharingObserved((gpu_node("n1"),), {})
    plan = planning.plan([policy("s", "MPS")], seen, cleared=frozenset({"n1"}))
    assert plan.results["s"].key is not None
    assert [c.node for c in plan.device_plugin.labels] == ["n1"]


def test_spec_dra_on_a_device_plugin_pool_is_refused_naming_the_pool() -> None:
    spec = (
        SharingPolicyWrapper("s")
        .pool("a")
        .backend("MPS")
        .spec(nodeSelector=None, poolRef={"name": "a"}, dra={"mps": {}})
    )
    raw = {k: v for k, v in spec.obj()["spec"].items() if v is not None}
    found = Policy("s", SharingPolicySpec.model_validate(raw), LabelSelector())
    plan = planning.plan([found], planning.SharingObserved((gpu_node("n1"),), {}))
    errors = plan.results["s"].errors
    assert [e.field for e in errors] == ["spec.dra"]
    assert "pool a has allocation: DevicePlugin" in errors[0].rule
    assert "spec.mps instead" in errors[0].rule
    assert plan.device_plugin.labels == ()
