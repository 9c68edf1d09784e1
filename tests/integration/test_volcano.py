"""Volcano's deviceshare plugin wired from a SharingPolicy, on the real control plane.

The story: a platform engineer runs Volcano (its ``volcano-scheduler-configmap`` holds an
upstream-style ``volcano-scheduler.conf`` with other plugins, ``configurations`` and
comments; a ``volcano-scheduler`` Deployment of ``volcanosh/vc-scheduler``) and HAMi
(``kube-system/hami-scheduler-device`` with the v2.10 chart's 310P3 entry), and applies a
SharingPolicy for an Ascend pool naming Volcano. Tessera edits only the deviceshare
arguments, writes the geometries map they point at, and restarts Volcano (Automatic) or
says a restart is pending (Manual). Under KWOK the scheduler pods just run: no Volcano
binary, so a restart is seen as pods replaced, counted by an outside observer.

Each test has its own Volcano namespace (the RBAC grants the default ConfigMap names in any
namespace) and its own Ascend pool; the operator runs under its own ServiceAccount.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import DeploymentWrapper
from devcluster import fleet, hami_ascend
from devcluster.controlplane import ControlPlane
from devcluster.scheduler_texts import HAMI_VNPUS_CONFIG
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain.schedulers.volcano import conf as v

from .conftest import Kubectl, OperatorProcess
from .helpers import app_pods, eventually, namespace, wait_running
from .sharing_support import SP, delete_policy, event_with, policy, wait_ready

CONF = """\
# volcano-scheduler.conf as the team keeps it
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates            # filters before scoring
  - name: deviceshare
    arguments:
      deviceshare.NodeLockEnable: true
      deviceshare.SchedulePolicy: spread   # was: spread across cards
  - name: proportion
  - name: nodeorder
  - name: binpack
configurations:
- name: init-params
  arguments: {"grace-over-time":"900","presetVirtualDevice":"false"}
"""
SCHEDULER = "volcano-scheduler"
VOLCANO_CM = "volcano-scheduler-configmap"
GEOMETRIES = "tessera-volcano-device-config"
HAMI = ("kube-system", "hami-scheduler-device")


@pytest.fixture(scope="module", autouse=True)
def hami(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    """HAMi installed: its scheduler's device config and Deployment, its Ascend plugin."""
    made = [
        _create(kube, _configmap(*HAMI, c.HAMI_SCHEDULER_CONFIGMAP_KEY, HAMI_VNPUS_CONFIG)),
        _create(kube, _deployment("kube-system", "hami-scheduler", "projecthami/hami:v2.10.0")),
    ]
    plugin = hami_ascend.HamiAscendPlugin(kube).start()
    yield
    plugin.stop()
    for path in made:
        kube.delete(path)


@pytest.fixture(autouse=True)
def own_policies(kube: Kube) -> Iterator[None]:
    """Each test's policies go when it ends: HAMi's hamiVnpuCore is one switch for every
    policy naming its map, so a soft-slicing test must not meet another test's policies."""
    yield
    for obj in kube.list(SP):
        if obj["metadata"]["name"].startswith("vc-"):
            delete_policy(kube, obj["metadata"]["name"])


def _create(kube: Kube, obj: Obj) -> str:
    meta = obj["metadata"]
    version, plural = (
        ("v1", "configmaps") if obj["kind"] == "ConfigMap" else ("apps/v1", "deployments")
    )
    try:
        kube.create(path_of(version, plural, namespace=meta["namespace"]), obj)
    except ApiError as err:
        if not err.conflict:
            raise
    return path_of(version, plural, meta["name"], meta["namespace"])


def _configmap(ns: str, name: str, key: str, text: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {key: text},
    }


def _deployment(ns: str, name: str, image: str) -> Obj:
    obj = DeploymentWrapper(name).obj()
    obj["metadata"]["namespace"] = ns
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return obj


def _volcano(kube: Kube, ns: str, tag: str = "v1.16.0", conf: str | None = CONF) -> None:
    """Volcano installed in ``ns``: its scheduler config (unless None) and Deployment, running."""
    namespace(kube, ns)
    if conf is not None:
        _create(kube, _configmap(ns, VOLCANO_CM, c.VOLCANO_SCHEDULER_CONFIGMAP_KEY, conf))
    _create(kube, _deployment(ns, SCHEDULER, f"volcanosh/vc-scheduler:{tag}"))
    wait_running(kube, ns, SCHEDULER, 1)


def _pool(kube: Kube, pool: str) -> None:
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    fleet.create_nodes(kube, [fleet.NodeSpec(f"{pool}-0", "Ascend310P3", 2, pool=pool, labels=on)])


def _policy(kube: Kube, name: str, pool: str, ns: str, soft: bool = False, **volcano: Any) -> None:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        "backend": "Exclusive",
        "ascend": {"softSlicing": soft},
        "scheduler": {
            "name": "Volcano",
            "volcano": {
                "configMap": {"namespace": ns, "name": VOLCANO_CM},
                "deployment": {"namespace": ns, "name": SCHEDULER},
                **volcano,
            },
        },
    }
    body = {"apiVersion": "tessera.io/v1alpha1", "kind": "SharingPolicy"}
    kube.create(SP, {**body, "metadata": {"name": name}, "spec": spec})


def _conf(kube: Kube, ns: str) -> str | None:
    cm = kube.get_or_none(path_of("v1", "configmaps", VOLCANO_CM, ns))
    return ((cm or {}).get("data") or {}).get(c.VOLCANO_SCHEDULER_CONFIGMAP_KEY)


def _geometries(kube: Kube, ns: str) -> Obj | None:
    return kube.get_or_none(path_of("v1", "configmaps", GEOMETRIES, ns))


def _others(text: str) -> list[str]:
    """The conf's lines less deviceshare arguments Tessera owns."""
    owned = tuple(f"{k}:" for k in v.OWNED)
    return [line for line in text.splitlines() if not line.strip().startswith(owned)]


def _reason(kube: Kube, name: str, reason: str) -> Obj | None:
    """The policy once a condition of its current generation carries ``reason``."""
    obj = policy(kube, name)
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        current = cond.get("observedGeneration") == (obj or {})["metadata"]["generation"]
        if cond.get("reason") == reason and cond["status"] == "True" and current:
            return obj
    return None


def _wait_reason(kube: Kube, name: str, reason: str, timeout: float = 60) -> Obj:
    try:
        return eventually(lambda: _reason(kube, name, reason), timeout, f"{name}: {reason}")
    except AssertionError as err:
        status = (policy(kube, name) or {}).get("status")
        raise AssertionError(f"{err}\nstatus: {json.dumps(status, indent=1)}") from None


def _message(obj: Obj, reason: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("reason") == reason:
            return str(cond.get("message", ""))
    return ""


class PodCount:
    """Every scheduler pod ever seen in a namespace (an outside observer of restarts)."""

    def __init__(self, kube: Kube, ns: str) -> None:
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        self.informer = Informer(
            kube, path_of("v1", "pods", namespace=ns), self._pod, name=f"pods-{ns}"
        )

    def _pod(self, kind: str, pod: dict[str, Any]) -> None:
        if (pod["metadata"].get("labels") or {}).get("app") == SCHEDULER:
            with self._lock:
                self.seen.add(pod["metadata"]["uid"])

    def __enter__(self) -> PodCount:
        self.informer.start()
        eventually(self.informer.synced.is_set, what="pod informer synced")
        return self

    def __exit__(self, *_: object) -> None:
        self.informer.stop()

    def count(self) -> int:
        with self._lock:
            return len(self.seen)


def test_automatic_restart_writes_only_deviceshare_and_restarts_once(kube: Kube) -> None:
    ns, pool, name = "vc-auto", "vc-auto", "vc-auto"
    _pool(kube, pool)
    _volcano(kube, ns)
    with PodCount(kube, ns) as pods:
        assert pods.count() == 1
        _policy(kube, name, pool, ns, weight=10, restart="Automatic")
        obj = wait_ready(kube, name, timeout=90)
        text = _conf(kube, ns)
        assert text is not None
        assert v.arguments(text) == {
            "deviceshare.NodeLockEnable": True,  # the team's own argument, kept
            v.ENABLE_VNPU: True,
            v.POLICY: "binpack",
            v.WEIGHT: 10,
            v.CM_NAME: GEOMETRIES,
            v.CM_NAMESPACE: ns,
        }
        assert _others(text) == _others(CONF)  # every other line, comments too, byte for byte
        geometries = _geometries(kube, ns)
        assert geometries is not None
        doc = yaml.safe_load(geometries["data"]["device-config.yaml"])
        chip = doc["vnpus"]["configs"][0]  # v1.16: the wrapper
        assert doc["vnpus"]["hamiVnpuCore"] is False and chip["chipName"] == "310P3"
        assert "resourceCoreName" not in chip and "memoryFactor" not in chip  # Volcano ignores them
        scheduler = obj["status"]["scheduler"]
        assert scheduler["restartPending"] is False
        assert f"{ns}/{VOLCANO_CM}" in scheduler["configMaps"]
        assert scheduler["versions"]["volcano"] == "v1.16.0 (image)"
        eventually(lambda: event_with(kube, name, "SchedulerRestarted", ns), 30, "restart Event")
        live = app_pods(kube, ns, SCHEDULER)
        assert pods.count() == 2 and len(live) == 1  # replaced once
        # a later pass (a new generation) that changes nothing of Volcano's restarts nothing
        kube.patch(f"{SP}/{name}", {"spec": {"rollout": {"maxUnavailable": 2}}})
        wait_ready(kube, name)
        assert _conf(kube, ns) == text
        assert pods.count() == 2


def test_manual_restart_is_pending_until_the_user_restarts(kube: Kube, kubectl: Kubectl) -> None:
    ns, pool, name = "vc-manual", "vc-manual", "vc-manual"
    _pool(kube, pool)
    _volcano(kube, ns)
    with PodCount(kube, ns) as pods:
        _policy(kube, name, pool, ns, weight=10)
        obj = _wait_reason(kube, name, "RestartPending", 90)
        assert "rollout restart deployment/volcano-scheduler" in _message(obj, "RestartPending")
        assert obj["status"]["scheduler"]["restartPending"] is True
        assert v.arguments(_conf(kube, ns) or "")[v.CM_NAME] == GEOMETRIES
        assert pods.count() == 1  # Tessera restarted nothing
        kubectl.ok("-n", ns, "rollout", "restart", f"deployment/{SCHEDULER}")
        obj = wait_ready(kube, name, timeout=90)
        assert obj["status"]["scheduler"]["restartPending"] is False
        assert pods.count() == 2
    # the policy goes: the team's conf comes back byte for byte, Tessera's map goes
    delete_policy(kube, name)
    assert _conf(kube, ns) == CONF
    assert _geometries(kube, ns) is None
    notes = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))["metadata"].get("annotations")
    assert not any(k.startswith("tessera.io/") for k in notes or {})


def test_volcano_1_15_with_soft_slicing_is_a_trap(kube: Kube) -> None:
    ns, pool, name = "vc-old", "vc-old", "vc-old"
    _pool(kube, pool)
    _volcano(kube, ns, tag="v1.15.0")
    _policy(kube, name, pool, ns, soft=True, weight=10)
    obj = _wait_reason(kube, name, "SchedulerTrap", 90)
    assert "needs Volcano v1.16" in _message(obj, "SchedulerTrap")
    geometries = _geometries(kube, ns)
    assert geometries is not None  # written all the same, in the form v1.15 reads: a list
    doc = yaml.safe_load(geometries["data"]["device-config.yaml"])
    assert isinstance(doc["vnpus"], list) and doc["vnpus"][0]["chipName"] == "310P3"
    delete_policy(kube, name)
    assert _geometries(kube, ns) is None


def test_two_policies_disagreeing_are_both_in_conflict(kube: Kube) -> None:
    ns = "vc-clash"
    _pool(kube, "vc-clash-a")
    _pool(kube, "vc-clash-b")
    namespace(kube, ns)
    _policy(kube, "vc-clash-a", "vc-clash-a", ns, policy="binpack", weight=10)
    _policy(kube, "vc-clash-b", "vc-clash-b", ns, policy="spread")
    # Volcano comes last: until its map and Deployment exist nothing is written
    # (WaitingForScheduler), so no pass can write a's ask before b exists, however slow the
    # machine. (Once written, a's settings would stay: a later disagreement writes nothing.)
    _volcano(kube, ns)
    for name, other in (("vc-clash-a", "vc-clash-b"), ("vc-clash-b", "vc-clash-a")):
        obj = _wait_reason(kube, name, "Conflict", 90)
        assert f"SharingPolicy {other} asks" in _message(obj, "Conflict")
    assert _conf(kube, ns) == CONF  # untouched
    assert _geometries(kube, ns) is None


def test_missing_conf_waits_and_creates_nothing_until_it_exists(kube: Kube) -> None:
    ns, pool, name = "vc-missing", "vc-missing", "vc-missing"
    _pool(kube, pool)
    _volcano(kube, ns, conf=None)
    _policy(kube, name, pool, ns, weight=10, restart="Automatic")
    obj = _wait_reason(kube, name, "WaitingForScheduler", 90)
    assert f"ConfigMap {ns}/{VOLCANO_CM}" in _message(obj, "WaitingForScheduler")
    assert _conf(kube, ns) is None and _geometries(kube, ns) is None
    # the engineer installs Volcano's config: Tessera goes on
    _create(kube, _configmap(ns, VOLCANO_CM, c.VOLCANO_SCHEDULER_CONFIGMAP_KEY, CONF))
    wait_ready(kube, name, timeout=90)
    assert _geometries(kube, ns) is not None


def test_unparseable_conf_is_left_untouched_and_says_where(kube: Kube) -> None:
    ns, pool, name = "vc-garbage", "vc-garbage", "vc-garbage"
    garbage = CONF.replace("  - name: proportion\n", "  - name: [proportion\n")
    _pool(kube, pool)
    _volcano(kube, ns, conf=garbage)
    before = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))
    _policy(kube, name, pool, ns, weight=10)
    obj = _wait_reason(kube, name, "SchedulerConfigInvalid", 90)
    assert "line 19, column 9" in _message(obj, "SchedulerConfigInvalid")
    after = kube.get(path_of("v1", "configmaps", VOLCANO_CM, ns))
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert _geometries(kube, ns) is None


def _plan(control_plane: ControlPlane, tmp_path: Path, *docs: Obj) -> tuple[int, str]:
    """``tessera plan -f`` of ``docs`` against the live cluster: (exit code, stdout + stderr)."""
    path = tmp_path / f"plan-{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    run = [sys.executable, "-m", "tessera.cli.main", "plan", "-f", str(path)]
    done = subprocess.run(
        [*run, f"--kubeconfig={control_plane.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


def _manifest(name: str, pool: str, ns: str, **volcano: Any) -> Obj:
    spec = {
        "nodeSelector": {"matchLabels": {c.POOL_LABEL: pool}},
        "backend": "Exclusive",
        "ascend": {"softSlicing": False},
        "scheduler": {
            "name": "Volcano",
            "volcano": {
                "configMap": {"namespace": ns, "name": VOLCANO_CM},
                "deployment": {"namespace": ns, "name": SCHEDULER},
                **volcano,
            },
        },
    }
    return {
        "apiVersion": "tessera.io/v1alpha1",
        "kind": "SharingPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_plan_previews_the_deviceshare_change_and_errs_where_it_cannot_answer(
    kube: Kube, control_plane: ControlPlane, tmp_path: Path
) -> None:
    ns, pool = "vc-plan", "vc-plan"
    _pool(kube, pool)
    _volcano(kube, ns)
    code, out = _plan(control_plane, tmp_path, _manifest("vc-plan", pool, ns))
    assert code == 2, out
    assert f"{ns}/{VOLCANO_CM}/volcano-scheduler.conf (planned)" in out
    assert "+      deviceshare.AscendHAMiVNPUEnable: true" in out
    assert "-      deviceshare.SchedulePolicy: spread   # was: spread across cards" in out
    assert f"{ns}/{GEOMETRIES}/device-config.yaml (planned)" in out
    assert "Volcano must be restarted to read the change" in out
    assert "ScheduleWeight is 0" in out  # binpack without weight: a trap note
    # a Volcano whose config the cluster does not hold: an error, never "no changes"
    namespace(kube, "vc-plan-none")
    code, out = _plan(control_plane, tmp_path, _manifest("vc-plan-none", pool, "vc-plan-none"))
    assert code == 1, out
    assert "WaitingForScheduler" in out and f"ConfigMap vc-plan-none/{VOLCANO_CM}" in out
    assert _conf(kube, ns) == CONF  # a plan writes nothing
