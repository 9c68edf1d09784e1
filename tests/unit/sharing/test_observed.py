"""What the SharingPolicy controller hands planning: an absent ConfigMap stays absent.

Planning tells "the device-plugin map does not exist" (``plugin_data`` None)
from "it exists and is empty"; only the first lets an Ascend-only cluster plan
no map at all. The controller's snapshot and ``tessera plan`` must both say so.
"""

from __future__ import annotations

import pytest
from sharing_builders import npu_node

from tessera.controllers.sharing.observe import ConfigDocument, Snapshot
from tessera.domain.sharing import planning


def snapshot(plugin_map: dict[str, object] | None) -> Snapshot:
    facts = npu_node("a1", npus=2)
    nvidia = ConfigDocument("kube-system", "hami-device-plugin", "config.json", None)
    ascend = ConfigDocument("kube-system", "hami-device-node-config", "node-config.yaml", None)
    return Snapshot((), {"a1": {}}, {"a1": facts}, plugin_map, nvidia, ascend, {})


@pytest.mark.parametrize(
    ("plugin_map", "data"),
    [
        (None, None),
        ({"metadata": {"name": "device-plugin-configs"}}, {}),
        ({"metadata": {}, "data": {"default": "version: v1\n"}}, {"default": "version: v1\n"}),
    ],
)
def test_plugin_data_is_none_only_when_the_map_is_absent(
    plugin_map: dict[str, object] | None, data: dict[str, str] | None
) -> None:
    assert snapshot(plugin_map).observed().plugin_data == data


def test_an_ascend_only_snapshot_plans_no_device_plugin_write() -> None:
    plan = planning.plan([], snapshot(None).observed())
    assert not plan.device_plugin.writes_config_map and plan.device_plugin.converged
