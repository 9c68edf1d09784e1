"""Observed classes against the desired ones; what the API server stored against what was sent."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from dra_builders import LAYOUT_B, policy, pool

from builders.dra import DeviceClassWrapper
from tessera.domain.dra import ClassProblem, desired_classes, diff, dropped, dropped_message

MANAGED = {"app.kubernetes.io/managed-by": "tessera"}
DESIRED = desired_classes({"p": pool(LAYOUT_B)}, {})
MIG = DESIRED.classes["mig-1g.10gb.tessera.io"]


def stored(
    name: str, *, by: str = "NodePoolGeometry/p", spec: Any = None, mine: bool = True
) -> dict[str, Any]:
    built = DeviceClassWrapper(name).meta(resourceVersion="7")
    if mine:
        built.labels(MANAGED).annotation("tessera.io/declared-by", by)
    return built.spec(spec if spec is not None else MIG.spec()).obj()


@pytest.mark.parametrize(
    ("observed", "creates", "updates", "deletes", "conflicts"),
    [
        pytest.param([], ["mig-1g.10gb.tessera.io"], [], [], {}, id="create"),
        pytest.param([stored("mig-1g.10gb.tessera.io")], [], [], [], {}, id="converged"),
        pytest.param(
            [stored("mig-1g.10gb.tessera.io", spec={"selectors": []})],
            [],
            ["mig-1g.10gb.tessera.io"],
            [],
            {},
            id="spec-drift-updated",
        ),
        pytest.param(
            [stored("mig-1g.10gb.tessera.io", by="NodePoolGeometry/old")],
            [],
            ["mig-1g.10gb.tessera.io"],
            [],
            {},
            id="declared-by-updated",
        ),
        pytest.param(
            [stored("mig-1g.10gb.tessera.io"), stored("gpu.tessera.io")],
            [],
            [],
            ["gpu.tessera.io"],
            {},
            id="undeclared-deleted",
        ),
        pytest.param(
            [stored("mig-1g.10gb.tessera.io", mine=False), stored("other", mine=False)],
            [],
            [],
            [],
            {"mig-1g.10gb.tessera.io": ("NodePoolGeometry/p",)},
            id="hand-made-collision-is-conflict-and-untouched",
        ),
    ],
)
def test_diff(
    observed: list[dict[str, Any]],
    creates: list[str],
    updates: list[str],
    deletes: list[str],
    conflicts: dict[str, tuple[str, ...]],
) -> None:
    changes = diff(DESIRED, observed)
    assert [c.name for c in changes.create] == creates
    assert [c.name for c, version in changes.update] == updates
    assert all(version == "7" for _, version in changes.update)
    assert [name for name, _ in changes.delete] == deletes
    assert dict(changes.conflicts) == conflicts


def test_refused_policy_keeps_its_classes() -> None:
    held = desired_classes({"p": pool()}, {"s": policy("p", "MPS")})  # gate off: refused
    old = stored("s.gpu.sharing.tessera.io", by="SharingPolicy/s")
    assert diff(held, [old]).delete == ()
    fixed = desired_classes({"p": pool(mps=True)}, {"s": policy("p", "MPS")})
    assert [c.name for c, _ in diff(fixed, [old]).update] == ["s.gpu.sharing.tessera.io"]


@pytest.mark.parametrize(
    ("sent", "kept", "want"),
    [
        pytest.param({"selectors": [1]}, {"selectors": [1]}, (), id="all-kept"),
        pytest.param(
            {"selectors": [1], "extendedResourceName": "nvidia.com/gpu"},
            {"selectors": [1]},
            ("spec.extendedResourceName",),
            id="alpha-field-dropped",
        ),
        pytest.param(
            {"config": [{"opaque": {"driver": "d", "parameters": {"a": 1}}}]},
            {"config": [{"opaque": {"driver": "d"}}]},
            ("spec.config[0].opaque.parameters",),
            id="nested",
        ),
        pytest.param({"config": [1, 2]}, {"config": [1]}, ("spec.config",), id="list-shortened"),
    ],
)
def test_dropped(sent: dict[str, Any], kept: dict[str, Any], want: tuple[str, ...]) -> None:
    assert dropped(sent, kept) == want


def test_dropped_message_names_field_and_gate() -> None:
    text = dropped_message("gpu.tessera.io", ["spec.extendedResourceName"])
    assert "spec.extendedResourceName" in text
    assert "DRAExtendedResource" in text


def test_a_converged_cluster_of_a_thousand_pools_needs_no_write() -> None:
    pools = {f"p{i}": pool(LAYOUT_B if i % 3 else None, mps=True) for i in range(1000)}
    policies = {
        f"s{i}": policy(f"p{i}", "MPS", mps={"defaultActiveThreadPercentage": 20})
        for i in range(1000)
    }
    policies |= {f"t{i}": policy(f"p{i}", "Exclusive") for i in range(0, 1000, 7)}
    desired = desired_classes(pools, policies)
    observed = [
        {**c.manifest(), "metadata": {**c.metadata(), "resourceVersion": "1"}}
        for c in desired.classes.values()
    ]
    again = desired_classes(dict(reversed(pools.items())), policies)  # order does not matter
    assert diff(again, observed).writes == 0
    assert len(desired.classes["mig-1g.10gb.tessera.io"].declared_by) == 666


def test_a_shared_class_keeps_its_held_declarer() -> None:
    """Pools a and b both declare mig-1g.10gb; b's spec no longer parses (held): the class
    keeps naming b, so it is not deleted once a stops declaring it."""
    bad = {"NodePoolGeometry/b": (ClassProblem("InvalidSpec", "spec", "does not parse"),)}
    both = stored("mig-1g.10gb.tessera.io", by="NodePoolGeometry/a,NodePoolGeometry/b")
    with_a = replace(desired_classes({"a": pool(LAYOUT_B)}, {}), problems=bad)
    assert diff(with_a, [both]).writes == 0
    a_gone = replace(desired_classes({}, {}), problems=bad)
    assert diff(a_gone, [both]).delete == ()
