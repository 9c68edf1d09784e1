"""Volcano versions as comparable tuples (``v1.15.0`` → ``(1, 15, 0)``)."""

from __future__ import annotations

import re

Version = tuple[int, int, int]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse(text: str) -> Version | None:
    """``v1.16.0``, ``1.16``, ``v1.16.0-alpha.1`` → a tuple; anything else → None."""
    found = _VERSION.match(text.strip())
    if not found:
        return None
    return int(found[1]), int(found[2]), int(found[3] or 0)


def at_least(version: Version, floor: Version) -> bool:
    return version >= floor


def show(version: Version) -> str:
    return "v" + ".".join(str(p) for p in version)


# Volcano v1.16 reads the vnpus wrapper {hamiVnpuCore, configs} and schedules hami-core vNPUs.
WRAPPER_SINCE: Version = (1, 16, 0)
HAMI_CORE_SINCE: Version = (1, 16, 0)
