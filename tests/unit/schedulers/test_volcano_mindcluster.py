"""MindCluster mode on Volcano: the deviceshare switch and init-params, read by Volcano's parser.

What Tessera writes into ``volcano-scheduler.conf`` for a ``spec.ascend.mode MindCluster``
policy is read back by ``devcluster.volcano_conf`` — the stand-in for Volcano's own parser,
written from its code, not Tessera's — which must register the MindCluster vNPU device with
dynamic segmentation, keep every plugin and configuration the person wrote, and, once the
policy is gone, read what it read before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import volcano_conf as volcano
from tessera.api.v1alpha1.scheduler import SchedulerSpec
from tessera.domain.schedulers.demands import ObjectKey, PolicyDemand, VolcanoDemand
from tessera.domain.schedulers.versions import Detected, Version
from tessera.domain.schedulers.volcano import conf as v
from tessera.domain.schedulers.volcano import plan as vp

DATA = Path(__file__).parents[2] / "data" / "volcano"
KEY = ObjectKey("volcano-system", "volcano-scheduler-configmap")
DEPLOY = ObjectKey("volcano-system", "volcano-scheduler")
EXAMPLES = ["vgpu.conf", "hami-vnpu.conf", "mindcluster.conf", "no-deviceshare.conf"]


V1_16 = Version(1, 16, 0)


def mindcluster(name: str = "mc", version: Version = V1_16) -> PolicyDemand:
    spec = SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": 10}})
    found = {"volcano": Detected(version, "image")}
    return PolicyDemand(name, spec, ("310P3",), False, None, found, mindcluster=True)


def hami(name: str = "hami") -> PolicyDemand:
    spec = SchedulerSpec.model_validate({"name": "Volcano", "volcano": {"weight": 10}})
    found = {"volcano": Detected(Version(1, 16, 0), "image")}
    return PolicyDemand(name, spec, ("310P3",), False, None, found, ascend=True)


def demand(*policies: PolicyDemand) -> VolcanoDemand:
    return VolcanoDemand(KEY, policies, {DEPLOY: {"spec": {}}})


@pytest.mark.parametrize("example", EXAMPLES)
def test_volcano_reads_dynamic_mindcluster_vnpu_and_keeps_the_persons_settings(
    example: str,
) -> None:
    before = (DATA / example).read_text()
    found = vp.plan(demand(mindcluster()), before, {}, {})
    assert found.conf is not None and found.verdicts["mc"].state == "ready", found.verdicts
    read, was = volcano.read(found.conf), volcano.read(before)
    assert read.mindcluster_vnpu and read.dynamic_vnpu
    assert read.hami_vnpu == was.hami_vnpu  # no HAMi policy: HAMi mode is left as it was
    assert read.actions == was.actions
    assert [p for p in read.plugins if p != "deviceshare"] == [
        p for p in was.plugins if p != "deviceshare"
    ]
    for name, args in was.configurations.items():  # every other init-param stays
        kept = {k: x for k, x in args.items() if k != "presetVirtualDevice"}
        assert kept.items() <= read.configurations[name].items()
    # converged: a second plan writes the same text
    assert vp.plan(demand(mindcluster()), found.conf, {}, found.previous).conf == found.conf


@pytest.mark.parametrize("example", EXAMPLES)
def test_released_the_conf_reads_as_before(example: str) -> None:
    before = (DATA / example).read_text()
    written = vp.plan(demand(mindcluster()), before, {}, {})
    assert written.conf is not None
    released = vp.plan(demand(), written.conf, {}, written.previous)
    assert released.conf is not None
    assert volcano.read(released.conf) == volcano.read(before)


def test_hami_and_mindcluster_policies_turn_both_switches_on() -> None:
    conf = (DATA / "no-deviceshare.conf").read_text()
    entry = {"chipName": "310P3", "commonWord": "Ascend310P", "templates": []}
    found = vp.plan(demand(mindcluster(), hami()), conf, {"310P3": entry}, {})
    assert found.conf is not None
    read = volcano.read(found.conf)
    assert read.mindcluster_vnpu and read.hami_vnpu and read.dynamic_vnpu


def test_volcano_before_1_14_is_a_trap_and_nothing_is_written() -> None:
    conf = (DATA / "no-deviceshare.conf").read_text()
    found = vp.plan(demand(mindcluster(version=Version(1, 13, 0))), conf, {}, {})
    assert found.conf is None
    assert found.verdicts["mc"].reason == "SchedulerTrap"
    assert "AscendMindClusterVNPUEnable (Volcano v1.14" in found.verdicts["mc"].message


def test_an_init_params_entry_is_added_where_there_is_none() -> None:
    text = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: predicates\n'
    out = v.edit(text, {v.ENABLE_MINDCLUSTER: True, v.PRESET_VIRTUAL_DEVICE: "false"})
    assert out.endswith(
        'configurations:\n- name: init-params\n  arguments:\n    presetVirtualDevice: "false"\n'
    )
    assert volcano.read(out).dynamic_vnpu
    # a list of other configurations gets one more entry, in its own indentation
    other = text + "configurations:\n  - name: other\n    arguments: {a: b}\n"
    out = v.edit(other, {v.PRESET_VIRTUAL_DEVICE: "false"})
    read = volcano.read(out)
    assert read.configurations == {
        "other": {"a": "b"},
        "init-params": {"presetVirtualDevice": "false"},
    }


# The stand-in refuses what Volcano refuses and reads what Volcano reads (so the checks above
# can fail): a key written twice, a preset flag written as a boolean, a switch as a string.


def test_the_stand_in_refuses_a_key_written_twice() -> None:
    text = "actions: a\nactions: b\ntiers: []\n"
    with pytest.raises(volcano.ConfError, match="already defined"):
        volcano.read(text)


def test_the_stand_in_reads_only_a_string_false_and_only_a_boolean_switch() -> None:
    base = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n'
    quoted = base + '      deviceshare.AscendMindClusterVNPUEnable: "true"\n'
    assert not volcano.read(quoted).mindcluster_vnpu
    boolean = base + "      deviceshare.AscendMindClusterVNPUEnable: true\n"
    as_bool = (
        boolean
        + "configurations:\n- name: init-params\n  arguments: {presetVirtualDevice: false}\n"
    )
    assert volcano.read(as_bool).mindcluster_vnpu and not volcano.read(as_bool).dynamic_vnpu
