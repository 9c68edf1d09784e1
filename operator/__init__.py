"""Tessera: declare how accelerators are partitioned and shared; make the cluster match.

This folder is installed as the package ``tessera`` (see pyproject's
``package-dir``). The standard library owns the name ``operator``, and
``python -m ...`` run from the repository root puts this folder on the path
under that name before the real module is imported. When that happens we load
the standard library's ``operator`` and stand aside, so ``python -m pytest``
and ``import operator, tessera`` both work from the repository root.
"""

if __name__ == "operator":  # pragma: no cover - exercised by tests/unit/test_packaging.py
    import importlib.machinery as _machinery
    import importlib.util as _util
    import sys as _sys
    import sysconfig as _sysconfig

    _spec = _machinery.PathFinder.find_spec("operator", [_sysconfig.get_paths()["stdlib"]])
    assert _spec is not None and _spec.loader is not None
    _stdlib_operator = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_stdlib_operator)
    _sys.modules["operator"] = _stdlib_operator
    globals().update(_stdlib_operator.__dict__)
else:
    __version__ = "0.1.0"
