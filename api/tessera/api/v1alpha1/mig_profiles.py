"""Every MIG profile name a GPU model of Tessera's catalog has: the API server's static check.

A name no model has (``1g.7gb``, a typo for ``1g.5gb`` or ``1g.10gb``) is refused when the
object is applied, before any node exists; whether the pool's own model has a known name
(``1g.6gb`` is an A30's, not an A100's) is decided per node or from the model the selector
names (``InvalidGeometryForModel``, with "did you mean"). The union of
``operator/tessera/domain/geometry/mig_catalog.yaml``'s profiles, kept equal to it by
``tests/unit/geometry/test_geometry_catalog.py``: a model added there with a new profile adds
it here.
"""

from __future__ import annotations

KNOWN: tuple[str, ...] = (
    "1g.5gb", "1g.5gb+me", "1g.6gb", "1g.6gb+me", "1g.10gb", "1g.10gb+me", "1g.12gb",
    "1g.12gb+me", "1g.18gb", "1g.18gb+me", "1g.20gb", "1g.23gb", "1g.23gb+me", "1g.24gb",
    "1g.24gb+gfx", "1g.24gb+me", "1g.24gb+me.all", "1g.24gb-me", "1g.35gb", "1g.36gb", "1g.45gb",
    "2g.10gb", "2g.12gb", "2g.12gb+me", "2g.20gb", "2g.24gb", "2g.35gb", "2g.36gb", "2g.45gb",
    "2g.48gb", "2g.48gb+gfx", "2g.48gb+me.all", "2g.48gb-me", "3g.20gb", "3g.40gb", "3g.47gb",
    "3g.48gb", "3g.71gb", "3g.72gb", "3g.90gb", "4g.20gb", "4g.24gb", "4g.40gb", "4g.47gb",
    "4g.48gb", "4g.71gb", "4g.72gb", "4g.90gb", "4g.96gb", "4g.96gb+gfx", "7g.40gb", "7g.80gb",
    "7g.94gb", "7g.96gb", "7g.141gb", "7g.144gb", "7g.180gb",
)  # fmt: skip
UNKNOWN = (
    "no GPU model in Tessera's catalog has one of these MIG profiles "
    "(tessera geometry models lists each model's)"
)
"""The CRD's message; ``tessera plan`` adds the names, each with the nearest known one."""

# Membership only (the pattern's rule names malformed keys); a messageExpression listing the
# unknown keys costs the API server's CEL estimator over 100x its budget.
KNOWN_RULE = "self.all(k, k in [" + ", ".join(f"'{n}'" for n in KNOWN) + "])"

BY_MODEL: dict[str, tuple[str, ...]] = {
    "A30-24GB": ("1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb",),
    "A100-40GB": ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb",),
    "A100-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",),
    "H100-80GB": ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",),
    "H100-94GB": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb",),
    "H200-141GB": ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb",),
    "GH200-96GB": ("1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb",),
    "GH200-144GB": ("1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb",),
    "B200-180GB": ("1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb",),
    "RTXPRO6000-96GB": ("1g.24gb", "1g.24gb+me", "1g.24gb+gfx", "1g.24gb+me.all", "1g.24gb-me", "2g.48gb", "2g.48gb+gfx", "2g.48gb+me.all", "2g.48gb-me", "4g.96gb", "4g.96gb+gfx",),
}  # fmt: skip
"""Each catalog model's profiles by its id: what ``spec.autopilot.profiles`` may name under it."""
