"""A pod contract's objects deleted or edited by hand are restored at once, not at the resync.

A cluster admin cleaning up admission policies deletes Tessera's binding, or "fixes" the
ValidatingAdmissionPolicy by hand. Tessera watches both kinds (its own, by the managed-by
label) and wakes the SharingPolicy named in ``tessera.io/declared-by``. The operator runs
here with a resync far longer than the test's deadlines, so only that wake-up can restore
them in time (before the fix nothing did until the next timed pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube, Obj
from tessera.api import constants as c
from tessera.domain import admission

from .conftest import OperatorProcess
from .helpers import eventually
from .sharing_support import SP, delete_policy, policy

NAME = "pcw-asc"
VAP = admission.name_of(NAME)
SLOW_RESYNC = "--resync-seconds=900"


@pytest.fixture
def slow_operator(
    control_plane: ControlPlane, operator: OperatorProcess, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The operator, run with a resync no deadline below reaches (the session's stops)."""
    private = OperatorProcess(
        control_plane, tmp_path / "operator.log", SLOW_RESYNC, kubeconfig=operator.kubeconfig
    )
    operator.kill()
    try:
        yield private.start()
    finally:
        private.stop()
        operator.start()
    private.assert_clean_log()


def _policy() -> Obj:
    scheduler = {
        "name": "HAMi",
        "podContract": "Warn",
        "hami": {"version": "v2.10.0"},  # no scheduler Deployment here: version declared
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "SharingPolicy",
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: "pcw-pool"}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": True},
            "scheduler": scheduler,
        },
    }


def _get(kube: Kube, collection: str) -> Obj | None:
    return kube.get_or_none(f"{collection}/{VAP}")


def _restored(kube: Kube, collection: str, holds: Callable[[Obj], bool], what: str) -> Obj:
    """The object, once Tessera's again and ``holds`` of it (the API server's own status
    writes move its resourceVersion too, so the content is what tells)."""

    def probe() -> Obj | None:
        found = _get(kube, collection)
        if found is None or not admission.owned(found, f"SharingPolicy/{NAME}"):
            return None
        return found if holds(found) else None

    return eventually(probe, 60, what)


def _settled(kube: Kube) -> None:
    """Its generation observed with the contract named in status: the passes are done
    (Reconciling, waiting for a HAMi scheduler this cluster lacks; the contract is written)."""

    def probe() -> bool:
        obj = policy(kube, NAME) or {"metadata": {}}
        found = obj.get("status") or {}
        named = found.get("scheduler") or {}
        seen = found.get("observedGeneration") == obj["metadata"].get("generation")
        return bool(seen and named.get("admissionPolicy") == VAP)

    eventually(probe, 60, f"{NAME} Ready with {VAP} in status")


def _warns(obj: Obj) -> bool:
    return bool(obj["spec"]["validationActions"] == ["Warn"])


def test_a_deleted_or_edited_contract_object_is_restored_by_a_wake_up(
    kube: Kube, slow_operator: OperatorProcess
) -> None:
    kube.create(SP, _policy())
    try:
        _settled(kube)
        vap = _get(kube, admission.POLICIES)
        assert vap is not None and _get(kube, admission.BINDINGS) is not None
        wanted = vap["spec"]["validations"]
        assert len(wanted) > 1, wanted

        # the binding deleted by hand
        kube.delete(f"{admission.BINDINGS}/{VAP}")
        _restored(kube, admission.BINDINGS, _warns, "the deleted binding restored")

        # the policy's validations edited by hand (one kept)
        patch = {"spec": {"validations": wanted[:1]}}
        kube.patch(f"{admission.POLICIES}/{VAP}", patch, kind="merge")
        _restored(
            kube,
            admission.POLICIES,
            lambda o: bool(o["spec"]["validations"] == wanted),
            "the edited policy restored",
        )

        # the binding turned to Deny by hand
        patch = {"spec": {"validationActions": ["Deny"]}}
        kube.patch(f"{admission.BINDINGS}/{VAP}", patch, kind="merge")
        _restored(kube, admission.BINDINGS, _warns, "the edited binding restored")
    finally:
        if policy(kube, NAME) is not None:
            delete_policy(kube, NAME)
