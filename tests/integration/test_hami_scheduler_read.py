"""HAMi's scheduler reading what Tessera wrote, and files Tessera must not edit, on the real
control plane.

The stories: a platform engineer runs HAMi as its chart leaves it (``devcluster.schedulers``:
a real ``hami-scheduler`` Deployment whose pod KWOK runs — no binary; the config mounted by
subPath, read once at start). They apply a soft-slicing policy naming HAMi: Tessera writes
``hami-scheduler-device`` and says ``RestartPending`` — restarting nothing — until they run
``kubectl rollout restart``; a later hand edit of the file is pending again. HAMi installed
without ``--enable-ascend`` ignores ``vnpus``: a ``SchedulerTrap``. A file whose ``vnpus``
uses a merge key is refused with line and column and left as written, while a policy naming
another HAMi's map goes on to Ready. ``tessera plan`` shows the file's diff and the restart,
and exits 1 where it cannot answer (HAMi's version unknown).

The operator runs under its ServiceAccount with exactly config/rbac.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import fleet, gpunode, hami_ascend, schedulers
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c

from .conftest import Kubectl, OperatorProcess
from .helpers import condition, eventually, namespace
from .sharing_support import create_ascend_policy, delete_policy, policy, wait_ready

KEY = c.HAMI_SCHEDULER_CONFIGMAP_KEY
NS = c.HAMI_NAMESPACE
MAP = path_of("v1", "configmaps", "hami-scheduler-device", NS)
DEPLOYMENT = path_of("apps/v1", "deployments", "hami-scheduler", NS)
OTHER = "hami-two"  # a second HAMi install, in its own namespace
# A person's file whose vnpus entry takes its numbers from an anchor by a merge key.
MERGED = """\
defaults: &d
  aiCore: 20
  aiCPU: 7
vnpus:
  hamiVnpuCore: false
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    <<: *d
"""


@pytest.fixture(scope="module", autouse=True)
def plugin(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    namespace(kube, "gpu-operator")
    sim = hami_ascend.HamiAscendPlugin(kube).start()
    gpus = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start()
    yield
    gpus.stop()
    sim.stop()


def _nodes(kube: Kube, pool: str) -> None:
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-0", "Ascend310P3", 2, pool=pool, labels=on)])


def _policy(kube: Kube, name: str, pool: str, **hami: Any) -> None:
    scheduler: dict[str, Any] = {"name": "HAMi", **({"hami": hami} if hami else {})}
    ascend = {"softSlicing": True, "vDeviceCount": 4}
    create_ascend_policy(kube, name, pool, ascend, scheduler=scheduler)


def _said(kube: Kube, name: str, kind: str, reason: str) -> str | None:
    found = condition(policy(kube, name), kind)
    if found and found["status"] == "True" and found["reason"] == reason:
        return str(found["message"])
    return None


def _uids(kube: Kube) -> set[str]:
    return {p["metadata"]["uid"] for p in schedulers.pods(kube, NS, "hami-scheduler")}


def _text(kube: Kube, path: str = MAP) -> str:
    return str(kube.get(path)["data"][KEY])


def test_a_change_is_pending_until_hami_is_restarted_by_hand(kube: Kube, kubectl: Kubectl) -> None:
    schedulers.install_hami(kube)
    try:
        (first,) = schedulers.wait_running(kube, NS, "hami-scheduler")
        _nodes(kube, "hr-restart")
        _policy(kube, "hr-restart", "hr-restart")

        # Tessera wrote the file; the running pod read the old one: pending, nothing restarted
        message = eventually(
            lambda: _said(kube, "hr-restart", "Reconciling", "RestartPending"), 90, "pending"
        )
        assert "kubectl -n kube-system rollout restart deployment/hami-scheduler" in message
        assert yaml.safe_load(_text(kube))["vnpus"]["hamiVnpuCore"] is True
        assert policy(kube, "hr-restart")["status"]["scheduler"]["restartPending"] is True  # type: ignore[index]
        assert _uids(kube) == {first["metadata"]["uid"]}  # Tessera restarted nothing

        _restart_by_hand(kubectl)
        obj = wait_ready(kube, "hr-restart", 90)
        assert obj["status"]["scheduler"]["restartPending"] is False
        assert first["metadata"]["uid"] not in _uids(kube)

        # a person edits the file by hand: the running scheduler has not read that either
        kube.patch(
            MAP, {"data": {KEY: _text(kube).replace("defaultMemory: 0", "defaultMemory: 1")}}
        )
        eventually(
            lambda: _said(kube, "hr-restart", "Reconciling", "RestartPending"), 60, "pending again"
        )
        _restart_by_hand(kubectl)
        wait_ready(kube, "hr-restart", 90)

        # HAMi reinstalled without --enable-ascend: it ignores vnpus, Ascend pods stay Pending
        _set_command(kube, without="--enable-ascend=true")
        trap = eventually(lambda: _said(kube, "hr-restart", "Stalled", "SchedulerTrap"), 60, "trap")
        assert "without --enable-ascend" in trap and "310P3" in trap
    finally:
        if policy(kube, "hr-restart") is not None:
            delete_policy(kube, "hr-restart")
        schedulers.uninstall(kube)


def _restart_by_hand(kubectl: Kubectl) -> None:
    """``kubectl rollout restart``, as a person runs it. kubectl stamps the restart to the
    second and refuses a second one within that second, which a person simply runs again."""

    def restarted() -> bool:
        result = kubectl("-n", NS, "rollout", "restart", "deployment/hami-scheduler")
        assert result.returncode == 0 or "within the past second" in result.stderr, result.stderr
        return result.returncode == 0

    eventually(restarted, 10, "kubectl rollout restart deployment/hami-scheduler")


def _set_command(kube: Kube, *, without: str) -> None:
    obj = kube.get(DEPLOYMENT)
    containers = obj["spec"]["template"]["spec"]["containers"]
    for one in containers:
        one["command"] = [a for a in one.get("command") or [] if a != without]
    kube.patch(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": containers}}}})


def _stand_in(kube: Kube, ns: str, text: str) -> None:
    """A HAMi install in ``ns`` with no pod (replicas 0): its map and scheduler Deployment."""
    namespace(kube, ns)
    meta = {"name": "hami-scheduler-device", "namespace": ns}
    kube.create(path_of("v1", "configmaps", namespace=ns), {"metadata": meta, "data": {KEY: text}})
    extender = {
        "name": "vgpu-scheduler-extender",
        "image": "projecthami/hami:v2.10.0",
        "args": ["--enable-ascend=true"],
    }
    body = {
        "metadata": {"name": "hami-scheduler", "namespace": ns},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "hami-scheduler"}},
            "template": {
                "metadata": {"labels": {"app": "hami-scheduler"}},
                "spec": {"containers": [extender]},
            },
        },
    }
    kube.create(path_of("apps/v1", "deployments", namespace=ns), body)


def _remove(kube: Kube, ns: str) -> None:
    for path in (
        path_of("v1", "configmaps", "hami-scheduler-device", ns),
        path_of("apps/v1", "deployments", "hami-scheduler", ns),
    ):
        try:
            kube.delete(path)
        except ApiError as err:
            assert err.not_found


def test_a_merge_key_in_vnpus_is_refused_and_another_map_goes_on(kube: Kube) -> None:
    _stand_in(kube, "hr-alias", MERGED)
    _stand_in(kube, OTHER, "vnpus:\n  hamiVnpuCore: false\n  configs: []\n")
    merged_map = path_of("v1", "configmaps", "hami-scheduler-device", "hr-alias")
    other_map = path_of("v1", "configmaps", "hami-scheduler-device", OTHER)
    try:
        for pool in ("hr-alias", "hr-other"):
            _nodes(kube, pool)
        _policy(kube, "hr-alias", "hr-alias", **_names("hr-alias"))
        _policy(kube, "hr-other", "hr-other", **_names(OTHER))

        message = eventually(
            lambda: _said(kube, "hr-alias", "Stalled", "SchedulerConfigInvalid"), 60, "refused"
        )
        assert "line 9, column 5" in message and "merge key" in message, message
        assert "hr-alias/hami-scheduler-device (device-config.yaml)" in message
        assert _text(kube, merged_map) == MERGED  # left as the person wrote it
        wait_ready(kube, "hr-other", 90)  # one map's trouble is not every policy's
        assert yaml.safe_load(_text(kube, other_map))["vnpus"]["hamiVnpuCore"] is True

        # the person writes the numbers out: Tessera edits the file
        written_out = MERGED.replace("    <<: *d\n", "    aiCore: 20\n    aiCPU: 7\n")
        kube.patch(merged_map, {"data": {KEY: written_out}})
        wait_ready(kube, "hr-alias", 90)
        doc: Obj = yaml.safe_load(_text(kube, merged_map))
        assert doc["vnpus"]["hamiVnpuCore"] is True and doc["defaults"] == {
            "aiCore": 20,
            "aiCPU": 7,
        }
        delete_policy(kube, "hr-alias")
        assert _text(kube, merged_map) == written_out
    finally:
        for name in ("hr-alias", "hr-other"):
            if policy(kube, name) is not None:
                delete_policy(kube, name)
        _remove(kube, "hr-alias")
        _remove(kube, OTHER)


def _names(ns: str) -> dict[str, Any]:
    return {
        "configMap": {"namespace": ns, "name": "hami-scheduler-device"},
        "deployment": {"namespace": ns, "name": "hami-scheduler"},
    }


def test_plan_previews_hamis_config_and_errs_where_it_cannot_answer(
    kube: Kube, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """``tessera plan`` of a soft-slicing policy naming a HAMi install: the diff of its
    device-config.yaml and the restart it needs; HAMi's version unknown: exit 1."""
    ns, pool = "hr-plan", "hr-plan"
    text = "vnpus:\n  hamiVnpuCore: false\n  configs: []\n"
    _stand_in(kube, ns, text)
    try:
        _nodes(kube, pool)
        manifest = tmp_path / "policy.yaml"
        manifest.write_text(yaml.safe_dump(_manifest("hr-plan", pool, **_names(ns))))
        code, out = _plan(control_plane, manifest)
        assert code == 2, out
        assert f"{ns}/hami-scheduler-device/device-config.yaml (planned)" in out, out
        assert "-  hamiVnpuCore: false" in out and "+  hamiVnpuCore: true" in out, out
        assert "chipName: 310P3" in out, out
        assert f"kubectl -n {ns} rollout restart deployment/hami-scheduler" in out, out

        # HAMi's image without a version tag and none declared: the plan cannot answer
        deployment = path_of("apps/v1", "deployments", "hami-scheduler", ns)
        containers = kube.get(deployment)["spec"]["template"]["spec"]["containers"]
        containers[0]["image"] = "projecthami/hami:latest"
        kube.patch(deployment, {"spec": {"template": {"spec": {"containers": containers}}}})
        code, out = _plan(control_plane, manifest)
        assert code == 1, out
        assert "SchedulerVersionUnknown" in out, out
        assert _text(kube, path_of("v1", "configmaps", "hami-scheduler-device", ns)) == text
    finally:
        _remove(kube, ns)


def _manifest(name: str, pool: str, **hami: Any) -> Obj:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        "backend": "Exclusive",
        "ascend": {"softSlicing": True, "vDeviceCount": 4},
        "scheduler": {"name": "HAMi", "hami": hami},
        "rollout": {"maxUnavailable": 1},
    }
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "SharingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _plan(control_plane: ControlPlane, manifest: Path) -> tuple[int, str]:
    run = [sys.executable, "-m", "tessera.cli.main", "plan", "-f", str(manifest)]
    done = subprocess.run(
        [*run, f"--kubeconfig={control_plane.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout + done.stderr
