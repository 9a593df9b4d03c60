"""Test-suite configuration: hypothesis profiles.

``ci`` (the default) runs every property with 200 examples; ``soak`` runs
10,000 (``HYPOTHESIS_PROFILE=soak pytest -m "not spark"``); ``dev`` is a quick
50 for local iteration.
"""

import os

from hypothesis import HealthCheck, settings

_common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=200, **_common)
settings.register_profile("soak", max_examples=10_000, **_common)
settings.register_profile("dev", max_examples=50, **_common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
