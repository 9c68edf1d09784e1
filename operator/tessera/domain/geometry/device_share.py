"""The npu-smi commands that switch an NPU node's device-share (container-sharing) mode.

vCANN-RT shares one NPU between containers only once the chip is in device-share mode
(docs/facts/ascend.md §vCANN-RT): ``npu-smi set -t device-share -i ID -c CHIP -d 1|0``
switches it (npu-smi asks ``(Y/N)`` first, answered on stdin), ``npu-smi info -t
device-share -i ID -c CHIP`` reads it back as ``Device-share Status : True|False``. The
mode is not kept across a reboot (it comes back disabled), so Tessera's agent reads it back
rather than trusting what it set. Pure: argv lists and parsing, the agent runs them.
"""

from __future__ import annotations

import re
from typing import Literal

from tessera.domain.geometry.npusmi import CHIP_ID

Mode = Literal["on", "off"]
MODES: tuple[Mode, ...] = ("on", "off")
CONFIRM = "Y\n"
"""npu-smi's answer to its security prompt before a device-share change."""
SHARE_DEV_COUNT = 100
"""Huawei's device plugin runs with ``-shareDevCount=100`` for soft sharing (the only value
allowed with ``-softShareDevConfigDir``): each shared chip is advertised as 100 units of its
whole resource (``huawei.com/Ascend910``), one per AI-core percent."""
MAX_CONTAINERS_PER_NPU = 63
"""vCANN-RT's README: at most 63 containers share one card (the plugin's budget is 100)."""

_STATUS = re.compile(r"Device-share Status\s*:\s*(True|False)", re.IGNORECASE)


def set_commands(npus: int, mode: Mode) -> list[list[str]]:
    """Switch every NPU of the node (ids 0..npus-1, chip 0) to ``mode``."""
    value = "1" if mode == "on" else "0"
    return [
        ["set", "-t", "device-share", "-i", str(npu), "-c", str(CHIP_ID), "-d", value]
        for npu in range(npus)
    ]


def info_command(npu: int) -> list[str]:
    return ["info", "-t", "device-share", "-i", str(npu), "-c", str(CHIP_ID)]


def parse_status(output: str) -> bool | None:
    """``True``/``False`` from ``npu-smi info -t device-share``; None when it says neither."""
    found = _STATUS.search(output)
    return None if found is None else found.group(1).lower() == "true"


def mismatch(read_back: dict[int, bool | None], mode: Mode) -> str:
    """Why the NPUs read back are not all in ``mode`` (``""``: they are)."""
    want = mode == "on"
    wrong = [
        f"NPU {npu} reads {'unreadable' if got is None else ('True' if got else 'False')}"
        for npu, got in sorted(read_back.items())
        if got is not want
    ]
    if not wrong:
        return ""
    return f"device-share {mode} not read back: " + ", ".join(wrong)
