"""Where each package of `tessera` lives: the operator under operator/, its API types under api/.

Every folder below those two is its import name (operator/tessera/domain is tessera.domain,
api/tessera/api is tessera.api), so the package list is found, not kept by hand; `tessera`
itself is a namespace package spanning both roots, carrying only the PEP 561 marker.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOTS = ("operator", "api")

package_dir: dict[str, str] = {"tessera": "operator/tessera"}
for root in ROOTS:
    for name in find_namespace_packages(root, include=["tessera.*"]):
        folder = Path(root, *name.split("."))
        if any(folder.glob("*.py")) or any(folder.glob("*.yaml")):
            package_dir[name] = folder.as_posix()

setup(packages=sorted(package_dir), package_dir=package_dir)
