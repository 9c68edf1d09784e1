"""HAMi's scheduler config kept consistent with SharingPolicies, on the real API server.

The story: a platform engineer has HAMi installed — its scheduler Deployment
``kube-system/hami-scheduler`` (image ``projecthami/hami:<version>``; no binary runs under
KWOK, replicas 0) and its device config ``kube-system/hami-scheduler-device`` written by hand
(the shape of HAMi v2.10's chart, with comments and a chip entry of their own). They apply a
SharingPolicy with soft slicing on 310P3 nodes and ``scheduler: {name: HAMi}``: Tessera adds
the 310P3 ``vnpus`` entry and sets ``hamiVnpuCore``, every hand-written line kept; HAMi
downgraded to v2.8 gets the list form; the policy deleted gives the file back as written.
Bad input: no map (or no Deployment) is ``WaitingForScheduler`` and nothing is created; a file
that does not parse is left alone and reported with line and column; two policies wanting
different ``hamiVnpuCore`` are a ``Conflict`` on both. A person's entries of another HAMi
version's shape: ``vnpus`` kept as a list under v2.10 is reshaped (the one known shape change),
an entry HAMi would refuse (a quoted number) is ``SchedulerConfigUnloadable`` naming the entry
and the version, and nothing is written until the person fixes it; whatever Tessera writes,
the simulated HAMi scheduler of that version loads (``devcluster.hami_config``).

The operator runs under its ServiceAccount with exactly config/rbac (a verb missing there
fails these tests). HAMi's Ascend device plugin is simulated (``devcluster.hami_ascend``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devcluster import fleet, gpunode, hami_ascend, hami_config, hami_nvidia
from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c

from .conftest import OperatorProcess
from .helpers import condition, eventually, namespace
from .sharing_support import (
    SP,
    create_ascend_policy,
    create_policy,
    delete_policy,
    event_with,
    nodes,
    policy,
    wait_ready,
)

MAP = path_of("v1", "configmaps", c.HAMI_SCHEDULER_CONFIGMAP_NAME, c.HAMI_NAMESPACE)
DEPLOYMENT = path_of("apps/v1", "deployments", "hami-scheduler", c.HAMI_NAMESPACE)
KEY = c.HAMI_SCHEDULER_CONFIGMAP_KEY
# As a person wrote it: reference §1.6, a comment of theirs, and their own 910B3 entry.
HAND_WRITTEN = """\
# HAMi device config -- owned by the platform team (ticket OPS-1207)
nvidia:
  resourceCountName: nvidia.com/gpu
  resourceMemoryName: nvidia.com/gpumem
  resourceMemoryPercentageName: nvidia.com/gpumem-percentage
  resourceCoreName: nvidia.com/gpucores
  resourcePriorityName: nvidia.com/priority
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  migProfileAllowlist:
  - models: [ "A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB" ]
    profiles: [ "1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb" ]
vnpus:
  hamiVnpuCore: false
  configs:
  # our 910B3 boxes: tuned by hand, do not touch
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: huawei.com/Ascend910B3
    resourceMemoryName: huawei.com/Ascend910B3-memory
    resourceCoreName: huawei.com/Ascend910B3-core
    memoryAllocatable: 65536
    memoryCapacity: 65536
    aiCore: 20
    aiCPU: 7
    templates:
      - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
"""


@pytest.fixture(scope="module", autouse=True)
def plugin(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    """HAMi's device plugins, simulated; HAMi's scheduler objects go at the end."""
    namespace(kube, "gpu-operator")
    sim = hami_ascend.HamiAscendPlugin(kube).start()
    gpus = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.2).start()
    nvidia = hami_nvidia.HamiNvidiaPlugin(kube).start()  # on the gpu=on nodes
    yield
    nvidia.stop()
    gpus.stop()
    sim.stop()
    for path in (MAP, DEPLOYMENT):
        try:
            kube.delete(path)
        except ApiError as err:
            assert err.not_found


@pytest.fixture
def hami(kube: Kube) -> Iterator[None]:
    """HAMi as installed by hand: the scheduler Deployment (v2.10.0) and the config map."""
    _install_scheduler(kube, "v2.10.0")
    _write_map(kube, HAND_WRITTEN)
    yield
    for path in (MAP, DEPLOYMENT):
        try:
            kube.delete(path)
        except ApiError as err:
            assert err.not_found
    eventually(lambda: kube.get_or_none(MAP) is None, 30, "HAMi's config map gone")


def _install_scheduler(kube: Kube, tag: str) -> None:
    containers = [
        {"name": "kube-scheduler", "image": "registry.k8s.io/kube-scheduler:v1.34.4"},
        {
            "name": "vgpu-scheduler-extender",
            "image": f"projecthami/hami:{tag}",
            "args": ["--enable-ascend=true"],  # HAMi reads vnpus only with it
        },
    ]
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "hami-scheduler", "namespace": c.HAMI_NAMESPACE},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "hami-scheduler"}},
            "template": {
                "metadata": {"labels": {"app": "hami-scheduler"}},
                "spec": {"containers": containers},
            },
        },
    }
    if kube.get_or_none(DEPLOYMENT) is None:
        kube.create(path_of("apps/v1", "deployments", namespace=c.HAMI_NAMESPACE), body)
    else:
        kube.patch(DEPLOYMENT, {"spec": body["spec"]}, "strategic")


def _write_map(kube: Kube, text: str) -> None:
    if kube.get_or_none(MAP) is None:
        body = {"metadata": {"name": c.HAMI_SCHEDULER_CONFIGMAP_NAME}, "data": {KEY: text}}
        kube.create(path_of("v1", "configmaps", namespace=c.HAMI_NAMESPACE), body)
    else:
        kube.patch(MAP, {"data": {KEY: text}})


def _text(kube: Kube) -> str:
    return str(((kube.get_or_none(MAP) or {}).get("data") or {}).get(KEY, ""))


def _vnpus(kube: Kube) -> Any:
    return (yaml.safe_load(_text(kube)) or {}).get("vnpus")


def _nodes(kube: Kube, pool: str, count: int = 1) -> list[str]:
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    specs = [
        fleet.NodeSpec(f"{pool}-{i}", "Ascend310P3", 2, pool=pool, labels=on) for i in range(count)
    ]
    return fleet.create_nodes(kube, specs)


def _policy(kube: Kube, name: str, pool: str, soft: bool, **scheduler: Any) -> None:
    """An Ascend policy (soft slicing on or off) naming HAMi's scheduler."""
    ascend = {"softSlicing": soft, "vDeviceCount": 4}
    create_ascend_policy(kube, name, pool, ascend, scheduler={"name": "HAMi", **scheduler})


def _reason(kube: Kube, name: str, kind: str = "Stalled") -> str | None:
    found = condition(policy(kube, name), kind)
    return found["reason"] if found and found["status"] == "True" else None


def _passes(operator: OperatorProcess, name: str, since: int) -> int:
    return len(re.findall(rf"sharingpolicy/{name}: pass done: ", operator.log()[since:]))


def _entry(vnpus: Any, chip: str) -> dict[str, Any] | None:
    entries = vnpus.get("configs") if isinstance(vnpus, dict) else vnpus
    return next((e for e in entries or [] if e.get("chipName") == chip), None)


def _lines_gone(before: str, after: str) -> list[str]:
    """Lines of ``before`` no longer in ``after`` (each line counted as often as it occurs)."""
    left = after.splitlines()
    gone = []
    for line in before.splitlines():
        if line in left:
            left.remove(line)
        else:
            gone.append(line)
    return gone


# -- the story: install, apply, downgrade HAMi, delete ---------------------------------------


def test_soft_slicing_policy_writes_hamis_scheduler_config_and_gives_it_back(
    kube: Kube, hami: None
) -> None:
    _nodes(kube, "hs-story")
    _policy(kube, "hs-story", "hs-story", soft=True)
    obj = wait_ready(kube, "hs-story", 90)

    vnpus = _vnpus(kube)
    assert vnpus["hamiVnpuCore"] is True
    ours = _entry(vnpus, "310P3")
    assert ours is not None and ours["commonWord"] == "Ascend310P"
    assert ours["resourceCoreName"] == "huawei.com/Ascend310P-core"  # hami-core, v2.9+
    assert ours["memoryAllocatable"] == 21527
    assert [t["name"] for t in ours["templates"]] == ["vir01", "vir02", "vir04"]
    assert _lines_gone(HAND_WRITTEN, _text(kube)) == ["  hamiVnpuCore: false"]  # all else kept
    assert obj["status"]["scheduler"] == {
        "name": "HAMi",
        "versions": {"hami": "v2.10.0 (image)"},
        "configMaps": ["kube-system/hami-scheduler-device"],
        "admissionPolicy": "hs-story.pod-contract.tessera.io",
        "restartPending": False,
    }
    written = _text(kube)
    said = event_with(kube, "hs-story", "SchedulerConfigWritten", "added vnpus entry 310P3")
    assert said is not None and "set vnpus.hamiVnpuCore true" in said

    # HAMi downgraded to v2.8.0: vnpus as a list; soft slicing has no hami-core there
    _install_scheduler(kube, "v2.8.0")
    eventually(lambda: isinstance(_vnpus(kube), list), 60, "vnpus in the list form")
    listed = _vnpus(kube)
    assert _entry(listed, "910B3") == _entry(yaml.safe_load(HAND_WRITTEN)["vnpus"], "910B3")
    assert "resourceCoreName" not in (_entry(listed, "310P3") or {})
    assert "# our 910B3 boxes: tuned by hand, do not touch" in _text(kube)  # moved along
    eventually(lambda: _reason(kube, "hs-story") == "SchedulerTrap", 60, "SchedulerTrap")
    message = condition(policy(kube, "hs-story"), "Stalled")["message"]  # type: ignore[index]
    assert "needs HAMi v2.9 or newer" in message and "v2.8.0 (image)" in message

    # back to v2.10.0: the same file as before, byte for byte
    _install_scheduler(kube, "v2.10.0")
    eventually(lambda: _text(kube) == written, 60, "the v2.10 form back")
    wait_ready(kube, "hs-story", 60)

    # the policy deleted: Tessera's fields go, the person's file is back as they wrote it
    delete_policy(kube, "hs-story")
    assert _text(kube) == HAND_WRITTEN
    annotations = kube.get(MAP)["metadata"].get("annotations") or {}
    assert c.HAMI_SCHEDULER_MANAGED_ANNOTATION not in annotations


# -- bad input ---------------------------------------------------------------------------------


def test_no_config_map_waits_for_the_scheduler_and_creates_nothing(
    kube: Kube, operator: OperatorProcess
) -> None:
    assert kube.get_or_none(MAP) is None
    _install_scheduler(kube, "v2.10.0")
    _nodes(kube, "hs-wait")
    mark = len(operator.log())
    _policy(kube, "hs-wait", "hs-wait", soft=True)
    eventually(
        lambda: _reason(kube, "hs-wait", "Reconciling") == "WaitingForScheduler",
        60,
        "WaitingForScheduler",
    )
    eventually(lambda: _passes(operator, "hs-wait", mark) >= 3, 60, "three passes")
    assert kube.get_or_none(MAP) is None  # nothing created
    message = condition(policy(kube, "hs-wait"), "Reconciling")["message"]  # type: ignore[index]
    assert "ConfigMap kube-system/hami-scheduler-device" in message

    # HAMi's chart installed the map later: the policy converges
    _write_map(kube, HAND_WRITTEN)
    wait_ready(kube, "hs-wait", 90)
    assert _entry(_vnpus(kube), "310P3") is not None

    # the scheduler Deployment removed: waiting again, the file left as it is
    text = _text(kube)
    kube.delete(DEPLOYMENT)
    eventually(
        lambda: _reason(kube, "hs-wait", "Reconciling") == "WaitingForScheduler",
        60,
        "WaitingForScheduler without the Deployment",
    )
    assert "Deployment kube-system/hami-scheduler" in str(
        condition(policy(kube, "hs-wait"), "Reconciling")
    )
    assert _text(kube) == text
    delete_policy(kube, "hs-wait")
    kube.delete(MAP)


def test_unparseable_config_is_left_alone_and_reported_with_line_and_column(
    kube: Kube, hami: None
) -> None:
    broken = HAND_WRITTEN.replace("  defaultCores: 0\n", "  defaultCores: 0\n defaultGPUs: 2\n")
    _write_map(kube, broken)
    _nodes(kube, "hs-bad")
    _policy(kube, "hs-bad", "hs-bad", soft=True)
    eventually(lambda: _reason(kube, "hs-bad") == "SchedulerConfigInvalid", 60, "invalid")
    message = condition(policy(kube, "hs-bad"), "Stalled")["message"]  # type: ignore[index]
    assert "line 11, column 2" in message, message  # the line indented one column short
    assert "kube-system/hami-scheduler-device (device-config.yaml)" in message
    assert _text(kube) == broken  # untouched

    _write_map(kube, HAND_WRITTEN)  # the person fixes it
    wait_ready(kube, "hs-bad", 90)
    assert _vnpus(kube)["hamiVnpuCore"] is True
    delete_policy(kube, "hs-bad")
    assert _text(kube) == HAND_WRITTEN


def test_two_policies_wanting_different_hami_vnpu_core_conflict_on_both(
    kube: Kube, hami: None
) -> None:
    _nodes(kube, "hs-on")
    _nodes(kube, "hs-off")
    _policy(kube, "hs-on", "hs-on", soft=True)
    _policy(kube, "hs-off", "hs-off", soft=False)
    for name in ("hs-on", "hs-off"):
        eventually(lambda n=name: _reason(kube, n) == "Conflict", 60, f"{name} Conflict")  # type: ignore[misc]
    message = condition(policy(kube, "hs-on"), "Stalled")["message"]  # type: ignore[index]
    assert "hs-on wants true" in message and "hs-off wants false" in message
    assert _vnpus(kube)["hamiVnpuCore"] is False  # left as the person wrote it
    assert _entry(_vnpus(kube), "310P3") is not None  # what they agree on is written

    delete_policy(kube, "hs-off")
    wait_ready(kube, "hs-on", 90)
    assert _vnpus(kube)["hamiVnpuCore"] is True
    delete_policy(kube, "hs-on")
    assert _text(kube) == HAND_WRITTEN


def test_an_image_without_a_version_tag_asks_for_the_declared_version(
    kube: Kube, hami: None
) -> None:
    _install_scheduler(kube, "latest")
    _nodes(kube, "hs-ver")
    _policy(kube, "hs-ver", "hs-ver", soft=True)
    eventually(lambda: _reason(kube, "hs-ver") == "SchedulerVersionUnknown", 60, "unknown")
    message = condition(policy(kube, "hs-ver"), "Stalled")["message"]  # type: ignore[index]
    assert "projecthami/hami:latest of Deployment kube-system/hami-scheduler" in message
    assert "declare spec.scheduler.hami.version" in message
    assert _text(kube) == HAND_WRITTEN  # no format guessed

    patch = {"spec": {"scheduler": {"hami": {"version": "v2.8.0"}}}}
    kube.patch(f"{SP}/hs-ver", patch)
    eventually(lambda: isinstance(_vnpus(kube), list), 60, "the list form v2.8.0 reads")

    def versions() -> object:  # the status is written at the end of the pass that wrote the map
        found = policy(kube, "hs-ver") or {}
        return ((found.get("status") or {}).get("scheduler") or {}).get("versions")

    eventually(lambda: versions() == {"hami": "v2.8.0 (declared)"}, 60, "status naming v2.8.0")
    delete_policy(kube, "hs-ver")


def test_hami_core_policies_write_nvidia_scalings_and_conflict_when_they_differ(
    kube: Kube, hami: None
) -> None:
    nodes(kube, "hs-gpu-a", 1, mig_strategy="none", hami=True)
    nodes(kube, "hs-gpu-b", 1, mig_strategy="none", hami=True)
    scheduler = {"name": "HAMi"}
    create_policy(
        kube,
        "hs-gpu-a",
        "hs-gpu-a",
        "HAMiCore",
        hamiCore={"deviceSplitCount": 4},
        scheduler=scheduler,
    )
    wait_ready(kube, "hs-gpu-a", 90)
    nvidia = yaml.safe_load(_text(kube))["nvidia"]
    assert (nvidia["deviceSplitCount"], nvidia["deviceMemoryScaling"]) == (4, 1)
    assert _lines_gone(HAND_WRITTEN, _text(kube)) == ["  deviceSplitCount: 10"]
    assert _vnpus(kube) == yaml.safe_load(HAND_WRITTEN)["vnpus"]  # no Ascend: vnpus untouched

    spec = {"deviceSplitCount": 8, "deviceMemoryScaling": 2.0}
    create_policy(kube, "hs-gpu-b", "hs-gpu-b", "HAMiCore", hamiCore=spec, scheduler=scheduler)
    for name in ("hs-gpu-a", "hs-gpu-b"):
        eventually(lambda n=name: _reason(kube, n) == "Conflict", 60, f"{name} Conflict")  # type: ignore[misc]
    message = condition(policy(kube, "hs-gpu-b"), "Stalled")["message"]  # type: ignore[index]
    assert "disagree on nvidia" in message and "hs-gpu-b wants deviceSplitCount 8" in message
    assert yaml.safe_load(_text(kube))["nvidia"]["deviceSplitCount"] == 4  # held

    delete_policy(kube, "hs-gpu-a")
    wait_ready(kube, "hs-gpu-b", 90)
    nvidia = yaml.safe_load(_text(kube))["nvidia"]
    assert (nvidia["deviceSplitCount"], nvidia["deviceMemoryScaling"]) == (8, 2.0)
    delete_policy(kube, "hs-gpu-b")
    assert _text(kube) == HAND_WRITTEN  # the person's 10 and 1 are back


def test_a_policy_that_stops_naming_the_scheduler_gives_its_fields_back(
    kube: Kube, hami: None
) -> None:
    _nodes(kube, "hs-drop")
    _policy(kube, "hs-drop", "hs-drop", soft=True)
    wait_ready(kube, "hs-drop", 90)
    assert _text(kube) != HAND_WRITTEN

    kube.patch(f"{SP}/hs-drop", {"spec": {"scheduler": None}})  # the block removed in Git
    eventually(lambda: _text(kube) == HAND_WRITTEN, 60, "the person's file back")
    obj = wait_ready(kube, "hs-drop", 60)
    assert "scheduler" not in obj["status"]
    delete_policy(kube, "hs-drop")


def _loads(kube: Kube, version: tuple[int, int]) -> None:
    """HAMi's scheduler of ``version``, simulated, reads the map as it stands (raises if not)."""
    hami_config.scheduler_loads(yaml.safe_load(_text(kube)) or {}, version)


# A person's file from the v2.8 days: vnpus still a list, their 910B3 entry in it.
KEPT_AS_LIST = HAND_WRITTEN.replace(
    "vnpus:\n  hamiVnpuCore: false\n  configs:\n  # our", "vnpus:\n  # our"
)


def test_a_kept_list_of_another_version_is_reshaped_and_the_scheduler_loads_it(
    kube: Kube, hami: None
) -> None:
    _write_map(kube, KEPT_AS_LIST)
    with pytest.raises(hami_config.ConfigError):  # as the person left it, v2.10 would not start
        _loads(kube, (2, 10))
    _nodes(kube, "hs-list")
    _policy(kube, "hs-list", "hs-list", soft=True)
    wait_ready(kube, "hs-list", 90)
    _loads(kube, (2, 10))
    section = _vnpus(kube)
    assert section["hamiVnpuCore"] is True
    assert _entry(section, "910B3") == _entry(yaml.safe_load(KEPT_AS_LIST)["vnpus"], "910B3")
    assert "# our 910B3 boxes: tuned by hand, do not touch" in _text(kube)
    message = event_with(kube, "hs-list", "SchedulerConfigWritten", "reshaped vnpus")
    assert message is not None and "HAMi v2.10.0 reads that form" in message
    delete_policy(kube, "hs-list")
    _loads(kube, (2, 10))  # given back in the shape the scheduler reads


def test_a_kept_entry_the_scheduler_would_refuse_is_named_and_nothing_is_written(
    kube: Kube, hami: None
) -> None:
    quoted = HAND_WRITTEN.replace("    aiCore: 20\n", '    aiCore: "20"\n', 1)
    _write_map(kube, quoted)
    _nodes(kube, "hs-quoted")
    _policy(kube, "hs-quoted", "hs-quoted", soft=True)
    eventually(lambda: _reason(kube, "hs-quoted") == "SchedulerConfigUnloadable", 60, "refused")
    message = condition(policy(kube, "hs-quoted"), "Stalled")["message"]  # type: ignore[index]
    assert "HAMi v2.10.0's LoadConfig would fail" in message, message
    assert "vnpus.configs[0].aiCore (chip 910B3): a string ('20')" in message, message
    assert "line 29, column 13: HAMi" in message, message  # where the person sees it
    assert condition(policy(kube, "hs-quoted"), "Ready")["status"] == "False"  # type: ignore[index]
    warned = event_with(kube, "hs-quoted", "SchedulerConfigUnloadable", "chip 910B3", "v2.10.0")
    assert warned is not None
    assert _text(kube) == quoted  # nothing written
    with pytest.raises(hami_config.ConfigError, match="aiCore '20' is not a number"):
        _loads(kube, (2, 10))  # the simulated scheduler agrees, from its own reading

    _write_map(kube, HAND_WRITTEN)  # the person fixes their entry
    wait_ready(kube, "hs-quoted", 90)
    _loads(kube, (2, 10))
    assert _entry(_vnpus(kube), "310P3") is not None
    delete_policy(kube, "hs-quoted")
    assert _text(kube) == HAND_WRITTEN
