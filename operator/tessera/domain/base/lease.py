"""Who may write: the writer Lease that makes a peering handover strictly one-at-a-time.

kopf peering decides which replica *should* act, but it drops a stopping
replica's peer record before that replica's pass in flight has ended (a pass
runs in a thread nobody can interrupt). Without more, the replica taking over
can observe the cluster while the other's last writes are still landing, and
both may admit a node against the same ``maxUnavailable`` slot.

So every pass first holds a ``coordination.k8s.io/v1`` Lease. A replica keeps
it while any pass of its own may still run and gives it back only after the
last one ended. A replica that died keeps it until it has gone unrenewed for
``leaseDurationSeconds`` — measured on the waiting replica's own clock from
when it first saw the current record, as client-go's leader election does, so
two nodes' clocks never need to agree. This module decides, from the Lease as
read, whether this replica holds it, may take it, or must wait — and builds
the spec it writes. ``tessera.controllers.writer_lease`` reads and writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime, as the API server expects it

Verdict = Literal["held", "take", "wait"]


@dataclass(frozen=True)
class LeaseView:
    """The parts of a Lease's spec the decision needs (times as written, never compared)."""

    holder: str = ""
    renew_time: str = ""
    duration_s: int = 0
    transitions: int = 0
    acquire_time: str = ""

    @property
    def record(self) -> tuple[str, str]:
        """What changes on every renewal: seeing it change is seeing the holder alive."""
        return self.holder, self.renew_time


@dataclass(frozen=True)
class Claim:
    verdict: Verdict
    reason: str


def view_of(spec: dict[str, Any] | None) -> LeaseView:
    spec = spec or {}
    return LeaseView(
        holder=str(spec.get("holderIdentity") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        duration_s=int(spec.get("leaseDurationSeconds") or 0),
        transitions=int(spec.get("leaseTransitions") or 0),
        acquire_time=str(spec.get("acquireTime") or ""),
    )


def claim(lease: LeaseView, me: str, now: datetime, seen_since: datetime) -> Claim:
    """Whether ``me`` holds the Lease, may take it now, or must wait for its holder.

    ``seen_since``: when this replica first saw the Lease's current record
    (holder and renewTime), on its own clock.
    """
    if lease.holder == me:
        return Claim("held", f"held by {me}")
    if not lease.holder:
        return Claim("take", "released")
    expiry = seen_since + timedelta(seconds=lease.duration_s)
    if expiry <= now:
        return Claim("take", f"{lease.holder} has not renewed it for {lease.duration_s} s")
    left = (expiry - now).total_seconds()
    return Claim("wait", f"held by {lease.holder} for up to {left:.0f} s more")


SAFETY_S = 3.0
"""A pass starts no new stage of writes unless the Lease has this long left to run."""


def usable(since_renewal: float, duration_s: int) -> bool:
    """Whether a write started now lands inside the Lease we hold."""
    return since_renewal < duration_s - SAFETY_S


def fresh(since_renewal: float, duration_s: int) -> bool:
    """Whether a pass starting now may skip renewing (under half the duration gone)."""
    return since_renewal < duration_s / 2


def renew_period(duration_s: int) -> float:
    """How often a holder renews while passes run."""
    return duration_s / 3


def spec_for(lease: LeaseView, me: str, now: datetime, duration_s: int) -> dict[str, Any]:
    """The spec that takes (new acquireTime, one more transition) or renews the Lease."""
    taking = lease.holder != me
    return {
        "holderIdentity": me,
        "leaseDurationSeconds": duration_s,
        "acquireTime": micro_time(now) if taking or not lease.acquire_time else lease.acquire_time,
        "renewTime": micro_time(now),
        "leaseTransitions": lease.transitions + (1 if taking else 0),
    }


def released_spec(lease: LeaseView, now: datetime) -> dict[str, Any]:
    """The spec that gives the Lease back: no holder, so the next replica need not wait."""
    spec: dict[str, Any] = {
        "holderIdentity": None,
        "leaseDurationSeconds": lease.duration_s,
        "renewTime": micro_time(now),
        "leaseTransitions": lease.transitions,
    }
    if lease.acquire_time:
        spec["acquireTime"] = lease.acquire_time
    return spec


def micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(MICRO_TIME)
