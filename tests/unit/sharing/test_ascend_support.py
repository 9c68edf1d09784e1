"""The Ascend chip support matrix: every chip by every path, accepted or refused with the words.

``SEED`` below is the seed's matrix retyped (its 有/无 per cell), not read from Tessera's table,
so a cell flipped in ``ascend_support.MATRIX`` fails here. Each refusal — the CRD's twin in
``tessera plan`` (``rules.first_broken``), the operator's check of a node's chip label (sharing
and geometry) — must name the chip, the choice and what the chip supports.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any

import pytest
from sharing_builders import POOL, npu_node, policy

from tessera.api import constants as c
from tessera.api.v1alpha1 import ascend_support as m
from tessera.api.v1alpha1 import rules
from tessera.api.v1alpha1.backends import ASCEND_MODES
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.api.v1alpha1.sharingpolicy import AscendSharing
from tessera.domain.cluster import pools
from tessera.domain.geometry import ascend
from tessera.domain.sharing import ascend_rules, nodes, planning, status

Y, N = True, False
# chip: driver templates, vCANN-RT, HAMi templates, HAMi-core, Volcano MindCluster
SEED: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "310P3": (Y, N, Y, Y, Y),
    "910A": (N, N, Y, N, N),
    "910B2": (N, N, Y, N, N),
    "910B3": (N, N, Y, N, N),
    "910B4": (Y, Y, Y, Y, N),
    "910B4-1": (Y, Y, Y, Y, N),
    "910C": (N, N, Y, N, N),
}
CELLS = [(chip, path, SEED[chip][i]) for chip in SEED for i, path in enumerate(m.PATHS)]
MODES = {path: mode for mode, path in m.PATH_OF_MODE.items()}


def test_the_matrix_is_the_seeds_cell_for_cell() -> None:
    assert list(m.MATRIX) == list(SEED)
    assert {chip: tuple(row.supports(p) for p in m.PATHS) for chip, row in m.MATRIX.items()} == SEED
    assert set(m.PATH_OF_MODE) == set(ASCEND_MODES)
    assert set(m.CHOICE) == set(m.PATHS) == set(m.TITLE)


def _assert_refusal(text: str, chip: str, path: m.Path) -> None:
    row = m.MATRIX[chip]  # type: ignore[index]
    assert f"chip {chip} " in text and f"does not support {m.TITLE[path]}" in text, text
    assert m.CHOICE[path] in text, text
    assert row.cells[path].says in text, text
    assert text.endswith(f"{chip} supports: {m.supports_text(row)}"), text
    for supported in row.supported:
        assert m.CHOICE[supported] in text.rsplit(" supports: ", maxsplit=1)[-1], text


@pytest.mark.parametrize(("chip", "path", "supported"), CELLS)
def test_check_accepts_or_refuses_every_cell(chip: str, path: m.Path, supported: bool) -> None:
    said = m.check(chip, path)
    assert (said == "") == supported, said
    if not supported:
        _assert_refusal(said, chip, path)
    # the DCMI spellings of the label answer the same
    assert m.check(f"Ascend{chip}", path) == said
    assert m.check(chip.lower(), path) == said


def test_a_chip_the_matrix_has_no_row_for_is_not_refused() -> None:
    assert m.row_of("310P1") is None
    assert all(m.check("310P1", p) == "" for p in m.PATHS)


@pytest.mark.parametrize(("chip", "path", "supported"), [x for x in CELLS if x[1] in MODES])
def test_tessera_plan_refuses_the_mode_the_chip_does_not_support(
    chip: str, path: m.Path, supported: bool
) -> None:
    spec = {"nodeSelector": {}, "backend": "Exclusive", "ascend": {"chip": chip}}
    spec["ascend"]["mode"] = MODES[path]
    spec["scheduler"] = {"name": "Volcano", "volcano": {}}
    found = rules.first_broken("SharingPolicy", spec)
    if supported:
        assert found is None
    else:
        assert found is not None and found[0] == "ascend"
        _assert_refusal(found[1], chip, path)


def test_the_effective_mode_is_checked_when_mode_is_absent() -> None:
    spec: dict[str, Any] = {"nodeSelector": {}, "backend": "Exclusive"}
    spec["ascend"] = {"chip": "910A", "softSlicing": True}
    assert rules.first_broken("SharingPolicy", spec) == ("ascend", m.refusal("910A", "HAMiCore"))
    spec["ascend"] = {"chip": "910A"}  # Templates: HAMi templates, which 910A takes
    assert rules.first_broken("SharingPolicy", spec) is None


@pytest.mark.parametrize("chip", list(SEED))
def test_tessera_plan_refuses_driver_templates_on_a_chip_without_them(chip: str) -> None:
    spec = {"nodeSelector": {}, "vnpu": {"chip": chip, "layouts": [{"templates": {}}]}}
    found = rules.first_broken("NodePoolGeometry", spec)
    if SEED[chip][0]:
        assert found is None
    else:
        assert found is not None and found[0] == "vnpu"
        _assert_refusal(found[1], chip, "DriverTemplates")


@pytest.mark.parametrize(("chip", "path", "supported"), [x for x in CELLS if x[1] in MODES])
def test_a_node_whose_chip_label_does_not_support_the_mode_is_held_and_named(
    chip: str, path: m.Path, supported: bool
) -> None:
    node = npu_node("npu-0", labels={c.NPU_CHIP_NAME_LABEL: chip, "ascend": "off"})
    ascend_spec = AscendSharing.model_construct(mode=MODES[path])
    errors = ascend_rules.check(ascend_spec, node)
    if supported:
        assert errors == ()
    else:
        (error,) = errors
        assert (error.field, error.node) == ("spec.ascend.mode", "npu-0")
        _assert_refusal(error.rule, chip, path)


def test_planning_holds_the_node_and_stalls_the_policy_with_the_chip() -> None:
    sp = policy("sp", "Exclusive", ascend={"mode": "HAMiCore"})
    good = npu_node("npu-good")
    bad = npu_node("npu-910a", labels={c.NPU_CHIP_NAME_LABEL: "910A"})
    plan = planning.plan([sp], planning.SharingObserved(nodes=(good, bad)))
    (error,) = plan.results["sp"].node_errors
    assert error.node == "npu-910a" and "chip 910A" in error.rule
    assert set(plan.hami_ascend.managed) == {"npu-good"}


def test_a_node_of_another_chip_than_spec_ascend_chip_is_named() -> None:
    sp = policy("sp", "Exclusive", ascend={"mode": "Templates", "chip": "310P3"})
    node = npu_node("npu-b4", labels={c.NPU_CHIP_NAME_LABEL: "910B4"})
    assert sp.spec.ascend is not None
    (error,) = ascend_rules.check(sp.spec.ascend, node)
    assert error.field == "spec.ascend.chip" and "910B4" in error.rule and "310P3" in error.rule


@pytest.mark.parametrize("chip", list(SEED))
def test_a_vnpu_pool_on_a_node_whose_chip_has_no_templates_is_invalid_naming_it(
    chip: str,
) -> None:
    spec = NodePoolGeometrySpec.model_validate(
        {"nodeSelector": {}, "vnpu": {"layouts": [{"templates": {}}]}}
    )
    labels = {c.NPU_CHIP_NAME_LABEL: chip, c.NPU_COUNT_LABEL: "2"}
    target = pools.target_for("p", spec, labels, {})
    invalid = target.desired.invalid
    if SEED[chip][0]:
        assert not invalid, invalid
    else:
        assert invalid.startswith(f"{c.NPU_CHIP_NAME_LABEL}={chip}: ")
        _assert_refusal(invalid.split(": ", 1)[1], chip, "DriverTemplates")


def test_a_vnpu_pool_declaring_another_chip_than_its_nodes_is_invalid() -> None:
    spec = NodePoolGeometrySpec.model_validate(
        {"nodeSelector": {}, "vnpu": {"chip": "910B4", "layouts": [{"templates": {}}]}}
    )
    labels = {c.NPU_CHIP_NAME_LABEL: "310P3", c.NPU_COUNT_LABEL: "2"}
    invalid = pools.target_for("p", spec, labels, {}).desired.invalid
    assert "spec.vnpu.chip is 910B4" in invalid and "310P3" in invalid


def test_every_catalog_chip_has_its_row_and_templates_exactly_where_the_row_says() -> None:
    for chip in ascend.chips():
        assert chip.support.supports("DriverTemplates") == bool(chip.templates), chip.chip
    with_templates = {r.chip for r in m.MATRIX.values() if r.supports("DriverTemplates")}
    assert with_templates == {chip.chip for chip in ascend.chips()}


def test_the_docs_table_is_generated_and_fresh() -> None:
    doc = FsPath(__file__).resolve().parents[3] / "docs" / "facts" / "ascend.md"
    text = doc.read_text()
    assert m.render(text) == text, "docs/facts/ascend.md is stale: run `make docs`"
    for row in m.MATRIX.values():
        assert f"| {row.chip} | {row.products} |" in text


# -- MindCluster on the node: HAMi's plugin there is a Conflict, preset vNPUs hold it


def _mindcluster(**spec: Any) -> Any:
    return policy(
        "mc",
        "Exclusive",
        ascend={"mode": "MindCluster"},
        scheduler={"name": "Volcano", "volcano": {}},
        **spec,
    )


def test_mindcluster_on_a_node_where_hamis_plugin_runs_is_a_conflict() -> None:
    node = npu_node("npu-0")  # the builder's node carries ascend=on: HAMi's plugin runs there
    plan = planning.plan([_mindcluster()], planning.SharingObserved(nodes=(node,)))
    (error,) = plan.results["mc"].node_errors
    assert error.reason == "Conflict" and "ascend=on" in error.rule
    assert "MindCluster and HAMi mode on the same node" in error.rule
    verdict = status.summarize(plan, "mc", (node,)).verdict
    assert (verdict.state, verdict.reason) == ("stalled", "Conflict")


def test_mindcluster_on_a_node_with_preset_vnpus_is_held_naming_them() -> None:
    node = nodes.from_node(
        "npu-1",
        {POOL: "a", c.NPU_CHIP_NAME_LABEL: "310P3"},
        npus=2,
        npu_resource="huawei.com/Ascend310P",
        allocatable={"huawei.com/Ascend310P-2c": 4, "huawei.com/Ascend310P": 0},
    )
    assert _mindcluster().spec.ascend is not None
    (error,) = ascend_rules.check(_mindcluster().spec.ascend, node)  # type: ignore[arg-type]
    assert "preset vNPUs (huawei.com/Ascend310P-2c: 4)" in error.rule and error.reason == ""
    whole = nodes.from_node(
        "npu-2",
        {POOL: "a", c.NPU_CHIP_NAME_LABEL: "310P3"},
        npus=2,
        npu_resource="huawei.com/Ascend310P",
        allocatable={"huawei.com/Ascend310P": 2},
    )
    assert ascend_rules.check(_mindcluster().spec.ascend, whole) == ()  # type: ignore[arg-type]


def test_mindcluster_writes_no_hami_node_config() -> None:
    node = nodes.from_node(
        "npu-3", {POOL: "a", c.NPU_CHIP_NAME_LABEL: "310P3"}, npus=2, npu_resource="x"
    )
    plan = planning.plan([_mindcluster()], planning.SharingObserved(nodes=(node,)))
    assert plan.results["mc"].node_errors == ()
    assert plan.results["mc"].ascend_fields is None and plan.hami_ascend.converged
