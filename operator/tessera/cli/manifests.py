"""``tessera plan -f``: read manifests the way Argo CD reads an application's source.

* ``-`` is stdin;
* a file is read as it is — but a kustomization file (``kustomization.yaml``,
  ``kustomization.yml``, ``Kustomization``) stands for its directory;
* a directory holding a kustomization file is rendered by kustomize (``kubectl
  kustomize DIR``; kustomize is built into kubectl), as Argo CD renders it
  before applying — its plain YAML files are never read one by one;
* a Helm chart (``Chart.yaml``) is refused: render it first (``helm template``);
* any other directory: its ``*.yaml``, ``*.yml`` and ``*.json`` files, not
  recursing (Argo CD's directory default); a directory without any is an error;
* an argument that holds no object at all (an empty file, only comments, an
  empty stdin) is an error, as ``kubectl apply`` makes it.

kubectl is ``--kubectl``, else ``$TESSERA_KUBECTL``, else ``kubectl`` on PATH;
when a kustomization must be rendered and there is none, the plan is refused
(exit 1), never answered from the unrendered files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tessera.domain.preview.manifests import (
    KUSTOMIZATION_FILES,
    ManifestDocument,
    ManifestError,
    decode,
    load,
    nonempty,
)

KUBECTL_ENV = "TESSERA_KUBECTL"
RENDER_TIMEOUT_S = 300
SUFFIXES = (".yaml", ".yml", ".json")


def kubectl(flag: str | None) -> str | None:
    """The kubectl that renders kustomizations, or None when there is none."""
    return flag or os.environ.get(KUBECTL_ENV) or shutil.which("kubectl")


def documents(paths: Iterable[str], renderer: str | None) -> list[ManifestDocument]:
    """Every document the ``-f`` arguments name, in order; ManifestError or OSError if not."""
    return [doc for raw in paths for doc in nonempty(_read(raw, renderer), raw)]


def _read(raw: str, renderer: str | None) -> list[ManifestDocument]:
    if raw == "-":
        stdin = getattr(sys.stdin, "buffer", None)  # bytes, so that bad UTF-8 names its line
        return load(decode(stdin.read(), "-") if stdin else sys.stdin.read(), "-")
    path = Path(raw)
    if path.is_file() and path.name in KUSTOMIZATION_FILES:
        path = path.parent
    if not path.is_dir():
        return load(decode(path.read_bytes(), raw), raw)
    found = [path / name for name in KUSTOMIZATION_FILES if (path / name).is_file()]
    if found:
        return _kustomize(path, found[0].name, renderer)
    if (path / "Chart.yaml").is_file():
        raise ManifestError(
            f"{path} is a Helm chart (Chart.yaml), which Argo CD renders with Helm: "
            f"render it first, e.g. helm template NAME {path} | tessera plan -f -"
        )
    files = sorted(f for f in path.iterdir() if f.suffix in SUFFIXES and f.is_file())
    if not files:
        nested = any(f.is_dir() for f in path.iterdir())
        hint = " (subdirectories are not read, as in Argo CD: give each with -f)" if nested else ""
        raise ManifestError(f"{path}: no *.yaml, *.yml or *.json file to read{hint}")
    return [doc for file in files for doc in load(decode(file.read_bytes(), str(file)), str(file))]


def _kustomize(directory: Path, marker: str, renderer: str | None) -> list[ManifestDocument]:
    what = f"{directory} is a kustomization ({marker}), which Argo CD renders with kustomize"
    if renderer is None:
        raise ManifestError(
            f"{what}; no kubectl to render it: put kubectl on PATH, or give "
            f"--kubectl PATH (or ${KUBECTL_ENV})"
        )
    command = [renderer, "kustomize", str(directory)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ManifestError(f"{what}; {' '.join(command)} failed: {err}") from err
    if run.returncode != 0:
        raise ManifestError(f"{what}; {' '.join(command)} failed: {run.stderr.strip()}")
    return load(run.stdout, f"{directory} (rendered by {renderer} kustomize)", generated=True)
