"""BLAS threads sized to the cores other processes leave idle.

NumPy's OpenBLAS starts one thread per core and its threads spin while they wait for each other. Beside other
CPU-bound processes that is the worst case: a thread that loses its core holds up the rest, and a fit that takes
2.3 s on two idle cores took 36.5 s beside two busy processes, against 4.2 s with one BLAS thread (issue 67,
``benchmarks/upgrade_fit_load.py``). One thread on an idle machine costs about a fifth more, so the default counts
the cores other processes keep busy, from a short sample of ``/proc/stat`` taken while this process sleeps (the
1-minute load average where that file is missing), and leaves BLAS the rest, at least one.
"""

import contextlib
import os
import time

SAMPLE_SECONDS = 0.05


def _busy_jiffies() -> tuple[int, int] | None:
  """(busy, total) jiffies over all cores since boot, from ``/proc/stat``; None where it cannot be read."""
  try:
    with open("/proc/stat") as f:
      fields = [int(x) for x in f.readline().split()[1:]]
  except (OSError, ValueError):
    return None
  idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
  return sum(fields) - idle, sum(fields)


def busy_cores(sample_seconds: float = SAMPLE_SECONDS) -> float:
  """Cores kept busy by other processes.

  The machine's busy share over ``sample_seconds`` of this process sleeping, times the core count (the 1-minute
  load average where ``/proc/stat`` is missing).
  """
  cores = os.cpu_count() or 1
  first = _busy_jiffies()
  if first is None:
    return min(float(cores), os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0.0
  time.sleep(sample_seconds)
  second = _busy_jiffies()
  if second is None or second[1] <= first[1]:
    return 0.0
  return cores * (second[0] - first[0]) / (second[1] - first[1])


def idle_threads() -> int:
  """BLAS threads for the cores other processes leave idle.

  ``os.cpu_count()`` less the busy cores, rounded down unless within 0.4 of a core of the next: a core more than
  0.4 taken is one a spinning thread would fight for, while a neighbour's occasional work (an editor, a shell) is
  not worth a thread. At least 1.
  """
  cores = os.cpu_count() or 1
  return max(1, min(cores, int(cores - busy_cores() + 0.4)))


@contextlib.contextmanager
def blas_threads(threads: int | None = None, name: str = "`threads`"):
  """Limits NumPy's BLAS to ``threads`` threads inside the block, restoring it after.

  Args:
    threads: the thread count; ``None`` takes :func:`idle_threads`.
    name: how an error message names ``threads``.

  Yields:
    The thread count used.

  Raises:
    ValueError: ``threads`` is not a positive integer (the message names it as ``name``).
  """
  if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
    raise ValueError(f"{name} must be a positive integer or None, got {threads!r}")
  from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

  count = idle_threads() if threads is None else threads
  with threadpool_limits(limits=count, user_api="blas"):
    yield count
