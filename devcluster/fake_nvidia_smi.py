"""A stand-in for ``nvidia-smi -L`` on a simulated GPU node, read from its inventory.

Prints what the real command prints (one line per GPU, then one indented line per MIG device
of that GPU, in the format ``nvidia-smi -L`` has, e.g.::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-950792bf-a01c-3f1a-e122-3473e67f54b2)
      MIG 3g.40gb     Device  0: (UUID: MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c)

the profile left-aligned in 11 columns, the MIG device's index within its GPU in 2) from the
node's ``inventory.json`` (``gpuinventory``), which the simulated MIG manager and device plugin
keep. MIG devices are listed in placement order. Only ``-L`` / ``--list-gpus`` is implemented;
``FAKE_NVIDIA_SMI_FAIL=1`` fails as a driver/library mismatch does.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from devcluster import gpuinventory


def listing(inventory: gpuinventory.Inventory) -> str:
    lines = []
    for gpu in inventory.gpus:
        lines.append(f"GPU {gpu.index}: {inventory.product} (UUID: {gpu.uuid})")
        lines += [
            f"  MIG {mig.profile:<11} Device {j:>2}: (UUID: {mig.uuid})"
            for j, mig in enumerate(gpu.migs)
        ]
    return "".join(f"{line}\n" for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nvidia-smi")
    parser.add_argument("--inventory", type=Path, required=True)
    parser.add_argument("--node", default="")
    parser.add_argument("-L", "--list-gpus", action="store_true")
    args = parser.parse_args(argv)
    if os.environ.get("FAKE_NVIDIA_SMI_FAIL") == "1":
        print("Failed to initialize NVML: Driver/library version mismatch")
        return 18
    if not args.list_gpus:
        print("fake nvidia-smi: only -L (--list-gpus) is simulated", file=sys.stderr)
        return 2
    inventory = gpuinventory.load(args.inventory.parent) if args.inventory.exists() else None
    if inventory is None or not inventory.gpus or args.node not in ("", inventory.node):
        print("No devices were found")
        return 6
    sys.stdout.write(listing(inventory))
    return 0


def install(folder: Path, node: str) -> Path:
    """Write an executable ``nvidia-smi`` into ``folder`` listing ``folder/inventory.json``
    (the inventory of ``node``)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"exec {shlex.quote(sys.executable)} -m devcluster.fake_nvidia_smi "
        f"--inventory {shlex.quote(str(folder / gpuinventory.FILE))} --node {shlex.quote(node)} "
        '"$@"\n'
    )
    script.chmod(0o755)
    return script


if __name__ == "__main__":
    sys.exit(main())
