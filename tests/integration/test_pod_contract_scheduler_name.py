"""The pod contract asks for the schedulerName HAMi's scheduler was installed with.

HAMi's chart takes its scheduler name from a value (``schedulerName``) and passes it to its
Deployment as ``--scheduler-name``. A platform team that installed HAMi as ``hami-gpu``
declares a HAMi policy: Tessera's contract must ask pods for ``hami-gpu`` (asking for
``hami-scheduler`` would warn about — or, under Deny, refuse — every pod that HAMi can
schedule). When HAMi is re-installed under another name, the contract follows.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import pytest

from devcluster import schedulers
from tessera.adapters.kube import Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain import admission

from .conftest import OperatorProcess
from .helpers import eventually
from .sharing_support import SP, delete_policy, policy

NAME = "pcn-asc"
VAP = admission.name_of(NAME)
HAMI = path_of(
    "apps/v1", "deployments", schedulers.HAMI_DEPLOYMENT, namespace=schedulers.HAMI_NAMESPACE
)


@pytest.fixture
def hami(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    """HAMi's scheduler as its chart leaves it, with ``schedulerName: hami-gpu``."""
    schedulers.install_hami(kube)
    _rename(kube, "hami-gpu")
    yield
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)
    schedulers.uninstall(kube)


def _rename(kube: Kube, name: str) -> None:
    """The extender's ``--scheduler-name`` set to ``name`` (as ``helm upgrade`` would)."""
    found = kube.get(HAMI)
    containers = copy.deepcopy(found["spec"]["template"]["spec"]["containers"])
    for container in containers:
        if container["name"] == "vgpu-scheduler-extender":
            words = [w for w in container["command"] if not w.startswith("--scheduler-name")]
            container["command"] = [*words, f"--scheduler-name={name}"]
    patch = {"spec": {"template": {"spec": {"containers": containers}}}}
    kube.patch(HAMI, patch, kind="strategic")


def _policy() -> Obj:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "SharingPolicy",
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelector": {"matchLabels": {c.POOL_LABEL: "pcn-pool"}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": True},
            "scheduler": {"name": "HAMi", "podContract": "Warn"},
        },
    }


def _asks(kube: Kube, name: str) -> Obj:
    def probe() -> Obj | None:
        vap = kube.get_or_none(f"{admission.POLICIES}/{VAP}")
        text = json.dumps((vap or {}).get("spec"))
        return vap if f"need schedulerName: {name} " in text else None

    return eventually(probe, 60, f"{VAP} to ask for schedulerName {name}")


def test_the_contract_asks_for_the_name_hami_was_installed_with(kube: Kube, hami: None) -> None:
    kube.create(SP, _policy())
    vap = _asks(kube, "hami-gpu")
    assert "hami-scheduler" not in json.dumps(vap["spec"])

    _rename(kube, "hami-npu")  # re-installed under another name
    vap = _asks(kube, "hami-npu")
    assert "hami-gpu" not in json.dumps(vap["spec"])
