"""The compile budget: what one run of each experiment's ``test`` preset, and ``bcjax fit``, spends before and beside
its arithmetic.

Each target runs in a fresh process, twice: **cold** (an empty persistent compilation cache) and **warm** (the cache
the cold run filled, as a user's second run of a preset finds it). The child process counts, through
:mod:`jax.monitoring` and a counter on eager dispatch:

* ``programs``: executables built (by XLA or from the persistent cache), with the fifteen functions built most often;
  ``programs_compiled`` of them by XLA, ``programs_from_cache`` read back from the persistent cache;
* ``compile_s``, ``lower_s``, ``trace_s``: seconds building executables (XLA's compiler or the cache read), lowering
  jaxprs to MLIR and tracing;
* ``eager_primitive_calls``: primitives applied outside ``jit`` (each distinct primitive and shape is a small
  compiled program of its own), with the ten most frequent;
* ``wall_s``: the whole run, start of the target to its end (the process's start-up and imports apart).

Usage::

  python -m benchmarks.compile --out compile.json                     # every experiment and bcjax fit
  python -m benchmarks.compile --out c.json --targets bc_aligner,fit-auto

Timings are never asserted; compare ratios measured in one run (machines differ).
"""

import argparse
import collections
import contextlib
import dataclasses
import io
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import benchmark_main
from experiments.harness import option

EXPERIMENTS = (
  "bc_aligner",
  "error_amplification",
  "gramian_estimation",
  "gramian_scaling",
  "gramian_training",
  "icl",
  "conceptors_sts",
)
FIT_KINDS = ("orthogonal", "linear", "affine", "auto")
TARGETS = EXPERIMENTS + tuple(f"fit-{kind}" for kind in FIT_KINDS)
_RESULT = "COMPILE_BUDGET "


@dataclasses.dataclass(frozen=True)
class Config:
  targets: tuple[str, ...] = option(TARGETS, choices=TARGETS, help="experiments (test preset) and bcjax fit kinds")
  fit_rows: int = option(1000, help="bcjax fit: paired rows", low=10)
  fit_dim: int = option(384, help="bcjax fit: embedding dimension of both models", low=2)
  timeout: int = option(900, help="seconds allowed to each child run", low=1)


PRESETS = {
  "full": Config(),
  "quick": Config(targets=("fit-linear",), fit_rows=200, fit_dim=16, timeout=300),
}


# ---------------------------------------------------------------------------------------------------------------
# The child: counts, then runs one target in this process.


class _Counters:
  def __init__(self):
    self.seconds = collections.Counter()
    self.events = collections.Counter()
    self.eager = collections.Counter()
    self.by_function = collections.Counter()

  def on_duration(self, event: str, duration: float, fun_name: str = "?", **_) -> None:
    from jax._src import dispatch

    self.seconds[event] += duration
    self.events[event] += 1
    if event == dispatch.BACKEND_COMPILE_EVENT:
      self.by_function[fun_name] += 1

  def on_event(self, event: str, **_) -> None:
    self.events[event] += 1

  def report(self, wall_s: float) -> dict:
    from jax._src import dispatch

    return {
      "programs": self.events[dispatch.BACKEND_COMPILE_EVENT],
      "programs_compiled": self.events[dispatch.BACKEND_COMPILE_EVENT]
      - self.events["/jax/compilation_cache/cache_hits"],
      "programs_from_cache": self.events["/jax/compilation_cache/cache_hits"],
      "compile_s": self.seconds[dispatch.BACKEND_COMPILE_EVENT],
      "lower_s": self.seconds[dispatch.JAXPR_TO_MLIR_MODULE_EVENT],
      "trace_s": self.seconds[dispatch.JAXPR_TRACE_EVENT],
      "eager_primitive_calls": sum(self.eager.values()),
      "eager_top": dict(self.eager.most_common(10)),
      "compiled_top": dict(self.by_function.most_common(15)),
      "wall_s": wall_s,
    }


def _install(counters: _Counters) -> None:
  """Listeners on JAX's compile events and a counter around eager primitive dispatch (a private function: the
  count is left at 0 where a JAX version has moved it)."""
  import jax
  from jax._src import dispatch

  jax.monitoring.register_event_duration_secs_listener(counters.on_duration)
  jax.monitoring.register_event_listener(counters.on_event)
  apply = getattr(dispatch, "apply_primitive", None)
  if apply is None:
    return

  def counted(prim, *args, **params):
    counters.eager[prim.name] += 1
    return apply(prim, *args, **params)

  dispatch.apply_primitive = counted
  for module in list(sys.modules.values()):  # modules that imported the name itself
    if getattr(module, "apply_primitive", None) is apply and module is not dispatch:
      module.apply_primitive = counted


def _fit_inputs(folder: Path, rows: int, dim: int) -> tuple[Path, Path]:
  """Paired embeddings with a known relation: new = tanh(old·A) + noise, row-normalised (a cosine model pair)."""
  import numpy as np

  rng = np.random.default_rng(0)
  old = rng.normal(size=(rows, dim)).astype(np.float32)
  new = np.tanh(old @ (rng.normal(size=(dim, dim)) / np.sqrt(dim))) + 0.1 * rng.normal(size=(rows, dim))
  paths = folder / "old.npy", folder / "new.npy"
  np.save(paths[0], old / np.linalg.norm(old, axis=1, keepdims=True))
  np.save(paths[1], (new / np.linalg.norm(new, axis=1, keepdims=True)).astype(np.float32))
  return paths


def _run_target(target: str, folder: Path, cfg_rows: int, cfg_dim: int) -> int:
  if target.startswith("fit-"):
    from bcjax import cli

    old, new = _fit_inputs(folder, cfg_rows, cfg_dim)
    argv = ["fit", "--old", str(old), "--new", str(new), "--kind", target.removeprefix("fit-")]
    return cli.main([*argv, "--out", str(folder / "map.bcmap")])
  sys.argv = [f"experiments.{target}", "--preset", "test", "--no-progress", "--out", str(folder / "run")]
  try:
    runpy.run_module(f"experiments.{target}", run_name="__main__", alter_sys=True)
  except SystemExit as e:
    return int(e.code or 0)
  return 0


def child(target: str, rows: int, dim: int) -> None:
  counters = _Counters()
  _install(counters)
  with tempfile.TemporaryDirectory(prefix="bcjax-compile-") as folder:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
      code = _run_target(target, Path(folder), rows, dim)
    wall = time.perf_counter() - start
  print(_RESULT + json.dumps({"exit_code": code, **counters.report(wall)}))


# ---------------------------------------------------------------------------------------------------------------
# The parent: each target cold, then warm, in fresh processes.


def _measure(target: str, cache: Path, cfg: Config) -> dict:
  env = {
    **os.environ,
    "JAX_COMPILATION_CACHE_DIR": str(cache),
  }
  argv = [sys.executable, "-m", "benchmarks.compile", "--child", target]
  argv += ["--fit-rows-child", str(cfg.fit_rows), "--fit-dim-child", str(cfg.fit_dim)]
  proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=cfg.timeout)
  lines = [line for line in proc.stdout.splitlines() if line.startswith(_RESULT)]
  if proc.returncode or not lines:
    raise RuntimeError(f"benchmarks.compile: {target} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
  return json.loads(lines[-1].removeprefix(_RESULT))


def run(cfg: Config) -> dict:
  results = {}
  for target in cfg.targets:
    with tempfile.TemporaryDirectory(prefix="bcjax-compile-cache-") as cache:
      cold = _measure(target, Path(cache), cfg)
      warm = _measure(target, Path(cache), cfg)
    results[target] = {"cold": cold, "warm": warm}
    print(
      f"{target}: cold {cold['wall_s']:.1f} s, {cold['programs']} programs "
      f"({cold['compile_s']:.1f} s compile, {cold['lower_s']:.1f} s lower, {cold['trace_s']:.1f} s trace), "
      f"{cold['eager_primitive_calls']} eager primitive calls; warm {warm['wall_s']:.1f} s "
      f"({warm['programs_compiled']} compiled, {warm['programs_from_cache']} from the cache)",
      file=sys.stderr,
    )
  return {"xla_flags": os.environ.get("XLA_FLAGS", ""), "targets": results}


def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if argv[:1] == ["--child"]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile --child")
    parser.add_argument("--child", choices=TARGETS, required=True)
    parser.add_argument("--fit-rows-child", type=int, required=True)
    parser.add_argument("--fit-dim-child", type=int, required=True)
    args = parser.parse_args(argv)
    child(args.child, args.fit_rows_child, args.fit_dim_child)
    return 0
  return benchmark_main(
    "compile",
    "Compiled programs, compile/lower/trace seconds, eager primitive calls and wall time of one run of each "
    "experiment's test preset and of bcjax fit, cold and with the persistent compilation cache.",
    Config,
    PRESETS,
    run,
    argv,
  )


if __name__ == "__main__":
  sys.exit(main())
