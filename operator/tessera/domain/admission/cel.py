"""The CEL of a pod contract: one validation per missing piece, each message naming it.

One policy checks pods (CREATE) and the pod templates of workloads (CREATE, and UPDATE when
the template changed), so ``kubectl apply`` of a Deployment already shows the warning — a
pod's warning goes to the ReplicaSet controller, which no person reads. Every expression
reads the pod (template) through the variable ``template``; a container requests a resource
when it names it under limits or requests. A ``matchCondition`` keeps every other object
from being evaluated at all: only objects requesting a guarded resource pay for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tessera.domain.admission.contract import (
    AICORE_QUOTA_LABEL,
    ASCEND_RUNTIME_CLASS,
    HAMI_CORE,
    HBM_QUOTA_LABEL,
    NPU_CORE,
    RING_CONTROLLER_310P,
    RING_CONTROLLER_LABEL,
    SHARE_POLICIES,
    SHARE_POLICY_LABEL,
    SHARED_NPU,
    SOFT_SHARE_LABELS,
    VNPU_DVPP_LABEL,
    VNPU_DVPP_VALUES,
    VNPU_LEVEL_LABEL,
    VNPU_LEVELS,
    VNPU_MODE_ANNOTATION,
    Contract,
)

MB = "^[0-9]+$"
_TEMPLATE = (
    "has(object.spec.template) ? object.spec.template : "
    "(has(object.spec.jobTemplate) ? object.spec.jobTemplate.spec.template : object)"
)
_CONTAINERS = (
    "variables.template.spec.containers + (has(variables.template.spec.initContainers) "
    "? variables.template.spec.initContainers : [])"
)
_SPEC = "variables.template.spec"
_ANNOTATED = (
    f"'{VNPU_MODE_ANNOTATION}' in variables.annotations && "
    f"variables.annotations['{VNPU_MODE_ANNOTATION}'] == '{HAMI_CORE}'"
)


def lit(text: str) -> str:
    """``text`` as a CEL string literal (double-quoted: messages hold apostrophes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _names(resources: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{r}'" for r in resources) + "]"


def _asks(c: str, r: str) -> str:
    """Container ``c`` names resource ``r`` (a CEL string) under limits or requests."""
    return (
        f"has({c}.resources) && ((has({c}.resources.limits) && {r} in {c}.resources.limits) || "
        f"(has({c}.resources.requests) && {r} in {c}.resources.requests))"
    )


def _asks_any(c: str, resources: Sequence[str]) -> str:
    return f"{_names(resources)}.exists(r, {_asks(c, 'r')})"


def match_condition(contract: Contract) -> dict[str, str]:
    """Only pods and templates requesting a guarded resource are evaluated."""
    spec = (
        "(has(object.spec.template) ? object.spec.template.spec : "
        "(has(object.spec.jobTemplate) ? object.spec.jobTemplate.spec.template.spec : "
        "object.spec))"
    )
    containers = f"({spec}.containers + (has({spec}.initContainers) ? {spec}.initContainers : []))"
    asks = f"{containers}.exists(c, {_asks_any('c', contract.resources)})"
    if contract.vcannrt:  # its pods are told apart by the labels, not by huawei.com/Ascend910
        meta = (
            "(has(object.spec.template) ? object.spec.template.metadata : "
            "(has(object.spec.jobTemplate) ? object.spec.jobTemplate.spec.template.metadata : "
            "object.metadata))"
        )
        labelled = (
            f"(has({meta}.labels) && {_names(SOFT_SHARE_LABELS)}.exists(k, k in {meta}.labels))"
        )
        asks = f"({asks} || {labelled})"
    changed = (
        "request.operation != 'UPDATE' || (has(object.spec.jobTemplate) ? "
        "object.spec.jobTemplate != oldObject.spec.jobTemplate : "
        "object.spec.template != oldObject.spec.template)"
    )
    return {"name": "requests-sliced-resources", "expression": f"({changed}) && {asks}"}


def variables(contract: Contract) -> list[dict[str, str]]:
    found = [
        {"name": "template", "expression": _TEMPLATE},
        {"name": "containers", "expression": _CONTAINERS},
        {
            "name": "annotations",
            "expression": "has(variables.template.metadata.annotations) ? "
            "variables.template.metadata.annotations : {}",
        },
        {
            "name": "labels",
            "expression": "has(variables.template.metadata.labels) ? "
            "variables.template.metadata.labels : {}",
        },
    ]
    if contract.mindcluster:
        asks = f"variables.containers.exists(c, {_asks('c', repr(NPU_CORE))})"
        found.append({"name": "npuCore", "expression": asks})
    if contract.ascend is not None:
        asks = f"variables.containers.exists(c, {_asks_any('c', contract.ascend.resources)})"
        found.append({"name": "ascend", "expression": asks})
    return found


def validations(contract: Contract) -> list[dict[str, str]]:
    """Scheduler name; for Ascend runtime class, hami-core annotation, MB memory requests."""
    out = [_scheduler(contract)]
    part = contract.ascend
    if part is not None:
        out.append(_runtime_class(contract))
        out.append(_soft_annotation(contract) if part.soft else _core_annotation(contract))
        out.extend(_memory(contract, r) for r in part.memory)
    if contract.mindcluster:
        out.extend(_mindcluster(contract))
    if contract.vcannrt:
        out.extend(_vcannrt(contract))
    return out


def _vcannrt(contract: Contract) -> list[dict[str, str]]:
    """vCANN-RT: the three softShareDev labels Huawei's Volcano plugin reads, each in its
    range; each container's huawei.com/Ascend910 equal to the AI-core percent (one physical
    NPU per container); no privileged container (vCANN-RT does not support them)."""
    who = f"pods carrying the softShareDev labels of SharingPolicy {contract.policy}"
    core, hbm, pol = AICORE_QUOTA_LABEL, HBM_QUOTA_LABEL, SHARE_POLICY_LABEL
    labels = "variables.labels"

    def number(label: str) -> str:
        return f"('{label}' in {labels} && {labels}['{label}'].matches('{MB}'))"

    core_ok = f"({number(core)} && int({labels}['{core}']) >= 1 && int({labels}['{core}']) <= 100)"
    hbm_ok = f"({number(hbm)} && int({labels}['{hbm}']) >= 1)"
    core_tail = f": {who} need label {core}: the AI-core percent of one NPU, 1 to 100"
    hbm_tail = f": {who} need label {hbm}: the NPU memory in MB, at least 1"
    pol_tail = f": {who} need label {pol}: {', '.join(SHARE_POLICIES)} (elastic is recommended)"
    value = f"string(c.resources.limits['{SHARED_NPU}'])"
    asks = f"has(c.resources) && has(c.resources.limits) && '{SHARED_NPU}' in c.resources.limits"
    wrong = f"{asks} && (!{core_ok} || {value} != {labels}['{core}'])"

    def describe(x: str) -> str:
        return (
            f"'container ' + {x}.name + ' requests {SHARED_NPU}: ' + "
            f"string({x}.resources.limits['{SHARED_NPU}'])"
        )

    listing = _first(f"variables.containers.filter(c, {wrong})", describe)
    npu_tail = (
        f": under vCANN-RT a container asks {SHARED_NPU} equal to label {core} (its AI-core "
        "percent of one physical NPU; more than one NPU per container is not supported)"
    )
    privileged = (
        "has(c.securityContext) && has(c.securityContext.privileged) && "
        "c.securityContext.privileged"
    )
    priv_list = _first(
        f"variables.containers.filter(c, {privileged})",
        lambda x: f"'container ' + {x}.name + ' is privileged'",
    )
    priv_tail = ": vCANN-RT does not support privileged containers"
    return [
        _validation(
            core_ok, f"{lit('label ' + core + ' is ')} + {_label(core)} + {lit(core_tail)}"
        ),
        _validation(hbm_ok, f"{lit('label ' + hbm + ' is ')} + {_label(hbm)} + {lit(hbm_tail)}"),
        _validation(
            f"'{pol}' in {labels} && {labels}['{pol}'] in {_names(SHARE_POLICIES)}",
            f"{lit('label ' + pol + ' is ')} + {_label(pol)} + {lit(pol_tail)}",
        ),
        _validation(f"!variables.containers.exists(c, {wrong})", f"{listing} + {lit(npu_tail)}"),
        _validation(
            f"!variables.containers.exists(c, {privileged})", f"{priv_list} + {lit(priv_tail)}"
        ),
    ]


def _label(name: str) -> str:
    """CEL: the pod (template) label ``name`` quoted, or ``unset``."""
    value = f"variables.labels['{name}']"
    return f"('{name}' in variables.labels ? \"'\" + {value} + \"'\" : 'unset')"


def _mindcluster(contract: Contract) -> list[dict[str, str]]:
    """Volcano's MindCluster mode: the 310P family label, a template level, a dvpp value Volcano
    knows, and an AI-core count a 310P template or whole chips give."""
    who = f"pods requesting {NPU_CORE} of SharingPolicy {contract.policy}"
    ring, level, dvpp = RING_CONTROLLER_LABEL, VNPU_LEVEL_LABEL, VNPU_DVPP_LABEL
    ring_tail = (
        f": {who} need label {ring}: {RING_CONTROLLER_310P} (Volcano's MindCluster mode "
        "serves the 310P family only; a 910 pool has no dynamic vNPU)"
    )
    level_tail = (
        f": {who} need label {level}: {' or '.join(VNPU_LEVELS)} (the template level Volcano's "
        "MindCluster mode matches, with the AI-core count and vnpu-dvpp)"
    )
    dvpp_tail = f": label {dvpp} must be {', '.join(VNPU_DVPP_VALUES)} or unset"
    value = f"string(c.resources.limits['{NPU_CORE}'])"
    bad = (
        f"has(c.resources) && has(c.resources.limits) && '{NPU_CORE}' in c.resources.limits && "
        f"!({value}.matches('{MB}') && int({value}) > 0 && "
        f"(int({value}) in [1, 2, 4] || int({value}) % 8 == 0))"
    )

    def describe(x: str) -> str:
        return (
            f"'container ' + {x}.name + ' requests {NPU_CORE}: ' + "
            f"string({x}.resources.limits['{NPU_CORE}'])"
        )

    listing = _first(f"variables.containers.filter(c, {bad})", describe)
    core_tail = (
        ": a 310P vNPU has 1, 2 or 4 AI cores and a whole chip 8, so Volcano's MindCluster "
        "mode takes 1, 2, 4 or a multiple of 8"
    )
    return [
        _validation(
            f"!variables.npuCore || ('{ring}' in variables.labels && "
            f"variables.labels['{ring}'] == '{RING_CONTROLLER_310P}')",
            f"{lit('label ' + ring + ' is ')} + {_label(ring)} + {lit(ring_tail)}",
        ),
        _validation(
            f"!variables.npuCore || ('{level}' in variables.labels && "
            f"variables.labels['{level}'] in {_names(VNPU_LEVELS)})",
            f"{lit('label ' + level + ' is ')} + {_label(level)} + {lit(level_tail)}",
        ),
        _validation(
            f"!variables.npuCore || !('{dvpp}' in variables.labels) || "
            f"variables.labels['{dvpp}'] in {_names(VNPU_DVPP_VALUES)}",
            f"{lit('label ' + dvpp + ' is ')} + {_label(dvpp)} + {lit(dvpp_tail)}",
        ),
        _validation(f"!variables.containers.exists(c, {bad})", f"{listing} + {lit(core_tail)}"),
    ]


def _who(contract: Contract) -> str:
    return f"pods requesting slices of SharingPolicy {contract.policy}"


def _quoted(path: str) -> str:
    return f"(has({path}) ? \"'\" + {path} + \"'\" : 'unset')"


def _validation(expression: str, message: str) -> dict[str, str]:
    return {"expression": expression, "messageExpression": message, "reason": "Invalid"}


def _scheduler(contract: Contract) -> dict[str, str]:
    name, path = contract.scheduler, f"{_SPEC}.schedulerName"
    who = "Volcano's deviceshare plugin" if contract.scheduler_kind == "Volcano" else "HAMi"
    tail = f": {_who(contract)} need schedulerName: {name} ({who} allocates them)"
    return _validation(
        f"has({path}) && {path} == '{name}'",
        f"{lit('schedulerName is ')} + {_quoted(path)} + {lit(tail)}",
    )


def _runtime_class(contract: Contract) -> dict[str, str]:
    path = f"{_SPEC}.runtimeClassName"
    tail = (
        f": {_who(contract)} need runtimeClassName: {ASCEND_RUNTIME_CLASS} "
        "(the Ascend Docker Runtime mounts the vNPU)"
    )
    return _validation(
        f"!variables.ascend || (has({path}) && {path} == '{ASCEND_RUNTIME_CLASS}')",
        f"{lit('runtimeClassName is ')} + {_quoted(path)} + {lit(tail)}",
    )


def _soft_annotation(contract: Contract) -> dict[str, str]:
    text = (
        f"annotation {VNPU_MODE_ANNOTATION}: {HAMI_CORE} is missing: {_who(contract)} need it "
        "(soft slicing is on; without it HAMi slices by template and the pod may stay Pending)"
    )
    return _validation(f"!variables.ascend || ({_ANNOTATED})", lit(text))


def _first(offending: str, describe: Callable[[str], str]) -> str:
    """The first offending container described, and how many more: a message stays short
    however many containers a pod has (the API server drops a long one for the expression)."""
    more = "(size(l) > 1 ? ' (and ' + string(size(l) - 1) + ' more)' : '')"
    return f"[{offending}].map(l, {describe('l[0]')} + {more})[0]"


def _core_annotation(contract: Contract) -> dict[str, str]:
    assert contract.ascend is not None
    core, asks = contract.ascend.core, _asks_any("c", contract.ascend.core)

    def describe(x: str) -> str:
        named = f"{_names(core)}.filter(r, {_asks(x, 'r')}).join(', ')"
        return f"'container ' + {x}.name + ' requests ' + {named}"

    listing = _first(f"variables.containers.filter(c, {asks})", describe)
    tail = (
        f": annotation {VNPU_MODE_ANNOTATION}: {HAMI_CORE} is missing, and HAMi accepts a "
        "-core request only in hami-core mode"
    )
    return _validation(
        f"!variables.containers.exists(c, {asks}) || ({_ANNOTATED})", f"{listing} + {lit(tail)}"
    )


def _value(c: str, r: str, where: str) -> str:
    return f"string({c}.resources.{where}['{r}'])"


def _bad(c: str, r: str, where: str) -> str:
    return (
        f"(has({c}.resources.{where}) && '{r}' in {c}.resources.{where} && "
        f"!{_value(c, r, where)}.matches('{MB}'))"
    )


def _memory(contract: Contract, resource: str) -> dict[str, str]:
    bad = (
        f"has(c.resources) && ({_bad('c', resource, 'limits')} || "
        f"{_bad('c', resource, 'requests')})"
    )

    def describe(x: str) -> str:
        limits = _bad(x, resource, "limits")
        value = f"({limits} ? {_value(x, resource, 'limits')} : {_value(x, resource, 'requests')})"
        return f"'container ' + {x}.name + ' requests {resource}: ' + {value}"

    listing = _first(f"variables.containers.filter(c, {bad})", describe)
    tail = (
        f": HAMi reads {resource} in MB and refuses a unit suffix as out of range; "
        "write the MB count (8Gi is 8192)"
    )
    return _validation(f"!variables.containers.exists(c, {bad})", f"{listing} + {lit(tail)}")


def summary(contract: Contract) -> str:
    """The pieces a contract checks, in words (Events, ``tessera plan``)."""
    pieces = [f"schedulerName {contract.scheduler}"]
    if contract.ascend is not None:
        pieces.append(f"runtimeClassName {ASCEND_RUNTIME_CLASS}")
        when = "" if contract.ascend.soft else " with a -core request"
        pieces.append(f"{VNPU_MODE_ANNOTATION}: {HAMI_CORE}{when}")
        pieces.append("-memory in MB")
    if contract.mindcluster:
        pieces.append(f"label {RING_CONTROLLER_LABEL}: {RING_CONTROLLER_310P}")
        pieces.append(f"label {VNPU_LEVEL_LABEL}: low or high")
        pieces.append(f"{NPU_CORE} 1, 2, 4 or 8·n")
    if contract.vcannrt:
        pieces.append(f"labels {', '.join(SOFT_SHARE_LABELS)} in range")
        pieces.append(f"{SHARED_NPU} equal to the AI-core percent; no privileged container")
    return f"pods requesting {', '.join(contract.resources)} need " + "; ".join(pieces)
