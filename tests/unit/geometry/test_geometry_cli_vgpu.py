"""`tessera geometry check|list --vgpu`: vGPU layouts of one GPU, with reasons, on the command line."""

import json

import pytest
from test_geometry_cli import run


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["check", "--model", "A100-40GB", "--vgpu", "A100-20C=2"], 0, ["valid", "A100-PCIE-40GB"]),
        (["check", "--model", "A100-40GB", "--vgpu", "A100-20C", "A100-20C"], 0, ["valid"]),
        (["check", "--model", "A100-40GB", "--vgpu", "A100X-20C=2"], 0, ["A100-SXM4-40GB"]),
        (
            ["check", "--model", "A100-40GB", "--vgpu", "A100-20C=3"],
            1,
            ["invalid", "A100-20C x3", "A100-PCIE-40GB", "count <= the type's maximum"],
        ),
        (
            ["check", "--model", "A100-40GB", "--vgpu", "A100D-20C=1"],
            1,
            ["A100D-20C", "A100-PCIE-40GB", "the type must exist on the board", "A100X-*"],
        ),
        (
            ["check", "--model", "NVIDIA-A100-PCIE-40GB", "--vgpu", "A100-20C", "A100-10C"],
            1,
            ["A100-10C and A100-20C", "one time-sliced vGPU type per GPU", "mixed-size mode"],
        ),
        (
            ["check", "--model", "A100-40GB", "--vgpu", "A100-20C", "A100-1-5C"],
            1,
            ["A100-20C with A100-1-5C", "never share a GPU"],
        ),
        (["check", "--model", "T4", "--vgpu", "T4-4Q"], 2, []),
        (["check", "--model", "A100-40GB", "--vgpu", "A100-20C=x"], 2, []),
        (["list", "--model", "L40S", "--vgpu"], 0, ["L40S-1Q x32", "L40S-48C x1"]),
    ],
)
def test_vgpu_check_and_list(
    argv: list[str], code: int, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, _ = run(["geometry", *argv], capsys)
    assert got == code
    for word in words:
        assert word in out


def test_vgpu_check_reads_layouts_from_stdin_and_answers_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = "A100-1-5C=6 A100-1-5CME\nA100-1-5C=8\n"
    code, out, _ = run(
        ["geometry", "check", "--model", "A100-40GB", "--vgpu", "-"], capsys, stdin=lines
    )
    first, second = (json.loads(line) for line in out.splitlines())
    assert code == 1
    assert first["valid"] and first["resources"] == {
        "nvidia.com/NVIDIA_A100-1-5C": 6,
        "nvidia.com/NVIDIA_A100-1-5CME": 1,
    }
    assert not second["valid"] and "at most 7 per GPU" in second["reason"]
