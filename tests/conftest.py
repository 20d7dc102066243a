"""Test-session settings: float64 JAX so results can be compared with float64 NumPy references."""

import os

import hypothesis
import jax
from absl import flags

jax.config.update("jax_enable_x64", True)

hypothesis.settings.register_profile("bcjax", deadline=None, max_examples=40, derandomize=True,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
# A deep run of the fuzzed loaders and the algebraic laws: HYPOTHESIS_PROFILE=deep pytest tests/test_fuzz_loaders.py
hypothesis.settings.register_profile("deep", deadline=None, max_examples=2000, derandomize=False,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bcjax"))

# pytest runs absltest classes without absl's flag parsing; defaults (e.g. --test_tmpdir) are what we want.
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
