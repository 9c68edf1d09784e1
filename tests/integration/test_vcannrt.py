"""vCANN-RT on a 910B4 pool, played as a platform engineer would, on the real control plane.

Two 910B4 nodes (2 NPUs each) run Tessera's real Ascend agent (``tessera agent vnpu`` under
the ``tessera-agent`` ServiceAccount, a token bound to its Pod on the node) over the
simulated ``npu-smi``, which decides from its own chip table whether a chip takes
device-share mode; the device-plugin stand-in advertises what npu-smi holds (100 units of
``huawei.com/Ascend910`` per shared NPU, as Huawei's plugin with ``-shareDevCount=100``).
The SharingPolicy of config/samples/vcannrt switches the pool to ``spec.ascend.mode:
VCannRT``: an outside watcher sees
the nodes cordoned one at a time, each gets the label Huawei's Volcano plugin selects by, its
agent reports device-share on and npu-smi reads it back on every NPU. The policy says the
upstream notice and the unverified prerequisites as conditions and Warning Events. A pod
breaking the vCANN-RT contract is refused by the API server, the message naming the label.
Switched back to template mode, every NPU is off again, read back the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import fleet, npunode
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain import admission

from .conftest import OperatorProcess
from .helpers import condition, eventually, namespace
from .sharing_support import SP, delete_policy, event_with, node, policy

SAMPLE = Path(__file__).parents[2] / "config/samples/vcannrt/sharingpolicy_vcannrt.yaml"
POOL = "ascend-910b4"  # the sample's pool
NAME = "vcannrt-910b4"  # the sample's name
WORK = "vcann-work"
NODES = [f"{POOL}-{i}" for i in range(2)]
SHARE, STATE = c.NPU_DEVICE_SHARE_LABEL, c.NPU_DEVICE_SHARE_STATE_LABEL
CORE = "huawei.com/scheduler.softShareDev.aicoreQuota"


class Watcher:
    """Outside the operator: every node change of the pool, as a watch delivers it."""

    def __init__(self, kube: Kube) -> None:
        self.cordoned: set[str] = set()
        self.most_at_once = 0
        self._lock = threading.Lock()
        self.informer = Informer(kube, "/api/v1/nodes", self._node, name="vcann-watcher")

    def _node(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if name not in NODES:
            return
        with self._lock:
            if kind != "DELETED" and obj["spec"].get("unschedulable"):
                self.cordoned.add(name)
            else:
                self.cordoned.discard(name)
            self.most_at_once = max(self.most_at_once, len(self.cordoned))


@pytest.fixture(scope="module")
def ascend_nodes(
    kube: Kube, rbac: None, operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[npunode.AscendNodes]:
    namespace(kube, WORK)
    sims = npunode.AscendNodes(kube, tmp_path_factory.mktemp("vcann")).start()
    fleet.create_nodes(kube, fleet.pool(POOL, "Ascend910B4", 2, devices=2))
    yield sims
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)
    sims.stop()
    problems = sims.problems()
    assert not problems, "the Ascend agents logged refusals or crashes:\n" + "\n".join(problems)


def _templates() -> dict[str, Any]:
    """The pool back on HAMi's template mode, as a merge patch of the sample's spec: no
    ``spec.scheduler`` (no HAMi or Volcano runs here, and the switch needs no pod contract)."""
    return {"ascend": {"mode": "Templates", "chip": "910B4"}, "scheduler": None}


def _labels(kube: Kube, name: str) -> dict[str, str]:
    found: dict[str, str] = node(kube, name)["metadata"].get("labels") or {}
    return found


def _shared(sims: npunode.AscendNodes, name: str) -> dict[str, bool]:
    found: dict[str, bool] = sims.npu_smi_state(name).get("device-share") or {}
    return found


def _settled(kube: Kube, mode: str) -> Obj | None:
    obj = policy(kube, NAME)
    ready = condition(obj, "Ready")
    if not obj or not ready or ready["status"] != "True":
        return None
    done = all(
        _labels(kube, n).get(SHARE) == mode and _labels(kube, n).get(STATE) == "success"
        for n in NODES
    )
    uncordoned = not any(node(kube, n)["spec"].get("unschedulable") for n in NODES)
    current = obj["status"].get("observedGeneration") == obj["metadata"]["generation"]
    return obj if done and uncordoned and current else None


def _wait(kube: Kube, mode: str, what: str) -> Obj:
    """Until ``_settled``; on time-out the failure shows the policy's conditions and the
    nodes' device-share labels and cordon, what a person would look at."""
    try:
        return eventually(lambda: _settled(kube, mode), 180, what)
    except AssertionError as err:
        conds = [
            (k["type"], k["status"], k.get("reason"), k.get("message"))
            for k in ((policy(kube, NAME) or {}).get("status") or {}).get("conditions") or []
        ]
        seen = {
            n: (
                {k: v for k, v in _labels(kube, n).items() if "share" in k or "hami" in k},
                node(kube, n)["spec"].get("unschedulable"),
            )
            for n in NODES
        }
        raise AssertionError(f"{err}\nconditions: {conds}\nnodes: {seen}") from None


def _pod(name: str, **labels: str) -> Obj:
    pod_labels = {CORE: "50", "huawei.com/scheduler.softShareDev.hbmQuota": "2048"}
    pod_labels["huawei.com/scheduler.softShareDev.policy"] = "elastic"
    pod_labels.update(labels)
    limits = {"huawei.com/Ascend910": pod_labels.get(CORE, "50")}
    container = {"name": "infer", "image": "infer:1", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }


def _refusal(kube: Kube, body: Obj) -> str | None:
    """The API server's answer to a server-side dry run of ``body``: None when admitted."""
    try:
        kube.create(path_of("v1", "pods", namespace=WORK) + "?dryRun=All", body)
    except ApiError as err:
        return err.message
    return None


def test_a_910b4_pool_switched_to_vcannrt_and_back_node_by_node(
    kube: Kube, ascend_nodes: npunode.AscendNodes
) -> None:
    watcher = Watcher(kube)
    watcher.informer.start()
    try:
        sample = yaml.safe_load(SAMPLE.read_text())
        assert sample["metadata"]["name"] == NAME
        kube.create(SP, sample)  # config/samples' policy, as it is
        obj = _wait(kube, "on", "both nodes in device-share mode")
        for name in NODES:
            labels = _labels(kube, name)
            assert labels[c.SOFT_SHARE_NODE_LABEL] == "true"
            assert _shared(ascend_nodes, name) == {"0": True, "1": True}  # npu-smi's own record
            alloc = node(kube, name)["status"]["allocatable"]
            assert alloc["huawei.com/Ascend910"] == "200"  # 2 NPUs x shareDevCount 100
        assert watcher.most_at_once == 1  # maxUnavailable 1: never both cordoned
        assert obj["status"]["advertised"] == {"huawei.com/Ascend910": "400"}
        notice = condition(obj, "ReferenceOnly")
        assert notice is not None and notice["status"] == "True"
        assert "not for commercial products" in notice["message"]
        pre = condition(obj, "Prerequisites")
        assert pre is not None and (pre["status"], pre["reason"]) == ("Unknown", "Unverified")
        assert "HDK 25.5.0, CANN 8.5.0 or 9.1.0, MindCluster 26.0.0.0" in pre["message"]
        assert event_with(kube, NAME, "NotForCommercialUse", "reference only")

        # the pod contract, at the API server
        vap = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{admission.name_of(NAME)}"
        eventually(lambda: kube.get_or_none(vap), 60, "the pod contract's admission policy")
        bad = _pod("too-much", **{CORE: "150"})
        refused = eventually(lambda: _refusal(kube, bad), 60, "the contract to refuse the pod")
        assert CORE in refused and "1 to 100" in refused
        privileged = _pod("root")
        privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
        said = _refusal(kube, privileged)
        assert said is not None and "does not support privileged containers" in said
        two_npus = _pod("greedy")
        two_npus["spec"]["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] = "200"
        said = _refusal(kube, two_npus)
        assert said is not None and "equal to label " + CORE in said
        assert _refusal(kube, _pod("fits")) is None  # the full contract is admitted

        # and back: template mode switches every NPU off, read back by npu-smi
        watcher.most_at_once = 0
        kube.patch(f"{SP}/{NAME}", {"spec": _templates()})
        _wait(kube, "off", "both nodes out of device-share mode")
        for name in NODES:
            assert _labels(kube, name)[c.SOFT_SHARE_NODE_LABEL] == "false"
            assert _shared(ascend_nodes, name) == {"0": False, "1": False}
            alloc = node(kube, name)["status"]["allocatable"]
            assert alloc["huawei.com/Ascend910"] == "2"  # whole NPUs again
        assert watcher.most_at_once == 1
        after = policy(kube, NAME)
        assert condition(after, "ReferenceOnly") is None  # template mode carries no notice
    finally:
        watcher.informer.stop()


def test_deleting_the_policy_switches_its_nodes_off(
    kube: Kube, ascend_nodes: npunode.AscendNodes
) -> None:
    """A released node returns to the default at once (no policy's rollout settings are left
    to govern a drain): device-share off, read back by npu-smi, the label false."""
    if policy(kube, NAME) is not None:
        delete_policy(kube, NAME)
    kube.create(SP, yaml.safe_load(SAMPLE.read_text()))
    _wait(kube, "on", "both nodes in device-share mode")
    delete_policy(kube, NAME)

    def off() -> bool:
        return all(
            _labels(kube, n).get(SHARE) == "off"
            and _labels(kube, n).get(STATE) == "success"
            and _shared(ascend_nodes, n) == {"0": False, "1": False}
            for n in NODES
        )

    eventually(off, 90, "both nodes switched off after the policy's deletion")
    for name in NODES:
        assert _labels(kube, name)[c.SOFT_SHARE_NODE_LABEL] == "false"
        assert not node(kube, name)["spec"].get("unschedulable")
