"""The device-share half of ``tessera agent vnpu``: vCANN-RT's container-sharing mode.

The operator asks for a mode with ``tessera.io/npu.device-share`` (``on`` or ``off``) on the
Node, during a rollout that has drained it; the agent reports ``pending`` in
``tessera.io/npu.device-share.state``, runs ``npu-smi set -t device-share`` on every NPU,
reads each one back with ``npu-smi info -t device-share`` and reports ``success`` only when
all read back as asked — else ``failed`` with npu-smi's words in
``tessera.io/npu.device-share.error``. What it applied is the state label itself: a node
whose request and answer agree is left alone, so a restarted agent does nothing twice.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping
from typing import Any

from tessera.adapters.kube import ApiError, Kube, path_of
from tessera.api import constants as c
from tessera.domain.geometry import device_share

log = logging.getLogger("tessera.agent.vnpu")
DONE = ("success", "failed")
APPLIED_ANNOTATION = "tessera.io/npu.device-share.applied"


class DeviceShare:
    def __init__(self, kube: Kube, node: str, npu_smi: str) -> None:
        self.kube, self.node, self.npu_smi = kube, node, npu_smi

    def step(self, node: Mapping[str, Any]) -> None:
        meta = node["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        wanted = labels.get(c.NPU_DEVICE_SHARE_LABEL)
        if wanted is None:
            return
        state = labels.get(c.NPU_DEVICE_SHARE_STATE_LABEL)
        if annotations.get(APPLIED_ANNOTATION) == wanted and state in DONE:
            return
        if wanted not in device_share.MODES:
            why = f"{c.NPU_DEVICE_SHARE_LABEL} is {wanted!r}: on or off"
            self._report("failed", why, wanted)
            return
        mode: device_share.Mode = "on" if wanted == "on" else "off"
        self._report("pending", None, None)
        npus = int(labels.get(c.NPU_COUNT_LABEL, "0") or "0")
        for argv in device_share.set_commands(npus, mode):
            out, rc = self._run(argv, device_share.CONFIRM)
            if rc != 0:
                self._report("failed", f"npu-smi {' '.join(argv)} failed: {out}", wanted)
                return
        read = {}
        for npu in range(npus):
            out, rc = self._run(device_share.info_command(npu), "")
            read[npu] = device_share.parse_status(out) if rc == 0 else None
        wrong = device_share.mismatch(read, mode)
        if wrong:
            self._report("failed", wrong, wanted)
            return
        self._report("success", None, wanted)

    def _run(self, argv: list[str], answer: str) -> tuple[str, int]:
        result = subprocess.run(
            [self.npu_smi, *argv],
            input=answer,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        log.info("%s: npu-smi %s -> %s", self.node, " ".join(argv), result.returncode)
        return (result.stdout + result.stderr).strip(), result.returncode

    def _report(self, state: str, error: str | None, applied: str | None) -> None:
        annotations: dict[str, str | None] = {c.NPU_DEVICE_SHARE_ERROR_ANNOTATION: error}
        if applied is not None:
            annotations[APPLIED_ANNOTATION] = applied
        patch = {
            "metadata": {
                "labels": {c.NPU_DEVICE_SHARE_STATE_LABEL: state},
                "annotations": annotations,
            }
        }
        try:
            self.kube.patch(path_of("v1", "nodes", self.node), patch)
        except ApiError as err:
            log.warning("%s: could not report device-share %s: %s", self.node, state, err)
