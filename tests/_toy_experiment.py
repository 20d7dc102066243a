"""A small experiment on the harness for its own tests: three stages of NumPy work, a config with every kind of
option, data that can be made to fail. ``python -m tests._toy_experiment`` runs it."""

import dataclasses
import sys

import numpy as np

from experiments import harness
from experiments.harness import option


@dataclasses.dataclass(frozen=True)
class Config:
  steps: int = option(3, help="steps", low=1)
  rate: float = option(0.5, help="a rate", low=0.0, high=1.0, low_open=True)
  kinds: tuple[str, ...] = option(("a", "b"), help="kinds", choices=("a", "b", "c"))
  widths: tuple[int, ...] = option((), help="widths", low=1, nonempty=False)
  size: int | None = option(None, help="an optional size", low=1)
  loud: bool = option(False, help="a switch")
  seed: int = option(0, help="seed", low=0)


class Toy(harness.Experiment):
  name = "toy"
  description = "the harness's test experiment"
  config = Config
  presets = {"quick": Config(), "test": Config(steps=2)}

  def add_arguments(self, parser):
    parser.add_argument("--bad-data", action="store_true", help="make loading fail")
    parser.add_argument("--invalid-in", help="a stage whose computation gets an argument it refuses (ValueError)")
    parser.add_argument("--diverge-in", help="a stage whose training diverges (FloatingPointError)")

  def load(self, args, cfg):
    if args.bad_data:
      raise ValueError("toy data is damaged")
    return np.random.default_rng(cfg.seed).normal(size=(50, 4))

  def execute(self, run, args, cfg, data):
    sums = {}

    def compute(kind, step):
      if args.invalid_in == f"{kind}/{step}":
        raise ValueError(f"toy: `step` {step} is refused")
      if args.diverge_in == f"{kind}/{step}":
        raise FloatingPointError(f"toy: non-finite loss at step {step}")
      return {"value": float(np.sum(data ** (step + 1)) * cfg.rate) + len(kind)}

    for kind in cfg.kinds:
      for step in range(cfg.steps):
        sums[f"{kind}/{step}"] = run.stage(f"{kind}/{step}", lambda kind=kind, step=step: compute(kind, step))
        run.log(kind=kind, step=step, value=sums[f"{kind}/{step}"]["value"])
    total = run.stage("total", lambda: sum(v["value"] for v in sums.values()))
    return {"sums": sums, "total": total, "seconds": 0.0}

  def report(self, run, args, cfg, results):
    run.write_text("table.md", f"| total |\n|---|\n| {results['total']:.6f} |\n")
    return f"total {results['total']:.6f}"


EXPERIMENT = Toy()


def main(argv=None) -> int:
  return harness.main(EXPERIMENT, argv)


if __name__ == "__main__":
  sys.exit(main())
