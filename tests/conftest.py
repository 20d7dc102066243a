"""Test-session settings: float64 JAX so results can be compared with float64 NumPy references, XLA's fastest CPU
compile, and one persistent compilation cache for the session, shared by the xdist workers and the subprocesses the
tests start (the experiments' command-line tests compile the same steps many times). The cache and every temporary
folder of the session live in one fresh temporary root, so no run sees another run's cache and nothing is left
behind."""

import os
import shutil
import tempfile

# Set before JAX is imported, here and (inherited) in every worker and subprocess.
_ROOT_ENV = "BCJAX_TEST_TMP"
_OWN_ROOT = _ROOT_ENV not in os.environ
if _OWN_ROOT:
  os.environ[_ROOT_ENV] = tempfile.mkdtemp(prefix="bcjax-tests-")
# Every temporary folder of the session lives under one root that the session removes: the workers', and those of
# the subprocesses, which cannot clean up when a test kills them (a killed peer's scratch folder, a probe's runs).
os.environ["TMPDIR"] = tempfile.tempdir = os.environ[_ROOT_ENV]
_CACHE_ENV = "BCJAX_TEST_JIT_CACHE"
os.environ.setdefault(_CACHE_ENV, os.path.join(os.environ[_ROOT_ENV], "jit-cache"))
os.makedirs(os.environ[_CACHE_ENV], exist_ok=True)
os.environ.update(
  BCJAX_RUN_ACTIVITY=os.path.join(os.environ[_ROOT_ENV], "runs.jsonl"),  # the suite's runs flag each other, not yours
  JAX_COMPILATION_CACHE_DIR=os.environ[_CACHE_ENV],
  JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
  JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
)
# The suite's programs are small and mostly run once: XLA's CPU compile (LLVM's optimisation passes and its fusion
# emitters) is most of their cost. Level 0 keeps the same HLO and compiles about a third faster; the legacy
# elemental emitters compile the same fusions about a third faster again (a BC-Aligner test run: 62 s -> 40 s) and
# differ only in float rounding, which the tests' tolerances already allow for. One LLVM module per program instead
# of XLA's default split into parallel codegen parts: on 2 cores the split costs more than it saves (a BC-Aligner
# 4-device test run: 31.4 s -> 29.8 s, three times each).
TEST_XLA_FLAGS = (
  "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"
)
if TEST_XLA_FLAGS not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

import hypothesis  # noqa: E402
import jax  # noqa: E402
from absl import flags  # noqa: E402

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
  """The process that made the session's temporary root (the controller, or a plain pytest) removes it, the
  compilation cache with it, at the end."""
  del config
  if _OWN_ROOT:
    shutil.rmtree(os.environ[_ROOT_ENV], ignore_errors=True)


hypothesis.settings.register_profile(
  "bcjax", deadline=None, max_examples=40, derandomize=True, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
# A deep run of the fuzzed loaders and the algebraic laws: HYPOTHESIS_PROFILE=deep pytest tests/test_fuzz_loaders.py
hypothesis.settings.register_profile(
  "deep", deadline=None, max_examples=2000, derandomize=False, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bcjax"))

# pytest runs absltest classes without absl's flag parsing; defaults (e.g. --test_tmpdir) are what we want.
if not flags.FLAGS.is_parsed():
  flags.FLAGS.mark_as_parsed()
