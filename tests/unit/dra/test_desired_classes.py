"""The desired DeviceClasses from every pool and policy: who declares what, who is refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from dra_builders import LAYOUT_A, LAYOUT_B, policy, pool

from tessera.domain.dra import PoolInput, desired_classes, provides

POOL = "NodePoolGeometry/p"


def layouts(*items: tuple[Any, dict[str, int]]) -> dict[str, Any]:
    return {"mig": {"layouts": [{"devices": d, "profiles": p} for d, p in items]}}


@pytest.mark.parametrize(
    ("layout", "gpus", "want"),
    [
        pytest.param(None, 8, ("gpu",), id="no-mig-whole-gpus"),
        pytest.param(LAYOUT_B, 8, ("1g.10gb",), id="all-mig"),
        pytest.param(LAYOUT_A, 8, ("1g.10gb", "2g.20gb", "3g.40gb"), id="mixed-profiles"),
        pytest.param(
            layouts(("all", {"1g.10gb": 7}), ("0-1", {})),
            8,
            ("1g.10gb", "gpu"),
            id="empty-profiles-keep-mig-off",
        ),
        pytest.param(
            layouts(("0-3", {"1g.10gb": 7})), 8, ("1g.10gb", "gpu"), id="unnamed-index-whole"
        ),
        pytest.param(layouts(("0-3", {"1g.10gb": 7})), 4, ("1g.10gb",), id="all-indexes-named"),
        pytest.param(
            layouts(("0-3", {"1g.10gb": 7})), None, ("1g.10gb", "gpu"), id="unknown-count"
        ),
        pytest.param(
            layouts(("all", {"1g.10gb+me": 1})), None, ("1g.10gb+me",), id="all-covers-unknown"
        ),
    ],
)
def test_provides(
    layout: Mapping[str, Any] | None, gpus: int | None, want: tuple[str, ...]
) -> None:
    assert provides(pool(layout).spec, gpus) == want


def test_pool_classes_shared_by_pools_and_ignored_for_device_plugin_pools() -> None:
    found = desired_classes(
        {"a": pool(LAYOUT_B), "b": pool(LAYOUT_A), "c": pool(LAYOUT_B, allocation="DevicePlugin")},
        {},
    )
    assert sorted(found.classes) == [
        "mig-1g.10gb.tessera.io",
        "mig-2g.20gb.tessera.io",
        "mig-3g.40gb.tessera.io",
    ]
    one = found.classes["mig-1g.10gb.tessera.io"]
    assert one.declared_by == ("NodePoolGeometry/a", "NodePoolGeometry/b")
    assert one.metadata()["annotations"] == {
        "tessera.io/declared-by": "NodePoolGeometry/a,NodePoolGeometry/b"
    }
    assert one.metadata()["labels"] == {"app.kubernetes.io/managed-by": "tessera"}
    assert one.spec() == {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'mig' && "
                    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
                }
            }
        ]
    }
    assert "NodePoolGeometry/c" not in found.declared


@pytest.mark.parametrize(
    ("backend", "dra", "gates", "want", "problem"),
    [
        pytest.param(
            "MPS",
            {"mps": {"defaultActiveThreadPercentage": 20}},
            {"mps": True},
            {
                "s.gpu.sharing.tessera.io": "GpuConfig",
                "s.mig-1g.10gb.sharing.tessera.io": "MigDeviceConfig",
            },
            None,
            id="mps-gate-on-config-per-class",
        ),
        pytest.param(
            "Exclusive",
            {},
            {},
            {"s.gpu.sharing.tessera.io": None, "s.mig-1g.10gb.sharing.tessera.io": None},
            None,
            id="exclusive-same-names-no-config",
        ),
        pytest.param("MPS", {}, {}, {}, "spec.backend", id="gate-off-refused-nothing-declared"),
    ],
)
def test_policy_classes(
    backend: str,
    dra: dict[str, Any],
    gates: dict[str, bool],
    want: dict[str, str | None],
    problem: str | None,
) -> None:
    mixed = pool(layouts(("0-3", {"1g.10gb": 7})), 8, mps=gates.get("mps", False))
    found = desired_classes({"p": mixed}, {"s": policy("p", backend, **dra)})
    mine = {n: c for n, c in found.classes.items() if n.startswith("s.")}
    assert {n: (c.config or {}).get("kind") for n, c in mine.items()} == want
    assert found.declared["SharingPolicy/s"] == tuple(sorted(want))
    assert sorted(n for n in found.classes if not n.startswith("s.")) == [
        "gpu.tessera.io",
        "mig-1g.10gb.tessera.io",
    ]
    if problem is None:
        assert not found.problems
    else:
        assert [p.field for p in found.problems["SharingPolicy/s"]] == [problem]
        assert found.held == frozenset({"SharingPolicy/s"})


def test_policy_on_device_plugin_or_missing_pool_declares_nothing() -> None:
    found = desired_classes(
        {"dp": pool(LAYOUT_B, allocation="DevicePlugin")},
        {"s": policy("dp", "Exclusive"), "t": policy("gone", "Exclusive")},
    )
    assert found.classes == {}
    assert found.declared == {}


def test_too_long_name_is_refused_not_raised() -> None:
    name = "x" * 240
    found = desired_classes({"p": pool()}, {name: policy("p", "Exclusive")})
    problems = found.problems[f"SharingPolicy/{name}"]
    assert problems[0].reason == "InvalidSelector"
    assert "over 253" in problems[0].message
    assert found.declared[POOL] == ("gpu.tessera.io",)


def test_every_pool_and_policy_declares_its_classes() -> None:
    pools = {f"p{i}": pool(LAYOUT_A if i % 2 else None) for i in range(50)}
    found = desired_classes(pools, {f"s{i}": policy(f"p{i}", "Exclusive") for i in range(50)})
    assert len(found.declared) == 100
    assert isinstance(next(iter(pools.values())), PoolInput)
