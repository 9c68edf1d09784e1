"""Versions of HAMi and Volcano: declared wins, else the image tag; never a guess."""

from __future__ import annotations

from typing import Any

import pytest

from tessera.domain.schedulers.versions import (
    Component,
    Version,
    VersionUnknownError,
    detect,
    image_tag,
    parse,
)

HAMI_PODS = ["registry.k8s.io/kube-scheduler:v1.34.4", "projecthami/hami:v2.10.0"]


def deployment(*images: str) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    return {"spec": {"template": {"spec": {"containers": containers}}}}


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("v2.10.0", Version(2, 10, 0)),
        ("2.8", Version(2, 8, 0)),
        ("v1.16.0-alpha.1", Version(1, 16, 0)),
        ("latest", None),
        ("", None),
        ("v2", None),
    ],
)
def test_parse(text: str, version: Version | None) -> None:
    assert parse(text) == version


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("projecthami/hami:v2.10.0", "v2.10.0"),
        ("registry:5000/org/hami:v2.9.1", "v2.9.1"),
        ("registry:5000/org/hami", None),
        ("docker.io/volcanosh/vc-scheduler:v1.15.0@sha256:abc", "v1.15.0"),
        ("volcanosh/vc-scheduler@sha256:abc", None),
    ],
)
def test_image_tag(image: str, tag: str | None) -> None:
    assert image_tag(image) == tag


@pytest.mark.parametrize(
    ("component", "declared", "images", "found"),
    [
        # component, declared, the Deployment's images (None: no Deployment), version (source)
        ("hami", None, HAMI_PODS, "v2.10.0 (image)"),  # the kube-scheduler container skipped
        ("hami", "v2.8.0", HAMI_PODS, "v2.8.0 (declared)"),  # declared wins
        ("hami", "v2.9", None, "v2.9.0 (declared)"),  # no Deployment needed when declared
        ("volcano", None, ["volcanosh/vc-scheduler:v1.15.0"], "v1.15.0 (image)"),
        ("volcano", None, ["volcanosh/vc-scheduler:v1.16.0-alpha.1"], "v1.16.0 (image)"),
    ],
)
def test_detect(
    component: Component, declared: str | None, images: list[str] | None, found: str
) -> None:
    obj = None if images is None else deployment(*images)
    assert str(detect(component, declared, obj, "ns/sched")) == found


@pytest.mark.parametrize(
    ("component", "images", "message"),
    [
        ("hami", None, "hami version unknown: Deployment ns/sched does not exist; declare "
         "spec.scheduler.hami.version"),
        ("hami", ["projecthami/hami:latest"], "image projecthami/hami:latest of Deployment "
         "ns/sched has no version tag; declare spec.scheduler.hami.version"),
        ("volcano", ["busybox:1.36"], "no container of Deployment ns/sched runs vc-scheduler "
         "(images: busybox:1.36); declare spec.scheduler.volcano.version"),
    ],
)  # fmt: skip
def test_unknown_names_the_deployment_and_the_field(
    component: Component, images: list[str] | None, message: str
) -> None:
    obj = None if images is None else deployment(*images)
    with pytest.raises(VersionUnknownError, match=r".*") as err:
        detect(component, None, obj, "ns/sched")
    assert message in str(err.value)


def test_compare() -> None:
    assert Version(2, 10).at_least(2, 9)
    assert not Version(2, 8, 5).at_least(2, 9)
    assert Version(1, 15, 0) < Version(1, 16, 0)
