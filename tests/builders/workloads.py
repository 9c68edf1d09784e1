"""Pods, the Deployments that own them, and the PodDisruptionBudgets over them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from tessera.api import constants as c

from .base import Raw, Wrapper

HOSTNAME = "kubernetes.io/hostname"


def _limits(resources: Mapping[str, int | str]) -> dict[str, str]:
    return {name: str(count) for name, count in resources.items()}


class PodWrapper(Wrapper):
    """A bare Pod: ``PodWrapper("p").namespace("ml").node("n1").limits({GPU: 1}).obj()``."""

    kind = "Pod"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._obj["spec"] = {}

    def owner(self, kind: str = "ReplicaSet", name: str = "rs") -> Self:
        """Controlled by ``kind`` ``name`` (a drain evicts such a pod; a bare pod it refuses)."""
        self._meta["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
        return self

    def node(self, name: str) -> Self:
        """Bound to node ``name`` (``spec.nodeName``), as the scheduler leaves it."""
        self._obj["spec"]["nodeName"] = name
        return self

    def limits(self, resources: Mapping[str, int | str], container: str = "m") -> Self:
        """One container ``container`` asking ``resources`` (limits, which are its requests)."""
        limits = {"limits": _limits(resources)}
        self._obj["spec"]["containers"] = [{"name": container, "resources": limits}]
        return self

    def phase(self, phase: str) -> Self:
        self._obj.setdefault("status", {})["phase"] = phase
        return self


class DeploymentWrapper(Wrapper):
    """A Deployment labelled ``app=<name>`` whose pods (``app=<name>``) run one container
    ``main`` (image ``serve``, which KWOK runs); one replica, asking nothing, with a 1 s grace
    period until told otherwise."""

    api_version = "apps/v1"
    kind = "Deployment"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.label("app", name)
        container: Raw = {"name": "main", "image": "serve", "resources": {"limits": {}}}
        self._obj["spec"] = {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "terminationGracePeriodSeconds": 1},
            },
        }

    @property
    def _pod(self) -> Raw:
        pod: Raw = self._obj["spec"]["template"]
        return pod

    def replicas(self, count: int) -> Self:
        self._obj["spec"]["replicas"] = count
        return self

    def limits(self, resources: Mapping[str, int | str]) -> Self:
        """Each replica asks ``resources`` (``{"nvidia.com/gpu": 1}``)."""
        self._pod["spec"]["containers"][0]["resources"]["limits"].update(_limits(resources))
        return self

    def pool(self, pool: str) -> Self:
        """Replicas go only to the nodes of ``pool`` (label ``tessera.io/pool``), as a team's
        workload targets its pool."""
        return self.node_selector({c.POOL_LABEL: pool})

    def grace(self, seconds: int) -> Self:
        """``terminationGracePeriodSeconds`` of each replica."""
        self._pod["spec"]["terminationGracePeriodSeconds"] = seconds
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        """Replicas go only to nodes labelled ``selector`` (nothing here sets ``nodeName``)."""
        if selector:
            self._pod["spec"].setdefault("nodeSelector", {}).update(selector)
        return self

    def away_from(self, app: str) -> Self:
        """Replicas the scheduler never puts on a node running a pod of ``app`` (required
        anti-affinity per hostname; ``app`` its own name: one replica per node)."""
        away = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
        rule = {"requiredDuringSchedulingIgnoredDuringExecution": [away]}
        self._pod["spec"]["affinity"] = {"podAntiAffinity": rule}
        return self

    def pod_annotations(self, annotations: Mapping[str, str]) -> Self:
        if annotations:
            self._pod["metadata"].setdefault("annotations", {}).update(annotations)
        return self


class PdbWrapper(Wrapper):
    """A PodDisruptionBudget: ``PdbWrapper("db").match(app="db").min_available(1).obj()``."""

    api_version = "policy/v1"
    kind = "PodDisruptionBudget"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._obj["spec"] = {}

    def match(self, **labels: str) -> Self:
        """Over the pods labelled ``labels`` (none: every pod of the namespace)."""
        self._obj["spec"]["selector"] = {"matchLabels": labels}
        return self

    def min_available(self, count: int | str) -> Self:
        self._obj["spec"]["minAvailable"] = count
        return self

    def max_unavailable(self, count: int | str) -> Self:
        self._obj["spec"]["maxUnavailable"] = count
        return self

    def allowed(self, count: int) -> Self:
        """As the disruption controller reports it: ``count`` disruptions allowed, for the
        budget's current generation."""
        generation = self._meta.setdefault("generation", 1)
        self._obj["status"] = {"observedGeneration": generation, "disruptionsAllowed": count}
        return self
