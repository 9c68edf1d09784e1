"""ResourceSlice devices of one simulated H100 board, for the DRA claim and taint tables."""

from __future__ import annotations

from typing import Any


def bus(i: int) -> dict[str, dict[str, str]]:
    # bus numbers not in index order as text: 0x08 < 0x18 < 0x28 ..., as a real board's are
    return {"resource.kubernetes.io/pciBusID": {"string": f"0000:{0x08 + 0x10 * i:02x}:00.0"}}


def gpu(i: int) -> dict[str, Any]:
    return {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, **bus(i)}}


def mig(i: int, start: int) -> dict[str, Any]:
    attrs = {"type": {"string": "mig"}, "profile": {"string": "3g.40gb"}, **bus(i)}
    return {"name": f"gpu-{i}-mig-3g40gb-9-{start}", "attributes": attrs}
