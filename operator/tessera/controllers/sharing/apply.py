"""Writing one SharingPlan, in the order the node agents need.

1. the device-plugin ConfigMap (new keys before any label names them);
2. each node's ``nvidia.com/device-plugin.config`` label, one merge patch each;
3. the key cleanup, only when every label write of step 2 succeeded (otherwise
   a node may still point at a key we would delete: the next pass retries);
4. HAMi's node configs, as the plan's JSON patch applied to the document, with
   a resourceVersion precondition so a person's concurrent edit is re-planned,
   never overwritten. They name no key, so they are written even when step 1
   failed (steps 2 and 3 are then skipped).

Each function returns how many writes it made, so the caller knows whether to
observe again, and a converged cluster costs zero writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from tessera.adapters.kube import ApiError, path_of
from tessera.api import constants as c
from tessera.controllers.runtime import Context
from tessera.controllers.sharing.observe import ConfigDocument, serialize
from tessera.domain.schedulers.hami import nodes as hami
from tessera.domain.sharing import planning, vcannrt
from tessera.domain.sharing.configmap import ConfigMapPlan
from tessera.domain.sharing.rollout_targets import HAMI_MODE_LABEL

log = logging.getLogger("tessera.sharingpolicy")


@dataclass(frozen=True)
class Applied:
    writes: int
    plugin_map: bool
    """Whether the device-plugin ConfigMap took this plan's keys (False: no label was written)."""


def apply(
    ctx: Context, plan: planning.SharingPlan, nvidia: ConfigDocument, ascend: ConfigDocument
) -> Applied:
    keys = _plugin_map(ctx, plan.device_plugin)
    writes = 0
    if keys >= 0:  # keys could not be written: no label may point at them
        writes = keys + _labels(ctx, plan.device_plugin)
    # HAMi's entries name no key: written even where the device-plugin ConfigMap cannot be
    # (no GPU Operator namespace, as in a cluster of Ascend nodes only).
    writes += _entries(ctx, nvidia, plan.hami_nvidia)
    writes += _entries(ctx, ascend, plan.hami_ascend)
    return Applied(writes, keys >= 0)


def _labels(ctx: Context, cm: ConfigMapPlan) -> int:
    """Steps 2 and 3: the node labels, then the cleanup once every label landed."""
    writes = 0
    labels_ok = True
    for change in cm.labels:
        try:
            ctx.kube.patch(path_of("v1", "nodes", change.node), change.patch())
            writes += 1
        except ApiError as err:
            if not (err.not_found or err.conflict):
                raise
            labels_ok = False
            log.info("label on node %s not written (%s); next pass retries", change.node, err)
    if labels_ok and cm.delete_after_labels:
        ctx.kube.patch(
            path_of("v1", "configmaps", cm.ref.name, cm.ref.namespace), cm.cleanup_patch()
        )
        writes += 1
    return writes


def drop_mode_labels(ctx: Context, names: Iterable[str]) -> int:
    """Remove Tessera's HAMi mode marker from nodes no policy governs any more."""
    return _label_nodes(ctx, names, {HAMI_MODE_LABEL: None})


def switch_device_share_off(ctx: Context, names: Iterable[str]) -> int:
    """Ask the Ascend agent of nodes no vCANN-RT policy governs any more for device-share off
    (``vcannrt.labels``); the agent switches every NPU and reads it back."""
    return _label_nodes(ctx, names, vcannrt.labels("off"))


def _label_nodes(ctx: Context, names: Iterable[str], labels: Mapping[str, str | None]) -> int:
    """Patch ``labels`` onto each node still there; how many were patched."""
    done = 0
    for name in names:
        try:
            ctx.kube.patch(path_of("v1", "nodes", name), {"metadata": {"labels": dict(labels)}})
            done += 1
        except ApiError as err:
            if not err.not_found:
                raise
    return done


def _plugin_map(ctx: Context, cm: ConfigMapPlan) -> int:
    if not cm.writes_config_map:
        return 0
    path = path_of("v1", "configmaps", cm.ref.name, cm.ref.namespace)
    body = cm.data_patch()
    try:
        ctx.kube.patch(path, body)
    except ApiError as err:
        if not err.not_found:
            raise
        data = {k: v for k, v in body["data"].items() if v is not None}
        meta = {"name": cm.ref.name, "namespace": cm.ref.namespace, **body["metadata"]}
        try:
            ctx.kube.create(path_of("v1", "configmaps", namespace=cm.ref.namespace), {
                "metadata": meta,
                "data": data,
            })  # fmt: skip
        except ApiError as failed:
            if not (failed.not_found or failed.conflict):
                raise
            log.warning("cannot create %s: %s", cm.ref, failed.message)
            return -1
    return 1


def _entries(ctx: Context, doc: ConfigDocument, plan: hami.EntriesPlan) -> int:
    """Apply Tessera's entry patch to one HAMi document, if anything changed."""
    if doc.error:
        if plan.patch:
            log.warning("not writing HAMi entries: %s", doc.error)
        return 0
    annotation = hami.managed_annotation(plan.managed)
    if not plan.patch and dict(plan.managed) == dict(doc.managed):
        return 0
    if doc.obj is None:
        if not plan.managed:
            return 0
        body: dict[str, Any] = {
            "metadata": {
                "name": doc.name,
                "namespace": doc.namespace,
                "annotations": {c.MANAGED_NODES_ANNOTATION: annotation},
            },
            "data": {doc.key: serialize(doc.key, plan.document)},
        }
        ctx.kube.create(path_of("v1", "configmaps", namespace=doc.namespace), body)
        return 1
    after = jsonpatch.apply_patch(dict(doc.parsed or {}), list(plan.patch))
    meta: dict[str, Any] = {
        "resourceVersion": doc.obj["metadata"]["resourceVersion"],
        "annotations": {c.MANAGED_NODES_ANNOTATION: annotation or None},
    }
    patch: dict[str, Any] = {"metadata": meta}
    if plan.patch:
        patch["data"] = {doc.key: serialize(doc.key, after)}
    try:
        ctx.kube.patch(path_of("v1", "configmaps", doc.name, doc.namespace), patch)
    except ApiError as err:
        if not err.conflict:
            raise
        log.info("%s/%s changed while we planned; re-planning", doc.namespace, doc.name)
        return 1  # not written, but the caller must observe again
    return 1
