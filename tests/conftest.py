"""Test-session settings: float64 JAX so results can be compared with float64 NumPy references."""

import os

import hypothesis
import jax

jax.config.update("jax_enable_x64", True)

hypothesis.settings.register_profile("bcjax", deadline=None, max_examples=40, derandomize=True,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bcjax"))
