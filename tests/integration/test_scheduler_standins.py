"""The stand-in HAMi and Volcano installs (``devcluster.schedulers``): real Deployments.

What Tessera reads of a scheduler (its image tag, its config map) and what a restart does to it
(``kubectl rollout restart``: new pods) must be there as a Helm install leaves them. Their pods
are placed by kube-scheduler on the plain ``sim-system`` node and run by KWOK.
"""

from __future__ import annotations

import pytest
import yaml

from devcluster import schedulers
from tessera.adapters.kube import Kube, path_of
from tessera.api import constants as c

from .conftest import Kubectl
from .helpers import eventually

pytestmark = pytest.mark.integration


def test_both_installs_run_and_a_rollout_restart_makes_a_new_pod(
    kube: Kube, kubectl: Kubectl
) -> None:
    try:
        hami = schedulers.install_hami(kube)
        volcano = schedulers.install_volcano(kube)
        images = [x["image"] for x in hami["spec"]["template"]["spec"]["containers"]]
        assert images[1] == "projecthami/hami:v2.10.0", images
        image = volcano["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == "volcanosh/vc-scheduler:v1.16.0"
        device = kube.get(path_of("v1", "configmaps", "hami-scheduler-device", "kube-system"))
        config = yaml.safe_load(device["data"][c.HAMI_SCHEDULER_CONFIGMAP_KEY])
        assert config["vnpus"]["hamiVnpuCore"] is False
        assert config["nvidia"]["deviceSplitCount"] == 10
        conf_map = path_of("v1", "configmaps", "volcano-scheduler-configmap", "volcano-system")
        conf = yaml.safe_load(kube.get(conf_map)["data"][c.VOLCANO_SCHEDULER_CONFIGMAP_KEY])
        assert [p["name"] for p in conf["tiers"][1]["plugins"]][-1] == "binpack"

        (hami_pod,) = schedulers.wait_running(kube, "kube-system", "hami-scheduler")
        (before,) = schedulers.wait_running(kube, "volcano-system", "volcano-scheduler")
        assert hami_pod["spec"]["nodeName"] == before["spec"]["nodeName"] == "sim-system"

        kubectl.ok("-n", "volcano-system", "rollout", "restart", "deployment/volcano-scheduler")
        after = eventually(
            lambda: [
                p
                for p in schedulers.wait_running(kube, "volcano-system", "volcano-scheduler")
                if p["metadata"]["uid"] != before["metadata"]["uid"]
            ],
            60,
            "a new volcano-scheduler pod after the restart",
        )
        notes = after[0]["metadata"].get("annotations") or {}
        assert "kubectl.kubernetes.io/restartedAt" in notes, notes
        # a second install keeps what exists
        again = schedulers.install_volcano(kube, version="v1.15.0")
        assert again["spec"]["template"]["spec"]["containers"][0]["image"].endswith("v1.16.0")
    finally:
        schedulers.uninstall(kube)
