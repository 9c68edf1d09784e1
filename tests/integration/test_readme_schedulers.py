"""docs/examples.md's "Schedulers: HAMi and Volcano" example (linked from the README), applied
verbatim with kubectl.

A platform engineer has HAMi and Volcano installed (``devcluster.schedulers``: their config
maps and scheduler Deployments as the charts leave them), the Ascend runtime class, and two
310P3 nodes labelled ``ascend=on`` where HAMi's Ascend plugin runs (simulated). They copy the
section's two YAML blocks: the SharingPolicy, then the two pods into ``inference``. Every place
of the field report's chain is then checked from outside (``devcluster.chain``): soft slicing
rolled out and advertised, HAMi's and Volcano's configs, Volcano's restart, the pod contract.
The checks of parts not on this branch yet are listed by ``chain.REQUIRED``; the page's
blocks are the demo's (``devcluster/soft_slicing.yaml``), so ``make demo`` plays this story.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devcluster import chain, fleet, hami_ascend, schedulers
from devcluster.controlplane import ControlPlane
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import ROOT, Kubectl, OperatorProcess
from .sharing_support import delete_policy

pytestmark = pytest.mark.integration


def readme_blocks() -> list[list[dict[str, Any]]]:
    text = (ROOT / "docs" / "examples.md").read_text()
    section = text.split("\n## Schedulers: HAMi and Volcano\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return [[d for d in yaml.safe_load_all(b) if d] for b in blocks]


@pytest.fixture
def plugin(kube: Kube, operator: OperatorProcess) -> Iterator[None]:
    chain.install(kube)
    sim = hami_ascend.HamiAscendPlugin(kube).start()
    yield
    sim.stop()
    schedulers.uninstall(kube)  # later modules find no HAMi or Volcano of this one


def test_the_readme_chain_agrees_in_every_place(
    kube: Kube, kubectl: Kubectl, control_plane: ControlPlane, plugin: None
) -> None:
    (policy,), pods = readme_blocks()
    assert [policy, *pods] == chain.manifests()  # what make demo applies
    on = {c.HAMI_ASCEND_NODE_LABEL: c.HAMI_ASCEND_NODE_VALUE}
    pool = policy["spec"]["nodeSelector"]["matchLabels"][c.POOL_LABEL]
    specs = [fleet.NodeSpec(f"{pool}-{i}", "Ascend310P3", 2, pool=pool, labels=on) for i in (0, 1)]
    fleet.create_nodes(kube, specs)
    kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump(policy))
    try:
        prefix = [str(control_plane.kubectl), f"--kubeconfig={control_plane.kubeconfig}"]
        found = chain.wait(kube, prefix, 180)
        text, ok = chain.report(found)
        print(text)
        assert ok, text
        assert any(x.ok and not x.needs for x in found), text  # soft slicing, at least
        answers = []
        for pod in pods:  # then the pods, one at a time: each answer is that pod's
            answers.append(
                kubectl("apply", "-n", chain.NAMESPACE, "-f", "-", stdin=yaml.safe_dump(pod))
            )
            assert answers[-1].returncode == 0, answers[-1].stderr  # podContract: Warn admits
            path = path_of("v1", "pods", pod["metadata"]["name"], chain.NAMESPACE)
            assert kube.get_or_none(path) is not None
        if "podcontract" in chain.REQUIRED:
            assert "Warning" not in answers[0].stderr, answers[0].stderr
            assert chain.MODE_ANNOTATION in answers[1].stderr, answers[1].stderr
    finally:
        delete_policy(kube, policy["metadata"]["name"])
