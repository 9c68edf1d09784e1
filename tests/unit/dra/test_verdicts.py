"""A declarer's conditions after a class sync; a DRA pool's status.deviceClasses."""

from __future__ import annotations

import pytest
from dra_builders import LAYOUT_B, policy, pool

from builders.dra import ResourceSliceWrapper
from tessera.domain.base.conditions import Verdict
from tessera.domain.dra import desired_classes
from tessera.domain.dra.verdicts import ClassesSynced, pool_classes, pool_verdict

ROLLING = Verdict("progressing", "RollingOut", "1 of 2 nodes updated")
STUCK = Verdict("stalled", "NoNodes", "no node")
WAITING = Verdict("progressing", "WaitingForDriver", "node(s) n2 ...; a layout change waits")
MIG = "mig-1g.10gb.tessera.io"
DESIRED = desired_classes(
    {"p": pool(LAYOUT_B)}, {"s": policy("p", "MPS"), "ok": policy("p", "Exclusive")}
)
SLICES = [ResourceSliceWrapper("n1").mig(0, "1g.10gb").mig(0, "1g.10gb", 1).gpu(1).obj()]


@pytest.mark.parametrize(
    ("synced", "who", "want"),
    [
        pytest.param(ClassesSynced(DESIRED), "NodePoolGeometry/p", None, id="fine"),
        pytest.param(
            ClassesSynced(DESIRED), "SharingPolicy/s", ("InvalidConfig", "MPSSupport"), id="refused"
        ),
        pytest.param(
            ClassesSynced(DESIRED, conflicts={MIG: ("NodePoolGeometry/p",)}),
            "NodePoolGeometry/p",
            ("Conflict", f"DeviceClass {MIG} exists and is not Tessera's"),
            id="conflict-names-the-class",
        ),
        pytest.param(
            ClassesSynced(DESIRED, conflicts={MIG: ("NodePoolGeometry/p",)}),
            "SharingPolicy/ok",
            None,
            id="conflict-only-for-its-declarers",
        ),
        pytest.param(
            ClassesSynced(
                DESIRED, dropped={MIG: "spec.extendedResourceName (DRAExtendedResource)"}
            ),
            "NodePoolGeometry/p",
            ("FieldDropped", "DRAExtendedResource"),
            id="dropped-field",
        ),
    ],
)
def test_verdict(synced: ClassesSynced, who: str, want: tuple[str, str] | None) -> None:
    found = synced.verdict(who)
    if want is None:
        assert found is None
        return
    assert found is not None and found.state == "stalled"
    assert (found.reason, want[1] in found.message) == (want[0], True), found.message


@pytest.mark.parametrize(
    ("nodes", "base", "want"),
    [
        pytest.param(["n1"], ROLLING, ("progressing", "RollingOut"), id="driver-everywhere"),
        pytest.param(
            ["n1", "n2"], ROLLING, ("progressing", "WaitingForDriver"), id="one-node-without"
        ),
        pytest.param(["n2"], STUCK, ("stalled", "NoNodes"), id="stalled-stays-stalled"),
        pytest.param([], STUCK, ("stalled", "NoNodes"), id="no-node"),
        pytest.param(
            ["n1"], WAITING, ("progressing", "WaitingForDriver"), id="the-rollouts-wait-kept"
        ),
    ],
)
def test_pool_verdict(nodes: list[str], base: Verdict, want: tuple[str, str]) -> None:
    found = pool_verdict(ClassesSynced(DESIRED), "p", SLICES, nodes, base)
    assert (found.state, found.reason) == want
    if found.reason == "WaitingForDriver":
        assert "n2" in found.message and "n1" not in found.message
    if base is WAITING:  # the rollout's own words (the change that waits) are kept
        assert found.message == WAITING.message


def test_pool_classes_count_devices_on_its_nodes() -> None:
    listed = pool_classes(ClassesSynced(DESIRED), "p", SLICES, ["n1"])
    assert listed == [{"name": MIG, "selects": "1g.10gb", "devices": 2}]
    assert pool_classes(ClassesSynced(DESIRED), "p", SLICES, ["n9"])[0]["devices"] == 0
