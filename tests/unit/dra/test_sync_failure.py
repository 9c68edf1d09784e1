"""A failed DeviceClass sync is reported by the objects whose classes it concerns, only."""

from __future__ import annotations

import pytest

from tessera.domain.base import failures
from tessera.domain.base.failures import Failure
from tessera.domain.dra.verdicts import ClassesSynced, failure_for, holds_deletion

FORBIDDEN = Failure(403, 'deviceclasses.resource.k8s.io is forbidden: cannot "create"')
FAILED = ClassesSynced(
    owners=frozenset({"SharingPolicy/old", "NodePoolGeometry/dra"}), error=FORBIDDEN
)


@pytest.mark.parametrize(
    ("synced", "who", "on_dra", "reported"),
    [
        # the sync went through: nobody reports anything
        pytest.param(ClassesSynced(), "NodePoolGeometry/dra", True, False, id="synced"),
        # a DRA pool's classes may be unwritten: it reports the API's refusal
        pytest.param(FAILED, "NodePoolGeometry/dra", True, True, id="dra-pool"),
        # a device-plugin pool never fails because of DRA, even if classes still name it
        pytest.param(FAILED, "NodePoolGeometry/dra", False, False, id="device-plugin-pool"),
        pytest.param(FAILED, "NodePoolGeometry/gpus", False, False, id="unrelated-pool"),
        # a policy on a DRA pool reports it
        pytest.param(FAILED, "SharingPolicy/mps", True, True, id="policy-on-dra-pool"),
        # a policy moved off a DRA pool whose classes still exist: their deletion is its
        pytest.param(FAILED, "SharingPolicy/old", False, True, id="policy-with-classes-left"),
        # a device-plugin policy with no class: not concerned
        pytest.param(FAILED, "SharingPolicy/ts", False, False, id="device-plugin-policy"),
    ],
)
def test_failure_for(synced: ClassesSynced, who: str, on_dra: bool, reported: bool) -> None:
    assert (failure_for(synced, who, on_dra=on_dra) == FORBIDDEN) is reported


@pytest.mark.parametrize(
    ("status", "tries", "state"),
    [
        (403, 1, "stalled"),  # RBAC: only a person can fix it, Stalled at once
        (422, 1, "stalled"),
        (404, 1, "progressing"),  # resource.k8s.io/v1 not served (yet): retried
        (409, 1, "progressing"),  # kept changing under five attempts: retried
        (503, 1, "progressing"),
    ],
)
def test_reported_like_any_failed_call(status: int, tries: int, state: str) -> None:
    found = failure_for(
        ClassesSynced(error=Failure(status, "x")), "NodePoolGeometry/p", on_dra=True
    )
    assert found is not None
    assert failures.verdict(found, tries).state == state


@pytest.mark.parametrize(
    ("synced", "who", "waits"),
    [
        pytest.param(FAILED, "SharingPolicy/old", True, id="classes-left-wait"),
        pytest.param(FAILED, "SharingPolicy/never-written", False, id="no-class-no-wait"),
        pytest.param(ClassesSynced(owners=FAILED.owners), "SharingPolicy/old", False, id="synced"),
    ],
)
def test_holds_deletion(synced: ClassesSynced, who: str, waits: bool) -> None:
    assert holds_deletion(synced, who) is waits
