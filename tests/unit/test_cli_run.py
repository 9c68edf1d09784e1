"""``tessera run`` flags: the ConfigMaps Tessera writes reach the controllers' Settings."""

from __future__ import annotations

import pytest

from tessera.cli import main, run
from tessera.controllers.runtime import Settings


def parse(*argv: str) -> Settings:
    return run.settings_from(main.build_parser().parse_args(["run", *argv]))


def test_defaults_are_the_settings_defaults() -> None:
    assert parse() == Settings()


def test_configmap_flags_feed_the_settings() -> None:
    settings = parse(
        "--device-plugin-configmap=nvidia/dp-configs",
        "--mig-parted-configmap=nvidia/mig",
        "--vnpu-configmap=ops/vnpu",
        "--hami-namespace=hami-system",
        "--resync-seconds=30",
    )
    assert settings == Settings(
        resync_seconds=30.0,
        device_plugin_configmap=("nvidia", "dp-configs"),
        mig_configmap=("nvidia", "mig"),
        vnpu_configmap=("ops", "vnpu"),
        hami_namespace="hami-system",
    )


@pytest.mark.parametrize("value", ["no-slash", "/name", "ns/", "a/b/c"])
def test_a_configmap_without_namespace_and_name_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(f"--device-plugin-configmap={value}")
    assert exit_info.value.code == 2
    assert "NAMESPACE/NAME" in capsys.readouterr().err
