"""HAMi node configs: Tessera's fields only, minimal JSON patches, people's entries kept."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonpatch
import pytest
import yaml
from sharing_builders import check_golden, policy

from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing.rendering import result_of

NV_WHERE = "kube-system/hami-device-plugin (config.json)"
ASC_WHERE = "kube-system/hami-device-node-config (node-config.yaml)"
# Keys of HAMi's NVIDIA and Ascend node entries: docs/facts/hami.md §NVIDIA per-node config
NODECONFIG_KEYS = {
    "name", "operatingmode", "devicesplitcount", "devicememoryscaling", "devicecorescaling",
    "preconfigureddevicememory", "libcudaloglevel", "enablenumatopology", "migstrategy",
    "filterdevices", "enablegetpreferredallocation",
}  # fmt: skip
ASCEND_KEYS = {"name", "hami-vnpu-core", "vDeviceCount", "filterDevices"}

PEOPLE = {
    "nodeconfig": [
        {"name": "gpu-1", "operatingmode": "hami-core", "devicesplitcount": 5,
         "filterdevices": {"uuid": [], "index": [7]}},
        {"name": "gpu-9", "operatingmode": "mig", "migstrategy": "mixed"},
    ]
}  # fmt: skip


def nv(
    document: Any, desired: dict[str, Any], managed: Mapping[str, str] | None = None
) -> hami.EntriesPlan:
    return hami.plan_entries(
        document, list_key=hami.NVIDIA_LIST, owned=hami.NVIDIA_FIELDS, desired=desired,
        managed=managed or {}, where=NV_WHERE,
    )  # fmt: skip


def asc(
    document: Any, desired: dict[str, Any], managed: Mapping[str, str] | None = None
) -> hami.EntriesPlan:
    return hami.plan_entries(
        document, list_key=hami.ASCEND_LIST, owned=hami.ASCEND_FIELDS, desired=desired,
        managed=managed or {}, where=ASC_WHERE,
    )  # fmt: skip


def golden_text(plan: hami.EntriesPlan) -> str:
    return (
        json.dumps({"patch": list(plan.patch), "notes": [n.message for n in plan.notes]}, indent=2)
        + "\n"
    )


def assert_applies(document: Any, plan: hami.EntriesPlan) -> None:
    assert jsonpatch.apply_patch(document or {}, list(plan.patch)) == plan.document


def test_fields_for_each_mode() -> None:
    spec = policy("p", "HAMiCore", hamiCore={"mode": "TimeSlicing", "deviceSplitCount": 4}).spec
    assert spec.hami_core is not None
    assert hami.nvidia_fields(spec.hami_core) == {
        "operatingmode": "hami-core", "devicesplitcount": 4,
        "devicememoryscaling": 1.0, "devicecorescaling": 1.0,
    }  # fmt: skip
    mig = policy("p", "HAMiCore", hamiCore={"mode": "MIG"}).spec.hami_core
    assert mig is not None and hami.nvidia_fields(mig) == {"operatingmode": "mig"}


def test_mps_mode_writes_hami_core_and_says_why() -> None:
    result = result_of(policy("p", "HAMiCore", hamiCore={"mode": "MPS"}))
    assert result.hami_fields is not None and result.hami_fields["operatingmode"] == "hami-core"
    [notice] = result.notices
    assert "no MPS code path" in notice and "other than 'mig' as hami-core" in notice


CORE = {
    "operatingmode": "hami-core",
    "devicesplitcount": 10,
    "devicememoryscaling": 1.0,
    "devicecorescaling": 1.0,
}


@pytest.mark.parametrize(
    ("name", "document", "desired", "managed"),
    [
        ("hami-nvidia-add-to-empty", None, {"gpu-2": CORE}, {}),
        ("hami-nvidia-merge-into-people-entry", PEOPLE, {"gpu-1": CORE}, {}),
        (
            "hami-nvidia-switch-to-mig",
            {"nodeconfig": [{"name": "gpu-1", **CORE}]},
            {"gpu-1": {"operatingmode": "mig"}},
            {"gpu-1": hami.digest(CORE)},
        ),
        (
            "hami-nvidia-release",
            {"nodeconfig": [{"name": "gpu-2", **CORE}, *PEOPLE["nodeconfig"]]},
            {},
            {"gpu-2": hami.digest(CORE), "gpu-1": "000000"},
        ),
    ],
)
def test_nvidia_patches_match_golden(
    name: str, document: Any, desired: dict[str, Any], managed: dict[str, str]
) -> None:
    got = nv(document, desired, managed)
    check_golden(f"{name}.json", golden_text(got))
    assert_applies(document, got)
    for entry in got.document["nodeconfig"]:
        assert set(entry) <= NODECONFIG_KEYS
        assert entry.get("operatingmode", "hami-core") in ("hami-core", "mig")
    assert nv(got.document, desired, got.managed).patch == ()  # converged: zero writes


def test_people_fields_and_entries_survive() -> None:
    got = nv(PEOPLE, {"gpu-1": CORE})
    entries = {e["name"]: e for e in got.document["nodeconfig"]}
    assert entries["gpu-1"]["filterdevices"] == {"uuid": [], "index": [7]}
    assert entries["gpu-9"] == PEOPLE["nodeconfig"][1]
    released = nv(got.document, {}, got.managed)
    kept = {e["name"]: e for e in released.document["nodeconfig"]}
    assert kept["gpu-1"] == {"name": "gpu-1", "filterdevices": {"uuid": [], "index": [7]}}
    assert "gpu-9" in kept


def test_split_count_change_is_one_replace() -> None:
    doc = {"nodeconfig": [{"name": "gpu-1", **CORE}]}
    got = nv(doc, {"gpu-1": {**CORE, "devicesplitcount": 20}}, {"gpu-1": hami.digest(CORE)})
    assert got.patch == ({"op": "replace", "path": "/nodeconfig/0/devicesplitcount", "value": 20},)


def test_hand_edit_of_owned_field_is_restored_with_message() -> None:
    doc = {"nodeconfig": [{"name": "gpu-1", **CORE, "devicesplitcount": 3}]}
    got = nv(doc, {"gpu-1": CORE}, {"gpu-1": hami.digest(CORE)})
    assert [n.message for n in got.notes if n.restores] == [
        'restored operatingmode="hami-core", devicesplitcount=10, devicememoryscaling=1.0, '
        f"devicecorescaling=1.0 for node gpu-1 in {NV_WHERE} (edited by hand)"
    ]
    assert got.patch == ({"op": "replace", "path": "/nodeconfig/0/devicesplitcount", "value": 10},)


def test_policy_change_is_not_reported_as_drift() -> None:
    doc = {"nodeconfig": [{"name": "gpu-1", **CORE}]}
    got = nv(doc, {"gpu-1": {**CORE, "devicesplitcount": 4}}, {"gpu-1": hami.digest(CORE)})
    assert [n.action for n in got.notes] == ["add"]


def test_managed_annotation_round_trips() -> None:
    marks = {"gpu-2": "abcdef", "gpu-1": "123456"}
    text = hami.managed_annotation(marks)
    assert text == "gpu-1=123456,gpu-2=abcdef"
    assert hami.managed_nodes({"tessera.io/managed-nodes": text}) == marks


SOFT = {"hami-vnpu-core": True, "vDeviceCount": 7}
ASCEND_PEOPLE = {"nodes": [{"name": "npu-1", "filterDevices": {"index": [3], "uuid": []}}]}


@pytest.mark.parametrize(
    ("name", "document", "desired", "managed"),
    [
        ("hami-ascend-soft-slicing", ASCEND_PEOPLE, {"npu-1": SOFT, "npu-2": SOFT}, {}),
        (
            "hami-ascend-back-to-templates",
            {"nodes": [{"name": "npu-1", **SOFT}]},
            {"npu-1": {"hami-vnpu-core": False}},
            {"npu-1": hami.digest(SOFT)},
        ),
    ],
)
def test_ascend_patches_match_golden(
    name: str, document: Any, desired: dict[str, Any], managed: dict[str, str]
) -> None:
    got = asc(document, desired, managed)
    check_golden(f"{name}.json", golden_text(got))
    assert_applies(document, got)
    text = yaml.safe_dump(dict(got.document), sort_keys=False)
    for entry in yaml.safe_load(text)["nodes"]:
        assert set(entry) <= ASCEND_KEYS
        assert isinstance(entry.get("hami-vnpu-core", False), bool)
        assert isinstance(entry.get("vDeviceCount", 1), int)
    assert asc(got.document, desired, got.managed).patch == ()


def test_ascend_fields() -> None:
    spec = policy("p", "Exclusive", ascend={"softSlicing": True, "vDeviceCount": 7}).spec
    assert spec.ascend is not None and hami.ascend_fields(spec.ascend) == SOFT
