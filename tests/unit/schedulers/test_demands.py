"""Each policy's ask of the scheduler side, and the asks per Volcano scheduler config."""

from __future__ import annotations

from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.schedulers.demands import ObjectKey, chips_of, demand, volcano_demands

VOLCANO = {"name": "Volcano", "volcano": {"policy": "spread"}}


def spec(**scheduler: object) -> SharingPolicySpec:
    return SharingPolicySpec.model_validate(
        {
            "nodeSelector": {"matchLabels": {"p": "a"}},
            "backend": "Exclusive",
            "ascend": {"softSlicing": True},
            "scheduler": scheduler,
        }
    )


def test_chips_are_catalog_names_and_unknown_labels_are_kept() -> None:
    labels = [
        {c.NPU_CHIP_NAME_LABEL: "Ascend310P3"},
        {c.NPU_CHIP_NAME_LABEL: "310P3"},
        {c.NPU_CHIP_NAME_LABEL: "910Z9"},
        {"other": "x"},
    ]
    assert chips_of(labels) == ("310P3", "910Z9")


def test_a_policy_demand() -> None:
    made = spec(name="HAMi")
    assert made.scheduler is not None
    one = demand("a", made, made.scheduler, [{c.NPU_CHIP_NAME_LABEL: "310P3"}])
    assert (one.chips, one.soft_slicing, one.ascend, one.hami_core) == (
        ("310P3",),
        True,
        True,
        None,
    )
    assert one.hami_config == ObjectKey("kube-system", "hami-scheduler-device")


def test_volcano_demands_group_by_config_and_a_released_one_has_no_policies() -> None:
    volcano, hami = spec(**VOLCANO), spec(name="HAMi")
    assert volcano.scheduler is not None and hami.scheduler is not None
    asks = [
        demand("v1", volcano, volcano.scheduler, []),
        demand("v2", volcano, volcano.scheduler, []),
        demand("h", hami, hami.scheduler, []),
    ]
    gone = ObjectKey("volcano-system", "old-config")
    grouped = volcano_demands(asks, [gone])
    default = ObjectKey("volcano-system", "volcano-scheduler-configmap")
    assert list(grouped) == [gone, default]  # sorted
    assert [p.policy for p in grouped[default].policies] == ["v1", "v2"]
    assert grouped[gone].policies == ()
    assert str(default) == "volcano-system/volcano-scheduler-configmap"
