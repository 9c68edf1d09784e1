"""A Preview as a reviewer reads it in a terminal or a pull-request comment, and as JSON.

Per object: what happens to it, then per node ``old → new``, the GPUs a MIG change
repartitions and the pods drained first (and those that stay), the PDBs that would block, the plan hash to approve, and the
capacity the pool ends with; then cluster capacity, quota impact and the
agent ConfigMaps as unified diffs. An object ``tessera plan --prune`` deletes
reads like a finalizer run: the nodes it holds (``-``) and what it writes to
them, the layouts that stay (``=``), the nodes whose sharing config returns
to the default (``~``), the ResourceQuotas deleted. The last line says whether
anything changes, like ``terraform plan``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tessera.domain.preview.results import Deletion, ObjectPreview, Preview

SHORT = {"NodePoolGeometry": "npg", "SharingPolicy": "sp", "TenantQuota": "tq"}
NODES_SHOWN = 20
SIGN = {"create": "+", "update": "~", "delete": "-", "unchanged": "="}


def render(p: Preview) -> str:
    out: list[str] = []
    for note in p.notes:
        out.append(f"# {note}")
    for obj in p.objects:
        out.extend(_object(obj))
        out.append("")
    if p.device_classes or p.class_conflicts:
        out.append("DeviceClasses:")
        for cls in p.device_classes:
            by = f"; declared by {', '.join(cls.declared_by)}" if cls.declared_by else ""
            what = f" ({cls.says}{by})" if cls.says else ""
            out.append(f"  {SIGN.get(cls.action, '?')} {cls.action} {cls.name}{what}")
        out += [f"  ! {conflict}" for conflict in p.class_conflicts]
        out.append("")
    if p.admission or p.admission_conflicts:
        out.append("Pod contracts (ValidatingAdmissionPolicies):")
        for change in p.admission:
            what = f" ({change.says})" if change.says else ""
            out.append(f"  {SIGN[change.action]} {change.action} {change.kind} {change.name}{what}")
        out += [f"  ! {conflict}" for conflict in p.admission_conflicts]
        out.append("")
    if p.capacity:
        out.append("Cluster capacity (what TenantQuotas are compared with):")
        width = max(len(r) for r in p.capacity)
        for resource, (old, new) in p.capacity.items():
            out.append(f"  {resource:<{width}}  {old:>6} -> {new:<6} ({new - old:+d})")
        out.append("")
    if p.tenants:
        out.append("Quota impact:")
        for t in p.tenants:
            if t.after and not t.before:
                state = "becomes Overcommitted"
            elif t.after:
                state = "stays Overcommitted"
            else:
                state = "no longer Overcommitted"
            detail = f": {t.message}" if t.after else ""
            out.append(f"  tenantquota/{t.tenant} {state}{detail}")
        out.append("")
    for diff in p.configs:
        out.append(f"Config {diff.where}:")
        out.append(diff.diff.rstrip("\n"))
        out.append("")
    nodes = sum(len(o.changes) for o in p.objects)
    pods = sum(o.pods_to_evict for o in p.objects)
    deleted = sum(1 for o in p.objects if o.action == "delete")
    if p.changed:
        out.append(
            f"Plan: {nodes} node(s) change, {pods} pod(s) evicted, "
            f"{len(p.configs)} config(s) rewritten"
            + (f", {len(p.device_classes)} DeviceClass(es) written" if p.device_classes else "")
            + (f", {len(p.admission)} admission object(s) written" if p.admission else "")
            + (f", {deleted} object(s) deleted." if deleted else ".")
        )
    else:
        out.append("No changes. The cluster already matches these manifests.")
    return "\n".join(out) + "\n"


def _object(o: ObjectPreview) -> list[str]:
    if o.action == "delete":
        return _deleted(o)
    ref = f"{SHORT.get(o.kind, o.kind.lower())}/{o.name}"
    action = "spec unchanged" if o.action == "unchanged" and o.changes else o.action
    head = f"{o.kind}/{o.name}: {action}"
    if o.kind == "TenantQuota":
        lines = [f"{head} ({o.nodes_total} namespace(s))"]
        lines += [f"  {w}" for w in o.writes] or ["  no ResourceQuota changes"]
        lines += [f"  ! {p}" for p in o.problems]
        return lines
    disruptive = sum(1 for c in o.changes if c.disruptive)
    lines = [
        f"{head}; {len(o.changes)} of {o.nodes_total} node(s) change"
        + (f" ({disruptive} drained first)" if disruptive and o.kind == "SharingPolicy" else "")
    ]
    if o.plan_hash:
        lines.append(
            f"  plan {o.plan_hash}: {o.pods_to_evict} pod(s) to evict"
            + (f", blocked by PDB {', '.join(o.blocking_pdbs)}" if o.blocking_pdbs else "")
        )
    if o.autopilot:
        lines.append(f"  autopilot: {o.autopilot}")
    for change in o.changes[:NODES_SHOWN]:
        mode = (
            ""
            if o.kind == "NodePoolGeometry"
            else (" [drain]" if change.disruptive else " [in place]")
        )
        lines.append(f"  ~ {change.node}{mode}: {change.before}  ->  {change.after}")
        if change.scope:
            lines.append(f"      {change.scope}")
        pods = [p for p in change.evicts if p not in change.migrates]
        if change.migrates:
            vms = ", ".join(change.migrates)
            lines.append(f"      migrates VMs {vms} (evicted: KubeVirt live-migrates what it can)")
        if pods:
            lines.append(f"      evicts {', '.join(pods)}")
        if change.gpus and change.stays:
            lines.append(f"      keeps {', '.join(change.stays)} (on GPUs that do not change)")
        if change.note and o.kind == "SharingPolicy":
            lines.append(f"      {change.note}")
    if len(o.changes) > NODES_SHOWN:
        lines.append(f"  ... and {len(o.changes) - NODES_SHOWN} more node(s)")
    lines += _capacity(o)
    lines += [f"  {w}" for w in o.writes]  # SharingPolicy: a scheduler restart
    lines += [f"  ! {p}" for p in o.problems]
    if o.plan_hash and o.changes and o.approval == "Manual":
        if o.approved:
            lines.append(f"  approved (tessera.io/approve-plan={o.plan_hash})")
        else:
            lines.append(
                f"  approval: Manual; approve with: kubectl annotate {ref} --overwrite "
                f"tessera.io/approve-plan={o.plan_hash}"
            )
    return lines


def _deleted(o: ObjectPreview) -> list[str]:
    gone = o.deletion or Deletion()
    head = f"{o.kind}/{o.name}: delete"
    if o.kind == "TenantQuota":
        lines = [f"{head} ({len(gone.quotas)} ResourceQuota(s))"]
        lines += [f"  {w}" for w in o.writes]
    elif o.kind == "SharingPolicy":
        lines = [f"{head}; {len(o.changes)} of {o.nodes_total} node(s) return at once, no drain"]
        for change in o.changes[:NODES_SHOWN]:
            lines.append(f"  ~ {change.node}: {change.before}  ->  {change.after}")
            lines.append(f"      {change.note}")
        if len(o.changes) > NODES_SHOWN:
            lines.append(f"  ... and {len(o.changes) - NODES_SHOWN} more node(s)")
        if gone.hami:
            lines.append(f"  HAMi node config: Tessera's fields removed for {', '.join(gone.hami)}")
    else:
        held = len(gone.released)
        lines = [f"{head}; holds {held} node(s), {o.nodes_total} node(s) keep their layout"]
    for r in gone.released[:NODES_SHOWN]:
        lines.append(f"  - {r.node}: holds {', '.join(r.holds) or 'nothing'}")
        then = ", ".join(r.then) or "nothing to write"
        lines.append(f"      {r.waits}; then {then}" if r.waits else f"      finalizer: {then}")
        lines += [f"      ! {w}" for w in r.warnings]
    if len(gone.released) > NODES_SHOWN:
        lines.append(f"  ... and {len(gone.released) - NODES_SHOWN} more held node(s)")
    by_layout: dict[str, list[str]] = {}
    for node, layout in gone.kept.items():
        by_layout.setdefault(layout, []).append(node)
    for layout, nodes in sorted(by_layout.items()):
        more = f" and {len(nodes) - NODES_SHOWN} more" if len(nodes) > NODES_SHOWN else ""
        lines.append(f"  = {', '.join(sorted(nodes)[:NODES_SHOWN])}{more} keep {layout}")
    lines += _capacity(o)
    lines += [f"  {e}" for e in gone.effects]
    lines += [f"  ! {p}" for p in o.problems]
    return lines


def _capacity(o: ObjectPreview) -> list[str]:
    if o.devices:  # a DRA pool: what its nodes' ResourceSlices hold
        nodes = f" on {o.nodes_total} node(s)"
        lines = ["  ResourceSlice devices (per DeviceClass, now -> once applied):"]
        return lines + [f"    {k}: {b} -> {a} devices{nodes}" for k, (b, a) in o.devices.items()]
    if o.capacity_before == o.capacity_after:
        return []
    keys = sorted(o.capacity_before.keys() | o.capacity_after.keys())
    moves = [f"{k} {o.capacity_before.get(k, 0)} -> {o.capacity_after.get(k, 0)}" for k in keys]
    return ["  capacity: " + ", ".join(moves)]


def as_json(p: Preview) -> dict[str, Any]:
    doc = asdict(p)
    doc["capacity"] = {r: {"before": b, "after": a} for r, (b, a) in p.capacity.items()}
    doc["changed"] = p.changed
    doc["deleted"] = [f"{o.kind}/{o.name}" for o in p.objects if o.action == "delete"]
    return doc
