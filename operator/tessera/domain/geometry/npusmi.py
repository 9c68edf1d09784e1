"""The npu-smi commands that turn one NPU node from its current vNPUs into a named config.

Tessera's Ascend node agent mirrors the MIG manager: it reads a named config
(``vnpu-configs`` in the vNPU ConfigMap, rendered by
``tessera.domain.geometry.vnpu``), destroys the vNPUs it created before and
creates the listed ones with static virtualization. Which vNPUs exist is
recorded on the Node (not in agent memory), so a restarted agent destroys
exactly what it made — never a vNPU someone else created.

vNPU ids are chosen, not discovered: NPU ``i`` gets ids ``100 + 16*i + k`` in
creation order, inside npu-smi's documented id space, so the record and the
commands agree without parsing npu-smi's tables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FIRST_ID = 100
IDS_PER_NPU = 16
CHIP_ID = 0  # one chip per NPU id on the cards Tessera supports (310P3, 910B4)


class ConfigError(ValueError):
    """The named config is missing or malformed; the agent reports failed with this message."""


@dataclass(frozen=True)
class Vnpu:
    npu: int
    id: int
    template: str
    vgroup: int | None = None


@dataclass(frozen=True)
class Record:
    """What the agent created on this node, persisted as a Node annotation."""

    config: str = ""
    vnpus: tuple[Vnpu, ...] = field(default=())

    def encode(self) -> str:
        items = [
            {"npu": v.npu, "id": v.id, "template": v.template}
            | ({"vgroup": v.vgroup} if v.vgroup is not None else {})
            for v in self.vnpus
        ]
        return json.dumps({"config": self.config, "vnpus": items}, separators=(",", ":"))

    @staticmethod
    def decode(text: str | None) -> Record:
        if not text:
            return Record()
        try:
            data = json.loads(text)
            vnpus = tuple(
                Vnpu(int(v["npu"]), int(v["id"]), str(v["template"]), v.get("vgroup"))
                for v in data.get("vnpus", [])
            )
            return Record(str(data.get("config", "")), vnpus)
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"unreadable vNPU record on the node: {err}") from err


def wanted_vnpus(entries: Sequence[Mapping[str, Any]], npu_count: int) -> tuple[Vnpu, ...]:
    """The vNPUs a config asks for on a node with ``npu_count`` NPUs."""
    per_npu: dict[int, list[Mapping[str, Any]]] = {}
    for entry in entries:
        devices = entry.get("devices", "all")
        if devices == "all":
            targets: Sequence[int] = range(npu_count)
        elif isinstance(devices, list) and all(isinstance(i, int) for i in devices):
            targets = [i for i in devices if i < npu_count]
        else:
            raise ConfigError(f"entry devices must be 'all' or a list of indexes, not {devices!r}")
        creates = entry.get("create") or [] if entry.get("vnpu-enabled") else []
        for npu in targets:
            per_npu[npu] = list(creates)
    out: list[Vnpu] = []
    for npu in sorted(per_npu):
        for k, item in enumerate(per_npu[npu]):
            if "template" not in item:
                raise ConfigError(f"NPU {npu}: create entry without a template: {item!r}")
            out.append(
                Vnpu(
                    npu, FIRST_ID + IDS_PER_NPU * npu + k, str(item["template"]), item.get("vgroup")
                )
            )
    return tuple(out)


def commands(previous: Record, wanted: Sequence[Vnpu]) -> list[list[str]]:
    """npu-smi argument lists: destroy what we made before, then create the wanted vNPUs."""
    argv: list[list[str]] = []
    for v in previous.vnpus:
        argv.append(
            ["set", "-t", "destroy-vnpu", "-i", str(v.npu), "-c", str(CHIP_ID), "-v", str(v.id)]
        )
    for v in wanted:
        create = [
            "set",
            "-t",
            "create-vnpu",
            "-i",
            str(v.npu),
            "-c",
            str(CHIP_ID),
            "-f",
            v.template,
        ]
        create += ["-v", str(v.id)]
        if v.vgroup is not None:
            create += ["-g", str(v.vgroup)]
        argv.append(create)
    return argv
