"""What every benchmark shares: timing (compile once, timed separately; then the median of repeated runs with
block_until_ready), the machine's description, the JSON report, and the command line (a config dataclass with
``quick``/``full`` presets through the experiments' harness: flags validated, ``--out`` checked, before any work)."""

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence

import jax

from bcjax.files import write_atomic
from experiments import harness
from experiments.provenance import VECTOR_FLAGS, cpu_description  # noqa: F401  (re-exported: the benchmarks' name)


def time_jitted(fn: Callable, *args, repeats: int = 20, warmup: int = 2) -> dict:
  """Compiles ``jax.jit(fn)`` for ``args`` and times its execution.

  Returns:
    ``{"compile_s", "median_s", "min_s", "repeats"}``; ``compile_s`` is lowering plus compilation only.
  """
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  compile_s = time.perf_counter() - start
  for _ in range(warmup):
    jax.block_until_ready(compiled(*args))
  runs = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    runs.append(time.perf_counter() - start)
  return {"compile_s": compile_s, "median_s": statistics.median(runs), "min_s": min(runs), "repeats": repeats}


def write_report(out: str, benchmark: str, **content) -> None:
  """Writes a benchmark's JSON report (with the machine it ran on), atomically and never over an existing file."""
  report = {
    "benchmark": benchmark,
    "cpu": cpu_description(),
    "backend": jax.default_backend(),
    "devices": [str(d) for d in jax.devices()],
    "jax": jax.__version__,
    "python": platform.python_version(),
    **content,
  }
  write_atomic(out, (json.dumps(report, indent=2) + "\n").encode())
  print(f"wrote {out}")


def benchmark_main(
  name: str,
  description: str,
  config_cls,
  presets: dict,
  run: Callable[..., dict],
  argv: Sequence[str] | None = None,
  check_config: Callable | None = None,
) -> int:
  """The command line of a benchmark: ``--out FILE`` (must not exist: checked before any work), ``--preset``
  (``full``, or ``quick``: seconds; ``--quick`` is its shorthand) and one flag per config option; then
  ``run(cfg) -> report fields`` and the JSON report, which records the config. ``check_config(cfg)`` may raise
  :class:`~experiments.harness.UsageError` for cross-flag checks."""
  parser = argparse.ArgumentParser(
    prog=f"python -m benchmarks.{name}", description=description, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--out", required=True, help="JSON report to write (must not exist)")
  parser.add_argument("--preset", choices=sorted(presets), default="full", help="full, or quick (seconds)")
  parser.add_argument("--quick", action="store_true", help="shorthand for --preset quick")

  def check(args, cfg):
    if os.path.exists(args.out):
      raise harness.UsageError("--out", f"{args.out} exists; reports are never overwritten")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
      raise harness.UsageError("--out", f"{args.out}: its folder does not exist")
    if check_config is not None:
      check_config(cfg)

  args, cfg = harness.parse_config(parser, argv, config_cls, lambda a: presets["quick" if a.quick else a.preset], check)
  content = run(cfg)
  write_report(args.out, name, config=dataclasses.asdict(cfg), **content)
  return 0
