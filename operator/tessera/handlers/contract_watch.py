"""A pod contract's objects changed or deleted by anyone wake the policy that declared them.

Tessera's ValidatingAdmissionPolicies and bindings carry ``app.kubernetes.io/managed-by:
tessera`` and ``tessera.io/declared-by: SharingPolicy/<name>`` (``domain.admission``). A
hand edit or delete of one wakes that policy, whose pass restores it
(``controllers.sharing.pod_contract``); without this only the next timed pass would. Status writes
(the API server's type checking) wake nobody: only what a pass compares is fingerprinted.
kopf lists and watches the whole kind; the label filter is applied to what it receives.

Contracts of two policies can contradict each other (``admission.overlap``: both Stalled,
neither enforced), so a policy with ``spec.scheduler`` created, changed or deleted wakes
every SharingPolicy: the other side of a conflict learns at once that it began or ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from tessera.api import constants as c
from tessera.controllers import sharingpolicy
from tessera.controllers.sharing import pod_contract
from tessera.domain import admission
from tessera.handlers.wakeups import Wakeups, object_fingerprint

GROUP, VERSION = admission.API.split("/")
PLURALS = ("validatingadmissionpolicies", "validatingadmissionpolicybindings")


def declaring_policy(body: Mapping[str, Any]) -> str | None:
    """The SharingPolicy named in the object's ``tessera.io/declared-by``, if any."""
    notes = (body.get("metadata") or {}).get("annotations") or {}
    kind, _, name = str(notes.get(admission.DECLARED_BY) or "").partition("/")
    return name if kind == pod_contract.KIND and name else None


def scheduler_part(body: Mapping[str, Any] | None) -> str:
    """What of a policy its contract reads, as text ("" for a policy without a contract)."""
    spec = (body or {}).get("spec") or {}
    if not spec.get("scheduler"):
        return ""
    return repr(
        [spec.get(k) for k in ("scheduler", "ascend", "backend", "nodeSelector", "poolRef")]
    )


def register(registry: kopf.OperatorRegistry, wakeups: Wakeups) -> None:
    for plural in PLURALS:
        _watch(registry, wakeups, plural)
    _peers(registry, wakeups)


def _peers(registry: kopf.OperatorRegistry, wakeups: Wakeups) -> None:
    seen: dict[str, str] = {}

    @kopf.on.event(c.GROUP, c.VERSION, sharingpolicy.PLURAL, registry=registry, id="contract-peers")
    def policy_changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        now = "" if type == "DELETED" else scheduler_part(body)
        before = seen.pop(name, "")
        if now:
            seen[name] = now
        if now != before:
            wakeups.wake_all(sharingpolicy.PLURAL)


def _watch(registry: kopf.OperatorRegistry, wakeups: Wakeups, plural: str) -> None:
    seen: dict[str, tuple[object, ...]] = {}

    @kopf.on.event(
        GROUP,
        VERSION,
        plural,
        registry=registry,
        labels={c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
        id=f"contract-{plural}",
    )
    def changed(name: str, type: str | None, body: Mapping[str, Any], **_: Any) -> None:
        declared = declaring_policy(body)
        if type == "DELETED":
            seen.pop(name, None)
        elif seen.get(name) != (fingerprint := object_fingerprint(body)):
            seen[name] = fingerprint
        else:
            return  # a status write: nothing a pass compares
        if declared in wakeups.names(sharingpolicy.PLURAL):  # a policy gone: nobody to wake
            wakeups.wake(sharingpolicy.PLURAL, declared)
