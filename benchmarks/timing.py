"""Timing helpers: compile once (timed separately), then the median of repeated runs with block_until_ready."""

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
