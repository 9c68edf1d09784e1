"""tessera.api: the custom resources Tessera serves, as pydantic models.

These models are the single source of truth for the API: ``hack/gen_crds.py``
turns them into the CRDs under ``crds/`` (schemas, CEL rules, printer
columns), and the operator parses every object it reads through them.
"""
