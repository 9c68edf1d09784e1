"""The Ascend chip support matrix: which vNPU path each chip supports, one table.

A person picks "my chip + one path", so every path choice Tessera accepts is checked here: a
NodePoolGeometry's ``vnpu`` layouts (the driver's ``vir*`` templates, split by Tessera's agent
with ``npu-smi``) and a SharingPolicy's ``spec.ascend.mode`` (HAMi templates, HAMi-core soft
slicing, Volcano's MindCluster dynamic vNPU, Huawei's vCANN-RT soft slicing). A row per chip,
a cell per path: supported or not, and the words saying why (the version, or what upstream
says). Written from the seed's support matrix of August 2026, with sources in
docs/facts/ascend.md §Support matrix. The CRDs' CEL rules where the chip is in the spec, ``tessera plan``'s
twin of them, the operator's check of a node's ``node.kubernetes.io/npu.chip.name`` label and
the table in docs/facts/ascend.md are all drawn from ``MATRIX``; the device catalog
(``tessera.domain.geometry.ascend``) carries each chip's row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tessera.api.v1alpha1.backends import AscendMode

Path = Literal["DriverTemplates", "VCannRT", "HAMiTemplates", "HAMiCore", "MindCluster"]
"""A vNPU path, the matrix's columns (in the seed's order)."""

ChipName = Literal["310P3", "910A", "910B2", "910B3", "910B4", "910B4-1", "910C"]
"""A chip the matrix has a row for (``spec.ascend.chip``, ``spec.vnpu.chip``)."""

PATHS: tuple[Path, ...] = ("DriverTemplates", "VCannRT", "HAMiTemplates", "HAMiCore", "MindCluster")

PATH_OF_MODE: Mapping[AscendMode, Path] = {
    "Templates": "HAMiTemplates",
    "HAMiCore": "HAMiCore",
    "MindCluster": "MindCluster",
    "VCannRT": "VCannRT",
}
"""The path a SharingPolicy's ``spec.ascend.mode`` takes; ``spec.vnpu`` takes DriverTemplates."""

CHOICE: Mapping[Path, str] = {
    "DriverTemplates": "NodePoolGeometry spec.vnpu layouts",
    **{path: f"spec.ascend.mode {mode}" for mode, path in PATH_OF_MODE.items()},
}
"""How a person chooses each path, as the messages name it."""

TITLE: Mapping[Path, str] = {
    "DriverTemplates": "driver templates",
    "VCannRT": "vCANN-RT",
    "HAMiTemplates": "HAMi templates",
    "HAMiCore": "HAMi-core",
    "MindCluster": "Volcano MindCluster",
}


@dataclass(frozen=True)
class Cell:
    supported: bool
    says: str  # why: the templates, the version it came with, or what upstream says


@dataclass(frozen=True)
class ChipRow:
    chip: ChipName
    products: str
    aliases: tuple[str, ...]  # other spellings of the chip label (DCMI names)
    cells: Mapping[Path, Cell]

    def supports(self, path: Path) -> bool:
        return self.cells[path].supported

    @property
    def supported(self) -> tuple[Path, ...]:
        return tuple(p for p in PATHS if self.cells[p].supported)


def _row(
    chip: ChipName, products: str, aliases: tuple[str, ...], *cells: tuple[bool, str]
) -> ChipRow:
    assert len(cells) == len(PATHS)
    return ChipRow(
        chip, products, aliases, {p: Cell(*c) for p, c in zip(PATHS, cells, strict=True)}
    )


_NO_VCANN = (False, "vCANN-RT is for Atlas 300I A2 / 800I A2 (910B4) only")
_TRAINING = (False, "a training chip: no vNPU templates")
_NOT_MARKED = (False, "not marked supported upstream")
_MC_310_ONLY = (False, "the MindCluster mode of Volcano supports the 310 family only")
_B4 = (
    (True, "vir05 and vir10 series"),
    (True, "Atlas 300I A2 / 800I A2; HDK 25.5.0, CANN 8.5.0 or 9.1.0, MindCluster 26.0.0.0"),
    (True, "HAMi vir templates"),
    (True, "upstream marks 910B verified"),
    (False, "planned upstream for the 910 family, not released"),
)
_B23 = (_TRAINING, _NO_VCANN, (True, "since HAMi v2.6.0"), _NOT_MARKED, _MC_310_ONLY)

MATRIX: Mapping[ChipName, ChipRow] = {
    row.chip: row
    for row in (
        _row(
            "310P3",
            "Atlas 300I Duo / 300I Pro",
            ("Ascend310P3", "Ascend310P", "310P"),
            (True, "vir01 to vir04_4c_dvpp"),
            _NO_VCANN,
            (True, "since HAMi v2.4.0"),
            (True, "verified on hardware in August 2026"),
            (True, "the only family the MindCluster mode of Volcano supports"),
        ),
        _row(
            "910A",
            "Atlas 800 training server",
            ("Ascend910A", "910ProA", "910PremiumA"),
            _TRAINING,
            _NO_VCANN,
            (True, "whole cards and memory only"),
            _NOT_MARKED,
            _MC_310_ONLY,
        ),
        _row("910B2", "Atlas 800T A2 training", ("Ascend910B2",), *_B23),
        _row("910B3", "Atlas 800T A2 training", ("Ascend910B3",), *_B23),
        _row("910B4", "Atlas 800I A2 / 300I A2 inference", ("Ascend910B4",), *_B4),
        _row("910B4-1", "Atlas 800I A2 / 300I A2 inference", ("Ascend910B4-1",), *_B4),
        _row(
            "910C",
            "CloudMatrix 384 super node",
            ("Ascend910C",),
            (False, "a super-node chip, scheduled as whole cards"),
            _NO_VCANN,
            (True, "module-pair allocation only, since HAMi v2.9.0"),
            _NOT_MARKED,
            _MC_310_ONLY,
        ),
    )
}


def row_of(label: str) -> ChipRow | None:
    """The row a chip label (``node.kubernetes.io/npu.chip.name``) or alias names; None when
    the matrix has none (then no path is refused on its account)."""
    wanted = label.strip().upper()
    for row in MATRIX.values():
        if wanted in {n.upper() for n in (row.chip, *row.aliases)}:
            return row
    return None


def row(chip: object) -> ChipRow | None:
    """The row of a chip as ``spec.*.chip`` spells it (None: no such row)."""
    return next((r for name, r in MATRIX.items() if name == chip), None)


def path_of_mode(mode: object) -> Path | None:
    """The path a ``spec.ascend.mode`` value takes (None: not a mode)."""
    return next((p for name, p in PATH_OF_MODE.items() if name == mode), None)


def supports_text(row: ChipRow) -> str:
    """What a chip supports, as the refusals say it: ``HAMi templates (spec.ascend.mode ...)``."""
    return ", ".join(f"{TITLE[p]} ({CHOICE[p]})" for p in row.supported) or "none of these paths"


def refusal(chip: str, path: Path) -> str:
    """Why ``chip`` cannot take ``path``: the chip, the choice, the reason, what it supports.
    The CRDs' messageExpressions build the same words (``cel_mode_message``)."""
    found = row_of(chip)
    if found is None:
        raise ValueError(f"no support-matrix row for chip {chip!r}")
    row = found
    return (
        f"chip {row.chip} ({row.products}) does not support {TITLE[path]} ({CHOICE[path]}): "
        f"{row.cells[path].says}; {row.chip} supports: {supports_text(row)}"
    )


def check(chip: str, path: Path) -> str:
    """ "" when ``chip`` supports ``path`` or the matrix has no row for it, else the refusal."""
    row = row_of(chip)
    if row is None or row.supports(path):
        return ""
    return refusal(row.chip, path)


# -- the CEL rules (the CRDs): one rule per field, its message built from the same table


def _cel_map(values: Mapping[str, str]) -> str:
    assert not any("'" in t for kv in values.items() for t in kv), values
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in values.items()) + "}"


MODE_EXPR = (
    "(has(self.mode) ? self.mode : "
    "(has(self.softSlicing) && self.softSlicing ? 'HAMiCore' : 'Templates'))"
)
"""CEL on ``spec.ascend``: the effective mode (``AscendSharing.effective_mode``)."""


def cel_mode_rule() -> str:
    """``spec.ascend``: the chip, when set, supports the mode."""
    served = {
        chip: "[" + ", ".join(f"'{m}'" for m, p in PATH_OF_MODE.items() if row.supports(p)) + "]"
        for chip, row in MATRIX.items()
    }
    table = "{" + ", ".join(f"'{k}': {v}" for k, v in served.items()) + "}"
    return f"!has(self.chip) || {MODE_EXPR} in {table}[self.chip]"


def cel_mode_message() -> str:
    why = _cel_map(
        {
            f"{chip}/{mode}": row.cells[path].says
            for chip, row in MATRIX.items()
            for mode, path in PATH_OF_MODE.items()
            if not row.supports(path)
        }
    )
    title = _cel_map({m: f"{TITLE[p]} ({CHOICE[p]})" for m, p in PATH_OF_MODE.items()})
    products = _cel_map({chip: row.products for chip, row in MATRIX.items()})
    supports = _cel_map({chip: supports_text(row) for chip, row in MATRIX.items()})
    return (
        f"'chip ' + self.chip + ' (' + {products}[self.chip] + ') does not support ' + "
        f"{title}[{MODE_EXPR}] + ': ' + {why}[self.chip + '/' + {MODE_EXPR}] + '; ' + "
        f"self.chip + ' supports: ' + {supports}[self.chip]"
    )


def cel_vnpu_rule() -> str:
    """``spec.vnpu``: the chip, when set, has driver templates."""
    ok = ", ".join(f"'{c}'" for c, row in MATRIX.items() if row.supports("DriverTemplates"))
    return f"!has(self.chip) || self.chip in [{ok}]"


def cel_vnpu_message() -> str:
    products = _cel_map({chip: row.products for chip, row in MATRIX.items()})
    says = _cel_map({chip: row.cells["DriverTemplates"].says for chip, row in MATRIX.items()})
    supports = _cel_map({chip: supports_text(row) for chip, row in MATRIX.items()})
    path: Path = "DriverTemplates"
    return (
        f"'chip ' + self.chip + ' (' + {products}[self.chip] + ') does not support "
        f"{TITLE[path]} ({CHOICE[path]}): ' + {says}[self.chip] + '; ' + self.chip + "
        f"' supports: ' + {supports}[self.chip]"
    )


# -- the table in docs/facts/ascend.md (hack/gen_docs.py; make verify checks it is fresh)

DOC_BEGIN = (
    "<!-- BEGIN generated by `make docs` from tessera.api.v1alpha1.ascend_support.MATRIX -->"
)
DOC_END = "<!-- END generated support matrix -->"


def markdown() -> str:
    """The matrix as a Markdown table: a row per chip, a column per path."""
    head = "| chip | products | " + " | ".join(TITLE[p] for p in PATHS) + " |\n"
    head += "|---|---|" + "---|" * len(PATHS) + "\n"
    choose = "| how it is chosen | | " + " | ".join(f"`{CHOICE[p]}`" for p in PATHS) + " |\n"
    body = "".join(
        f"| {row.chip} | {row.products} | "
        + " | ".join(
            ("yes: " if row.cells[p].supported else "**no**: ") + row.cells[p].says for p in PATHS
        )
        + " |\n"
        for row in MATRIX.values()
    )
    return head + choose + body


def render(doc: str) -> str:
    """``doc`` with the block between ``DOC_BEGIN`` and ``DOC_END`` replaced by the table."""
    head, begin, rest = doc.partition(DOC_BEGIN)
    _, end, tail = rest.partition(DOC_END)
    if not begin or not end:
        raise ValueError(f"the markers {DOC_BEGIN!r} and {DOC_END!r} must both be in the document")
    return f"{head}{DOC_BEGIN}\n{markdown()}{DOC_END}{tail}"
