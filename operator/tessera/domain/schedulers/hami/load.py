"""Whether HAMi's scheduler can load a ``device-config.yaml``: its own ``LoadConfig``, as shapes.

HAMi's scheduler (and its device plugins) read the file with ``gopkg.in/yaml.v2``, not strict,
into Go structs that differ per version (docs/facts/hami.md §HAMi's scheduler device config).
Keys HAMi does not know are ignored, but a known key whose value has the wrong shape fails the
whole load — the scheduler exits at start: a list where a struct is read (``vnpus`` as a list
for v2.9+, ``{hamiVnpuCore, configs}`` up to v2.8), a mapping or list where a scalar is read,
a string (``"21527"``) where a number is read, anything but ``true``/``false`` for a bool, a
negative or fractional-overflowing number for an unsigned or 32-bit field. ``problems`` finds
every such place in a parsed file for one HAMi version; Tessera checks the whole file it is
about to write, people's entries included, and writes nothing that HAMi would not load.

What yaml.v2 accepts is mirrored: ``null`` for anything (the zero value), any scalar for a
string, an integer or a float for a number (a float is truncated into an integer field), an
integer for a float. Sections of other vendors (``metax``, ``hygon``...) are checked to be
mappings (``iluvatars`` a list of them from v2.8), not field by field.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tessera.domain.schedulers import yaml_text
from tessera.domain.schedulers.versions import Version

V2_8, V2_9, V2_10 = Version(2, 8), Version(2, 9), Version(2, 10)
SUPPORTED = (Version(2, 7), V2_8, V2_9, V2_10)
"""The versions whose shapes are known (older ones are read as v2.7, newer as v2.10)."""

_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint": (0, 2**64 - 1)}


@dataclass(frozen=True)
class ListOf:
    item: Shape


@dataclass(frozen=True)
class Struct:
    fields: Mapping[str, Shape]
    shown: str = "a mapping"
    """How a message names the shape (``{hamiVnpuCore, configs}``)."""


Shape = str | ListOf | Struct  # str: "string", "bool", "float", a key of _RANGES, or "mapping"
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class LoadProblem:
    """One place HAMi ``version`` cannot load: where, and what is wrong there."""

    path: Path
    version: Version
    what: str
    chip: str = ""
    """The ``chipName`` of the ``vnpus`` entry the place is in, if any."""

    @property
    def where(self) -> str:
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else f"{'.' if out else ''}{step}"
        return out + (f" (chip {self.chip})" if self.chip else "")

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def schema(version: Version) -> Struct:
    """The top of ``device-config.yaml`` as HAMi ``version``'s ``Config`` reads it."""
    template = Struct({"name": "string", "memory": "int64", "aiCore": "int32", "aiCPU": "int32"})
    chip: dict[str, Shape] = {
        "commonWord": "string",
        "chipName": "string",
        "resourceName": "string",
        "resourceMemoryName": "string",
        "memoryAllocatable": "int64",
        "memoryCapacity": "int64",
        "aiCore": "int32",
        "aiCPU": "int32",
        "templates": ListOf(template),
    }
    if version >= V2_8:
        chip["memoryFactor"] = "int32"
    if version >= V2_9:
        chip |= {"resourceCoreName": "string", "runtimeClassName": "string"}
        chip["overwriteEnv"] = "bool"
    if version >= V2_10:
        chip["superPod"] = "bool"
    entries = ListOf(Struct(chip))
    vnpus: Shape = (
        Struct({"hamiVnpuCore": "bool", "configs": entries}, "{hamiVnpuCore, configs}")
        if version >= V2_9
        else entries
    )
    top: dict[str, Shape] = {"nvidia": Struct(_nvidia(version)), "vnpus": vnpus}
    vendors = ["metax", "hygon", "cambricon", "mthreads", "enflame", "kunlun", "awsneuron"]
    vendors += ["amd"] if version >= V2_8 else ["iluvatar"]
    vendors += ["vastai"] if version >= V2_9 else []
    vendors += ["biren"] if version >= V2_10 else []
    top |= dict.fromkeys(vendors, "mapping")
    if version >= V2_8:
        top["iluvatars"] = ListOf("mapping")
    return Struct(top)


def _nvidia(version: Version) -> dict[str, Shape]:
    fields: dict[str, Shape] = {
        "deviceSplitCount": "uint",
        "deviceMemoryScaling": "float",
        "deviceCoreScaling": "float",
        "libCudaLogLevel": "string",
        "resourceCountName": "string",
        "resourceMemoryName": "string",
        "resourceCoreName": "string",
        "resourceMemoryPercentageName": "string",
        "resourcePriorityName": "string",
        "overwriteEnv": "bool",
        "defaultMemory": "int32",
        "defaultCores": "int32",
        "defaultGPUNum": "int32",
        "disableCoreLimit": "bool",
        "gpuCorePolicy": "string",
        "runtimeClassName": "string",
    }
    if version >= V2_8:
        fields["memoryFactor"] = "int32"
    if version >= V2_9:
        fields["preConfiguredDeviceMemory"] = "int64"
    if version >= V2_10:
        fields["enableNumaTopology"] = "bool"
        models = Struct({"models": ListOf("string"), "profiles": ListOf("string")})
        fields["migProfileAllowlist"] = ListOf(models)
    else:
        mig = {"name": "string", "memory": "int32", "count": "int32"}
        if version >= V2_8:
            mig["core"] = "int32"
        geometries = ListOf(ListOf(Struct(mig)))
        known = Struct({"models": ListOf("string"), "allowedGeometries": geometries})
        fields["knownMigGeometries"] = ListOf(known)
    return fields


class Unloadable(yaml_text.YamlInvalidError):
    """The file Tessera would write (or leave) is one HAMi's scheduler cannot load; the line
    and column are those of the first problem."""

    def __init__(self, found: Sequence[LoadProblem], version: Version, line: int, column: int):
        super().__init__(line, column, summary(found, version))
        self.problems, self.version = tuple(found), version


def said(where: str, err: Unloadable) -> str:
    """The condition's message: the map, the place as the person sees it, what to do."""
    return (
        f"{where}, line {err.line}, column {err.column}: {err.problem}; HAMi's scheduler "
        f"would not start, so Tessera writes nothing until that entry has the shape HAMi "
        f"{err.version} reads"
    )


def refuse(text: str, version: Version, stored: str | None = None) -> None:
    """``Unloadable`` when HAMi ``version`` cannot load ``text`` (``YamlInvalidError`` when it
    does not parse). With ``stored`` (the map as it stands, which ``text`` edits), the line
    and column are where the person sees the place there: a kept entry is found by its
    ``chipName``, whichever shape its ``vnpus`` has."""
    found = problems(yaml.safe_load(text), version)
    if not found:
        return
    mark = _mark(stored, found[0]) if stored is not None else None
    mark = mark or _mark(text, found[0]) or (1, 1)
    raise Unloadable(found, version, *mark)


def _mark(text: str, problem: LoadProblem) -> tuple[int, int] | None:
    root = yaml_text.compose(text)
    path: list[str | int] = list(problem.path)
    if problem.chip and path[:1] == ["vnpus"]:  # the entry by its chip, in either shape
        rest = path[3:] if path[1:2] == ["configs"] else path[2:]
        doc = yaml.safe_load(text) or {}
        section = doc.get("vnpus") if isinstance(doc, dict) else None
        at: list[str | int] = ["vnpus", "configs"] if isinstance(section, dict) else ["vnpus"]
        entries = section.get("configs") if isinstance(section, dict) else section
        names = [str(e.get("chipName")) if isinstance(e, dict) else "" for e in entries or []]
        if problem.chip not in names:
            return None
        path = [*at, names.index(problem.chip), *rest]
    node = yaml_text.find(root, path) if path else root
    if node is None:
        return None
    return node.start_mark.line + 1, node.start_mark.column + 1


def problems(doc: Any, version: Version) -> tuple[LoadProblem, ...]:
    """Every place of the parsed file (``yaml.safe_load``) HAMi ``version`` refuses; () if
    it loads."""
    if doc is None:
        return ()
    found: list[LoadProblem] = []
    _check(doc, schema(version), (), version, "", found)
    return tuple(found)


def _check(
    value: Any, shape: Shape, path: Path, version: Version, chip: str, out: list[LoadProblem]
) -> None:
    if value is None:
        return  # yaml.v2: null sets the zero value, whatever the type
    wrong = _wrong(value, shape)
    if wrong:
        out.append(LoadProblem(path, version, f"{wrong} where it reads {_name(shape)}", chip))
        return
    if isinstance(shape, ListOf):
        entries = path in (("vnpus",), ("vnpus", "configs"))
        for i, item in enumerate(value):
            named = isinstance(item, dict) and item.get("chipName") is not None
            here = str(item["chipName"]) if entries and named else chip
            _check(item, shape.item, (*path, i), version, here, out)
    elif isinstance(shape, Struct):
        for key, item in value.items():
            if isinstance(key, str) and key in shape.fields:
                _check(item, shape.fields[key], (*path, key), version, chip, out)


def _wrong(value: Any, shape: Shape) -> str:
    """What ``value`` is, when yaml.v2 cannot decode it into ``shape``; "" when it can."""
    if isinstance(shape, ListOf):
        return "" if isinstance(value, list) else _what(value)
    if isinstance(shape, Struct) or shape == "mapping":
        return "" if isinstance(value, dict) else _what(value)
    if isinstance(value, dict | list):
        return _what(value)
    if shape == "string":
        return ""
    if shape == "bool":
        return "" if isinstance(value, bool) else _what(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _what(value)
    if shape == "float":
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return _what(value)
    low, high = _RANGES[shape]
    if value < low or int(value) > high:  # a float is truncated into an integer field
        return f"{value!r} (out of range)"
    return ""


def _what(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"a bool ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, datetime.date):
        return f"a date ({value.isoformat()})"
    return f"a string ({str(value)!r})"


def _name(shape: Shape) -> str:
    if isinstance(shape, ListOf):
        return "a list"
    if isinstance(shape, Struct):
        return shape.shown
    return {
        "string": "a string",
        "bool": "true or false",
        "float": "a number",
        "int32": "a 32-bit integer",
        "int64": "an integer",
        "uint": "an unsigned integer",
        "mapping": "a mapping",
    }[shape]


def summary(found: Sequence[LoadProblem], version: Version) -> str:
    """One line naming the problems (the first three, then a count)."""
    shown = "; ".join(str(p) for p in found[:3])
    more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
    return f"HAMi {version}'s LoadConfig would fail: {shown}{more}"
