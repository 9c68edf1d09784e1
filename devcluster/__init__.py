"""Tessera's dev cluster: a local control plane and simulated GPU/NPU nodes.

Its own distribution (``devcluster/pyproject.toml``, installed editable by ``make dev``), never
in the operator's wheel or image. It drives Tessera from the outside — the adapter, the API
constants, the ``tessera`` command — and decides what the simulated hardware accepts from its
own tables (``hardware``), never from ``tessera.domain``. ``tessera dev`` comes from here
(``cli``, registered as the ``tessera.cli`` entry point ``dev``).
"""
