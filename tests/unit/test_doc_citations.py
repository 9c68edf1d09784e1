"""Every ``docs/….md §Section`` the code cites exists in the repository, heading included.

Docstrings and comments justify a rule by the fact it rests on ("backoff floor: docs/facts/
drain.md §Eviction retries"). A citation of a note that is not in the repository, or of a
section that was renamed, leaves the next reader with nothing to check, so each one is resolved
here: the file must exist and, when a section is named, a Markdown heading of that file must
start the text after ``§``. In the product (``operator/``, ``api/``) a bare ``name.md §…``
that is not a ``docs/`` path is refused too: that is how design notes outside the repository
used to be cited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("operator", "api")
SCANNED = (*PRODUCT, "devcluster", "tests", "bench", "hack")
SUFFIXES = (".py", ".yaml", ".yml")
CITATION = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)(?: §([^\n]*))?")
BARE = re.compile(r"(?<![\w/.-])([\w-]+\.md) §")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


@dataclass(frozen=True)
class Citation:
    where: str  # path:line
    doc: str  # docs/....md
    section: str | None  # the text after §, to the end of the line


def citations(path: Path, text: str) -> list[Citation]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in CITATION.finditer(line):
            found.append(Citation(f"{path}:{number}", match[1], match[2]))
    return found


def headings(markdown: str) -> set[str]:
    return {h.strip() for h in HEADING.findall(markdown)}


def problem(citation: Citation, root: Path) -> str | None:
    """Why ``citation`` does not resolve under ``root``, or None when it does."""
    target = root / citation.doc
    if not target.is_file():
        return f"{citation.where}: {citation.doc} does not exist"
    if citation.section is None:
        return None
    rest = citation.section
    for heading in headings(target.read_text()):
        if rest.startswith(heading) and not rest[len(heading) : len(heading) + 1].isalnum():
            return None
    return f"{citation.where}: {citation.doc} has no heading starting '§{rest}'"


def scanned_files() -> list[Path]:
    files = [p for d in SCANNED for p in sorted((ROOT / d).rglob("*")) if p.suffix in SUFFIXES]
    return [p for p in files if p.is_file() and p != Path(__file__).resolve()]


def test_every_docs_citation_in_the_code_names_a_file_and_a_heading_that_exist() -> None:
    found = [c for p in scanned_files() for c in citations(p.relative_to(ROOT), p.read_text())]
    assert len(found) >= 10  # the product cites its facts; a broken regex would find none
    problems = [why for c in found if (why := problem(c, ROOT))]
    assert problems == []


def test_the_product_cites_no_note_outside_docs() -> None:
    stale = []
    for path in scanned_files():
        if path.relative_to(ROOT).parts[0] not in PRODUCT:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            bare = [m[1] for m in BARE.finditer(line)]
            if bare or "shared/reference" in line:
                stale.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert stale == []


DOC = "# Facts\n\n## Eviction retries\n\ntext\n\n### One drain pass ###\n"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("floor (docs/facts/d.md §Eviction retries).", None),
        ("see docs/facts/d.md §One drain pass", None),
        ("see docs/facts/d.md", None),
        ("see docs/facts/d.md §Eviction", "has no heading starting '§Eviction'"),
        ("see docs/facts/d.md §Eviction retriesX", "has no heading starting"),
        ("see docs/facts/d.md §Crash safety", "has no heading starting '§Crash safety'"),
        ("see docs/facts/nope.md §Eviction retries", "docs/facts/nope.md does not exist"),
    ],
)
def test_a_citation_resolves_only_to_an_existing_file_and_heading(
    tmp_path: Path, line: str, expected: str | None
) -> None:
    (tmp_path / "docs" / "facts").mkdir(parents=True)
    (tmp_path / "docs" / "facts" / "d.md").write_text(DOC)
    (citation,) = citations(Path("x.py"), line)
    why = problem(citation, tmp_path)
    assert why is None if expected is None else (why is not None and expected in why)


def test_a_bare_note_citation_is_recognised() -> None:
    assert [m[1] for m in BARE.finditer('"""Drain pass (drain.md §4.3 step 4)."""')] == ["drain.md"]
    assert list(BARE.finditer("docs/facts/drain.md §One drain pass")) == []
