"""The per-node rollout state, persisted on the Node as one compact JSON annotation.

Nothing that matters lives in memory: a restarted operator reads this record
and resumes exactly where the last one stopped (docs/facts/drain.md §Crash safety). The record is
self-contained: it carries the full target (labels, watched agent label,
expected allocatable) and the layout to roll back to, so a node can be
finished or backed out even after its pool object is gone. ``orig`` is the
node's ``spec.unschedulable`` *before* Tessera touched it, written before the
cordon; Tessera uncordons only when it was ``False``.

``TRANSITIONS`` says which phase may follow which. Every change of phase goes
through ``check`` (``NodeState.to``, the first record, the clear), so a step the
table does not name raises ``IllegalTransition``, which tests catch. In
production ``plan`` catches it per node: that node gets no write this pass and
is reported ``NodeFailed`` with the message, while the pool's other nodes go
on (a node mid-drain must not stay cordoned because another is stuck). A
record that cannot occur is refused earlier, by ``decode``, as a ``StateError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

VERSION = 1


class Phase(StrEnum):
    """What is written to a node (``phase`` in the annotation): these values never change."""

    CORDONED = "Cordoned"
    DRAINING = "Draining"
    BLOCKED = "Blocked"
    APPLYING = "Applying"
    VERIFYING = "Verifying"
    UNCORDONING = "Uncordoning"
    FAILED = "Failed"


class ReportPhase(StrEnum):
    """What status, metrics and logs show for a node: its persisted phase, or a category.

    ``Pending``: no record, the node waits for its turn (or cannot start);
    ``Updated``: no record, the node runs its target. Neither is ever written.
    """

    PENDING = "Pending"
    CORDONED = "Cordoned"
    DRAINING = "Draining"
    BLOCKED = "Blocked"
    APPLYING = "Applying"
    VERIFYING = "Verifying"
    UNCORDONING = "Uncordoning"
    UPDATED = "Updated"
    FAILED = "Failed"

    @classmethod
    def of(cls, phase: Phase) -> ReportPhase:
        return cls(phase.value)


# Which phase may follow which; ``None`` is a node without a record (docs/rollout.md draws it).
TRANSITIONS: Final[Mapping[Phase | None, frozenset[Phase | None]]] = {
    # no record: starting.start writes Cordoned (before the cordon) when a node may start
    None: frozenset({Phase.CORDONED}),
    # Cordoned: set by starting; left once cordon and taint are seen, or when backed out
    Phase.CORDONED: frozenset({Phase.DRAINING, Phase.UNCORDONING}),
    # Draining: set by cordoned() or a recount that found pods; left drained, stuck or backed out
    Phase.DRAINING: frozenset({Phase.APPLYING, Phase.BLOCKED, Phase.UNCORDONING}),
    # Blocked: set when a PDB, a rule or drain.timeout holds the drain; left like Draining
    Phase.BLOCKED: frozenset({Phase.DRAINING, Phase.APPLYING, Phase.UNCORDONING}),
    # Applying: set by a finished drain, Rollback or a retarget; left once the layout is asked for
    Phase.APPLYING: frozenset({Phase.VERIFYING, Phase.DRAINING, Phase.UNCORDONING}),
    # Verifying: set as the labels are written; left verified, failed, retargeted or pods back
    Phase.VERIFYING: frozenset({Phase.UNCORDONING, Phase.FAILED, Phase.APPLYING, Phase.DRAINING}),
    # Failed: set by verifying() or release(settle); left by Rollback, retarget, release, new spec
    Phase.FAILED: frozenset({Phase.APPLYING, Phase.UNCORDONING, Phase.CORDONED, None}),
    # Uncordoning: set by release(); left by the clear (the last write) or a settled rollback
    Phase.UNCORDONING: frozenset({None, Phase.FAILED}),
}


Edge = tuple[Phase | None, Phase | None]


def edges() -> list[Edge]:
    """Every allowed change, in the table's order (what docs/rollout.md draws)."""
    return [(before, after) for before, nexts in TRANSITIONS.items() for after in order(nexts)]


def order(phases: frozenset[Phase | None]) -> list[Phase | None]:
    """``phases`` in declaration order, no record last: a stable order for docs and tests."""
    return [p for p in (*Phase, None) if p in phases]


class IllegalTransition(RuntimeError):
    """A change of phase that ``TRANSITIONS`` does not allow; ``plan`` reports it on the node."""


def check(before: Phase | None, after: Phase | None, node: str = "") -> None:
    """Raise unless ``after`` may follow ``before`` (``None``: the node carries no record)."""
    if after not in TRANSITIONS[before]:
        where = f"{node}: " if node else ""
        was, then = before or "no record", after or "no record"
        raise IllegalTransition(f"{where}rollout phase {was} may not be followed by {then}")


class StateError(ValueError):
    """The annotation exists but is not a record this version can trust."""


@dataclass(frozen=True)
class TargetSpec:
    """A layout as the node agent sees it: labels to write and how to check them."""

    id: str
    labels: Mapping[str, str | None] = field(default_factory=dict)
    watch: str | None = None
    alloc: Mapping[str, int] | None = None
    devices: Mapping[str, int] | None = None
    """DRA nodes: the devices the node's ResourceSlices must publish ("gpu" or a MIG profile)."""
    plugin: str | None = None
    """DRA nodes: ``<namespace>/<daemonSet>`` of the driver's kubelet plugin, restarted after
    the agent's success so that it enumerates the new MIG devices."""


@dataclass(frozen=True)
class Eviction:
    """Eviction bookkeeping for one pod: attempts drive the 429 back-off."""

    attempts: int
    last: datetime
    deleted: bool = False


@dataclass(frozen=True)
class NodeState:
    phase: Phase
    owner: str
    target: TargetSpec
    orig: bool
    since: datetime
    drain_started: datetime | None = None
    last_good: TargetSpec | None = None
    rollback_of: str | None = None
    rolled_back: bool = False
    evictions: Mapping[str, Eviction] = field(default_factory=dict)
    message: str = ""
    restarted: str | None = None
    """DRA nodes, Verifying: the uid of the kubelet-plugin pod deleted for this layout (``""``:
    none ran then); ``None``: not restarted yet. Reset whenever a layout is (re)requested."""
    gpus: tuple[int, ...] | None = None
    """The GPUs this change repartitions, decided when the node starts (``scope``): only the
    pods holding one of them leave. ``None``: the whole node is drained."""
    whole: str = ""
    """Why the whole node is drained although its pool changes GPU by GPU (``scope``)."""

    @property
    def goal(self) -> str:
        """The desired target this operation serves (the failed one while rolling back)."""
        return self.rollback_of or self.target.id

    def to(self, phase: Phase, now: datetime, message: str = "") -> NodeState:
        """This record in ``phase`` from ``now``; ``IllegalTransition`` unless the table allows."""
        check(self.phase, phase)
        return replace(self, phase=phase, since=now, message=message)


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(raw: Any) -> datetime:
    if not isinstance(raw, str):
        raise StateError(f"timestamp {raw!r} is not a string")
    try:
        return datetime.strptime(raw, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as err:
        raise StateError(f"timestamp {raw!r} is not RFC 3339 UTC") from err


def _target_out(t: TargetSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"id": t.id, "labels": dict(t.labels)}
    if t.watch is not None:
        out["watch"] = t.watch
    if t.alloc is not None:
        out["alloc"] = dict(t.alloc)
    if t.devices is not None:
        out["devices"] = dict(t.devices)
    if t.plugin is not None:
        out["plugin"] = t.plugin
    return out


def _target_in(raw: Any) -> TargetSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise StateError("target must be an object with an id")
    labels, watch, alloc = raw.get("labels", {}), raw.get("watch"), raw.get("alloc")
    devices, plugin = raw.get("devices"), raw.get("plugin")
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in labels.items()
    ):
        raise StateError("target.labels must map strings to strings or null")
    if watch is not None and not isinstance(watch, str):
        raise StateError("target.watch must be a string")
    for key, counts in (("alloc", alloc), ("devices", devices)):
        if counts is not None and not (
            isinstance(counts, dict)
            and all(isinstance(k, str) and type(v) is int for k, v in counts.items())
        ):
            raise StateError(f"target.{key} must map strings to integers")
    if plugin is not None and not isinstance(plugin, str):
        raise StateError("target.plugin must be a string")
    return TargetSpec(raw["id"], labels, watch, alloc, devices, plugin)


def encode(state: NodeState) -> str:
    """Compact, key-sorted JSON: equal states give byte-equal annotations (no spurious writes)."""
    out: dict[str, Any] = {
        "v": VERSION,
        "phase": state.phase.value,
        "owner": state.owner,
        "target": _target_out(state.target),
        "orig": state.orig,
        "since": ts(state.since),
    }
    if state.drain_started is not None:
        out["drain"] = ts(state.drain_started)
    if state.last_good is not None:
        out["good"] = _target_out(state.last_good)
    if state.rollback_of is not None:
        out["rbOf"] = state.rollback_of
    if state.rolled_back:
        out["rolledBack"] = True
    if state.evictions:
        out["ev"] = {
            k: [e.attempts, ts(e.last), *([1] if e.deleted else [])]
            for k, e in sorted(state.evictions.items())
        }
    if state.message:
        out["msg"] = state.message
    if state.restarted is not None:
        out["rs"] = state.restarted
    if state.gpus is not None:
        out["gpus"] = list(state.gpus)
    if state.whole:
        out["whole"] = state.whole
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def _evictions(raw: Any) -> dict[str, Eviction]:
    if not isinstance(raw, dict):
        raise StateError("ev must be an object")
    out = {}
    for key, rec in raw.items():
        if not (isinstance(rec, list) and len(rec) in (2, 3) and type(rec[0]) is int):
            raise StateError(f"eviction record for {key!r} is malformed")
        out[str(key)] = Eviction(rec[0], _time(rec[1]), deleted=len(rec) == 3 and rec[2] == 1)
    return out


def decode(raw: str | None) -> NodeState | None:
    """The state in ``raw``; ``None`` when absent; ``StateError`` for anything untrustworthy."""
    if raw is None or raw == "":
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise StateError(f"not JSON: {err}") from err
    if not isinstance(data, dict):
        raise StateError("not a JSON object")
    if data.get("v") != VERSION:
        raise StateError(f"unsupported version {data.get('v')!r}")
    try:
        phase = Phase(str(data.get("phase")))
    except ValueError as err:
        raise StateError(f"unknown phase {data.get('phase')!r}") from err
    owner, orig, msg = data.get("owner"), data.get("orig"), data.get("msg", "")
    rb_of, restarted = data.get("rbOf"), data.get("rs")
    if not isinstance(owner, str) or not owner:
        raise StateError("owner must be a non-empty string")
    if not isinstance(orig, bool):
        raise StateError("orig must be a boolean")
    if not isinstance(msg, str) or not all(
        x is None or isinstance(x, str) for x in (rb_of, restarted)
    ):
        raise StateError("msg, rbOf and rs must be strings")
    gpus, whole = data.get("gpus"), data.get("whole", "")
    if gpus is not None and not (
        isinstance(gpus, list) and all(type(i) is int and 0 <= i <= 15 for i in gpus)
    ):
        raise StateError("gpus must list GPU indices 0-15")
    if not isinstance(whole, str) or (whole and gpus is not None):
        raise StateError("whole must be a string, and only on a record without gpus")
    if data.get("rolledBack") is True and phase != Phase.FAILED:
        # Only a finished rollback is settled (release writes it Failed): no pass can continue one.
        raise StateError(f"rolledBack is set on a {phase} record; only a Failed record is settled")
    return NodeState(
        phase=phase,
        owner=owner,
        target=_target_in(data.get("target")),
        orig=orig,
        since=_time(data.get("since")),
        drain_started=_time(data["drain"]) if "drain" in data else None,
        last_good=_target_in(data["good"]) if "good" in data else None,
        rollback_of=rb_of,
        rolled_back=data.get("rolledBack") is True,
        evictions=_evictions(data.get("ev", {})),
        message=msg,
        restarted=restarted,
        gpus=tuple(gpus) if gpus is not None else None,
        whole=whole,
    )
