"""Polling with a deadline, and the API calls tests repeat (objects come from ``builders``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from builders import DeploymentWrapper, NamespaceWrapper, NodeWrapper, PdbWrapper
from devcluster import watchdog
from tessera.adapters.kube import ApiError, Kube, Obj, path_of

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``,
    or at once when a component the session's control plane registered has died (``watchdog``)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        watchdog.check()
        last = probe()
        if last:
            return last
        time.sleep(0.1)  # polling interval, bounded by the deadline
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def namespace(kube: Kube, name: str, labels: dict[str, str] | None = None) -> None:
    """Create a namespace and wait until its default ServiceAccount exists (pods need it)."""
    try:
        kube.create("/api/v1/namespaces", NamespaceWrapper(name).labels(labels or {}).obj())
    except ApiError as err:
        if not err.conflict:
            raise
    eventually(
        lambda: kube.get_or_none(path_of("v1", "serviceaccounts", "default", name)),
        what=f"default ServiceAccount in {name}",
    )


# -- workloads: placed by kube-scheduler, run by KWOK --------------------------------------------
# A test's workload is what a platform's user runs: a Deployment (or StatefulSet, Job) whose pods
# ask for accelerator resources and are placed by the scheduler. ``pool`` selects the pool's
# nodes by their label, as a team's workload targets its pool; nothing here sets ``nodeName``.


def deployment(
    name: str,
    *,
    pool: str = "",
    resource: str = "nvidia.com/gpu",
    count: int = 1,
    replicas: int = 1,
    grace: int = 1,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The keyword form :func:`serve` takes: a Deployment ``name`` of ``replicas`` pods (label
    ``app=<name>``), each asking ``count`` of ``resource``; on the nodes of ``pool`` (label
    ``tessera.io/pool``) when given."""
    built = DeploymentWrapper(name).replicas(replicas).limits({resource: count}).grace(grace)
    built.node_selector({**({"tessera.io/pool": pool} if pool else {}), **(node_selector or {})})
    return built.pod_annotations(annotations or {}).obj()


def app_pods(kube: Kube, ns: str, app: str, *, live: bool = True) -> list[Obj]:
    """The pods of ``app`` in ``ns``; with ``live``, only those not terminating."""
    pods = kube.list(path_of("v1", "pods", namespace=ns), label_selector=f"app={app}")
    return [p for p in pods if not (live and p["metadata"].get("deletionTimestamp"))]


def running(pod: Obj) -> bool:
    ready = (condition(pod, "Ready") or {}).get("status") == "True"
    return (pod.get("status") or {}).get("phase") == "Running" and ready


def wait_running(kube: Kube, ns: str, app: str, replicas: int, timeout: float = 60.0) -> list[Obj]:
    """Wait until ``replicas`` live pods of ``app`` run and are Ready; return them."""

    def all_running() -> list[Obj] | None:
        pods = app_pods(kube, ns, app)
        return pods if len(pods) == replicas and all(map(running, pods)) else None

    return eventually(all_running, timeout, f"{replicas} pod(s) of {ns}/{app} Running and Ready")


def serve(kube: Kube, ns: str, name: str, *, budget: int | None = None, **kw: Any) -> list[Obj]:
    """Create :func:`deployment` ``name`` in ``ns`` (and a PDB with ``minAvailable: budget``),
    wait until the scheduler has placed every replica and KWOK runs it; return the pods."""
    manifest = deployment(name, **kw)
    kube.create(path_of("apps/v1", "deployments", namespace=ns), manifest)
    if budget is not None:
        kube.create(
            path_of("policy/v1", "poddisruptionbudgets", namespace=ns),
            PdbWrapper(name).match(app=name).min_available(budget).obj(),
        )
    return wait_running(kube, ns, name, manifest["spec"]["replicas"])


def spare_node(kube: Kube, name: str, labels: dict[str, str], resources: dict[str, int]) -> str:
    """A KWOK node outside every pool, labelled ``labels`` and advertising ``resources``: room
    where a drained node's replicas can go (Tessera holds a node whose pods would have nowhere
    to run). No GPU labels, so no device simulator acts on it."""
    from devcluster import fleet

    spare = NodeWrapper.simulated(fleet.NodeSpec(name, "H100-80GB"))
    spare.relabel({"kubernetes.io/hostname": name, **labels}).advertise(resources)
    fleet.create_from_manifests(kube, [spare.obj()])
    return name


def nodes_of(pods: list[Obj]) -> list[str]:
    """Where the scheduler put ``pods`` (their ``spec.nodeName``), in order."""
    return [p["spec"]["nodeName"] for p in pods]


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


@contextlib.contextmanager
def gpu_agents(kube: Kube) -> Iterator[None]:
    """The simulated GPU node agents, for the duration of a fixture (KWOK plays the kubelet)."""
    from devcluster import gpunode

    namespace(kube, "gpu-operator")
    sim = gpunode.GpuNodeAgents(kube, reconfigure_seconds=0.3).start()
    try:
        yield
    finally:
        sim.stop()
