"""``tessera suggest POOL`` on a DRA pool (issue 29 item 1: "DRA claims for its
DeviceClasses"), on the real control plane with kube-scheduler's DRA allocator and the
simulated NVIDIA DRA driver.

One H100 node of four GPUs in a pool with ``allocation: DRA`` at whole GPUs; two replicas
hold a whole GPU each through claims kube-scheduler allocates; three pods then ask, through
claims of their own, for ``mig-1g.10gb.tessera.io``, a profile the pool lacks, and
kube-scheduler marks them Unschedulable. ``tessera suggest``, run with a token of the
documented read-only roles, reads who holds which GPU and what pends from the claims, and
prints a patch that changes idle GPUs only; one pod whose claim asks ``allocationMode: All``
of a MIG class makes the answer an error naming the claim, never "no change".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builders import DeploymentWrapper
from devcluster import dradriver
from tessera.adapters.kube import Kube, path_of

from . import story_support as story
from .conftest import OperatorProcess
from .dra_support import DraObjects, dra_objects, driver, whole_gpu_pool
from .faults import agents
from .helpers import app_pods, eventually, namespace, wait_running
from .test_suggest_live import _indexes, reader, suggest

__all__ = ["agents", "dra_objects", "driver", "reader"]
pytestmark = pytest.mark.integration
RESOURCE = "resource.k8s.io/v1"
POOL, NS, BUSY, WANTED = "sg-dra", "sg-dra", 2, 3


def _claims_of(kube: Kube, app: str, cls: str, **exactly: Any) -> dict[str, Any]:
    """A Deployment of ``app`` whose pods each ask through a claim template for ``cls``."""
    template = {
        "metadata": {"name": app},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, **exactly}}]
                }
            }
        },
    }
    kube.create(path_of(RESOURCE, "resourceclaimtemplates", namespace=NS), template)
    manifest = DeploymentWrapper(app).replicas(1).pool(POOL).obj()
    pod = manifest["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": app}]
    pod["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return manifest


def _held(kube: Kube, node: str) -> list[int]:
    """The GPUs the busy replicas' claims hold on ``node`` (the sim names them ``gpu-<i>``)."""
    out = []
    for claim in kube.list(path_of(RESOURCE, "resourceclaims", namespace=NS)):
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []
        out += [int(r["device"].removeprefix("gpu-")) for r in results if r["pool"] == node]
    return sorted(out)


def test_suggest_reads_a_dra_pools_claims_and_changes_idle_gpus_only(
    kube: Kube,
    operator: OperatorProcess,
    driver: dradriver.DraDriver,
    dra_objects: DraObjects,
    reader: Path,
) -> None:
    node = whole_gpu_pool(kube, dra_objects, POOL)
    namespace(kube, NS)
    busy = _claims_of(kube, "busy", "gpu.tessera.io")
    busy["spec"]["replicas"] = BUSY
    kube.create(path_of("apps/v1", "deployments", namespace=NS), busy)
    wait_running(kube, NS, "busy", BUSY, 90)
    held = eventually(lambda: _held(kube, node) if len(_held(kube, node)) == BUSY else None, 60)

    code, body, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 0, text
    assert body["patch"] is None and body["pending"] == {} and body["unknownUsage"] == []

    want = _claims_of(kube, "want", "mig-1g.10gb.tessera.io")
    want["spec"]["replicas"] = WANTED
    kube.create(path_of("apps/v1", "deployments", namespace=NS), want)
    eventually(lambda: story.unschedulable(kube, NS, "want", WANTED), 90, "3 pods Unschedulable")

    code, body, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 2, text
    names = sorted(f"{NS}/{p['metadata']['name']}" for p in app_pods(kube, NS, "want"))
    assert body["pending"] == {"1g.10gb": names}
    assert body["unknownUsage"] == [], body["unknownUsage"]  # the claims say who holds what
    assert body["reasons"][0].startswith(f"{WANTED} pods want 1g.10gb for "), body["reasons"]
    layouts = body["patch"]["spec"]["mig"]["layouts"]
    assert layouts[0] == {"devices": "all", "profiles": {}}
    changed = [i for lay in layouts[1:] for i in _indexes(lay["devices"])]
    assert changed and not set(changed) & set(held), f"busy GPUs {held} in {layouts}"
    assert sum(lay["profiles"].get("1g.10gb", 0) for lay in layouts[1:]) >= WANTED

    # a claim no count can be read from: the answer is an error naming it
    odd = _claims_of(kube, "odd", "mig-1g.10gb.tessera.io", allocationMode="All")
    kube.create(path_of("apps/v1", "deployments", namespace=NS), odd)
    eventually(lambda: story.unschedulable(kube, NS, "odd", 1), 90, "the odd pod Unschedulable")
    code, _, text = suggest(reader, POOL, "--pend-threshold", "0s")
    assert code == 1, text
    [pod] = app_pods(kube, NS, "odd")
    assert f"pod {NS}/{pod['metadata']['name']}: its ResourceClaim {NS}/" in text, text
    assert "allocationMode All" in text, text
