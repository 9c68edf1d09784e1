"""The rollout policy's arithmetic: durations, the disruption budget, the maintenance window.

These decide *whether* a new node may start; they never look at a node's
phase. Time is always passed in (an aware datetime), and the window's time
zone comes from the spec, so this stays a pure function of its inputs.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tessera.api.v1alpha1.common import MaintenanceWindow

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def duration(text: str) -> timedelta:
    """A Go-style duration (``30m``, ``1h30m``, ``500ms``), as the CRD schema admits them."""
    pos, seconds = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return timedelta(seconds=seconds)


def budget(max_unavailable: int | str, total: int) -> int:
    """How many pool nodes may be disrupted at once.

    A percentage rounds down but never below 1: a rollout that can never start
    is worse than one that disrupts a single node of a small pool.
    """
    if isinstance(max_unavailable, int):
        return max(1, max_unavailable)
    text = max_unavailable.strip()
    if text.endswith("%"):
        return max(1, total * int(text[:-1]) // 100)
    return max(1, int(text))


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def in_window(window: MaintenanceWindow | None, now: datetime) -> tuple[bool, str]:
    """Whether a disruptive change may *start* at ``now``, and a sentence saying why not.

    A window whose end is earlier than its start crosses midnight; it then
    belongs to the day it started on, so ``Sat 22:00-02:00`` covers Sunday 01:00
    but not Saturday 01:00. Equal start and end mean the whole day.
    """
    if window is None:
        return True, ""
    try:
        zone = ZoneInfo(window.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False, f"maintenance window time zone {window.time_zone!r} is unknown"
    local = now.astimezone(zone)
    days: set[str] = set(window.days) or set(_DAYS)
    today, yesterday = _DAYS[local.weekday()], _DAYS[(local.weekday() - 1) % 7]
    at, start, end = local.hour * 60 + local.minute, _minutes(window.start), _minutes(window.end)
    if start < end:
        inside = today in days and start <= at < end
    elif start == end:
        inside = today in days
    else:
        inside = (today in days and at >= start) or (yesterday in days and at < end)
    if inside:
        return True, ""
    day_text = ",".join(d for d in _DAYS if d in days) if window.days else "daily"
    return False, (
        f"outside the maintenance window ({day_text} {window.start}-{window.end} "
        f"{window.time_zone}; now {local:%a %H:%M})"
    )
