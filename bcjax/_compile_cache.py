"""JAX's persistent compilation cache, on by default for the experiments and the ``bcjax`` command.

Most of what an experiment or a ``bcjax fit`` compiles is small: under JAX's default thresholds (programs that took
a second or more to compile) almost nothing would be kept, and every run would compile again. Here every program is
kept, so a second run of the same preset, a resumed run or the next seed of a sweep reads its programs back.
"""

import os
from pathlib import Path

import jax

# The environment variables that say a caller chose the cache's folder or thresholds itself.
_DIR_ENV = "JAX_COMPILATION_CACHE_DIR"
_THRESHOLD_ENVS = ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")


def default_compile_cache_dir() -> Path:
  """``xla`` in bcjax's cache folder.

  ``$BCJAX_DATA/xla`` when ``BCJAX_DATA`` is set (the folder downloads go to, :func:`bcjax.data.default_cache_dir`),
  else ``~/.cache/bcjax/xla``.
  """
  return Path(os.environ.get("BCJAX_DATA") or Path.home() / ".cache" / "bcjax") / "xla"


def use_compilation_cache(enabled: bool = True) -> None:
  """Turns JAX's persistent compilation cache on (or, with ``enabled=False``, off) for this process.

  Turns JAX's persistent compilation cache on at :func:`default_compile_cache_dir` and keeps every program in it, or,
  with ``enabled=False``, off for this process.

  A folder or thresholds set already (``JAX_COMPILATION_CACHE_DIR``, ``jax_compilation_cache_dir``, the
  ``JAX_PERSISTENT_CACHE_MIN_*`` variables) are left as the caller set them.

  Args:
    enabled: False turns the cache off (the ``--no-compile-cache`` flag).
  """
  if not enabled:
    jax.config.update("jax_enable_compilation_cache", False)
    return
  jax.config.update("jax_enable_compilation_cache", True)
  # getattr: jax.config declares no attribute for this option, so mypy would reject the plain attribute.
  if getattr(jax.config, "jax_compilation_cache_dir") is None and not os.environ.get(_DIR_ENV):  # noqa: B009
    jax.config.update("jax_compilation_cache_dir", str(default_compile_cache_dir()))
  if not any(name in os.environ for name in _THRESHOLD_ENVS):
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
