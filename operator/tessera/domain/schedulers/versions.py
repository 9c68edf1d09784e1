"""Which version of HAMi or Volcano Tessera writes for: declared, or read from an image tag.

The formats of the schedulers' configs change between versions (HAMi's ``vnpus`` is a list
up to v2.8 and ``{hamiVnpuCore, configs}`` from v2.9; Volcano up to v1.15 reads only the
list), so Tessera must know the version before it writes. A version declared in the policy
(``spec.scheduler.<component>.version``) wins; otherwise it is the tag of the component's
image in its scheduler Deployment (``projecthami/hami:v2.10.0``,
``volcanosh/vc-scheduler:v1.15.0``). A tag that is no version (``latest``, a digest only)
is no answer: ``VersionUnknownError``, whose message names the Deployment and asks for the
declared version — never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Component = Literal["hami", "volcano"]
Source = Literal["declared", "image"]

IMAGES: Mapping[Component, tuple[str, ...]] = {
    "hami": ("hami",),  # projecthami/hami; the Deployment's other container is kube-scheduler
    "volcano": ("vc-scheduler",),  # volcanosh/vc-scheduler
}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.+-]*)?$")


class VersionUnknownError(ValueError):
    """No declared version and no version in the image tag; the message says what to do."""


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}.{self.patch}"

    def at_least(self, major: int, minor: int, patch: int = 0) -> bool:
        return self >= Version(major, minor, patch)


@dataclass(frozen=True)
class Detected:
    """A component's version and where Tessera found it."""

    version: Version
    source: Source

    def __str__(self) -> str:  # as status.scheduler.versions shows it
        return f"{self.version} ({self.source})"


def parse(text: str) -> Version | None:
    """``v2.10.0``, ``2.10``, ``v1.16.0-alpha.1`` (as v1.16.0); None for anything else."""
    found = _VERSION.match(text.strip())
    if found is None:
        return None
    major, minor, patch = found.groups()
    return Version(int(major), int(minor), int(patch or 0))


def image_tag(image: str) -> str | None:
    """The tag of an image reference (``registry:5000/org/hami:v2.10.0@sha256:…`` → v2.10.0)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def repository(image: str) -> str:
    """The image's last path segment without tag or digest (``projecthami/hami:v2`` → hami)."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def detect(
    component: Component, declared: str | None, deployment: Mapping[str, Any] | None, where: str
) -> Detected:
    """The version to write for; ``where`` (``namespace/name``) names the Deployment in errors.

    Raises ``VersionUnknownError`` when nothing declares it and no container of the
    Deployment runs the component's image with a version tag.
    """
    field = f"spec.scheduler.{component}.version"
    if declared:
        version = parse(declared)
        if version is None:  # the CRD's pattern refuses this; a plan input may not
            raise VersionUnknownError(f"{field}: {declared!r} is not a version like v2.10.0")
        return Detected(version, "declared")
    if deployment is None:
        raise VersionUnknownError(
            f"{component} version unknown: Deployment {where} does not exist; declare {field}"
        )
    images = [str(c.get("image") or "") for c in _containers(deployment)]
    ours = [i for i in images if repository(i) in IMAGES[component]]
    if not ours:
        seen = ", ".join(images) or "no containers"
        raise VersionUnknownError(
            f"{component} version unknown: no container of Deployment {where} runs "
            f"{'/'.join(IMAGES[component])} (images: {seen}); declare {field}"
        )
    tag = image_tag(ours[0]) or ""
    version = parse(tag)
    if version is None:
        raise VersionUnknownError(
            f"{component} version unknown: image {ours[0]} of Deployment {where} has no "
            f"version tag; declare {field}"
        )
    return Detected(version, "image")


def _containers(deployment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return list(pod.get("containers") or [])
