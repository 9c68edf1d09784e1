"""The Ascend agent's npu-smi planning: which vNPUs a config wants, and in what commands."""

from __future__ import annotations

import pytest

from tessera.domain.geometry import npusmi
from tessera.domain.geometry.npusmi import ConfigError, Record, Vnpu

SPLIT = {
    "devices": "all",
    "vnpu-enabled": True,
    "create": [{"template": "vir04", "vgroup": 0}, {"template": "vir02", "vgroup": 1}],
}
WHOLE = {"devices": [1], "vnpu-enabled": False}


@pytest.mark.parametrize(
    ("entries", "npus", "want"),
    [
        ([SPLIT], 2, [(0, 100, "vir04"), (0, 101, "vir02"), (1, 116, "vir04"), (1, 117, "vir02")]),
        ([SPLIT, WHOLE], 2, [(0, 100, "vir04"), (0, 101, "vir02")]),
        (
            [{"devices": [0, 5], **{k: v for k, v in SPLIT.items() if k != "devices"}}],
            2,
            [(0, 100, "vir04"), (0, 101, "vir02")],
        ),
        ([{"devices": "all", "vnpu-enabled": False}], 4, []),
    ],
    ids=["all", "index-override", "missing-index-ignored", "whole-npus"],
)
def test_wanted_vnpus(
    entries: list[dict[str, object]], npus: int, want: list[tuple[int, int, str]]
) -> None:
    got = npusmi.wanted_vnpus(entries, npus)
    assert [(v.npu, v.id, v.template) for v in got] == want


@pytest.mark.parametrize(
    "entry",
    [
        {"devices": "first", "vnpu-enabled": True},
        {"devices": "all", "vnpu-enabled": True, "create": [{"vgroup": 0}]},
    ],
    ids=["bad-devices", "no-template"],
)
def test_malformed_config_is_a_config_error(entry: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        npusmi.wanted_vnpus([entry], 2)


def test_commands_destroy_what_we_made_then_create_in_order() -> None:
    previous = Record("old", (Vnpu(0, 100, "vir02"),))
    wanted = (Vnpu(0, 100, "vir04", 0), Vnpu(0, 101, "vir02_1c"))
    assert npusmi.commands(previous, wanted) == [
        ["set", "-t", "destroy-vnpu", "-i", "0", "-c", "0", "-v", "100"],
        ["set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir04", "-v", "100", "-g", "0"],
        ["set", "-t", "create-vnpu", "-i", "0", "-c", "0", "-f", "vir02_1c", "-v", "101"],
    ]


def test_record_round_trips_and_rejects_garbage() -> None:
    record = Record("tessera-p-1", (Vnpu(1, 116, "vir04", 0),))
    assert Record.decode(record.encode()) == record
    assert Record.decode(None) == Record()
    with pytest.raises(ConfigError):
        Record.decode('{"vnpus": [{"npu": "x"}]}')
