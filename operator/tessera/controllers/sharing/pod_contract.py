"""A SharingPolicy's pod contract: its ValidatingAdmissionPolicy and binding, kept in step.

Each policy owns two objects of its own name (``tessera.domain.admission``), so unlike the
shared DeviceClasses no cluster-wide sync is needed: a pass computes the policy's contract
from its spec and the chips of the nodes it governs, reads the two objects by name and
makes them match — created, updated (a PUT of the object as read: a concurrent writer is a
409 and the sync re-reads), or deleted when the policy says ``podContract: Off``, drops
``spec.scheduler`` or is deleted. An object of that name Tessera does not own is never
touched: the policy is Stalled with reason ``Conflict`` naming it. So is a policy whose
contract contradicts another's on a resource both guard (``admission.overlap``): neither is
enforced, and objects of theirs already written are removed. An API error is reported by
the pass (``skeleton.failed``), never hidden as Ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tessera.adapters.kube import ApiError, Obj, path_of
from tessera.api import constants as c
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.controllers import skeleton
from tessera.controllers.runtime import Context, ref_of
from tessera.domain import admission
from tessera.domain.base.conditions import Verdict
from tessera.domain.base.failures import Failure
from tessera.domain.dra.naming import declarer
from tessera.domain.sharing.assignment import Policy
from tessera.domain.sharing.nodes import NodeFacts

log = logging.getLogger("tessera.podcontract")
KIND = "SharingPolicy"
KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
_PATHS = {KINDS[0]: admission.POLICIES, KINDS[1]: admission.BINDINGS}
ATTEMPTS = 3


class NotServed(ApiError):
    """The API server serves no ValidatingAdmissionPolicy (Kubernetes before 1.30)."""


@dataclass(frozen=True)
class Guarded:
    """What a pass did with a policy's contract: the policy object's name ("" for none),
    names of same-named objects Tessera does not own, the other policies whose contracts
    contradict its own, and whether the sync failed."""

    name: str = ""
    conflicts: tuple[str, ...] = ()
    failed: bool = False
    overlaps: tuple[admission.Overlap, ...] = ()


def chips(facts: Mapping[str, NodeFacts], nodes: Iterable[str]) -> list[str]:
    """The NPU chip names of ``nodes`` (the nodes the policy governs)."""
    found = (facts[n].labels.get(c.NPU_CHIP_NAME_LABEL) for n in nodes if n in facts)
    return sorted({chip for chip in found if chip})


def guard(
    ctx: Context,
    obj: Obj,
    name: str,
    policies: Iterable[Policy],
    facts: Mapping[str, NodeFacts],
    nodes_of: Callable[[str], Iterable[str]],
) -> Guarded:
    """A pass's pod-contract step for policy ``name``: every policy's contract over the
    chips of the nodes it governs (``nodes_of``) and the scheduler name its cluster uses;
    this one's written unless it contradicts another's (``admission.overlaps``). HAMi's
    Deployment not readable: the failure is reported and the objects are left as they are
    (a contract with a guessed scheduler name would be a false one)."""
    read: dict[tuple[str, str], Obj | None] = {}
    contracts: dict[str, admission.Contract | None] = {}
    for p in policies:
        held = chips(facts, nodes_of(p.name))
        try:
            names = admission.scheduler_names(_hami_deployment(ctx, p.spec, read))
        except ApiError as err:
            if p.name == name:
                log.warning("pod contract of %s/%s not synced: %s", KIND, name, err)
                skeleton.failed(Failure(err.status, f"pod contract: HAMi's Deployment: {err}"))
                return Guarded(failed=True)
            continue  # another's: its own pass reports it
        contracts[p.name] = admission.contract_of(p.name, p.spec, held, names)
    overlaps = admission.overlaps(k for k in contracts.values() if k is not None)
    return sync(ctx, obj, name, contracts.get(name), overlaps.get(name, ()))


def _hami_deployment(
    ctx: Context, spec: SharingPolicySpec, read: dict[tuple[str, str], Obj | None]
) -> Obj | None:
    """The HAMi scheduler Deployment the policy names (read once per pass; None: absent)."""
    if spec.scheduler is None:
        return None
    ref = spec.scheduler.hami.deployment
    key = (ref.namespace, ref.name)
    if key not in read:
        read[key] = ctx.kube.get_or_none(path_of("apps/v1", "deployments", ref.name, ref.namespace))
    return read[key]


def sync(
    ctx: Context,
    obj: Obj | None,
    name: str,
    contract: admission.Contract | None,
    overlaps: Iterable[admission.Overlap] = (),
) -> Guarded:
    """Make policy ``name``'s two objects match ``contract`` (none when None: the policy is
    being deleted or wants none, or when it contradicts another's: ``overlaps``)."""
    overlaps = tuple(overlaps)
    contract = None if overlaps else contract
    desired = [admission.policy(contract), admission.binding(contract)] if contract else []
    who, target = declarer(KIND, name), admission.name_of(name)
    try:
        for _ in range(ATTEMPTS):
            found = admission.diff(who, desired, _observed(ctx, target), KINDS)
            try:
                _apply(ctx, obj, name, found.writes, contract)
            except ApiError as err:
                if not isinstance(err, NotServed) and (err.conflict or err.not_found):
                    continue  # written or deleted meanwhile: re-read
                raise
            if found.conflicts and obj is not None:
                text = admission.conflict_message(found.conflicts, who)
                ctx.events.post(ref_of(obj), "Conflict", text, ctx.clock(), "Warning")
            if overlaps and obj is not None:
                text = admission.overlap_message(who, overlaps)
                ctx.events.post(ref_of(obj), "Conflict", text, ctx.clock(), "Warning")
            return Guarded(target if contract else "", found.conflicts, overlaps=overlaps)
        raise ApiError(409, "Conflict", f"{target} kept changing while Tessera wrote it")
    except ApiError as err:
        log.warning("pod contract of %s/%s not synced: %s", KIND, name, err)
        skeleton.failed(Failure(err.status, f"pod contract {target}: {err}"))
        return Guarded(target if contract else "", failed=True, overlaps=overlaps)


def verdict(base: Verdict, guarded: Guarded, name: str) -> Verdict:
    """``admission.with_conflicts``: a same-named object Tessera does not own stalls it;
    ``admission.with_overlaps``: so does a contract contradicting another policy's."""
    who = declarer(KIND, name)
    return admission.with_overlaps(
        admission.with_conflicts(base, guarded.conflicts, who), guarded.overlaps, who
    )


def report(found: dict[str, Any], spec: SharingPolicySpec, guarded: Guarded) -> None:
    """``status.scheduler.admissionPolicy`` for a policy with ``spec.scheduler``."""
    if spec.scheduler is not None:
        found.setdefault("scheduler", {})["admissionPolicy"] = guarded.name


def inputs(ctx: Context, name: str) -> tuple[str, ...]:
    """The two objects' resourceVersions (``skipping``): a hand edit or delete re-runs the
    pass that restores them."""
    return tuple(
        str(o["metadata"].get("resourceVersion")) for o in _observed(ctx, admission.name_of(name))
    )


def _observed(ctx: Context, target: str) -> list[Obj]:
    out = []
    for kind in KINDS:
        obj = ctx.kube.get_or_none(f"{_PATHS[kind]}/{target}")
        if obj is not None:
            out.append({**obj, "kind": kind})
    return out


def _apply(
    ctx: Context,
    obj: Obj | None,
    name: str,
    writes: Iterable[admission.ContractChange],
    contract: admission.Contract | None,
) -> None:
    for change in writes:
        path = _PATHS[change.kind]
        if change.verb == "create":
            assert change.body is not None
            try:
                ctx.kube.create(path, change.body)
            except ApiError as err:
                if err.not_found:  # the collection itself is missing: no VAP API here
                    text = (
                        f"cannot create {change.kind} {change.name}: {path} is not served "
                        f"({err.message}); a pod contract needs Kubernetes 1.30 or newer "
                        "(admissionregistration.k8s.io/v1), else set spec.scheduler.podContract: Off"
                    )
                    raise NotServed(404, "NotFound", text) from None
                raise
        elif change.verb == "update":
            assert change.body is not None
            ctx.kube.replace(f"{path}/{change.name}", change.body)
        else:
            precondition = {"preconditions": {"resourceVersion": change.resource_version}}
            ctx.kube.delete(f"{path}/{change.name}", precondition)
        text = f"{change.kind} {change.name} {change.verb}d"
        if contract is not None:
            text += f" ({contract.action}: {admission.summary(contract)})"
        log.info("%s/%s: %s", KIND.lower(), name, text)
        if obj is not None:
            ctx.events.post(ref_of(obj), "PodContractWritten", text, ctx.clock())
