r"""Seconds per training epoch of every ICL method (issue 17's targets: ICL ≤ 1.5× retraining, ICL w/o M+LRL
≤ 1.2×), with each method's fused steps (one dispatch per batch, one host synchronisation per epoch).

Every method runs from the same pre-trained encoder for ``--epochs`` + 1 epochs at growth ratio ``--alpha``; its
first epoch (compilation and warm-up) is dropped, and the median of the others' training time (the experiment's own
clock: wall time minus the dispatches that compiled) is reported, with each method's ratio to retraining's.

  python -m benchmarks.icl_epoch --out runs/icl_epoch.json [--quick] [--dataset proteins --data-dir DIR]
"""

import dataclasses
import statistics

import jax
import numpy as np

from bcjax.data import growth_split
from benchmarks.timing import benchmark_main
from experiments.harness import UsageError, option
from experiments.icl.configs import METHODS
from experiments.icl.configs import PRESETS as ICL_PRESETS
from experiments.icl.datasets import DATASETS, known_dataset, load_dataset
from experiments.icl.methods import Context, pretrain, train_method
from experiments.icl.train import split_encoder


@dataclasses.dataclass(frozen=True)
class Config:
  datasets: tuple[str, ...] = option(
    ("synthetic-graphs", "digits-2"), help=f"datasets (of {DATASETS}); proteins needs --data-dir"
  )
  data_dir: str | None = option(None, help="folder holding the TU datasets (PROTEINS)")
  alpha: float = option(0.3, help="growth ratio", low=0.0, high=1.0, low_open=True, high_open=True)
  epochs: int = option(5, help="timed epochs per method (after one untimed)", low=1)
  methods: tuple[str, ...] = option(METHODS, choices=METHODS, help="methods (retrain always runs)")


PRESETS = {
  "full": Config(),
  "quick": Config(datasets=("synthetic-graphs",), epochs=1, methods=("retrain", "nce2-only", "icl")),
}


def check(cfg: Config) -> None:
  for name in cfg.datasets:
    if not known_dataset(name):
      raise UsageError("--datasets", f"unknown dataset {name!r}; choose from {DATASETS}")


def epoch_seconds(data, cfg: Config, name: str) -> dict:
  settings = dataclasses.replace(
    ICL_PRESETS["quick"], alpha=cfg.alpha, max_epochs=cfg.epochs + 1, patience=cfg.epochs + 2
  )
  old, new = growth_split(data.num, cfg.alpha, np.random.default_rng(0))
  ctx = Context(data, old, new, cfg.alpha, settings)
  fresh = split_encoder(data.new_model(settings, jax.random.key(0)))
  pre, loss0 = pretrain(ctx._replace(cfg=dataclasses.replace(settings, max_epochs=2)), fresh, jax.random.key(1), 1)
  rows = {}
  for i, method in enumerate(m for m in METHODS if m in set(cfg.methods) | {"retrain"}):
    clock = []
    run = train_method(
      method,
      ctx,
      pre.encoder,
      fresh,
      loss0,
      jax.random.key(2 + i),
      2 + i,
      log=lambda clock=clock, **r: clock.append(r["train_seconds"]),
    )
    per_epoch = np.diff([0.0] + clock)[1:]  # the first epoch is dropped
    rows[method] = {
      "median_s": float(statistics.median(per_epoch)),
      "min_s": float(np.min(per_epoch)),
      "epochs": len(per_epoch),
      "compile_s": run.compile_seconds,
    }
    print(f"{name} {method}: {rows[method]['median_s']:.3f} s per epoch (compile {run.compile_seconds:.1f} s)")
  base = rows["retrain"]["median_s"]
  for row in rows.values():
    row["over_retrain"] = row["median_s"] / base
  return {"graphs_or_images": data.num, "old": len(old), "new": len(new), "methods": rows}


def measure(cfg: Config) -> dict:
  return {"datasets": {name: epoch_seconds(load_dataset(name, cfg.data_dir), cfg, name) for name in cfg.datasets}}


def main(argv=None) -> int:
  return benchmark_main("icl_epoch", __doc__.split("\n\n")[0], Config, PRESETS, measure, argv, check)


if __name__ == "__main__":
  raise SystemExit(main())
