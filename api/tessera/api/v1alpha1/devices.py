"""The ``devices`` field of a MIG or vNPU layout: one grammar for the CRD, the models and Tessera.

A layout selects devices (GPUs or NPUs) by index:

- ``"all"`` — every device of the node;
- one index, ``7`` or ``"7"``;
- a comma-separated list of indexes and ranges without spaces, ``"0,1"``,
  ``"0-3"``, ``"0,1,4-7"`` (in any order).

Indexes run from 0 to ``MAX_INDEX``. A range runs upwards (``"3-0"`` is refused)
and no index may be named twice within one value (``"0,0"``, ``"0-3,2"``): both
are typos more often than not, and refusing them costs nothing. Indexes a node
does not have select nothing on that node (a pool may mix 4- and 8-GPU nodes).

``PATTERN`` and ``CEL_RULE`` are what the API server checks; ``parse`` is what
the operator and ``tessera plan`` use. tests/integration/test_devices_grammar.py
applies a table of values to the real API server and to ``parse`` and requires
the same verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_INDEX = 15
MAX_LENGTH = 40  # the longest value without a repeated index, "0,1,2,...,15", has 37 characters
_INDEX = "([0-9]|1[0-5])"
_ITEM = f"{_INDEX}(-{_INDEX})?"
PATTERN = f"^(all|{_ITEM}(,{_ITEM})*)$"
FORMS = '"all", one index 0-15, or indexes and ranges such as "0,1,4-7" (no spaces)'

# The value as the user wrote it, quoted when it is a string (what the error messages show).
_SHOWN = "(type(self) == int ? string(self) : '\"' + string(self) + '\"')"
# First and last index of item ``p`` ("4" or "4-7"), for the range and duplicate checks.
_LOW = "int(p.split('-')[0])"
_HIGH = "int(p.split('-')[size(p.split('-')) - 1])"
_ALL_INDEXES = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]"
CEL_RULE = (
    f"type(self) == int || self == 'all' || (self.matches('{PATTERN}') && "
    f"self.split(',').all(p, {_LOW} <= {_HIGH}) && "
    f"{_ALL_INDEXES}.all(i, self.split(',').filter(p, {_LOW} <= i && i <= {_HIGH}).size() <= 1))"
)


def _names(devices: str, index: str) -> str:
    """CEL: whether the layout field ``devices`` (well-formed or not) names ``index``."""
    return (
        f"(has({devices}) && (type({devices}) == int ? {devices} == {index} : "
        f"({devices}.matches('{PATTERN}') && {devices} != 'all' && "
        f"{devices}.split(',').exists(p, {_LOW} <= {index} && {index} <= {_HIGH}))))"
    )


# On a list of layouts (``self.layouts``): no index named by two of them.
_SHARED = f"self.layouts.filter(l, {_names('l.devices', 'i')}).size() > 1"
LAYOUTS_RULE = f"!{_ALL_INDEXES}.exists(i, {_SHARED})"
# A static message: any messageExpression listing the layouts' devices exceeds the API
# server's cost budget. The operator and tessera plan name the index (``shared_message``).
LAYOUTS_MESSAGE = (
    "two layouts name the same device index; each index may appear in one explicit layout only"
)
CEL_MESSAGE = (
    f"'devices ' + {_SHOWN} + ' is not ' + "
    '\'"all", one index 0-15, or indexes and ranges such as "0,1,4-7" (no spaces), '
    "with ranges running upwards and no index named twice'"
)


class DevicesError(ValueError):
    """A ``devices`` value outside the grammar; the message shows the value and the rule."""


def parse(devices: int | str) -> tuple[int, ...] | None:
    """The sorted indexes ``devices`` names, or None for ``"all"``; raises DevicesError."""
    if isinstance(devices, bool) or not isinstance(devices, int | str):
        raise DevicesError(f"devices {devices!r} is not {FORMS}")
    if isinstance(devices, int):
        if not 0 <= devices <= MAX_INDEX:
            raise DevicesError(f"devices {devices}: indexes run from 0 to {MAX_INDEX}")
        return (devices,)
    if devices == "all":
        return None
    if re.fullmatch(PATTERN, devices) is None:
        raise DevicesError(f"devices {devices!r} is not {FORMS}")
    seen: set[int] = set()
    for item in devices.split(","):
        low, _, high = item.partition("-")
        first, last = int(low), int(high or low)
        if first > last:
            raise DevicesError(
                f"devices {devices!r}: the range {item} runs backwards; write {last}-{first}"
            )
        twice = seen.intersection(range(first, last + 1))
        if twice:
            raise DevicesError(f"devices {devices!r}: index {min(twice)} is named twice")
        seen.update(range(first, last + 1))
    return tuple(sorted(seen))


def shared(layouts: Sequence[int | str]) -> tuple[int, int, int] | None:
    """The first index two layouts name, with the positions (0-based) of both, or None."""
    owner: dict[int, int] = {}
    for pos, devices in enumerate(layouts):
        for index in parse(devices) or ():
            if index in owner:
                return index, owner[index], pos
            owner[index] = pos
    return None


def shared_message(layouts: Sequence[int | str]) -> str | None:
    """What is wrong when two layouts name one index (the operator's and the models' words)."""
    found = shared(layouts)
    if found is None:
        return None
    index, first, second = found
    return (
        f"device {index} is listed by layout {first + 1} (devices: {layouts[first]}) and "
        f"layout {second + 1} (devices: {layouts[second]}); each index may appear in one "
        "explicit layout only"
    )


def validated(devices: int | str) -> int | str:
    """The value unchanged once ``parse`` accepts it (a pydantic after-validator)."""
    parse(devices)
    return devices
