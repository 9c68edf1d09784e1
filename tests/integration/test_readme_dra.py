"""docs/examples.md's "DRA pools" example (linked from the README), applied verbatim with kubectl
on the real control plane.

A platform engineer copies the section's two YAML blocks: the pool and its SharingPolicy,
then the ResourceClaimTemplate and the Deployment into the workload's namespace. Two H100
nodes of the pool run the simulated MIG manager and NVIDIA DRA driver (as in
``test_dra_rollout``). Every replica's claim is allocated by kube-scheduler to a device of
exactly the profile the template's class declares, on a node of the pool, and the class
carries the policy's MPS config.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from devcluster import dradriver, fleet
from tessera.adapters.kube import Kube, path_of

from .conftest import ROOT, Kubectl, OperatorProcess
from .dra_support import NPG, SP, DraObjects, dra_objects
from .faults import agents, wait_ready
from .helpers import eventually, namespace, wait_running
from .test_dra_rollout import RESOURCE, allocations, driver, profile_of

__all__ = ["agents", "dra_objects", "driver"]  # fixtures
pytestmark = pytest.mark.integration
NS = "readme-dra"


def readme_blocks() -> list[list[dict[str, Any]]]:
    """The YAML blocks of docs/examples.md's "DRA pools" section, each as its documents."""
    text = (ROOT / "docs" / "examples.md").read_text()
    section = text.split("\n## DRA pools\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return [[d for d in yaml.safe_load_all(b) if d] for b in blocks]


def test_the_readme_example_gets_claims_on_devices_of_the_declared_profile(
    kube: Kube,
    kubectl: Kubectl,
    operator: OperatorProcess,
    driver: dradriver.DraDriver,
    dra_objects: DraObjects,
) -> None:
    cluster_scoped, workload = readme_blocks()
    kinds = [d["kind"] for d in cluster_scoped + workload]
    assert kinds == ["NodePoolGeometry", "SharingPolicy", "ResourceClaimTemplate", "Deployment"]
    pool_obj, policy_obj = cluster_scoped
    pool, policy = pool_obj["metadata"]["name"], policy_obj["metadata"]["name"]
    label = pool_obj["spec"]["nodeSelector"]["matchLabels"]["tessera.io/pool"]
    names = fleet.create_nodes(kube, fleet.pool(label, "H100-80GB", 2, devices=1, dra=True))
    dra_objects.track(NPG, pool)
    dra_objects.track(SP, policy)
    kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump_all(cluster_scoped))
    wait_ready(kube, pool, 240, "the DRA pool of docs/examples.md")

    template, deployment = workload
    klass = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
    profile = re.fullmatch(rf"{policy}\.mig-(.+)\.sharing\.tessera\.io", klass)
    assert profile is not None, klass  # the policy's class of one MIG profile
    written = eventually(
        lambda: kube.get_or_none(path_of(RESOURCE, "deviceclasses", klass)), 60, klass
    )
    sharing = written["spec"]["config"][0]["opaque"]["parameters"]["sharing"]
    assert sharing["strategy"] == "MPS", sharing
    assert sharing["mpsConfig"] == policy_obj["spec"]["dra"]["mps"], sharing

    namespace(kube, NS)
    kubectl.ok("apply", "-n", NS, "-f", "-", stdin=yaml.safe_dump_all(workload))
    app, replicas = deployment["metadata"]["name"], deployment["spec"]["replicas"]
    wait_running(kube, NS, app, replicas, 120)
    held = eventually(
        lambda: len(allocations(kube, NS)) == replicas and allocations(kube, NS),
        60,
        "every replica's claim allocated",
    )
    for node, device, claim in held:
        assert node in names, (node, claim)
        assert profile_of(kube, node, device) == profile.group(1), (node, device, claim)
    kube.delete(path_of("v1", "namespaces", NS))  # its pods would hold the nodes' devices
