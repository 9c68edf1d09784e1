"""Which writes one SharingPlan makes when the device-plugin ConfigMap cannot be written.

HAMi's entries name no device-plugin key, so a cluster without the GPU
Operator's namespace (Ascend nodes only) still gets them; node labels, which
must name a key that exists, wait. The API server is a recording stand-in here;
tests/integration/test_ascend_sharing.py runs the same against a real one.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from sharing_builders import gpu_node, npu_node, policy

from tessera.adapters.kube import ApiError, Kube
from tessera.api import constants as c
from tessera.controllers.runtime import Context
from tessera.controllers.sharing.apply import apply
from tessera.controllers.sharing.observe import ConfigDocument
from tessera.domain.sharing import planning

PLUGIN = f"/api/v1/namespaces/gpu-operator/configmaps/{c.DEVICE_PLUGIN_CONFIGMAP_NAME}"
ASCEND_NEW = "/api/v1/namespaces/kube-system/configmaps"


class Recording:
    """Answers every write; a path under a missing namespace is 404, as the API server says."""

    def __init__(self, missing: str | None) -> None:
        self.missing = missing
        self.landed: list[tuple[str, str]] = []

    def _write(self, verb: str, path: str) -> dict[str, Any]:
        if self.missing and f"/namespaces/{self.missing}/" in path:
            raise ApiError(404, "NotFound", f'namespaces "{self.missing}" not found')
        self.landed.append((verb, path))
        return {}

    def patch(self, path: str, body: Any, kind: str = "merge") -> dict[str, Any]:
        return self._write("patch", path)

    def create(self, path: str, body: Any) -> dict[str, Any]:
        return self._write("create", path)


@pytest.mark.parametrize(
    ("missing", "landed", "writes"),
    [
        pytest.param(
            None,
            [("patch", PLUGIN), ("patch", "/api/v1/nodes/g1"), ("create", ASCEND_NEW)],
            3,
            id="gpu-operator-installed",
        ),
        pytest.param("gpu-operator", [("create", ASCEND_NEW)], 1, id="ascend-only-cluster"),
    ],
)
def test_hami_entries_do_not_wait_for_the_device_plugin_configmap(
    missing: str | None, landed: list[tuple[str, str]], writes: int
) -> None:
    sp = policy("p", ascend={"softSlicing": True, "vDeviceCount": 4})
    seen = planning.SharingObserved((gpu_node("g1"), npu_node("a1")))
    plan = planning.plan([sp], seen)
    assert plan.hami_ascend.managed.keys() == {"a1"} and plan.device_plugin.labels
    kube = Recording(missing)
    nvidia = ConfigDocument("kube-system", c.HAMI_NVIDIA_CONFIGMAP_NAME, "config.json", None)
    ascend = ConfigDocument("kube-system", c.HAMI_ASCEND_CONFIGMAP_NAME, "node-config.yaml", None)
    applied = apply(Context(cast(Kube, kube)), plan, nvidia, ascend)
    assert applied.writes == writes
    assert applied.plugin_map is (missing is None)  # the caller announces only what landed
    assert kube.landed == landed
