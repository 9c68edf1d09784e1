"""hack/build-tool.sh and hack/controlplane/build.sh when builds run at once (two test sessions,
``make demo`` next to ``make test``): both share one build, and nobody sees a folder vanish.

The scripts run for real (bash, flock, mktemp, mv) against an empty cache under a temporary
XDG_CACHE_HOME; only ``go`` is a stand-in, which logs each build, waits at a gate the test
opens, then writes its binaries. The gate opens once both scripts have got as far as they can
alone: both building (the race) or one building and the other waiting for it.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster import build_tool, scheduling

from . import tools
from .helpers import eventually

ROOT = Path(__file__).resolve().parents[2]
BINARY = "half written\nwhole\n"
FAKE_GO = r"""#!/usr/bin/env bash
set -eu
case "$1" in
  env) echo go0.0-fake; exit 0 ;;
  build) shift ;;
  *) exit 2 ;;
esac
out=""; pkgs=()
while (($#)); do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    -ldflags) shift 2 ;;
    -*) shift ;;
    *) pkgs+=("$1"); shift ;;
  esac
done
echo "build $out ${pkgs[*]}" >> "$FAKE_GO_LOG"
if [[ -n "${FAKE_GO_FAIL:-}" ]]; then echo "fake go: build failed" >&2; exit 1; fi
until [[ -e "$FAKE_GO_GATE" ]]; do sleep 0.05; done
for pkg in "${pkgs[@]}"; do
  bin="$out"; [[ "$out" == */ ]] && bin="$out${pkg##*/}"
  printf 'half written\n' > "$bin"
  printf 'whole\n' >> "$bin"
  chmod +x "$bin"
done
"""


@dataclass(frozen=True)
class Script:
    argv: list[str]
    binaries: list[str]  # what a complete cache entry holds
    builds: int  # go build calls per build


SCRIPTS = {
    "build-tool.sh helm": Script([str(ROOT / "hack/build-tool.sh"), "helm"], ["helm"], 1),
    "controlplane/build.sh": Script(
        [str(ROOT / "hack/controlplane/build.sh")],
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"],
        2,
    ),
}


@dataclass(frozen=True)
class Sandbox:
    env: dict[str, str]
    cache: Path
    log: Path
    gate: Path

    def start(self, script: Script, name: str) -> tuple[subprocess.Popen[str], Path]:
        err = self.cache.parent / f"{name}.stderr"
        with err.open("w") as stderr:
            proc = subprocess.Popen(
                script.argv, env=self.env, stdout=subprocess.PIPE, stderr=stderr, text=True
            )
        return proc, err

    def builds(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.cache.rglob("*") if ".tmp" in p.name)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    go = bindir / "go"
    go.write_text(FAKE_GO)
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"TESSERA_CONTROLPLANE_BIN", "KUBEBUILDER_ASSETS"}
    }
    env |= {
        "PATH": f"{bindir}:{env['PATH']}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_GO_GATE": str(tmp_path / "gate"),
    }
    return Sandbox(env, tmp_path / "cache", tmp_path / "go.log", tmp_path / "gate")


def finish(proc: subprocess.Popen[str], err: Path) -> tuple[int, str, str]:
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out.strip(), err.read_text()


def assert_complete(folder: Path, script: Script) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(script.binaries)
    for name in script.binaries:
        assert (folder / name).read_text() == BINARY
        assert os.access(folder / name, os.X_OK)


def race(sandbox: Sandbox, script: Script) -> Path:
    """Start two builds at once, open the gate when neither can go further alone; both must
    succeed and print the same path. Returns the cache entry (a folder)."""
    first, first_err = sandbox.start(script, "first")
    second, second_err = sandbox.start(script, "second")

    def alone_as_far_as_they_go() -> bool:
        building = sum("building" in e.read_text() for e in (first_err, second_err))
        waiting = any("waiting for another build" in e.read_text() for e in (first_err, second_err))
        return building == 2 or (building == 1 and waiting)

    eventually(alone_as_far_as_they_go, 30, "both scripts building, or one waiting for the other")
    sandbox.gate.touch()
    results = [finish(first, first_err), finish(second, second_err)]
    assert [rc for rc, _, _ in results] == [0, 0], results
    paths = {out for _, out, _ in results}
    assert len(paths) == 1, results
    entry = Path(paths.pop())
    return entry if entry.is_dir() else entry.parent


@pytest.mark.parametrize("name", SCRIPTS)
def test_two_builds_at_once_into_an_empty_cache_share_one_complete_build(
    sandbox: Sandbox, name: str
) -> None:
    script = SCRIPTS[name]
    assert_complete(race(sandbox, script), script)
    assert len(sandbox.builds()) == script.builds, sandbox.builds()  # one build, not two
    assert sandbox.leftovers() == []


def test_without_flock_two_builds_at_once_both_build_and_the_first_rename_wins(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    bare = tmp_path / "no-flock"  # every command of /usr/bin but flock (util-linux)
    bare.mkdir()
    for tool in Path("/usr/bin").iterdir():
        if tool.name != "flock":
            (bare / tool.name).symlink_to(tool)
    sandbox.env["PATH"] = f"{tmp_path / 'bin'}:{bare}"
    script = SCRIPTS["build-tool.sh helm"]
    assert_complete(race(sandbox, script), script)
    assert len(sandbox.builds()) == 2, sandbox.builds()
    assert sandbox.leftovers() == []


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_failed_build_leaves_no_entry_and_the_next_build_succeeds(
    sandbox: Sandbox, name: str
) -> None:
    script = SCRIPTS[name]
    sandbox.gate.touch()
    failed = subprocess.run(
        script.argv, env={**sandbox.env, "FAKE_GO_FAIL": "1"}, capture_output=True, text=True
    )
    assert failed.returncode != 0 and "fake go: build failed" in failed.stderr
    assert failed.stdout == ""
    assert [p for p in sandbox.cache.rglob("*") if p.is_dir() and "-go0.0-fake" in p.name] == []
    ok = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    entry = Path(ok.stdout.strip())
    assert_complete(entry if entry.is_dir() else entry.parent, script)
    assert sandbox.leftovers() == []


def test_an_entry_an_interrupted_build_left_incomplete_is_replaced(sandbox: Sandbox) -> None:
    script = SCRIPTS["controlplane/build.sh"]
    sandbox.gate.touch()
    first = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    entry = Path(first.stdout.strip())
    (entry / "kubectl").unlink()  # as if a build of an older script had been killed
    leftover = entry.parent / f"{entry.name}.tmp.abc123"
    leftover.mkdir()  # and a killed build's private folder
    again = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(entry)
    assert_complete(entry, script)
    assert sandbox.leftovers() == []
    assert not list(entry.parent.glob("*.stale.*"))


def test_a_complete_entry_is_reused_without_building(sandbox: Sandbox) -> None:
    script = SCRIPTS["build-tool.sh helm"]
    sandbox.gate.touch()
    first = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    inode = Path(first.stdout.strip()).stat().st_ino
    again = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    assert (again.returncode, again.stdout) == (0, first.stdout)
    assert Path(again.stdout.strip()).stat().st_ino == inode
    assert len(sandbox.builds()) == 1


def test_a_new_control_plane_entry_links_what_an_older_one_holds_and_builds_the_rest(
    sandbox: Sandbox,
) -> None:
    """Adding kube-scheduler to the list must not rebuild the API server (15+ min cold), nor
    touch the entry other sessions are running binaries from."""
    script = SCRIPTS["controlplane/build.sh"]
    sandbox.gate.touch()
    mod = (ROOT / "hack/controlplane/go.mod").read_text().split()
    k8s, etcd = (mod[mod.index(m) + 1] for m in ("k8s.io/kubernetes", "go.etcd.io/etcd/server/v3"))
    old = sandbox.cache / "tessera/controlplane" / f"k8s-{k8s}-etcd-{etcd}-go0.0-fake"
    old.mkdir(parents=True)  # an entry as named before the list of binaries was in the key
    reports = {"kube-apiserver": k8s, "kube-controller-manager": k8s, "kubectl": k8s}
    reports["etcd"] = "v0.0.1"  # not the pinned etcd: rebuilt, not reused
    for name, version in reports.items():
        (old / name).write_text(f"#!/bin/sh\necho {name} {version}\n")
        (old / name).chmod(0o755)
    before = {p.name: (p.stat().st_ino, p.read_text()) for p in old.iterdir()}

    done = subprocess.run(script.argv, env=sandbox.env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    entry = Path(done.stdout.strip())
    assert entry != old and sorted(p.name for p in entry.iterdir()) == sorted(script.binaries)
    for name in ("kube-apiserver", "kube-controller-manager", "kubectl"):
        assert (entry / name).stat().st_ino == before[name][0], name  # a hard link, not a build
    for name in ("etcd", "kube-scheduler"):
        assert (entry / name).read_text() == BINARY, name
    builds = sandbox.builds()
    assert [b.split()[2:] for b in builds] == [
        ["k8s.io/kubernetes/cmd/kube-scheduler"],
        ["go.etcd.io/etcd/server/v3"],
    ], builds
    assert {p.name: (p.stat().st_ino, p.read_text()) for p in old.iterdir()} == before
    assert sandbox.leftovers() == []


def test_a_tool_that_cannot_be_built_fails_the_test_with_what_the_script_said() -> None:
    with pytest.raises(tools.ToolBuildError, match="unknown tool no-such-tool"):
        tools.tool("no-such-tool")


def test_kwok_that_cannot_be_built_fails_the_dev_cluster_with_what_the_script_said(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TESSERA_KWOK_BIN", raising=False)
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_GO_FAIL", "1")
    sandbox.gate.touch()
    with pytest.raises(
        tools.ToolBuildError, match=r"(?s)build-tool.sh kwok.*fake go: build failed"
    ):
        scheduling.find_kwok()


def test_a_build_past_its_timeout_is_stopped_and_fails_with_how_far_it_got(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    # the gate stays shut: the stand-in go never finishes on its own
    with pytest.raises(tools.ToolBuildError, match=r"(?s)within 10 s.*building helm"):
        build_tool.build_tool("helm", timeout=10)
    assert _running_with(f"FAKE_GO_GATE={sandbox.gate}") == [], "the build went on"


def _running_with(env_entry: str) -> list[int]:
    """Processes whose environment holds ENV_ENTRY (the stand-in go of one sandbox)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and env_entry.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found
