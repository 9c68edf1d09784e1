"""Evictions through the Eviction API, and telling people which PDB holds a drain up.

A 429 from the Eviction API is an ordinary answer: a PodDisruptionBudget said
no. It is counted, logged and turned into a Warning Event naming the pod and
the PDB — once per pod, whether the API server's 429 or the PDB's own status
(the pass saw it allows no disruption and sent nothing) told us first — not
once per pass.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from tessera.adapters.events import Ref
from tessera.adapters.kube import ApiError, path_of
from tessera.controllers.runtime import Context
from tessera.domain import rollout
from tessera.observability import metrics

log = logging.getLogger("tessera.rollout")


def evict(ctx: Context, action: rollout.Evict) -> str | None:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": action.name, "namespace": action.namespace},
    }
    if action.uid:
        body["deleteOptions"] = {"preconditions": {"uid": action.uid}}
    try:
        ctx.kube.create(path_of("v1", "pods", action.name, action.namespace) + "/eviction", body)
        metrics.EVICTIONS.labels("evicted").inc()
    except ApiError as err:
        if err.too_many_requests:
            metrics.EVICTIONS.labels("blocked").inc()
            log.info("eviction of %s/%s refused: %s", action.namespace, action.name, err.message)
            return refusal(action.namespace, action.name, err)
        if not (err.not_found or err.conflict):
            raise
    return None


# "The disruption budget NAME needs ..." / "... NAME is still being processed by the server."
_BUDGET = re.compile(r"\bThe disruption budget (?P<name>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)\s")


def refusal(namespace: str, pod: str, err: ApiError) -> str:
    """The API server's 429 in a person's words, naming the PDB its causes name.

    The Eviction API answers "Cannot evict pod as it would violate the pod's
    disruption budget." and puts the PDB in ``details.causes`` ("The disruption
    budget serving-pdb needs 1 healthy pods and has 1 currently").
    """
    causes = (err.body.get("details") or {}).get("causes") or []
    texts = [str(c.get("message", "")) for c in causes if isinstance(c, dict)]
    for text in texts:
        found = _BUDGET.search(text)
        if found:
            pdb = f"{namespace}/{found['name']}"
            return f"eviction of pod {namespace}/{pod} refused by PodDisruptionBudget {pdb}: {text}"
    detail = "; ".join([err.message, *texts]) if texts else err.message
    return f"eviction of pod {namespace}/{pod} refused: {detail or err.reason}"


def announce_held(ctx: Context, owner: Ref, reports: Iterable[rollout.NodeReport]) -> None:
    """A Warning Event for each pod a PodDisruptionBudget keeps on a draining node, once.

    Only a PDB whose status allows no disruption counts here: a refusal is announced
    where the 429 is answered (``controllers.rollout.driver``), in the API server's words; a pod still
    there after an eviction was sent may just not show its deletion yet.
    """
    for report in reports:
        for pod in (p for p in report.held if not p.refused):
            held(ctx, owner, report.name, pod.pod, pod.uid, str(pod))


def held(ctx: Context, owner: Ref, node: str, pod: str, uid: str, text: str) -> None:
    """Once per pod (``uid``: a pod recreated under its name, as a StatefulSet's is, is
    another) and owner, whether a 429 or the PDB's status told us first."""
    if not ctx.events.first(owner.kind, owner.name, node, pod, uid):
        return
    message = f"drain of node {node}: {text}"
    for ref in (owner, Ref("v1", "Node", node)):
        ctx.events.post(ref, "EvictionBlocked", message, ctx.clock(), "Warning")
