"""The ``schedulerName`` a pod must carry for HAMi's scheduler, as the cluster says it.

HAMi's chart sets it from one value (``schedulerName``, default ``hami-scheduler``) and
passes it to its scheduler Deployment's containers as ``--scheduler-name=<name>`` (the
extender's flag, and kube-scheduler's on clusters before 1.22; the profile in the
``-newversion`` ConfigMap carries the same value). Tessera reads the flag from the
Deployment the policy names (``spec.scheduler.hami.deployment``); a Deployment that is
absent or passes no such flag keeps the chart's default. Volcano's name stays ``volcano``
(its chart's scheduler name; Tessera does not read Volcano's flags).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULTS = {"HAMi": "hami-scheduler", "Volcano": "volcano"}
FLAG = "--scheduler-name"


def hami(deployment: Mapping[str, Any] | None) -> str:
    """HAMi's scheduler name from its Deployment; the chart's default without one."""
    return flag(deployment) or DEFAULTS["HAMi"]


def flag(deployment: Mapping[str, Any] | None) -> str | None:
    """The first ``--scheduler-name`` value among the containers' command and args
    (``--scheduler-name=x`` or ``--scheduler-name x``); None when no container passes one."""
    spec = ((deployment or {}).get("spec") or {}).get("template", {}).get("spec") or {}
    for container in spec.get("containers") or []:
        words = [*(container.get("command") or []), *(container.get("args") or [])]
        for i, word in enumerate(words):
            if word.startswith(FLAG + "=") and word[len(FLAG) + 1 :]:
                return str(word[len(FLAG) + 1 :])
            if word == FLAG and i + 1 < len(words) and words[i + 1]:
                return str(words[i + 1])
    return None


def names(hami_deployment: Mapping[str, Any] | None) -> dict[str, str]:
    """Each scheduler's name (``Contract.scheduler``) given HAMi's Deployment."""
    return {**DEFAULTS, "HAMi": hami(hami_deployment)}
