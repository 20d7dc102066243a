"""Timing helpers: compile once (timed separately), then the median of repeated runs with block_until_ready."""

import json
import platform
import statistics
import time
from collections.abc import Callable

import jax


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
  """Writes a benchmark's JSON report (with the platform it ran on), atomically and never over an existing file."""
  from bcjax.files import write_atomic  # pylint: disable=import-outside-toplevel
  report = {"benchmark": benchmark, "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
            "jax": jax.__version__, "python": platform.python_version(), **content}
  write_atomic(out, (json.dumps(report, indent=2) + "\n").encode())
  print(f"wrote {out}")
