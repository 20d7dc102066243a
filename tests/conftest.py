"""Test-session settings: float64 JAX so results can be compared with float64 NumPy references, XLA's fastest CPU
compile, and one persistent compilation cache for the session, shared by the xdist workers and the subprocesses the tests start (the experiments'
command-line tests compile the same steps many times); it lives in a fresh temporary folder, so no run sees another
run's cache."""

import os
import shutil
import tempfile

# Set before JAX is imported, here and (inherited) in every worker and subprocess.
_CACHE_ENV = "BCJAX_TEST_JIT_CACHE"
_OWN_CACHE = _CACHE_ENV not in os.environ
if _OWN_CACHE:
  os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="bcjax-test-jit-cache-")
os.environ.update(JAX_COMPILATION_CACHE_DIR=os.environ[_CACHE_ENV], JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                  JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
# The suite's programs are small and mostly run once: XLA's CPU compile (LLVM's optimisation passes and its fusion
# emitters) is most of their cost. Level 0 keeps the same HLO and compiles about a third faster; the legacy
# elemental emitters compile the same fusions about a third faster again (a BC-Aligner test run: 62 s -> 40 s) and
# differ only in float rounding, which the tests' tolerances already allow for.
TEST_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

import hypothesis  # noqa: E402  pylint: disable=wrong-import-position
import jax  # noqa: E402  pylint: disable=wrong-import-position
from absl import flags  # noqa: E402  pylint: disable=wrong-import-position

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", os.environ[_CACHE_ENV])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_collection_modifyitems(items):
  """Classes marked ``heavy`` (whole experiment runs, multi-device subprocesses: tens of seconds to minutes each) go
  first, so that no heavy class is left running on one worker at the end of the suite while the other idles. xdist
  hands out classes in collection order only with ``--no-loadscope-reorder`` (``make test``); by default it sorts
  them by their number of tests, which put the one-test heavy classes last."""
  items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: the order within each group stays


def pytest_unconfigure(config):
  """The process that made the cache folder (the controller, or a plain pytest) removes it at the end."""
  del config
  if _OWN_CACHE:
    shutil.rmtree(os.environ[_CACHE_ENV], ignore_errors=True)

hypothesis.settings.register_profile("bcjax", deadline=None, max_examples=40, derandomize=True,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
# A deep run of the fuzzed loaders and the algebraic laws: HYPOTHESIS_PROFILE=deep pytest tests/test_fuzz_loaders.py
hypothesis.settings.register_profile("deep", deadline=None, max_examples=2000, derandomize=False,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bcjax"))

# pytest runs absltest classes without absl's flag parsing; defaults (e.g. --test_tmpdir) are what we want.
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
