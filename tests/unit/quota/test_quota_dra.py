"""TenantQuota in DRA units: quota keys, reading them back, capacity from ResourceSlices."""

from typing import Any

import pytest
from quota_builders import MIG, members, rq, spec

from builders.dra import DeviceClassWrapper
from tessera.domain.dra import naming
from tessera.domain.quota import devices, names, objects
from tessera.domain.quota.planning import plan
from tessera.domain.quota.reporting import capacity_of, overcommitted, status

CLASS = "mig-1g.10gb.tessera.io"
DEV = f"{CLASS}.deviceclass.resource.k8s.io/devices"
WHOLE = "gpu.tessera.io.deviceclass.resource.k8s.io/devices"
CLAIMS = "count/resourceclaims.resource.k8s.io"
TEMPLATES = "count/resourceclaimtemplates.resource.k8s.io"


@pytest.mark.parametrize(
    ("resource", "key", "kind"),
    [
        pytest.param(MIG, f"requests.{MIG}", "extended", id="extended-resource"),
        pytest.param(DEV, DEV, "devices", id="dra-class-devices"),
        pytest.param(CLAIMS, CLAIMS, "count", id="claim-count"),
        pytest.param(TEMPLATES, TEMPLATES, "count", id="template-count"),
        pytest.param(
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
            "devices",
            id="someone-elses-class",
        ),
    ],
)
def test_each_resource_is_written_under_the_key_its_evaluator_counts(
    resource: str, key: str, kind: str
) -> None:
    assert names.quota_key(resource) == key
    assert names.resource_of(key) == resource
    assert names.is_extended(resource) == (kind == "extended")
    assert names.is_object_count(resource) == (kind == "count")
    assert (names.device_class(resource) is not None) == (kind == "devices")


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(f"requests.{DEV}", id="requests-prefixed-class-counts-nothing"),
        pytest.param(f"requests.{CLAIMS}", id="requests-prefixed-count"),
        pytest.param("pods", id="plain-native"),
        pytest.param(MIG, id="extended-without-requests"),
    ],
)
def test_keys_tessera_never_writes_are_stray(key: str) -> None:
    assert names.resource_of(key) is None
    got = objects.read(rq("ns1", hard={key: "2", DEV: "1"}))
    assert got is not None and got.stray == (key,) and got.hard == {DEV: 1}


def test_manifest_mixes_extended_and_dra_keys() -> None:
    body = objects.manifest("team-a", "ns1", {MIG: 4, DEV: 2, CLAIMS: 5})
    assert body["spec"]["hard"] == {CLAIMS: "5", DEV: "2", f"requests.{MIG}": "4"}


def test_total_in_devices_is_split_and_never_exceeded() -> None:
    seen = [objects.read(rq("a", hard={DEV: "1"}, status={"hard": {DEV: "1"}, "used": {DEV: "1"}}))]
    p = plan(
        "team-a", spec({CLAIMS: 3}, {DEV: 2}), members("team-a", "a", "b"), [s for s in seen if s]
    )
    assert sum(t[DEV] for t in p.targets.values()) <= 2
    assert all(t[CLAIMS] == 3 for t in p.targets.values())
    written = [a.manifest["spec"]["hard"] for a in (*p.wave1, *p.wave2) if a.manifest]
    assert written and all(DEV in h and f"requests.{DEV}" not in h for h in written)


def _class(name: str, *expressions: str, **spec: Any) -> dict[str, Any]:
    selectors = [{"cel": {"expression": e}} for e in expressions]
    return DeviceClassWrapper(name).spec({"selectors": selectors, **spec}).obj()


def _slice(node: str, generation: int, *kinds: str) -> dict[str, Any]:
    devs = []
    for i, kind in enumerate(kinds):
        attrs = (
            {"type": {"string": "gpu"}}
            if kind == "gpu"
            else {
                "type": {"string": "mig"},
                "profile": {"string": kind},
            }
        )
        devs.append({"name": f"d{i}", "attributes": attrs})
    pool = {"name": node, "generation": generation, "resourceSliceCount": 1}
    return {"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": pool, "devices": devs}}


SLICES = [
    _slice("n1", 1, "1g.10gb", "1g.10gb", "gpu"),
    _slice("n2", 2, "1g.10gb", "3g.40gb"),
    _slice("n2", 1, "1g.10gb", "1g.10gb", "1g.10gb"),  # replaced by generation 2: not counted
]


@pytest.mark.parametrize(
    ("classes", "want"),
    [
        pytest.param(
            [
                _class(CLASS, naming.selector("1g.10gb")),
                _class("gpu.tessera.io", naming.selector("gpu")),
            ],
            {DEV: 3, WHOLE: 1},
            id="tessera-selectors-counted-newest-generation-only",
        ),
        pytest.param([], {DEV: 0, WHOLE: 0}, id="no-class-nothing-allocatable"),
        pytest.param(
            [
                _class(
                    CLASS,
                    naming.selector("1g.10gb")
                    + " && device.attributes['gpu.nvidia.com'].productName == 'x'",
                )
            ],
            {WHOLE: 0},
            id="hand-edited-selector-unknown",
        ),
        pytest.param(
            [_class(CLASS, naming.selector("1g.10gb"), naming.selector("gpu"))],
            {WHOLE: 0},
            id="two-selectors-unknown",
        ),
        pytest.param(
            [_class(CLASS, naming.selector("1g.10gb"), config=[{"opaque": {}}])],
            {DEV: 3, WHOLE: 0},
            id="sharing-config-selects-the-same-devices",
        ),
    ],
)
def test_capacity_counts_only_classes_whose_selector_tessera_reads(
    classes: list[dict[str, Any]], want: dict[str, int]
) -> None:
    assert devices.capacity([DEV, WHOLE, CLAIMS, MIG], classes, SLICES) == want


def test_unknown_capacity_is_neither_compared_nor_shown() -> None:
    assert capacity_of(CLAIMS, {}) is None and capacity_of(DEV, {}) is None
    assert capacity_of(MIG, {}) == 0 and capacity_of(DEV, {DEV: 3}) == 3
    commitments = {"a": {CLAIMS: 50, DEV: 2}}
    assert overcommitted("a", commitments, {})[1] == "False"
    assert overcommitted("a", commitments, {DEV: 1})[1] == "True"
    tenant = spec({CLAIMS: 5}, {DEV: 2, MIG: 1})
    p = plan("team-a", tenant, members("team-a", "a"), [])
    assert status(tenant, p, [], {}, tenant="team-a", generation=1).capacity == {MIG: "0"}
    got = status(tenant, p, [], {DEV: 3}, tenant="team-a", generation=1)
    assert got.capacity == {DEV: "3", MIG: "0"}
