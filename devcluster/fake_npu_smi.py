"""A stand-in for Huawei's ``npu-smi`` that keeps its vNPUs in a JSON file.

Only the two commands Tessera's agent runs are implemented, with the real
argument syntax (docs/facts/ascend.md §npu-smi): ``set -t create-vnpu -i ID -c CHIP -f
TEMPLATE [-v VNPU_ID] [-g VGROUP]`` and ``set -t destroy-vnpu -i ID -c CHIP
-v VNPU_ID``. It refuses what a chip would refuse — an unknown template, more
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
from pathlib import Path

from devcluster import hardware


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
    args = parser.parse_args(argv)
    if os.environ.get("FAKE_NPU_SMI_FAIL") == "1":
        print("Status : Error  Message : device busy")
        return 1
    state = json.loads(args.state.read_text()) if args.state.exists() else {}
    chip = hardware.npu_chip(os.environ.get("FAKE_NPU_SMI_CHIP", "310P3"))
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
