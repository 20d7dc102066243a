r"""The embedding-upgrade workflow's costs (:mod:`bcjax.upgrade`): fitting each kind on paired rows, serving a map
over a stored file, and the added latency of one query.

* ``fit``: ``fit_upgrade`` wall time per kind on ``pairs`` x ``dim`` synthetic pairs (a noisy rotation with shifts,
  new width ``dim`` to old width ``old_dim``), including its cross-validation and, for the MLP, its early-stopped
  epochs (reported).
* ``command``: the ``bcjax fit`` command a user runs, per kind (``orthogonal``, ``linear``, ``affine``, ``auto``) on
  ``command_pairs`` x ``dim`` pairs with an old index of ``command_index_rows`` rows (``--normalize --index``, the
  report included), in a fresh process with the persistent compilation cache off (the first run on a machine): its
  wall time, and where that time goes, measured in a second fresh process that runs the same steps in turn: the
  imports, ``fit_upgrade``, ``evaluate_upgrade`` and writing the map and report (the medians of ``repeats`` runs).
* ``transform``: ``transform_file`` over a float32 ``.npy`` of ``rows`` x D (for each D of ``widths``) with an affine
  map to ``old_dim``, against a plain chunked NumPy loop over the same memory map (read a chunk, ``z @ W.T + b``,
  write it into an output memory map): the memory-bandwidth bound of the same work. Each runs in a fresh subprocess
  that reports its wall time (imports excluded) and peak resident memory (``VmHWM``), and its resident memory
  after its imports; the medians of ``repeats`` runs, the ratio
  bcjax / NumPy, and the input file's size for scale.
* ``query``: the median time of one row through ``query_function`` (jitted, parameters placed once; its compile
  time apart), through ``apply_map`` (which converts the parameters on every call), and through NumPy's
  ``z @ W.T + b``, in microseconds.

  python -m benchmarks.upgrade --out runs/upgrade.json [--quick]
"""

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from bcjax import upgrade
from benchmarks.timing import benchmark_main
from experiments.harness import option


@dataclasses.dataclass(frozen=True)
class Config:
  pairs: int = option(100_000, help="paired rows for the fit timings", low=100)
  dim: int = option(384, help="the new model's width in the fit timings", low=2)
  old_dim: int = option(384, help="the old model's width", low=2)
  rows: int = option(1_000_000, help="rows of the served file", low=1)
  widths: tuple[int, ...] = option((384, 1024), help="widths D of the served file", low=1)
  chunk_rows: int = option(65_536, help="rows per chunk when serving", low=1)
  mlp_epochs: int = option(10, help="the MLP's epoch limit in the fit timing", low=1)
  command_pairs: int = option(1000, help="paired rows of the `bcjax fit` command timings", low=20)
  command_index_rows: int = option(20_000, help="old-index rows of the `bcjax fit` command timings", low=20)
  command_kinds: tuple[str, ...] = option(
    ("orthogonal", "linear", "affine", "auto"),
    help="kinds of the `bcjax fit` command timings",
    choices=upgrade.UPGRADE_KINDS,
  )
  repeats: int = option(3, help="subprocess runs per transform timing (median reported)", low=1)
  query_repeats: int = option(2000, help="timed single-row queries (median reported)", low=1)


PRESETS = {
  "full": Config(),
  "quick": Config(
    pairs=3000,
    dim=32,
    old_dim=24,
    rows=20_000,
    widths=(32, 64),
    chunk_rows=4096,
    mlp_epochs=2,
    command_pairs=300,
    command_index_rows=2000,
    repeats=2,
    query_repeats=200,
  ),
}

_WORKER = r"""
import json, sys, time
import numpy as np
mode, source, target, chunk_rows, map_file = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
if mode == "bcjax":
  from bcjax import upgrade
def peak_bytes():  # VmHWM: this process's peak resident memory (ru_maxrss would carry the parent's over exec)
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
imported = peak_bytes()
start = time.perf_counter()
if mode == "bcjax":
  upgrade.transform_file(upgrade.load_map(map_file)[0], source, target, chunk_rows=chunk_rows)
else:
  with np.load(map_file) as f:
    w_t, b = np.ascontiguousarray(f["w"].T.astype(np.float32)), f["b"].astype(np.float32)
  z = np.load(source, mmap_mode="r")
  out = np.lib.format.open_memmap(target, mode="w+", dtype=np.float32, shape=(z.shape[0], w_t.shape[1]))
  for s in range(0, z.shape[0], chunk_rows):
    out[s:s + chunk_rows] = np.asarray(z[s:s + chunk_rows], np.float32) @ w_t + b
  out.flush()
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "peak_rss_bytes": peak_bytes(), "after_import_rss_bytes": imported}))
"""


_PHASES = r"""
import json, sys, time
start = time.perf_counter()
from pathlib import Path
from bcjax import _atomic
from bcjax._compile_cache import use_compilation_cache
from bcjax.upgrade import _files, _map
from bcjax.upgrade import report as _report
from bcjax.upgrade import fit as _fit
use_compilation_cache(False)
phases = {"import_s": time.perf_counter() - start}
old_path, new_path, index_path, kind, out = sys.argv[1:6]
old, new = _files.open_embeddings(old_path), _files.open_embeddings(new_path)
index = _files.open_embeddings(index_path)
start = time.perf_counter()
split = _fit.split_pairs(old.shape[0])
fitted = _fit.fit_upgrade(new, old, kind=kind, split=split, normalize=True)
phases["fit_s"] = time.perf_counter() - start
start = time.perf_counter()
report = _report.evaluate_upgrade(fitted.map, new, old, split.test, index=index, consumer_rows=split.train)
phases["report_s"] = time.perf_counter() - start
start = time.perf_counter()
_map.save_map(fitted.map, out, overwrite=True)
_atomic.write_atomic(out + ".report.json", _report.report_json(report).encode(), overwrite=True)
_atomic.write_atomic(out + ".report.md", _report.report_markdown(report).encode(), overwrite=True)
phases["write_s"] = time.perf_counter() - start
print(json.dumps(phases))
"""


def time_command(cfg: Config, scratch: Path) -> dict:
  """``bcjax fit`` end to end per kind, and its phases (module docstring)."""
  z_new, z_old = _pairs(cfg.command_pairs + cfg.command_index_rows, cfg.dim, cfg.old_dim, seed=5)
  paths = {name: scratch / f"command-{name}.npy" for name in ("new", "old", "index")}
  np.save(paths["new"], z_new[: cfg.command_pairs])
  np.save(paths["old"], z_old[: cfg.command_pairs])
  np.save(paths["index"], z_old)  # the paired items and the rest of the corpus
  cli = [sys.executable, "-m", "bcjax.cli", "--no-compile-cache", "fit", "--normalize"]
  cli += ["--old", str(paths["old"]), "--new", str(paths["new"]), "--index", str(paths["index"])]
  out: dict = {"pairs": cfg.command_pairs, "dim": cfg.dim, "old_dim": cfg.old_dim, "index_rows": len(z_old)}
  for kind in cfg.command_kinds:
    walls, phases = [], []
    for repeat in range(cfg.repeats):
      target = scratch / f"command-{kind}-{repeat}.bcmap"
      for path in scratch.glob(target.name + "*"):
        path.unlink()
      start = time.perf_counter()
      proc = subprocess.run([*cli, "--kind", kind, "--out", str(target)], capture_output=True, text=True)
      walls.append(time.perf_counter() - start)
      if proc.returncode not in (0, 3, 4, 5):  # a verdict of any kind: the command ran to its end
        raise RuntimeError(f"bcjax fit --kind {kind} failed ({proc.returncode}): {proc.stderr[-2000:]}")
      worker = [sys.executable, "-c", _PHASES, str(paths["old"]), str(paths["new"]), str(paths["index"])]
      done = subprocess.run([*worker, kind, str(scratch / "phases.bcmap")], capture_output=True, text=True, check=True)
      phases.append(json.loads(done.stdout.strip().splitlines()[-1]))
    out[kind] = {
      "command_median_s": statistics.median(walls),
      **{name: statistics.median(p[name] for p in phases) for name in phases[0]},
    }
    row = out[kind]
    print(
      f"bcjax fit --kind {kind}: {row['command_median_s']:.2f} s (imports {row['import_s']:.2f}, fit "
      f"{row['fit_s']:.2f}, report {row['report_s']:.2f}, write {row['write_s']:.2f})",
      file=sys.stderr,
    )
  return out


def _pairs(n: int, d_new: int, d_old: int, seed: int = 0):
  rng = np.random.default_rng(seed)
  z_new = (rng.standard_normal((n, d_new)) * np.geomspace(2.0, 0.2, d_new) + 1.0).astype(np.float32)
  q, _ = np.linalg.qr(rng.standard_normal((max(d_new, d_old), max(d_new, d_old))))
  z_old = (z_new @ q[:d_old, :d_new].T - 0.5 + 0.05 * rng.standard_normal((n, d_old))).astype(np.float32)
  return z_new, z_old


def time_fits(cfg: Config) -> dict:
  z_new, z_old = _pairs(cfg.pairs, cfg.dim, cfg.old_dim)
  out = {}
  for kind in ("orthogonal", "linear", "affine", "mlp"):
    start = time.perf_counter()
    fit = upgrade.fit_upgrade(z_new, z_old, kind=kind, mlp_epochs=cfg.mlp_epochs)
    out[kind] = {"seconds": time.perf_counter() - start, "choices": fit.map.choices}
    print(f"fit {kind}: {out[kind]['seconds']:.2f} s {fit.map.choices}", file=sys.stderr)
  return out


def _run_worker(mode: str, source: Path, target: Path, chunk_rows: int, map_file: Path) -> dict:
  target.unlink(missing_ok=True)
  proc = subprocess.run(
    [sys.executable, "-c", _WORKER, mode, str(source), str(target), str(chunk_rows), str(map_file)],
    capture_output=True,
    text=True,
    check=True,
  )
  return json.loads(proc.stdout.strip().splitlines()[-1])


def time_transforms(cfg: Config, scratch: Path) -> list[dict]:
  rows = []
  for width in cfg.widths:
    z_new, z_old = _pairs(4 * max(width, cfg.old_dim), width, cfg.old_dim, seed=1)
    m = upgrade.fit_upgrade(z_new, z_old, kind="linear").map
    map_file, npz = scratch / f"m{width}.bcmap", scratch / f"m{width}.npz"
    upgrade.save_map(m, map_file)
    w, b = upgrade.affine_form(m.transform, m.params)
    np.savez(npz, w=w, b=b)
    source = scratch / f"z{width}.npy"
    out = np.lib.format.open_memmap(source, mode="w+", dtype=np.float32, shape=(cfg.rows, width))
    rng = np.random.default_rng(2)
    for s in range(0, cfg.rows, cfg.chunk_rows):
      out[s : s + cfg.chunk_rows] = rng.standard_normal((min(cfg.chunk_rows, cfg.rows - s), width), np.float32)
    out.flush()
    del out
    runs = {"bcjax": [], "numpy": []}
    for _ in range(cfg.repeats):
      runs["bcjax"].append(_run_worker("bcjax", source, scratch / "out.npy", cfg.chunk_rows, map_file))
      runs["numpy"].append(_run_worker("numpy", source, scratch / "out.npy", cfg.chunk_rows, npz))
    row = {"rows": cfg.rows, "width": width, "old_width": cfg.old_dim, "input_bytes": source.stat().st_size}
    for name, rs in runs.items():
      row[name] = {
        "median_s": statistics.median(r["seconds"] for r in rs),
        "peak_rss_bytes": max(r["peak_rss_bytes"] for r in rs),
        "after_import_rss_bytes": max(r["after_import_rss_bytes"] for r in rs),
        "rows_per_s": cfg.rows / statistics.median(r["seconds"] for r in rs),
      }
    row["time_ratio"] = row["bcjax"]["median_s"] / row["numpy"]["median_s"]
    print(
      f"transform {cfg.rows} x {width}: bcjax {row['bcjax']['median_s']:.2f} s "
      f"({row['bcjax']['peak_rss_bytes'] / 2**20:.0f} MiB), numpy {row['numpy']['median_s']:.2f} s "
      f"({row['numpy']['peak_rss_bytes'] / 2**20:.0f} MiB)",
      file=sys.stderr,
    )
    rows.append(row)
    source.unlink()
  return rows


def time_query(cfg: Config) -> dict:
  z_new, z_old = _pairs(4 * max(cfg.dim, cfg.old_dim), cfg.dim, cfg.old_dim, seed=3)
  m = upgrade.fit_upgrade(z_new, z_old, kind="linear").map
  w, b = upgrade.affine_form(m.transform, m.params)
  w_t, b = np.ascontiguousarray(w.T.astype(np.float32)), b.astype(np.float32)
  query = z_new[:1]
  serve = upgrade.query_function(m)
  device_query = jax.device_put(query)
  start = time.perf_counter()
  jax.block_until_ready(serve(device_query))
  compile_s = time.perf_counter() - start
  jax.block_until_ready(upgrade.apply_map(m, query))
  timings = {"bcjax": [], "apply_map": [], "numpy": []}
  for _ in range(cfg.query_repeats):
    start = time.perf_counter()
    jax.block_until_ready(serve(device_query))
    timings["bcjax"].append(time.perf_counter() - start)
    start = time.perf_counter()
    jax.block_until_ready(upgrade.apply_map(m, query))
    timings["apply_map"].append(time.perf_counter() - start)
    start = time.perf_counter()
    _ = query @ w_t + b
    timings["numpy"].append(time.perf_counter() - start)
  return {"compile_s": compile_s, **{f"{name}_median_us": 1e6 * statistics.median(t) for name, t in timings.items()}}


def run(cfg: Config) -> dict:
  with tempfile.TemporaryDirectory(dir=os.environ.get("BCJAX_BENCH_SCRATCH")) as scratch:
    return {
      "command": time_command(cfg, Path(scratch)),
      "fit": time_fits(cfg),
      "transform": time_transforms(cfg, Path(scratch)),
      "query": time_query(cfg),
    }


def main(argv=None) -> int:
  return benchmark_main("upgrade", __doc__, Config, PRESETS, run, argv)


if __name__ == "__main__":
  sys.exit(main())
