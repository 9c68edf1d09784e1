"""A broken rule, said so a person can fix it: which field, which rule, which node.

Every check Tessera runs before writing anything (the device plugin's parse
and start-up rules, HAMi's modes) reports through ``RuleError`` so messages
read the same in conditions, Events and test failures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class RuleError:
    """``field`` is a path in the SharingPolicy (``spec.mps.replicas``) or in the
    rendered config; ``node`` is set when the rule depends on the node."""

    field: str
    rule: str
    node: str | None = None
    reason: str = ""  # a condition reason of its own ("Conflict"); "" is InvalidSpec

    def __str__(self) -> str:
        where = f"node {self.node}: " if self.node else ""
        return f"{where}{self.field}: {self.rule}"


def summary(errors: Iterable[RuleError], limit: int = 5) -> str:
    """Up to ``limit`` errors on one line, then how many more there are."""
    ordered = sorted(set(errors))
    text = "; ".join(str(e) for e in ordered[:limit])
    if len(ordered) > limit:
        text += f"; and {len(ordered) - limit} more"
    return text


@dataclass(frozen=True)
class Note:
    """Why one write in a plan happens, for logs, Events and golden tests.

    ``restore`` marks a write that undoes a hand edit (drift); the controller
    turns those into Events. Every other action is Tessera moving on its own.
    """

    action: str  # add | restore | delete | move | release
    message: str
    policy: str | None = None
    """The SharingPolicy whose plan made this write (its Events carry it); None: no one's,
    such as the default key, or a node returned to it that no policy selects any more."""

    @property
    def restores(self) -> bool:
        return self.action == "restore"
