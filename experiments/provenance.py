"""Where a run came from: the code (git commit, bcjax version), the machine and the devices it ran on.

Recorded in each run's ``config.json`` and each benchmark's report, so that a number can be traced to the commit and
the CPU or GPU that produced it (the reproduction report quotes both).
"""

import datetime
import os
import platform
import subprocess
from pathlib import Path

VECTOR_FLAGS = (
  "sse4_2",
  "avx",
  "avx2",
  "fma",
  "avx512f",
  "avx512bw",
  "avx512vl",
  "avx512_vnni",
  "avx512_bf16",
  "amx_tile",
  "neon",
  "asimd",
  "sve",
)


def cpu_description() -> dict:
  """The CPU model, its vector extensions (of :data:`VECTOR_FLAGS`) and the cores this process may use."""
  model, flags = platform.processor() or platform.machine(), set()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "Hardware") and model in ("", platform.machine(), platform.processor()):
          model = value.strip()
        elif key in ("flags", "Features"):
          flags |= set(value.split())
  except OSError:  # not Linux: the platform module's model name stands, with no extensions listed
    flags = set()
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
  return {
    "model": model,
    "vector_extensions": [f for f in VECTOR_FLAGS if f in flags],
    "cores": cores,
    "machine": platform.machine(),
  }


def git_state(path: str | os.PathLike | None = None) -> dict:
  """``{"commit", "dirty"}`` of the git checkout holding ``path``; Nones outside one.

  By default, bcjax's own source checkout: None when this package is installed (a virtual environment inside some
  other repository must not lend it that repository's commit)."""
  here = Path(__file__).resolve().parent
  where = Path(path) if path is not None else here
  try:
    top = subprocess.run(
      ["git", "rev-parse", "--show-toplevel"], cwd=where, capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()
    if path is None and Path(top).resolve() != here.parent:
      return {"commit": None, "dirty": None}
    commit = subprocess.run(
      ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()
    status = subprocess.run(
      ["git", "status", "--porcelain", "--untracked-files=no"],
      cwd=where,
      capture_output=True,
      text=True,
      timeout=10,
      check=True,
    ).stdout
  except (OSError, subprocess.SubprocessError):  # no git, or not a checkout (an installed wheel)
    return {"commit": None, "dirty": None}
  return {"commit": commit, "dirty": bool(status.strip())}


def provenance() -> dict:
  """The code, machine and devices of this process: what a run's ``config.json`` records."""
  import jax

  import bcjax

  devices = jax.devices()
  return {
    "git": git_state(),
    "bcjax_version": bcjax.__version__,
    "jax_version": jax.__version__,
    "cpu": cpu_description(),
    "devices": {"platform": devices[0].platform, "kind": devices[0].device_kind, "count": len(devices)},
    "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }
