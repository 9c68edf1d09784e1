"""A stand-in for Huawei's ``npu-smi`` that keeps its vNPUs in a JSON file.

Only the commands Tessera's agent runs are implemented, with the real
argument syntax (docs/facts/ascend.md §npu-smi): ``set -t create-vnpu -i ID -c CHIP -f
TEMPLATE [-v VNPU_ID] [-g VGROUP]``, ``set -t destroy-vnpu -i ID -c CHIP
-v VNPU_ID``, and vCANN-RT's ``set -t device-share -i ID -c CHIP -d 0|1`` (which asks
``(Y/N)`` on stdin first and is refused on a chip the table does not mark ``device_share``)
with its read-back ``info -t device-share -i ID -c CHIP`` (``Device-share Status : True``). It refuses what a chip would refuse — an unknown template, more
AI cores than the chip has, a duplicate or unknown vNPU id — so agent tests
exercise real failure paths. What a chip holds comes from the simulator's own table
(``npu_chips.yaml``), never from Tessera's. ``FAKE_NPU_SMI_CHIP`` names the chip
(default 310P3); ``FAKE_NPU_SMI_FAIL=1`` makes every command fail.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from devcluster import hardware

DEVICE_SHARE = "device-share"  # the state file's key: NPU id -> device-share on


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npu-smi")
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("verb", choices=["set", "info"])
    parser.add_argument("-t", dest="type", required=True)
    parser.add_argument("-i", dest="npu", type=int)
    parser.add_argument("-c", dest="chip", type=int, default=0)
    parser.add_argument("-f", dest="template")
    parser.add_argument("-v", dest="vnpu", type=int)
    parser.add_argument("-g", dest="vgroup", type=int)
    parser.add_argument("-d", dest="value", choices=["0", "1"])
    args = parser.parse_args(argv)
    if os.environ.get("FAKE_NPU_SMI_FAIL") == "1":
        print("Status : Error  Message : device busy")
        return 1
    state = json.loads(args.state.read_text()) if args.state.exists() else {}
    chip = hardware.npu_chip(os.environ.get("FAKE_NPU_SMI_CHIP", "310P3"))
    if args.type == "device-share":
        return _device_share(args, state, chip)
    vnpus: dict[str, dict[str, object]] = state.setdefault(str(args.npu), {})
    if args.type == "create-vnpu":
        template = chip.templates.get(args.template or "")
        if template is None:
            print(f"Status : Error  Message : template {args.template} not supported")
            return 1
        used = sum(int(str(v["ai_core"])) for v in vnpus.values())
        if used + template.ai_core > chip.ai_core or str(args.vnpu) in vnpus:
            print("Status : Error  Message : resource not enough or vnpu id in use")
            return 1
        vnpus[str(args.vnpu)] = {
            "template": args.template,
            "ai_core": template.ai_core,
            "vgroup": args.vgroup,
        }
        message = "Create vnpu success"
    elif args.type == "destroy-vnpu":
        if vnpus.pop(str(args.vnpu), None) is None:
            print(f"Status : Error  Message : vnpu {args.vnpu} not exist")
            return 1
        message = f"Destroy vnpu {args.vnpu} success"
    else:
        print(json.dumps(state))
        return 0
    args.state.write_text(json.dumps(state))
    print(f"Status : OK  Message : {message}")
    return 0


def _device_share(args: argparse.Namespace, state: dict[str, Any], chip: hardware.NpuChip) -> int:
    shared: dict[str, bool] = state.setdefault(DEVICE_SHARE, {})
    if args.verb == "info":
        status = "True" if shared.get(str(args.npu)) else "False"
        print(f"        Device-share Status            : {status}")
        return 0
    if args.value is None:
        print("Status : Fail  Message : -d is required")
        return 1
    if not chip.device_share:
        print("Status : Fail  Message : This device does not support setting device-share.")
        return 1
    print("There are security risks when opening device sharing. (Y/N)")
    if sys.stdin.readline().strip().lower() != "y":
        print("Status : Fail  Message : The operation is cancelled.")
        return 1
    shared[str(args.npu)] = args.value == "1"
    args.state.write_text(json.dumps(state))
    print("Status : OK  Message : The device-share of the chip is set successfully.")
    return 0


def device_shared(state: Mapping[str, Any], npu: int) -> bool:
    """Whether npu-smi holds ``npu`` in device-share mode (for the device-plugin stand-in)."""
    return bool((state.get(DEVICE_SHARE) or {}).get(str(npu)))


def install(directory: Path, chip: str = "310P3") -> Path:
    """Write an executable ``npu-smi`` into ``directory`` backed by ``directory/state.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "npu-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"FAKE_NPU_SMI_CHIP={chip} exec {sys.executable} -m devcluster.fake_npu_smi "
        f'--state {directory / "state.json"} "$@"\n'
    )
    script.chmod(0o755)
    return script


if __name__ == "__main__":
    sys.exit(main())
