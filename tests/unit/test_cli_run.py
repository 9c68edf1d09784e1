"""``tessera run`` and ``tessera plan`` flags: the ConfigMaps Tessera writes reach both."""

from __future__ import annotations

import pytest

from tessera.cli import main, plan, run
from tessera.controllers.runtime import Settings
from tessera.domain.preview import Locations


def parse(*argv: str) -> Settings:
    return run.settings_from(main.build_parser().parse_args(["run", *argv]))


def test_defaults_are_the_settings_defaults() -> None:
    assert parse() == Settings()


def test_configmap_flags_feed_the_settings() -> None:
    settings = parse(
        "--device-plugin-configmap=nvidia/dp-configs",
        "--mig-parted-configmap=nvidia/mig",
        "--vnpu-configmap=ops/vnpu",
        "--vgpu-configmap=nvidia/vgpu",
        "--hami-namespace=hami-system",
        "--resync-seconds=30",
    )
    assert settings == Settings(
        resync_seconds=30.0,
        device_plugin_configmap=("nvidia", "dp-configs"),
        mig_configmap=("nvidia", "mig"),
        vnpu_configmap=("ops", "vnpu"),
        vgpu_configmap=("nvidia", "vgpu"),
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


def test_plan_reads_the_maps_the_operator_was_pointed_at() -> None:
    args = main.build_parser().parse_args(
        ["plan", "-f", "x.yaml", "--device-plugin-configmap=nvidia/dp", "--hami-namespace=hami"]
    )
    loc = plan.locations(args)
    assert loc == Locations(
        mig=Settings().mig_configmap,
        vnpu=Settings().vnpu_configmap,
        device_plugin=("nvidia", "dp"),
        hami_namespace="hami",
    )
    snapshot = main.build_parser().parse_args(["plan", "snapshot", "--vnpu-configmap=ops/v"])
    assert plan.locations(snapshot).vnpu == ("ops", "v")
    assert plan.locations(snapshot).mig == Settings().mig_configmap
    before = main.build_parser().parse_args(["plan", "--vnpu-configmap=ops/v", "snapshot"])
    assert plan.locations(before).vnpu == ("ops", "v")
    vgpu = main.build_parser().parse_args(["plan", "snapshot", "--vgpu-configmap=ops/g"])
    assert plan.locations(vgpu).vgpu == ("ops", "g")


def test_help_shows_configmap_defaults_as_namespace_slash_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps help to the terminal's width
    with pytest.raises(SystemExit):
        main.build_parser().parse_args(["run", "--help"])
    text = capsys.readouterr().out
    assert "devicePlugin.config (default: gpu-operator/device-plugin-configs)" in text, text
