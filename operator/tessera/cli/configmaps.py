"""The ConfigMap flags ``tessera run``, ``tessera plan`` and ``tessera suggest`` share.

The operator writes these maps and ``tessera plan`` diffs them, so both must
be pointed at the same ones on a cluster whose GPU Operator (or Helm values)
names them differently; one definition keeps the two commands in step.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection

from tessera.api import constants as c


def namespaced_name(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` → ``(namespace, name)``; argparse turns ValueError into a usage error."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(text)
    return namespace, name


namespaced_name.__name__ = "NAMESPACE/NAME"  # what argparse prints in its error message

DEFAULTS = {
    "device_plugin_configmap": (
        c.DEVICE_PLUGIN_CONFIGMAP_NAMESPACE,
        c.DEVICE_PLUGIN_CONFIGMAP_NAME,
    ),
    "mig_parted_configmap": (c.MIG_PARTED_CONFIGMAP_NAMESPACE, c.MIG_PARTED_CONFIGMAP_NAME),
    "vnpu_configmap": (c.VNPU_CONFIGMAP_NAMESPACE, c.VNPU_CONFIGMAP_NAME),
    "vgpu_configmap": (c.VGPU_CONFIGMAP_NAMESPACE, c.VGPU_CONFIGMAP_NAME),
}


def add_flags(
    parser: argparse.ArgumentParser,
    title: str,
    *,
    sub: bool = False,
    only: Collection[str] | None = None,
) -> None:
    """``--device-plugin-configmap``, ``--mig-parted-configmap``, ``--vnpu-configmap``,
    ``--vgpu-configmap``, ``--hami-namespace``, in an argument group called ``title``.

    ``sub``: the parser is a subcommand of one that has the flags too; its copies set
    no default, so ``tessera plan --vnpu-configmap=A snapshot`` keeps A. ``only``: just
    these (their ``dest`` names; ``tessera suggest`` reads two maps)."""
    maps = parser.add_argument_group(title)
    helps = {
        "device_plugin_configmap": "GPU Operator devicePlugin.config",
        "mig_parted_configmap": "GPU Operator migManager.config",
        "vnpu_configmap": "configs of Tessera's Ascend vNPU agent",
        "vgpu_configmap": "GPU Operator vgpuDeviceManager.config.name (key config.yaml)",
    }
    for dest, default in DEFAULTS.items():
        if only is not None and dest not in only:
            continue
        maps.add_argument(
            "--" + dest.replace("_", "-"),
            type=namespaced_name,
            default=argparse.SUPPRESS if sub else default,
            metavar="NAMESPACE/NAME",
            help=f"{helps[dest]} (default: {'/'.join(default)})",
        )
    if only is not None and "hami_namespace" not in only:
        return
    maps.add_argument(
        "--hami-namespace",
        default=argparse.SUPPRESS if sub else c.HAMI_NAMESPACE,
        help=f"namespace of HAMi's node-config ConfigMaps (default: {c.HAMI_NAMESPACE})",
    )
