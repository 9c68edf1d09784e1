"""SharingPolicy's Ascend soft slicing through HAMi, on the real API server.

``spec.ascend`` makes Tessera write its own fields (``hami-vnpu-core``,
``vDeviceCount``) into the per-node entries of HAMi's Ascend node config
(``kube-system/hami-device-node-config``, key ``node-config.yaml``) for the
Ascend nodes a policy selects. Every test owns its nodes (pools ``asc-sp-*``);
``tessera run`` is the real operator process with a 5 s resync.

The module creates no ``gpu-operator`` namespace: run alone, it is a cluster
of Ascend nodes only, where the device-plugin ConfigMap cannot be written and
HAMi's entries must be written all the same.

HAMi's Ascend device plugin is simulated (``devcluster.hami_ascend``)
on every node here, all labelled ``ascend=on``: it reads
``hami-device-node-config`` and, per node, registers ``vDeviceCount`` slots per
card as allocatable (7 per 310P3 card when no count is set), lists the two
physical cards in ``hami.io/node-register-Ascend310P`` and writes
``hami-vnpu-core``. So ``status.advertised`` is checked against a node whose
allocatable is already multiplied, and turning soft slicing *on* rolls out and
verifies the allocatable the plugin advertises.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import pairwise
from typing import Any

import pytest
import yaml

from builders import DeploymentWrapper, PdbWrapper
from devcluster import fleet, hami_ascend
from tessera.adapters.informer import Informer
from tessera.adapters.kube import ApiError, Kube, Obj, path_of
from tessera.api import constants as c
from tessera.domain.sharing import rollout_targets

from .conftest import OperatorProcess
from .helpers import app_pods, condition, eventually, namespace, nodes_of, running, wait_running
from .sharing_support import (
    SP,
    create_ascend_policy,
    delete_policy,
    event_with,
    label,
    node,
    policy,
    settled,
    wait_ready,
)

HAMI_ASCEND_CM = path_of("v1", "configmaps", c.HAMI_ASCEND_CONFIGMAP_NAME, c.HAMI_NAMESPACE)
NPU = "huawei.com/Ascend310P"
REGISTER = c.HAMI_NODE_REGISTER_ANNOTATION_PREFIX + "Ascend310P"
HAMI_MODE = rollout_targets.HAMI_MODE_LABEL
WORK = "asc-sp-work"


@pytest.fixture(scope="module", autouse=True)
def agents(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    """HAMi's Ascend device plugin (KWOK runs the NPU pods)."""
    namespace(kube, WORK)
    plugin = hami_ascend.HamiAscendPlugin(kube).start()
    yield
    plugin.stop()


def _ascend_nodes(kube: Kube, pool: str, count: int) -> list[str]:
    """``count`` Ascend 310P3 nodes with 2 NPUs each, labelled ``tessera.io/pool=<pool>`` and
    ``ascend=on`` (HAMi's plugin runs there)."""
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    specs = [
        fleet.NodeSpec(f"{pool}-{i}", "Ascend310P3", 2, pool=pool, labels=on) for i in range(count)
    ]
    return fleet.create_nodes(kube, specs)


def _advertised_by_hami(kube: Kube, name: str) -> tuple[int, int, str]:
    """(cards in HAMi's register annotation, allocatable NPUs, ``hami-vnpu-core``)."""
    obj = node(kube, name)
    notes = obj["metadata"].get("annotations") or {}
    cards = json.loads(notes.get(REGISTER, "[]"))
    alloc = int((obj.get("status") or {}).get("allocatable", {}).get(NPU, "0"))
    return len(cards), alloc, notes.get(c.HAMI_VNPU_CORE_ANNOTATION, "")


def _config_map(kube: Kube) -> Obj | None:
    return kube.get_or_none(HAMI_ASCEND_CM)


def _document(cm: Obj | None) -> dict[str, Any]:
    text = ((cm or {}).get("data") or {}).get(c.HAMI_ASCEND_CONFIGMAP_KEY) or "{}"
    loaded = yaml.safe_load(text)
    return loaded if isinstance(loaded, dict) else {}


def _entries(kube: Kube) -> dict[str, dict[str, Any]]:
    """HAMi's Ascend node entries by node name."""
    return {e["name"]: e for e in _document(_config_map(kube)).get("nodes") or []}


def _managed(cm: Obj | None) -> set[str]:
    """Nodes named in Tessera's managed-nodes annotation (``node=digest`` pairs)."""
    raw = ((cm or {}).get("metadata", {}).get("annotations") or {}).get(
        c.MANAGED_NODES_ANNOTATION, ""
    )
    return {pair.partition("=")[0] for pair in raw.split(",") if pair}


def _seed(kube: Kube, entries: Iterable[dict[str, Any]]) -> None:
    """Write entries as a person would: replace the named ones, keep every other entry."""
    mine = list(entries)
    names = {e["name"] for e in mine}
    cm = _config_map(kube)
    if cm is None:
        body = {"metadata": {"name": c.HAMI_ASCEND_CONFIGMAP_NAME}, "data": {}}
        try:
            kube.create(path_of("v1", "configmaps", namespace=c.HAMI_NAMESPACE), body)
        except ApiError as err:
            assert err.conflict
        cm = _config_map(kube)
    doc = _document(cm)
    doc["nodes"] = [e for e in doc.get("nodes") or [] if e.get("name") not in names] + mine
    text = yaml.safe_dump(doc, sort_keys=False)
    kube.patch(HAMI_ASCEND_CM, {"data": {c.HAMI_ASCEND_CONFIGMAP_KEY: text}})


def _passes(operator: OperatorProcess, name: str, since: int) -> int:
    """Passes of the policy logged since ``since``: run in full, or skipped as idle (nothing
    it reads changed; the skip decision itself is what a converged policy must get right)."""
    found = re.findall(rf"sharingpolicy/{name}: pass (?:done: |skipped: )", operator.log()[since:])
    return len(found)


# -- 1. what Tessera writes, what it keeps, and a converged policy writes nothing -----------------


def test_soft_slicing_writes_only_tesseras_fields_and_a_converged_policy_writes_nothing(
    kube: Kube, operator: OperatorProcess
) -> None:
    names = _ascend_nodes(kube, "asc-sp-a", 2)
    outside = _ascend_nodes(kube, "asc-sp-x", 1)  # an Ascend node no policy selects
    filters = {"index": [1], "uuid": []}
    human = {"name": "asc-sp-human", "hami-vnpu-core": False, "filterDevices": filters}
    _seed(kube, [human, {"name": names[0], "filterDevices": filters}])

    create_ascend_policy(kube, "asc-sp-a", "asc-sp-a", {"softSlicing": True, "vDeviceCount": 4})
    obj = wait_ready(kube, "asc-sp-a")

    entries = _entries(kube)
    assert entries[names[0]] == {
        "name": names[0],
        "filterDevices": filters,  # a person's field inside Tessera's entry
        "hami-vnpu-core": True,
        "vDeviceCount": 4,
    }
    assert entries[names[1]] == {"name": names[1], "hami-vnpu-core": True, "vDeviceCount": 4}
    assert entries["asc-sp-human"] == human  # a person's entry for another node
    assert outside[0] not in entries
    cm = _config_map(kube)
    assert _managed(cm) & {*names, *outside} == set(names)
    assert obj["status"]["nodes"] == {"matched": 2, "applied": 2, "conflicted": 0}
    assert obj["status"]["advertised"] == {NPU: "16"}  # 2 nodes x 2 NPUs x 4 slots
    eventually(  # what HAMi's plugin advertises adds up to it; 7 slots per card by default
        lambda: (
            [_advertised_by_hami(kube, n) for n in [*names, *outside]]
            == [(2, 8, "true"), (2, 8, "true"), (2, 14, "false")]
        ),
        what="HAMi's plugin advertising 2 cards x 4 slots (2 x 7 outside the policy)",
    )
    ready = condition(obj, "Ready")
    assert ready is not None and ready["reason"] == "Applied"
    assert all(settled(kube, n) for n in names)

    # converged: passes over two resync intervals leave the ConfigMap as it was
    assert cm is not None
    version = cm["metadata"]["resourceVersion"]
    mark = len(operator.log())
    eventually(lambda: _passes(operator, "asc-sp-a", mark) >= 3, 30, "three passes (>= 2 resyncs)")
    assert _config_map(kube)["metadata"]["resourceVersion"] == version  # type: ignore[index]

    # Git moves to the new spelling (mode: HAMiCore, the boolean dropped): the same mode, so
    # the new generation is Ready with nothing written on any node nor in HAMi's config
    before = {n: _held(node(kube, n)) for n in names}
    renamed = {"spec": {"ascend": {"mode": "HAMiCore", "softSlicing": None}}}
    generation = kube.patch(f"{SP}/asc-sp-a", renamed)["metadata"]["generation"]
    assert generation > obj["metadata"]["generation"]
    again = wait_ready(kube, "asc-sp-a")
    assert again["status"]["observedGeneration"] == generation
    assert again["status"]["advertised"] == {NPU: "16"}
    assert _config_map(kube)["metadata"]["resourceVersion"] == version  # type: ignore[index]
    assert {n: _held(node(kube, n)) for n in names} == before  # no label moved, no cordon


def _held(obj: Obj) -> tuple[Any, ...]:
    """What a rollout would change on a node: its labels, annotations, cordon and taints."""
    meta = obj["metadata"]
    spec = obj.get("spec", {})
    return (
        meta.get("labels"),
        meta.get("annotations"),
        spec.get("unschedulable"),
        spec.get("taints"),
    )


# -- 2. in place vs. cordon/drain ------------------------------------------------------------------


class Timeline:
    """Every version of some nodes and of HAMi's Ascend ConfigMap, ordered by resourceVersion.

    Both come from one etcd, whose revisions order every write of the cluster, so comparing
    them says whether a node was cordoned when its entry changed.
    """

    def __init__(self, kube: Kube, names: Iterable[str], app: str = "") -> None:
        self.names = set(names)
        self.app = app  # the pods (label ``app``) in WORK whose readiness is recorded
        self.nodes: list[tuple[int, str, bool, int]] = []  # (revision, node, unschedulable, NPUs)
        self.entries: list[tuple[int, dict[str, Any]]] = []  # (revision, entries by node)
        self.ready: dict[str, bool] = {}  # live pod name in WORK -> Running and Ready
        self.ready_counts: list[int] = []  # how many were Ready, after each pod event
        self._lock = threading.Lock()
        self.informers = [
            Informer(kube, "/api/v1/nodes", self._node, name="asc-sp-nodes"),
            Informer(
                kube,
                path_of("v1", "configmaps", namespace=c.HAMI_NAMESPACE),
                self._config_map,
                name="asc-sp-cm",
                field_selector=f"metadata.name={c.HAMI_ASCEND_CONFIGMAP_NAME}",
            ),
            Informer(kube, path_of("v1", "pods", namespace=WORK), self._pod, name="asc-sp-pods"),
        ]

    def __enter__(self) -> Timeline:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            eventually(informer.synced.is_set, what=f"{informer.name} synced")
        return self

    def __exit__(self, *_: object) -> None:
        for informer in self.informers:
            informer.stop()

    def _node(self, kind: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if name in self.names and kind != "DELETED":
            cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
            npus = int(((obj.get("status") or {}).get("allocatable") or {}).get(NPU, "0"))
            with self._lock:
                self.nodes.append((int(obj["metadata"]["resourceVersion"]), name, cordoned, npus))

    def _config_map(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            return
        docs = _document(obj).get("nodes") or []
        mine = {e["name"]: e for e in docs if e.get("name") in self.names}
        with self._lock:
            self.entries.append((int(obj["metadata"]["resourceVersion"]), mine))

    def _pod(self, kind: str, obj: Obj) -> None:
        if (obj["metadata"].get("labels") or {}).get("app") != self.app:
            return
        name = obj["metadata"]["name"]
        gone = kind == "DELETED" or obj["metadata"].get("deletionTimestamp")
        with self._lock:
            if gone:
                self.ready.pop(name, None)
            else:
                self.ready[name] = running(obj)
            self.ready_counts.append(sum(self.ready.values()))

    def fewest_ready(self, replicas: int) -> int:
        """The fewest pods Ready at once, from the first moment ``replicas`` were."""
        with self._lock:
            counts = self.ready_counts[self.ready_counts.index(replicas) :]
        return min(counts)

    def cordoned(self) -> set[str]:
        """Nodes that were ever cordoned while recording."""
        with self._lock:
            return {name for _, name, cordoned, _ in self.nodes if cordoned}

    def most_cordoned_at_once(self) -> int:
        now: set[str] = set()
        most = 0
        with self._lock:
            for _, name, cordoned, _ in sorted(self.nodes):
                (now.add if cordoned else now.discard)(name)
                most = max(most, len(now))
        return most

    def cordoned_at(self, name: str, revision: int) -> bool:
        """Whether ``name`` was cordoned at ``revision`` (its last version before it)."""
        with self._lock:
            mine = [(rv, cordoned) for rv, n, cordoned, _ in sorted(self.nodes) if n == name]
        before = [cordoned for rv, cordoned in mine if rv < revision]
        return bool(before and before[-1])

    def uncordoned_with(self, name: str) -> list[int]:
        """The allocatable NPUs ``name`` showed each time it went from cordoned to schedulable."""
        with self._lock:
            mine = [(cordoned, npus) for _, n, cordoned, npus in sorted(self.nodes) if n == name]
        return [now[1] for before, now in pairwise(mine) if before[0] and not now[0]]

    def first_change(self, name: str, field: str, value: Any) -> int | None:
        """The revision at which ``name``'s entry first had ``field == value``."""
        with self._lock:
            for rv, entries in sorted(self.entries, key=lambda item: item[0]):
                if (entries.get(name) or {}).get(field) == value:
                    return rv
        return None


def _serving(kube: Kube, name: str, pool: str, replicas: int, budget: int | None) -> list[Obj]:
    """A Deployment ``name`` of ``replicas`` pods each using one NPU, one per node of ``pool``
    (required anti-affinity: an evicted replica waits for its node to come back), and a PDB
    with ``minAvailable: budget``; returns the pods once the scheduler placed them and KWOK
    runs them."""
    one_per_node = DeploymentWrapper(name).pool(pool).limits({NPU: 1}).away_from(name)
    manifest = one_per_node.replicas(replicas).obj()
    kube.create(path_of("apps/v1", "deployments", namespace=WORK), manifest)
    if budget is not None:
        budgets = path_of("policy/v1", "poddisruptionbudgets", namespace=WORK)
        kube.create(budgets, PdbWrapper(name).match(app=name).min_available(budget).obj())
        eventually(
            lambda: (_pdb(kube, name).get("status") or {}).get("currentHealthy") == replicas,
            60,
            f"the disruption controller counting the {replicas} pod(s) of {name}",
        )
    return wait_running(kube, WORK, name, replicas)


def _uids(kube: Kube, app: str) -> set[str]:
    return {p["metadata"]["uid"] for p in app_pods(kube, WORK, app)}


def _pdb(kube: Kube, name: str) -> Obj:
    return kube.get(f"/apis/policy/v1/namespaces/{WORK}/poddisruptionbudgets/{name}")


def _reconciling(kube: Kube, name: str, reason: str) -> bool:
    cond = condition(policy(kube, name), "Reconciling")
    return bool(cond and cond["status"] == "True" and cond["reason"] == reason)


def _evicted(kube: Kube, policy_name: str, pod: str) -> str | None:
    """The policy's event saying it evicted ``pod`` through the Eviction API."""
    return event_with(kube, policy_name, "Evict", f"{WORK}/{pod}")


def _cordoned(kube: Kube, names: Iterable[str]) -> set[str]:
    return {n for n in names if (node(kube, n).get("spec") or {}).get("unschedulable")}


def test_slot_count_changes_in_place_and_turning_soft_slicing_off_drains_node_by_node(
    kube: Kube,
) -> None:
    names = _ascend_nodes(kube, "asc-sp-b", 2)
    create_ascend_policy(kube, "asc-sp-b", "asc-sp-b", {"softSlicing": True, "vDeviceCount": 4})
    wait_ready(kube, "asc-sp-b")
    # one replica on each node, under a PDB that allows no disruption yet
    pods = _serving(kube, "asc-sp-b", "asc-sp-b", len(names), budget=len(names))
    assert sorted(nodes_of(pods)) == names
    first = _uids(kube, "asc-sp-b")

    with Timeline(kube, names, app="asc-sp-b") as seen:
        # in place: HAMi's plugin rereads vDeviceCount; running vNPUs stay where they are
        kube.patch(f"{SP}/asc-sp-b", {"spec": {"ascend": {"vDeviceCount": 6}}})
        obj = wait_ready(kube, "asc-sp-b")
        assert obj["metadata"]["generation"] == 2
        assert obj["status"]["advertised"] == {NPU: "24"}  # 2 nodes x 2 NPUs x 6 slots
        entries = _entries(kube)
        assert all(
            entries[n] == {"name": n, "hami-vnpu-core": True, "vDeviceCount": 6} for n in names
        )
        assert seen.cordoned() == set()
        assert _uids(kube, "asc-sp-b") == first

        # disruptive: soft -> template slicing, node by node, each drained first
        kube.patch(f"{SP}/asc-sp-b", {"spec": {"ascend": {"softSlicing": False}}})
        eventually(lambda: _reconciling(kube, "asc-sp-b", "Draining"), 30, "Reconciling/Draining")
        cordoned = _cordoned(kube, names)
        assert len(cordoned) == 1, cordoned  # maxUnavailable 1
        entries = _entries(kube)  # the PDB allows no eviction: nothing changed yet
        assert all(entries[n]["hami-vnpu-core"] is True for n in names)
        assert _uids(kube, "asc-sp-b") == first

        # one replica may be away at a time: the second node is drained only once the first
        # node's evicted replica runs again (back on it, once it is uncordoned)
        path = f"/apis/policy/v1/namespaces/{WORK}/poddisruptionbudgets/asc-sp-b"
        kube.patch(path, {"spec": {"minAvailable": len(names) - 1}})
        obj = wait_ready(kube, "asc-sp-b", 90)
        eventually(lambda: all(settled(kube, n) for n in names), what="both nodes uncordoned")
        again = wait_running(kube, WORK, "asc-sp-b", len(names), 60)

    assert not first & {p["metadata"]["uid"] for p in again}, "a replica was never evicted"
    assert sorted(nodes_of(again)) == names  # each rescheduled onto its node, back in service
    # the PDB was never violated: one replica away at a time, never two
    assert seen.fewest_ready(len(names)) == len(names) - 1
    assert obj["metadata"]["generation"] == 3
    entries = _entries(kube)
    assert all(entries[n] == {"name": n, "hami-vnpu-core": False} for n in names)
    assert obj["status"]["advertised"] == {}  # template slicing: not predicted here
    assert seen.cordoned() == set(names)
    assert seen.most_cordoned_at_once() == 1
    for n in names:
        flipped = seen.first_change(n, "hami-vnpu-core", False)
        assert flipped is not None, f"{n}: entry never seen with hami-vnpu-core false"
        assert seen.cordoned_at(n, flipped), f"{n}: entry changed while the node was schedulable"
    for pod in pods:
        name = pod["metadata"]["name"]
        assert eventually(partial(_evicted, kube, "asc-sp-b", name), what=f"Evict event for {name}")


# -- 3. deletion -----------------------------------------------------------------------------------


def test_deletion_removes_only_tesseras_fields_and_a_new_policy_drains_again(
    kube: Kube,
) -> None:
    names = _ascend_nodes(kube, "asc-sp-c", 2)
    filters = {"index": [0], "uuid": []}
    human = {"name": "asc-sp-c-human", "hami-vnpu-core": True, "vDeviceCount": 3}
    _seed(kube, [human, {"name": names[0], "filterDevices": filters}])
    soft = {"softSlicing": True, "vDeviceCount": 4}
    create_ascend_policy(kube, "asc-sp-c", "asc-sp-c", soft)
    wait_ready(kube, "asc-sp-c")
    kube.patch(f"{SP}/asc-sp-c", {"spec": {"ascend": {"softSlicing": False}}})
    wait_ready(kube, "asc-sp-c", 60)
    eventually(lambda: all(settled(kube, n) for n in names), what="rollout finished")
    assert all(_entries(kube)[n]["hami-vnpu-core"] is False for n in names)
    assert all(label(kube, n, HAMI_MODE) == "vnpu-template" for n in names)  # the rollout's mark

    delete_policy(kube, "asc-sp-c")
    entries = _entries(kube)
    assert entries[names[0]] == {"name": names[0], "filterDevices": filters}
    assert names[1] not in entries  # nothing but Tessera's fields was left in it
    assert entries["asc-sp-c-human"] == human
    assert not _managed(_config_map(kube)) & set(names)
    for n in names:
        assert settled(kube, n)
        labels = node(kube, n)["metadata"].get("labels") or {}
        left = {k for k in labels if k in (HAMI_MODE, c.DEVICE_PLUGIN_CONFIG_LABEL)}
        assert left == set(), f"{n} keeps {left}"  # nothing the rollout marked it with

    # the released nodes are new to a new policy: first config in place, and the flip drains
    create_ascend_policy(kube, "asc-sp-c", "asc-sp-c", soft)
    wait_ready(kube, "asc-sp-c")
    with Timeline(kube, names) as seen:
        kube.patch(f"{SP}/asc-sp-c", {"spec": {"ascend": {"softSlicing": False}}})
        wait_ready(kube, "asc-sp-c", 60)
        eventually(lambda: all(settled(kube, n) for n in names), what="rollout finished")
    assert seen.cordoned() == set(names)
    assert seen.most_cordoned_at_once() == 1
    for n in names:
        flipped = seen.first_change(n, "hami-vnpu-core", False)
        assert flipped is not None and seen.cordoned_at(n, flipped), n


# -- 4. template -> soft slicing: the rollout verifies what HAMi's plugin advertises ----------------


def test_turning_soft_slicing_on_drains_and_verifies_the_allocatable_hami_advertises(
    kube: Kube,
) -> None:
    names = _ascend_nodes(kube, "asc-sp-d", 2)
    create_ascend_policy(kube, "asc-sp-d", "asc-sp-d", {"softSlicing": False})
    obj = wait_ready(kube, "asc-sp-d")
    assert obj["status"]["advertised"] == {}  # template slicing: not predicted
    eventually(  # HAMi's default: 21527 MB / 3072 MB = 7 slots per card, 2 cards
        lambda: all(_advertised_by_hami(kube, n) == (2, 14, "false") for n in names),
        what="HAMi's plugin advertising 2 cards x 7 slots per node",
    )
    pods = _serving(kube, "asc-sp-d", "asc-sp-d", len(names), budget=None)  # one per node
    assert sorted(nodes_of(pods)) == names

    with Timeline(kube, names) as seen:
        soft = {"softSlicing": True, "vDeviceCount": 5}
        kube.patch(f"{SP}/asc-sp-d", {"spec": {"ascend": soft}})
        obj = wait_ready(kube, "asc-sp-d", 90)
        eventually(lambda: all(settled(kube, n) for n in names), what="both nodes uncordoned")

    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["advertised"] == {NPU: "20"}  # 2 nodes x 2 cards x 5 slots
    entries = _entries(kube)
    assert all(entries[n] == {"name": n, "hami-vnpu-core": True, "vDeviceCount": 5} for n in names)
    assert all(_advertised_by_hami(kube, n) == (2, 10, "true") for n in names)
    assert all(label(kube, n, HAMI_MODE) == "hami-vnpu-core" for n in names)
    assert seen.cordoned() == set(names)
    assert seen.most_cordoned_at_once() == 1
    for n in names:
        flipped = seen.first_change(n, "hami-vnpu-core", True)
        assert flipped is not None and seen.cordoned_at(n, flipped), n
        # verified against the plugin's 2 cards x 5 slots before it was given back
        assert seen.uncordoned_with(n) == [10], n
    again = wait_running(kube, WORK, "asc-sp-d", len(names), 60)  # rescheduled, in service
    assert not {p["metadata"]["uid"] for p in pods} & {p["metadata"]["uid"] for p in again}
    assert sorted(nodes_of(again)) == names
