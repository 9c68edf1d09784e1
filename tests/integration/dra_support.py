"""Tessera's DeviceClasses are global per profile (DRA devices carry no node attribute), so a
DRA pool one test leaves behind keeps a class another test expects absent. Every test that
declares a DRA pool or policy deletes it through ``dra_objects`` (or ``delete_and_wait``) and
waits until no class names it among its declarers; a test that needs a class absent waits for
that (``wait_absent``) with a deadline instead of asserting it at t=0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builders import custom
from devcluster import dradriver, fleet
from tessera.adapters.kube import Kube, path_of

from .faults import pool_spec, wait_ready
from .helpers import eventually

NPG = "/apis/tessera.io/v1alpha1/nodepoolgeometries"
SP = "/apis/tessera.io/v1alpha1/sharingpolicies"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
DECLARED_BY = "tessera.io/declared-by"
KINDS = {NPG: "NodePoolGeometry", SP: "SharingPolicy"}


def declared(kube: Kube, declarer: str) -> list[str]:
    """Tessera's classes that name ``declarer`` (``Kind/name``) among their declarers."""
    found = kube.list(CLASSES, label_selector="app.kubernetes.io/managed-by=tessera")
    return [
        o["metadata"]["name"]
        for o in found
        if declarer in ((o["metadata"].get("annotations") or {}).get(DECLARED_BY) or "").split(",")
    ]


def delete_and_wait(kube: Kube, collection: str, name: str, timeout: float = 180) -> None:
    """Delete a pool or policy, wait until it is gone and no class is declared by it."""
    declarer = f"{KINDS[collection]}/{name}"
    kube.delete(f"{collection}/{name}")
    eventually(
        lambda: kube.get_or_none(f"{collection}/{name}") is None, timeout, f"{declarer} gone"
    )
    eventually(lambda: not declared(kube, declarer), timeout, f"no class declared by {declarer}")


def wait_absent(kube: Kube, *names: str, timeout: float = 180) -> None:
    """Precondition: the classes ``names`` do not exist (another test's pool may be leaving)."""
    eventually(
        lambda: all(kube.get_or_none(f"{CLASSES}/{n}") is None for n in names),
        timeout,
        f"no DeviceClass {', '.join(names)} (left by an earlier test?)",
    )


class DraObjects:
    """Pools and policies a test declares; deleted, policies first, when the test ends."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.made: list[tuple[str, str]] = []

    def track(self, collection: str, name: str) -> str:
        self.made.append((collection, name))
        return name

    def cleanup(self) -> None:
        for collection, name in sorted(set(self.made), key=lambda m: m[0] != SP):
            delete_and_wait(self.kube, collection, name)


@pytest.fixture
def dra_objects(kube: Kube) -> Iterator[DraObjects]:
    made = DraObjects(kube)
    try:
        yield made
    finally:
        made.cleanup()


SAMPLE_DRA_POOL = "h100-dra"  # config/samples/nodepoolgeometry_dra.yaml


@pytest.fixture(scope="module")
def samples_dra_pool_removed(kube: Kube) -> Iterator[None]:
    """For a module that applies config/samples: its DRA pool is deleted (and its classes
    gone) when the module ends, so later tests meet no class they did not declare."""
    yield
    delete_and_wait(kube, NPG, SAMPLE_DRA_POOL)


@pytest.fixture(scope="module")
def driver(kube: Kube, agents: None) -> Iterator[dradriver.DraDriver]:
    """The simulated NVIDIA DRA driver, for a module's tests (``agents``: the MIG manager)."""
    sim = dradriver.DraDriver(kube).start()
    try:
        yield sim
    finally:
        sim.stop()


WHOLE_GPUS = {"mig": {"layouts": [{"devices": "all", "profiles": {}}]}}


def whole_gpu_pool(kube: Kube, dra_objects: DraObjects, pool: str) -> str:
    """A DRA pool of one node of four H100s at whole GPUs, Ready, with its DeviceClass
    served (what the per-GPU DRA stories start from); the node's name."""
    [node] = fleet.create_nodes(kube, fleet.pool(pool, "H100-80GB", 1, devices=4, dra=True))
    spec = {**pool_spec(pool, WHOLE_GPUS, maxUnavailable=1), "allocation": "DRA"}
    kube.create(NPG, custom("NodePoolGeometry", dra_objects.track(NPG, pool), spec))
    wait_ready(kube, pool, 180, "whole GPUs on the DRA pool")
    gpu_class = path_of("resource.k8s.io/v1", "deviceclasses", "gpu.tessera.io")
    eventually(lambda: kube.get_or_none(gpu_class), 60)
    return node
