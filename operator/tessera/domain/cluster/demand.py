"""``tessera suggest POOL``: the live cluster as the decision's inputs, the demand file's twin.

What the cluster says, read as the controller and ``tessera plan`` read it
(``cluster.observe_pool``: the pool's members, and per member the layout it runs now,
``pools.current_layout``), is turned here into ``suggestion.Inputs`` by the same
``suggestion.assemble`` a demand file ends in, so both paths take one decision:

- **layouts**: the pool's ``spec.mig.layouts`` per GPU index (the patch is a change of it);
- **usage**, per node, from the GPU node agent's ``tessera.io/gpu-holders`` record: a pod
  the record places on GPU *i* uses there the MIG instances it requests (a whole GPU when it
  requests ``nvidia.com/gpu``). A node whose record is missing, unreadable or stale for its
  pods (``rollout.scope.stale``, the rollout's own test), or which does not run the spec's
  layout yet, has unknown usage: every GPU of it counts as busy, and ``unknown`` says why;
- **demand**: the pods kube-scheduler marked unschedulable (``PodScheduled`` False, reason
  ``Unschedulable``) that request one of the pool's MIG resources (``nvidia.com/mig-<profile>``,
  the mixed strategy's names) and whose nodeSelector some member satisfies, each pended since
  its condition's ``lastTransitionTime``; a pod asking for two instances counts twice.
  On a DRA pool the pod asks through its ResourceClaims instead: each request of a claim not
  yet allocated for a DeviceClass of Tessera's that selects a MIG profile
  (``mig-1g.10gb.tessera.io``, or a SharingPolicy's ``<policy>.mig-1g.10gb.sharing.tessera.io``;
  ``dra.naming.selects_of``) counts its device count; usage comes from the claims allocated
  (``cluster.dra_view.held``: the same per-GPU record, read from the claims).

What cannot be read is a ``LiveError`` naming the object — a pool that is not MIG, no
member, members unlike each other, a pending pod asking for a profile the pool's GPU model
does not have or without a readable time, a pending pod's claim that was not read or that
asks in a way no count can be read from (``firstAvailable``, ``allocationMode: All``) —
never "no changes". Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tessera.api import constants as c
from tessera.api.v1alpha1.nodepoolgeometry import NodePoolGeometrySpec
from tessera.domain.autopilot import demand, suggestion
from tessera.domain.autopilot.bounds import Bounds
from tessera.domain.cluster import dra_view
from tessera.domain.cluster.objects import PoolObservation, pod_view
from tessera.domain.dra import naming
from tessera.domain.geometry import catalog, layouts
from tessera.domain.geometry.capacity import WHOLE_GPU
from tessera.domain.rollout import scope
from tessera.domain.rollout.views import UNPUBLISHED, NodeView, PodView

Raw = Mapping[str, Any]
MIG_PREFIX = "nvidia.com/mig-"
WHOLE = "gpu"  # what a pod holding a GPU with MIG off uses there (never an instance of a layout)
NAMED = 10  # pending pods named in a reason; the rest are counted


class LiveError(ValueError):
    """The cluster's demand cannot be read; the message names the object."""


@dataclass(frozen=True, slots=True)
class Observed:
    inputs: suggestion.Inputs
    unknown: tuple[str, ...]  # per node whose usage is not known: why (its GPUs count as busy)
    waiting: Mapping[str, tuple[str, ...]]  # profile -> the pods (namespace/name) that pend


def observe(
    pool: str,
    spec: NodePoolGeometrySpec,
    seen: PoolObservation,
    pods: Sequence[Raw],
    now: datetime,
    bounds: Bounds,
    today: Mapping[int, int] | None = None,
    claims: Mapping[tuple[str, str], Raw] | None = None,
    views: Sequence[PodView] | None = None,
) -> Observed:
    """The decision's inputs for ``pool`` from its observation and every pod of the cluster
    (or those that pend and those on its nodes); ``today``: per GPU index, the changes the
    autopilot chose today. A DRA pool: ``seen`` and ``views`` (``pods`` read, in their order)
    as ``cluster.dra_view`` reads them, and ``claims`` every ResourceClaim by (namespace,
    name)."""
    where = f"NodePoolGeometry/{pool}"
    on_dra = spec.allocation == "DRA"
    if spec.mig is None:
        raise LiveError(f"{where}: suggest reads MIG pools only (it has no spec.mig)")
    if on_dra and claims is None:
        raise LiveError(f"{where}: a DRA pool's demand is in its ResourceClaims: none were read")
    if not on_dra and spec.mig_strategy != "mixed":
        raise LiveError(
            f"{where}: migStrategy {spec.mig_strategy}: pods ask for nvidia.com/gpu, which "
            "names no profile; suggest reads the mixed strategy's nvidia.com/mig-<profile>"
        )
    names = tuple(sorted(seen.targets))
    if not names:
        raise LiveError(f"{where}: selects no node, so no GPU can serve a pending pod")
    members = {v.name: v for v in seen.involved if v.name in seen.targets}
    model, count = model_of(where, [(n, members[n].labels) for n in names])
    current = layouts.per_device([(lay.devices, lay.profiles) for lay in spec.mig.layouts], count)
    views = list(views) if views is not None else [pod_view(p) for p in pods]
    on_node: dict[str, list[PodView]] = {}
    for view in views:
        if view.node and view.phase in ("Pending", "Running"):
            on_node.setdefault(view.node, []).append(view)
    used: dict[tuple[str, int], dict[str, int]] = {}
    unknown: list[str] = []
    for node in names:
        held, why = _usage(members[node], current, on_node.get(node, []))
        if why:
            unknown.append(f"{node}: {why}")
        for index, profiles in held.items():
            used[(node, index)] = profiles
    selected = [members[n].labels for n in names]
    waiting: dict[str, list[str]] = {}
    wants: list[demand.Pending] = []
    for raw, view in zip(pods, views, strict=True):
        marked, since = unschedulable(raw)
        if view.node or view.phase != "Pending" or not marked:
            continue
        if on_dra:
            asked = _claimed(view, claims or {})
        else:
            asked = {r: n for r, n in view.requests.items() if r.startswith(MIG_PREFIX)}
        if not asked or not any(_satisfies(view.node_selector, labels) for labels in selected):
            continue
        for resource, n in sorted(asked.items()):
            profile = _profile(model, resource)
            if profile is None:
                raise LiveError(
                    f"pod {view.ref} asks for {resource}, which names no MIG profile of "
                    f"{model.id}, the GPUs of {where}"
                )
            if since is None:
                raise LiveError(
                    f"pod {view.ref}: its PodScheduled condition has no readable "
                    "lastTransitionTime, so how long it pended is not known"
                )
            wants.append(demand.Pending(profile, n, max(now - since, timedelta(0))))
            waiting.setdefault(profile, []).append(view.ref)
    inputs = suggestion.assemble(
        pool, model, names, current, used, _grouped(wants, bounds), bounds, today
    )
    return Observed(
        inputs, tuple(unknown), {p: tuple(sorted(refs)) for p, refs in sorted(waiting.items())}
    )


def observe_dra(
    pool: str,
    spec: NodePoolGeometrySpec,
    seen: PoolObservation,
    pods: Sequence[Raw],
    claims: Sequence[Raw],
    slices: Sequence[Raw],
    now: datetime,
    bounds: Bounds,
) -> Observed:
    """``observe`` for a DRA pool, from every pod, ResourceClaim and ResourceSlice: its
    members through the driver, who holds which GPU from the claims allocated
    (``cluster.dra_view``), what pends from the claims not yet allocated."""
    seen = dra_view.through_driver(seen, spec, slices, pods)
    views = [pod_view(p) for p in pods]
    members = set(seen.targets)
    seen, marked = dra_view.held(seen, [v for v in views if v.node in members], claims, slices, now)
    by_ref = {v.ref: v for v in marked}
    views = [by_ref.get(v.ref, v) for v in views]
    named = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in claims}
    return observe(pool, spec, seen, pods, now, bounds, claims=named, views=views)


def _grouped(wants: Sequence[demand.Pending], bounds: Bounds) -> tuple[demand.Pending, ...]:
    """Per profile, the pods past the threshold as one entry and those below it as another,
    each with its longest wait: the pool's demand is scaled to a node once, not pod by pod."""
    groups: dict[tuple[str, bool], demand.Pending] = {}
    for want in wants:
        key = (want.profile, want.pended >= bounds.pend_threshold)
        seen = groups.get(key)
        groups[key] = (
            want
            if seen is None
            else demand.Pending(want.profile, seen.pods + want.pods, max(seen.pended, want.pended))
        )
    return tuple(groups[k] for k in sorted(groups, key=lambda k: (k[0], not k[1])))


def lines(observed: Observed) -> tuple[str, ...]:
    """What the decision's reasons leave out: which pods pend, whose usage is not known."""
    out = []
    for profile, refs in observed.waiting.items():
        more = len(refs) - NAMED
        named = ", ".join(refs[:NAMED]) + (f" and {more} more" if more > 0 else "")
        out.append(f"pending for {profile}: {named}")
    for why in observed.unknown:
        out.append(f"usage unknown on {why}; its GPUs count as busy")
    return tuple(out)


def model_of(
    where: str, nodes: Sequence[tuple[str, Mapping[str, str]]]
) -> tuple[catalog.GpuModel, int]:
    """The one GPU model and GPU count of the members: a patch sets every node's indexes."""
    seen: dict[tuple[str, int], list[str]] = {}
    for node, labels in nodes:
        product = labels.get(c.GPU_PRODUCT_LABEL, "")
        raw = labels.get(c.GPU_COUNT_LABEL, "")
        try:
            model = catalog.resolve(product)
        except catalog.UnknownModelError as err:
            raise LiveError(f"node {node} of {where}: {c.GPU_PRODUCT_LABEL}: {err}") from err
        if not raw.isdigit() or not 1 <= int(raw) <= layouts.MAX_DEVICES:
            raise LiveError(f"node {node} of {where}: {c.GPU_COUNT_LABEL} {raw!r} is no count")
        seen.setdefault((model.id, int(raw)), []).append(node)
    if len(seen) > 1:
        kinds = "; ".join(f"{', '.join(ns)}: {n} x {m}" for (m, n), ns in sorted(seen.items()))
        raise LiveError(
            f"{where}: its nodes differ ({kinds}); a layout is declared for every node alike"
        )
    ((model_id, count),) = seen
    return catalog.resolve(model_id), count


def _usage(
    node: NodeView, current: tuple[demand.Counts, ...], pods: Sequence[PodView]
) -> tuple[dict[int, dict[str, int]], str]:
    """Per GPU index, the instances pods hold on ``node``; all busy, and why, when not known."""
    busy = {i: dict(lay) if lay else {WHOLE: 1} for i, lay in enumerate(current)}
    if node.layout is None:
        return (
            busy,
            "the layout it runs now is not known (its MIG manager has not reported success)",
        )
    if tuple(node.layout) != current:
        return busy, "it does not run the pool's layout yet (a change is rolling out)"
    if node.holders is None:
        return (
            busy,
            node.holders_error or f"no {c.GPU_HOLDERS_ANNOTATION} record (no GPU node agent?)",
        )
    holding = [p for p in pods if p.requests_accelerator]  # a terminating pod holds its GPU still
    why = scope.stale(node.holders, holding)
    if why:
        return busy, why
    out: dict[int, dict[str, int]] = {}
    for pod in holding:
        gpus = node.holders.gpus_of(pod.ref) or ()
        for index in gpus:
            if index >= len(current):
                return busy, f"pod {pod.ref} holds GPU {index}, beyond its {len(current)} GPUs"
            into = out.setdefault(index, {})
            for resource, n in pod.requests.items():
                if resource == UNPUBLISHED:
                    return busy, f"pod {pod.ref} holds {resource}"
                key = _used_as(resource)
                into[key] = into.get(key, 0) + n
            if not pod.requests:
                into[WHOLE] = into.get(WHOLE, 0) + 1
    return out, ""


def _used_as(resource: str) -> str:
    """What a pod's request uses on its GPU: a profile's instance, or the whole GPU (the
    device plugin's resources, or on a DRA pool the class of the device its claim holds)."""
    if resource == WHOLE_GPU:
        return WHOLE
    selects = naming.selects_of(resource)
    if selects is not None:
        return WHOLE if selects == naming.GPU else selects
    return resource.removeprefix(MIG_PREFIX)


def _profile(model: catalog.GpuModel, resource: str) -> str | None:
    """``nvidia.com/mig-1g.10gb`` (or the DeviceClass ``mig-1g.10gb.tessera.io``) ->
    ``1g.10gb`` where the model has it (``+me``: ``.me``)."""
    name = naming.selects_of(resource) or resource.removeprefix(MIG_PREFIX)
    for candidate in (name, name.replace(".me", "+me")):
        if model.profile(candidate) is not None:
            return candidate
    return None


def _claimed(view: PodView, claims: Mapping[tuple[str, str], Raw]) -> dict[str, int]:
    """DeviceClass of Tessera's selecting a MIG profile -> devices the pod's claims not yet
    allocated ask for; whole GPUs and other drivers' classes are not this demand."""
    out: dict[str, int] = {}
    for name in view.claims:
        claim = claims.get((view.namespace, name))
        where = f"pod {view.ref}: its ResourceClaim {view.namespace}/{name}"
        if claim is None:
            raise LiveError(f"{where} was not read, so what it asks for is not known")
        if (claim.get("status") or {}).get("allocation"):
            continue  # it holds its devices already
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        for i, request in enumerate(requests):
            field = f"{where}: spec.devices.requests[{i}]"
            if request.get("firstAvailable"):
                named = [str(s.get("deviceClassName", "")) for s in request["firstAvailable"]]
                if any(naming.selects_of(n) not in (None, naming.GPU) for n in named):
                    raise LiveError(
                        f"{field}.firstAvailable: one of {', '.join(named)}; which profile "
                        "is wanted is not known"
                    )
                continue
            exactly = request.get("exactly") or request  # v1, or v1beta1's flat request
            cls = str(exactly.get("deviceClassName", ""))
            if naming.selects_of(cls) in (None, naming.GPU):
                continue
            mode = exactly.get("allocationMode") or "ExactCount"
            count = exactly.get("count", 1)
            if mode != "ExactCount" or not isinstance(count, int) or count < 1:
                raise LiveError(
                    f"{field}: allocationMode {mode}, count {count!r} for {cls}: no count of "
                    "devices to add can be read"
                )
            out[cls] = out.get(cls, 0) + count
    return out


def _satisfies(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def unschedulable(pod: Raw) -> tuple[bool, datetime | None]:
    """Whether kube-scheduler marked the pod unschedulable, and since when (None: no readable
    time). Not marked: not tried yet, or waiting for another reason (a gate, a claim)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") != "PodScheduled":
            continue
        if cond.get("status") != "False" or cond.get("reason") != "Unschedulable":
            return False, None
        raw = cond.get("lastTransitionTime")
        if not isinstance(raw, str):
            return True, None
        try:
            return True, datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return True, None
    return False, None
