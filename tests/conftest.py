"""Shared test settings.

Property tests run derandomized by default, so `make test` (and CI) sees the
same examples on every run: a red build always means a change broke something,
never that a new seed wandered into an old corner. `make fuzz` runs them ten times
with fresh seeds; whatever it finds becomes a table case.
"""

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("TESSERA_HYPOTHESIS", "repeatable"))
