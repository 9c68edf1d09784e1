import io
import json
import sys
import time

import pytest

from tessera.cli.main import main


def run(
    argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str = ""
) -> tuple[int, str, str]:
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        pytest.param(
            [
                "check",
                "--model",
                "NVIDIA-H100-80GB-HBM3",
                "3g.40gb",
                "2g.20gb",
                "1g.10gb",
                "1g.10gb",
            ],
            0,
            id="valid",
        ),
        pytest.param(
            ["check", "--model", "H100-80GB", "3g.40gb", "3g.40gb", "1g.10gb"], 1, id="invalid"
        ),
        pytest.param(["check", "--model", "H100-80GB", "3g.20gb"], 1, id="profile-model-lacks"),
        pytest.param(["check", "--model", "V100", "1g.5gb"], 2, id="unknown-model"),
        pytest.param(["check", "--model", "H100-80GB"], 2, id="no-profiles"),
        pytest.param(["check", "3g.40gb"], 2, id="no-model"),
        pytest.param(
            ["check", "--model", "H100-80GB", "-o", "yaml", "3g.40gb"], 2, id="bad-output"
        ),
        pytest.param(["pack", "--model", "H100-80GB", "1g.10gb"], 2, id="pack-malformed"),
        pytest.param(["pack", "--model", "H100-80GB", "1g.10gb=x"], 2, id="pack-not-a-count"),
        pytest.param(
            ["pack", "--model", "H100-80GB", "3g.20gb=1"], 1, id="pack-profile-model-lacks"
        ),
        pytest.param(["pack", "--model", "H100-80GB", "1g.10gb=9"], 0, id="pack-ok"),
        pytest.param(["list", "--model", "A30"], 0, id="list"),
        pytest.param(["models"], 0, id="models"),
        pytest.param([], 2, id="no-subcommand"),
    ],
)
def test_exit_codes(argv: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["geometry", *argv], capsys)[0] == code


def test_check_json_is_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["geometry", "check", "-o", "json", "--model", "A100-40GB", "3g.20gb", "3g.20gb"], capsys
    )
    assert code == 0
    assert json.loads(out) == {
        "valid": True,
        "model": "A100-40GB",
        "placement": [
            {"profile": "3g.20gb", "start": 0, "size": 4},
            {"profile": "3g.20gb", "start": 4, "size": 4},
        ],
        "reason": "3g.20gb at 0-3, 3g.20gb at 4-7",
    }


def test_check_text_names_the_collision(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["geometry", "check", "--model", "H100-80GB", "4g.40gb", "2g.20gb", "2g.20gb"], capsys
    )
    assert code == 1 and out.startswith("invalid: ") and "4g.40gb at 0-3" in out


def test_unknown_model_lists_known_models_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["geometry", "check", "--model", "T4", "1g.5gb"], capsys)
    assert (code, out) == (2, "") and "H100-80GB" in err and "RTXPRO6000-96GB" in err


def test_stdin_mode_prints_one_json_object_per_line_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = "3g.40gb 3g.40gb\n\n7g.80gb 1g.10gb\n1g.10gb  1g.10gb 2g.20gb\n"
    code, out, _ = run(["geometry", "check", "--model", "A100-80GB", "-"], capsys, stdin=lines)
    docs = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [d["valid"] for d in docs] == [True, True, False, True]
    assert [len(d["placement"]) for d in docs] == [2, 0, 0, 3]
    assert all(d["model"] == "A100-80GB" for d in docs)


def test_stdin_mode_all_valid_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["geometry", "check", "--model", "A30", "-"], capsys, stdin="4g.24gb\n1g.6gb 1g.6gb\n"
    )
    assert code == 0 and len(out.splitlines()) == 2


def test_list_maximal_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["geometry", "list", "--model", "NVIDIA-A30", "--maximal", "-o", "json"], capsys
    )
    doc = json.loads(out)
    assert code == 0 and doc["model"] == "A30-24GB" and doc["maximal"] is True
    assert {"4g.24gb": 1} in doc["layouts"] and {"2g.12gb": 2} in doc["layouts"]
    assert {"1g.6gb": 3} not in doc["layouts"]  # valid but not maximal


def test_pack_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["geometry", "pack", "-o", "json", "--model", "H100-80GB", "1g.10gb=12", "3g.40gb=3"],
        capsys,
    )
    doc = json.loads(out)
    assert code == 0 and doc["gpus"] == 3 and doc["optimal"] is True
    assert sum(d["profiles"].get("1g.10gb", 0) for d in doc["layouts"]) == 12
    code, out, _ = run(
        ["geometry", "pack", "--model", "H100-80GB", "1g.10gb=12", "3g.40gb=3"], capsys
    )
    assert out.splitlines()[0] == "3 x H100-80GB (optimal)"


def test_models_json_lists_profiles_and_labels(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["geometry", "models", "-o", "json"], capsys)
    doc = {m["id"]: m for m in json.loads(out)}
    assert code == 0 and len(doc) == 10
    assert "NVIDIA-H100-80GB-HBM3" in doc["H100-80GB"]["product_labels"]
    rtx = {p["name"]: p for p in doc["RTXPRO6000-96GB"]["profiles"]}
    assert rtx["2g.48gb"]["starts"] == [0, 6] and rtx["2g.48gb"]["size"] == 6


@pytest.mark.parametrize(
    ("demand", "says"),
    [
        (["1g.10gb=10000000"], "the demand totals 10000000 instances; tessera geometry pack answers demands of at most 10000"),
        (["1g.10gb=6000", "3g.40gb=4001"], "the demand totals 10001 instances"),
        (["1g.10gb=" + "9" * 5000], "1g.10gb: a 5000-digit count; a demand totals at most 10000"),
    ],
)  # fmt: skip
def test_a_huge_demand_is_refused_promptly_with_exit_1(
    demand: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code, out, err = run(["geometry", "pack", "--model", "H100-80GB", *demand], capsys)
    assert (code, out) == (1, "")
    assert says in err
    assert time.monotonic() - started < 30  # generous on a loaded machine; it hung before


def test_the_limit_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["geometry", "pack", "--help"])
    assert "at most 10000 instances" in " ".join(capsys.readouterr().out.split())
