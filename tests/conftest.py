"""Shared test configuration.

Hypothesis runs a deterministic profile by default (``derandomize=True``, no
deadline) so that CI is reproducible; set ``LINEARNETS_HYPOTHESIS_PROFILE=random``
for a nondeterministic exploration with more examples.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", derandomize=True, deadline=None, max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "random", derandomize=False, deadline=None, max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("LINEARNETS_HYPOTHESIS_PROFILE", "default"))
