r"""``fit_upgrade``'s time on an idle machine and beside CPU-bound processes, with BLAS threads sized to the idle
cores (bcjax's default) against one thread per core (NumPy's own default, what bcjax did before issue 67).

NumPy's OpenBLAS threads spin while they wait for each other, so one that loses its core to another process holds
the rest up: more BLAS threads than idle cores turns a few seconds into tens. For each number of pairs and each
load (``--busy`` processes running ``while True: pass`` beside the fits), the benchmark times ``fit_upgrade`` (kind
``auto``, hubness ``auto``, normalised, as ``bcjax fit`` runs it) with ``threads=None`` and with
``threads=os.cpu_count()``: the median of ``repeats`` fits after one untimed warm-up fit (its compiles apart,
reported as ``first_s``).

Pairs come from two synthetic models of the same items (a different linear view of shared latent factors each,
plus noise), ``dim`` wide.

  python -m benchmarks.upgrade_fit_load --out runs/fit_load.json [--quick]
"""

import dataclasses
import functools
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bcjax import upgrade
from bcjax._threads import idle_threads
from benchmarks.timing import benchmark_main
from experiments.harness import option


@dataclasses.dataclass(frozen=True)
class Config:
  pairs: tuple[int, ...] = option((200, 1000, 4000), help="paired items per fit", low=20)
  dim: int = option(384, help="embedding width of both models", low=2)
  busy: tuple[int, ...] = option((0, 2), help="CPU-bound processes beside the fits, per load", low=0, nonempty=True)
  repeats: int = option(3, help="timed fits per setting (median reported)", low=1)
  seed: int = option(0, help="seeds the synthetic models", low=0)


PRESETS = {
  "full": Config(),
  "quick": Config(pairs=(100,), dim=16, busy=(0, 1), repeats=1),
}


def _pairs(cfg: Config, n: int) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(cfg.seed)
  latent = rng.standard_normal((n, max(2, cfg.dim // 2)))
  old = np.tanh(latent @ rng.standard_normal((latent.shape[1], cfg.dim)) / 3)
  new = latent @ rng.standard_normal((latent.shape[1], cfg.dim)) + 0.5 * rng.standard_normal((n, cfg.dim))
  return new.astype(np.float32), old.astype(np.float32)


def _timed(fit, repeats: int) -> dict:
  start = time.perf_counter()
  fit()  # warm-up: compiles, caches
  first = time.perf_counter() - start
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    fit()
    seconds.append(time.perf_counter() - start)
  return {"first_s": first, "median_s": statistics.median(seconds), "repeats": repeats}


def run(cfg: Config) -> dict:
  cores = os.cpu_count() or 1
  rows = []
  for busy in cfg.busy:
    loads = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
      time.sleep(1.0 if busy else 0.0)  # let the busy processes take their cores
      chosen = idle_threads()
      for count in cfg.pairs:
        new, old = _pairs(cfg, count)
        row: dict = {"pairs": count, "busy": busy, "threads_chosen": chosen}
        for name, threads in (("idle cores (bcjax)", None), ("one per core", cores)):
          fit = functools.partial(
            upgrade.fit_upgrade, new, old, kind="auto", normalize=True, hubness="auto", threads=threads
          )
          row[name] = _timed(fit, cfg.repeats)
        ratio = row["one per core"]["median_s"] / row["idle cores (bcjax)"]["median_s"]
        row["one_per_core_over_bcjax"] = ratio
        print(
          f"{count} pairs beside {busy} busy: bcjax ({chosen} threads) {row['idle cores (bcjax)']['median_s']:.2f} s, "
          f"one per core ({cores}) {row['one per core']['median_s']:.2f} s ({ratio:.1f}x)",
          file=sys.stderr,
        )
        rows.append(row)
    finally:
      for p in loads:
        p.kill()
        p.wait()
  return {"cores": cores, "dim": cfg.dim, "rows": rows}


def main(argv=None) -> int:
  return benchmark_main("upgrade_fit_load", __doc__, Config, PRESETS, run, argv)


if __name__ == "__main__":
  sys.exit(main())
