"""Crash-safe file writing shared by the registry, the experiments and the benchmarks.

``write_atomic(path, data, overwrite=False)`` publishes a file that is either absent or complete (a temporary file
in the destination's directory, fsync-ed, then linked or renamed into place); without ``overwrite`` an existing file
is never replaced.
"""

from bcjax._atomic import write_atomic

__all__ = ("write_atomic",)
