"""metav1.LabelSelector matching, the way the API server reads it.

Pure and tiny on purpose: SharingPolicy, NodePoolGeometry and TenantQuota all
decide "which objects does this select" with it, and they must agree with
``kubectl get -l``. The rules that surprise people are kept here once:

* an empty selector (no labels, no expressions) selects everything;
* a missing selector (``None``) selects nothing;
* ``NotIn`` holds for objects that do not carry the key at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tessera.api.v1alpha1.common import LabelSelector, LabelSelectorRequirement


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether an object carrying ``labels`` is selected by ``selector``."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    return all(requirement_holds(r, labels) for r in selector.match_expressions)


def requirement_holds(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One ``matchExpressions`` entry against ``labels``."""
    present = requirement.key in labels
    if requirement.operator == "Exists":
        return present
    if requirement.operator == "DoesNotExist":
        return not present
    inside = present and labels[requirement.key] in requirement.values
    return inside if requirement.operator == "In" else not inside


class SelectorIndex:
    """Many named selectors, asked "which select these labels" for many objects: each
    selector with ``matchLabels`` is only tried on objects carrying its first pair, so
    10,000 nodes against 100 pools cost about one check per node, not one per pool."""

    def __init__(self, selectors: Mapping[str, LabelSelector | None]) -> None:
        self._by_pair: dict[tuple[str, str], list[tuple[str, LabelSelector]]] = {}
        self._always: list[tuple[str, LabelSelector]] = []
        for name, selector in sorted(selectors.items()):
            if selector is None:
                continue
            if selector.match_labels:
                pair = min(selector.match_labels.items())
                self._by_pair.setdefault(pair, []).append((name, selector))
            else:
                self._always.append((name, selector))

    def matching(self, labels: Mapping[str, str]) -> tuple[str, ...]:
        """The names whose selector selects ``labels``, sorted."""
        found = [n for n, s in self._always if matches(s, labels)]
        for pair in labels.items():
            found.extend(n for n, s in self._by_pair.get(pair, ()) if matches(s, labels))
        return tuple(sorted(found))


def describe(selector: LabelSelector | None) -> str:
    """The selector in ``kubectl -l`` syntax, for messages a person reads."""
    if selector is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        if r.operator == "Exists":
            parts.append(r.key)
        elif r.operator == "DoesNotExist":
            parts.append(f"!{r.key}")
        else:
            op = "in" if r.operator == "In" else "notin"
            parts.append(f"{r.key} {op} ({','.join(r.values)})")
    return ",".join(parts) or "<everything>"


_TERM = re.compile(
    r"^(?:(?P<not>!)\s*(?P<absent>[^\s=!(),]+)"
    r"|(?P<key>[^\s=!(),]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s=!(),]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)$"
)


def parse(text: str) -> LabelSelector:
    """``kubectl -l`` syntax (``k=v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a)``).

    Raises ValueError naming the term it cannot read.
    """
    labels: dict[str, str] = {}
    expressions: list[LabelSelectorRequirement] = []
    for term in _terms(text):
        found = _TERM.match(term)
        if found is None:
            raise ValueError(f"cannot read selector term {term!r}")
        if found["absent"]:
            expressions.append(
                LabelSelectorRequirement(key=found["absent"], operator="DoesNotExist")
            )
        elif found["op"] in ("=", "=="):
            labels[found["key"]] = found["value"]
        elif found["op"] == "!=":
            expressions.append(
                LabelSelectorRequirement(
                    key=found["key"], operator="NotIn", values=[found["value"]]
                )
            )
        elif found["set"]:
            values = [v.strip() for v in found["values"].split(",") if v.strip()]
            operator = "In" if found["set"] == "in" else "NotIn"
            expressions.append(
                LabelSelectorRequirement(key=found["key"], operator=operator, values=values)
            )
        else:
            expressions.append(LabelSelectorRequirement(key=found["key"], operator="Exists"))
    return LabelSelector(match_labels=labels, match_expressions=expressions)


def _terms(text: str) -> list[str]:
    """Split on the commas that are not inside ``( … )``."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip() or terms:
        terms.append(current.strip())
    return terms
