"""Who may write: the writer Lease that makes a peering handover strictly one-at-a-time.

kopf peering decides which replica *should* act, but it drops a stopping
replica's peer record before that replica's pass in flight has ended (a pass
runs in a thread nobody can interrupt). Without more, the replica taking over
can observe the cluster while the other's last writes are still landing, and
both may admit a node against the same ``maxUnavailable`` slot.

So every pass first holds a ``coordination.k8s.io/v1`` Lease. A replica keeps
it while any pass of its own may still run and gives it back only after the
last one ended; a replica that died keeps it until ``leaseDurationSeconds``
have passed since its last renewal. This module decides, from the Lease as
read, whether this replica holds it, may take it, or must wait — and builds the
spec it writes. The adapter that reads and writes it is
``tessera.controllers.writer_lease``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime, as the API server expects it

Verdict = Literal["held", "take", "wait"]


@dataclass(frozen=True)
class LeaseView:
    """The parts of a Lease's spec the decision needs."""

    holder: str = ""
    renewed: datetime | None = None
    duration_s: int = 0
    transitions: int = 0


@dataclass(frozen=True)
class Claim:
    verdict: Verdict
    reason: str


def view_of(spec: dict[str, Any] | None) -> LeaseView:
    """A Lease's spec as read (a missing or unparsable renewTime counts as never renewed)."""
    spec = spec or {}
    renewed = None
    raw = spec.get("renewTime")
    if isinstance(raw, str):
        try:
            renewed = datetime.strptime(raw, MICRO_TIME).replace(tzinfo=UTC)
        except ValueError:
            renewed = None
    return LeaseView(
        holder=str(spec.get("holderIdentity") or ""),
        renewed=renewed,
        duration_s=int(spec.get("leaseDurationSeconds") or 0),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def claim(lease: LeaseView, me: str, now: datetime) -> Claim:
    """Whether ``me`` holds the Lease, may take it now, or must wait for its holder."""
    if lease.holder == me:
        return Claim("held", f"held by {me}")
    if not lease.holder:
        return Claim("take", "released")
    if lease.renewed is None:
        return Claim("take", f"{lease.holder} never renewed it")
    expiry = lease.renewed + timedelta(seconds=lease.duration_s)
    if expiry <= now:
        return Claim("take", f"{lease.holder} stopped renewing it at {_text(lease.renewed)}")
    left = (expiry - now).total_seconds()
    return Claim("wait", f"held by {lease.holder} for up to {left:.0f} s more")


def spec_for(lease: LeaseView, me: str, now: datetime, duration_s: int) -> dict[str, Any]:
    """The spec that takes or renews the Lease for ``me``."""
    taking = lease.holder != me
    spec: dict[str, Any] = {
        "holderIdentity": me,
        "leaseDurationSeconds": duration_s,
        "renewTime": _text(now),
        "leaseTransitions": lease.transitions + (1 if taking and lease.holder else 0),
    }
    if taking:
        spec["acquireTime"] = _text(now)
    return spec


def released_spec(lease: LeaseView, now: datetime) -> dict[str, Any]:
    """The spec that gives the Lease back: no holder, so the next replica need not wait."""
    return {
        "holderIdentity": None,
        "leaseDurationSeconds": lease.duration_s,
        "renewTime": _text(now),
        "leaseTransitions": lease.transitions,
    }


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(MICRO_TIME)
