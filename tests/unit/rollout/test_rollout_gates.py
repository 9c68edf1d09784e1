"""Durations, the disruption budget and the maintenance window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tessera.api.v1alpha1.common import MaintenanceWindow
from tessera.domain.rollout.gates import budget, duration, in_window


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("1h30m", 5400), ("500ms", 0.5), ("1.5h", 5400), ("10s", 10)],
)
def test_duration(text: str, seconds: float) -> None:
    assert duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "m", "1x", "1h 2m", "-1s"])
def test_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        duration(text)


@pytest.mark.parametrize(
    ("value", "total", "want"),
    [
        (2, 6, 2),
        ("25%", 8, 2),
        ("25%", 7, 1),  # rounds down
        ("10%", 3, 1),  # never below 1
        ("100%", 5, 5),
        ("3", 10, 3),
        (0, 4, 1),
    ],
)
def test_budget(value: int | str, total: int, want: int) -> None:
    assert budget(value, total) == want


def window(start: str, end: str, days: tuple[str, ...] = (), tz: str = "UTC") -> MaintenanceWindow:
    return MaintenanceWindow.model_validate(
        {"days": list(days), "start": start, "end": end, "timeZone": tz}
    )


SAT = datetime(2026, 8, 1, tzinfo=UTC)  # Saturday


@pytest.mark.parametrize(
    ("w", "at", "inside"),
    [
        pytest.param(window("01:00", "05:00"), SAT.replace(hour=2), True, id="daily-inside"),
        pytest.param(window("01:00", "05:00"), SAT.replace(hour=5), False, id="end-exclusive"),
        pytest.param(
            window("01:00", "05:00", ("Sun",)), SAT.replace(hour=2), False, id="wrong-day"
        ),
        pytest.param(
            window("22:00", "02:00", ("Sat",)),
            SAT + timedelta(days=1, hours=1),
            True,
            id="crosses-midnight-belongs-to-start-day",
        ),
        pytest.param(
            window("22:00", "02:00", ("Sat",)),
            SAT.replace(hour=1),
            False,
            id="crossing-window-not-open-the-morning-before",
        ),
        pytest.param(window("22:00", "02:00", ("Sat",)), SAT.replace(hour=23), True, id="late"),
        pytest.param(window("00:00", "00:00", ("Sat",)), SAT.replace(hour=13), True, id="all-day"),
        pytest.param(
            window("01:00", "05:00", tz="Asia/Tokyo"),
            SAT.replace(hour=17),
            True,
            id="time-zone-02:00-in-tokyo",
        ),
        pytest.param(
            window("01:00", "05:00", tz="Asia/Tokyo"),
            SAT.replace(hour=2),
            False,
            id="time-zone-11:00-in-tokyo",
        ),
        pytest.param(window("01:00", "05:00", tz="Mars/Olympus"), SAT, False, id="bad-zone"),
    ],
)
def test_window(w: MaintenanceWindow, at: datetime, inside: bool) -> None:
    ok, why = in_window(w, at)
    assert ok is inside
    assert (why == "") is inside


def test_no_window_means_any_time() -> None:
    assert in_window(None, SAT) == (True, "")
