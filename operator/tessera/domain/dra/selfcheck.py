"""Tessera's own check of each selector it generates, before the API server or a scheduler sees it.

The API server accepts selectors that fail only when kube-scheduler evaluates them (an
attribute a device lacks, a wrongly typed read). A selector here must be at most 10 KiB,
read ``device.driver`` first and the type second, read only attributes the driver publishes
for that type, and compare them with single-quoted literals free of quotes and backslashes
(see docs/dra.md §Selectors). That grammar admits no macro, loop or function call, so a selector's
CEL cost is a few comparisons, far under the API server's limit of 1,000,000. Problems are
reported (the class is not written), never raised.
"""

from __future__ import annotations

import re

from tessera.domain.dra.naming import DRIVER

MAX_LENGTH = 10 * 1024
_COMMON = [
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "addressingMode",
]
ATTRIBUTES = {"gpu": frozenset(_COMMON), "mig": frozenset([*_COMMON, "parentUUID", "profile"])}
_DRIVER = f"device.driver == '{DRIVER}'"
_CLAUSE = re.compile(
    rf"^device\.attributes\['{re.escape(DRIVER)}'\]\.(?P<attr>[A-Za-z][A-Za-z0-9]*)"
    r" == '(?P<value>[^'\\]*)'$"
)


def check(expression: str) -> tuple[str, ...]:
    """What is wrong with ``expression``; empty when it is safe to send."""
    problems: list[str] = []
    if len(expression.encode()) > MAX_LENGTH:
        problems.append(f"selector is {len(expression.encode())} bytes, over {MAX_LENGTH}")
    clauses = expression.split(" && ")
    if clauses[0] != _DRIVER:
        problems.append(f"selector must start with {_DRIVER}")
    parsed = [_CLAUSE.match(clause) for clause in clauses[1:]]
    if not parsed or parsed[0] is None or parsed[0]["attr"] != "type":
        problems.append("selector must read the device type right after the driver")
        return tuple(problems)
    kind = parsed[0]["value"]
    known = ATTRIBUTES.get(kind)
    if known is None:
        problems.append(f"device type {kind!r} is not one Tessera selects (gpu, mig)")
        return tuple(problems)
    for clause, match in zip(clauses[2:], parsed[1:], strict=True):
        if match is None:
            problems.append(f"clause {clause!r} is not an attribute compared with a quoted literal")
        elif match["attr"] not in known:
            problems.append(
                f"clause {clause!r} reads {match['attr']}, which a {kind} device may lack"
            )
    return tuple(problems)
