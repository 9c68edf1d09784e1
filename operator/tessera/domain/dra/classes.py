"""The desired set of Tessera's DeviceClasses, from every pool and every SharingPolicy.

A pool with ``allocation: DRA`` declares one class per MIG profile its geometry provides,
plus ``gpu.tessera.io`` when some GPU keeps MIG off (``provides``). A SharingPolicy whose
``poolRef`` names a DRA pool declares ``<policy>.<base>.sharing.tessera.io`` for each of
those, carrying its opaque sharing config (none for Exclusive, so a claim keeps its class
when the backend changes). Classes are shared: ``declared_by`` lists every declarer.

A policy the driver would refuse (``sharing.device_plugin.validate``), or a class whose selector fails
Tessera's own check, is refused: the declarer gets a ``ClassProblem`` and none of its classes are
written; its ``held`` classes that exist stay as they are (nothing written before a fix).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import DraPool
from tessera.api.v1alpha1.sharingpolicy import SharingPolicySpec
from tessera.domain.dra import naming, selfcheck, sharing
from tessera.domain.dra.offer import INVALID_GEOMETRY, PoolInput, offer

POOL_KIND = "NodePoolGeometry"
POLICY_KIND = "SharingPolicy"


@dataclass(frozen=True)
class ClassProblem:
    """Why a declarer's classes are refused: ``reason`` (a condition reason), the field."""

    reason: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class DesiredClass:
    name: str
    selects: str
    declared_by: tuple[str, ...]
    config: Mapping[str, Any] | None = None

    @property
    def selector(self) -> str:
        return naming.selector(self.selects)

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"selectors": [{"cel": {"expression": self.selector}}]}
        if self.config is not None:
            out["config"] = [{"opaque": {"driver": naming.DRIVER, "parameters": self.config}}]
        return out

    def metadata(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
            "annotations": {naming.DECLARED_BY_ANNOTATION: ",".join(self.declared_by)},
        }

    def manifest(self) -> dict[str, Any]:
        """The whole object, as created."""
        meta = self.metadata()
        return {
            "apiVersion": naming.API,
            "kind": "DeviceClass",
            "metadata": meta,
            "spec": self.spec(),
        }


@dataclass(frozen=True)
class DesiredClasses:
    classes: Mapping[str, DesiredClass] = field(default_factory=dict)
    declared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Declarer (``Kind/name``) → the classes it declares, sorted (refused ones: empty)."""
    problems: Mapping[str, tuple[ClassProblem, ...]] = field(default_factory=dict)
    """Refused declarers: their classes are neither written nor deleted (``held``)."""

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self.problems)


def desired_classes(
    pools: Mapping[str, PoolInput], policies: Mapping[str, SharingPolicySpec]
) -> DesiredClasses:
    """Every class Tessera should own now, who declares it, and who is refused."""
    found: dict[str, DesiredClass] = {}
    declared: dict[str, tuple[str, ...]] = {}
    problems: dict[str, tuple[ClassProblem, ...]] = {}
    offered: dict[str, tuple[str, ...]] = {}
    for name, pool in sorted(pools.items()):
        if pool.spec.allocation != "DRA":
            continue
        found_offer = offer(pool.spec, pool.gpus, pool.models)
        offered[name] = found_offer.selects
        who = naming.declarer(POOL_KIND, name)
        if found_offer.field:  # no node can take its layouts: nothing of it is written
            problems[who] = (
                ClassProblem(INVALID_GEOMETRY, found_offer.field, found_offer.message),
            )
            declared[who] = ()
            continue
        wanted = [DesiredClass(naming.geometry_class(s), s, (who,)) for s in offered[name]]
        _declare(who, wanted, found, declared, problems)
    for name, spec in sorted(policies.items()):
        pool_name = spec.pool_ref.name if spec.pool_ref else None
        if pool_name not in offered:
            continue  # not on a DRA pool: the device-plugin path (or PoolNotFound)
        assert pool_name is not None
        who = naming.declarer(POLICY_KIND, name)
        pool_who = naming.declarer(POOL_KIND, pool_name)
        if pool_who in problems:  # its pool is refused: the policy's classes are held too
            text = f"{pool_who} is refused ({problems[pool_who][0]})"
            problems[who], declared[who] = (ClassProblem("PoolRefused", "spec.poolRef", text),), ()
            continue
        gates = (pools[pool_name].spec.dra or DraPool()).feature_gates
        selects = offered[pool_name]
        issues = sharing.validate(spec, pool_name, gates, naming.GPU in selects)
        if issues:
            problems[who] = tuple(ClassProblem("InvalidConfig", f, m) for f, m in issues)
            declared[who] = ()
            continue
        wanted = [
            DesiredClass(naming.sharing_class(name, s), s, (who,), sharing.parameters(spec, s))
            for s in selects
        ]
        _declare(who, wanted, found, declared, problems)
    return DesiredClasses(found, declared, problems)


def holding(desired: DesiredClasses, unparsed: Iterable[str]) -> DesiredClasses:
    """Declarers (``Kind/name``) whose spec does not parse keep their classes as they are
    (``held``): they report InvalidSpec themselves, and a bad edit must not delete what claims
    still name. The operator and ``tessera plan`` both apply it."""
    bad = (ClassProblem("InvalidSpec", "spec", "does not parse"),)
    return replace(desired, problems={**desired.problems, **dict.fromkeys(unparsed, bad)})


def _declare(
    who: str,
    wanted: list[DesiredClass],
    found: dict[str, DesiredClass],
    declared: dict[str, tuple[str, ...]],
    problems: dict[str, tuple[ClassProblem, ...]],
) -> None:
    issues = [
        ClassProblem("InvalidSelector", f"DeviceClass {d.name}", p)
        for d in wanted
        for p in _checked(d)
    ]
    if issues:
        problems[who], declared[who] = tuple(issues), ()
        return
    for cls in wanted:
        known = found.get(cls.name)
        by = tuple(sorted({*known.declared_by, who})) if known else cls.declared_by
        found[cls.name] = DesiredClass(cls.name, cls.selects, by, cls.config)
    declared[who] = tuple(sorted(d.name for d in wanted))


def _checked(cls: DesiredClass) -> tuple[str, ...]:
    problems = selfcheck.check(cls.selector)
    if len(cls.name) > naming.MAX_NAME:
        problems += (f"name is {len(cls.name)} characters, over {naming.MAX_NAME}",)
    return problems
