"""``--dry-run``: how long a run would take on this machine, from the runs kept in the repository.

Each experiment's work is counted in units its cost grows with (training steps × methods, epochs × methods ×
growth ratios × runs, ...; :func:`work`). The seconds per unit are read off the archived runs of the same experiment
and data set (``docs/reproduction/runs/``: each run's wall time is in its ``metrics.jsonl``) on this CPU model where
there are some, and the estimate says how many runs it rests on and how far a leave-one-out prediction of those runs
was off. Where the work is not known in advance (a run that stops on convergence) the estimate is a range, from the
fewest epochs the stopping rule allows to its cap.
"""

import gzip
import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

ARCHIVE = Path(__file__).resolve().parents[2] / "docs" / "reproduction" / "runs"


class Estimate(NamedTuple):
  """A wall-time range in seconds (None when nothing to go on) and what it rests on."""

  low: float | None
  high: float | None
  basis: str

  def text(self) -> str:
    if self.low is None or self.high is None:
      return f"no estimate: {self.basis}"
    span = _duration(self.low) if self.high <= 1.05 * self.low else f"{_duration(self.low)} to {_duration(self.high)}"
    return f"about {span} ({self.basis})"


def _duration(seconds: float) -> str:
  if seconds < 90:
    return f"{seconds:.0f} s"
  if seconds < 5400:
    return f"{seconds / 60:.0f} min"
  return f"{seconds / 3600:.1f} h"


def _icl_epochs(cfg: Mapping) -> tuple[float, float]:
  """The fewest and most epochs one ICL method can run under the config's stopping rule."""
  fewest = cfg["patience"] + 1
  if cfg.get("convergence", "smoothed") == "smoothed":
    fewest = max(fewest, cfg.get("min_epochs", 1))
  return float(min(fewest, cfg["max_epochs"])), float(cfg["max_epochs"])


def work(experiment: str, cfg: Mapping, metrics: list[dict] | None = None) -> tuple[float, float] | None:
  """The work of a run in its experiment's units, as a (fewest, most) range; exact for a finished run's ``metrics``.

  Args:
    experiment: the experiment's name.
    cfg: its config (``config.json``'s ``config``).
    metrics: a finished run's ``metrics.jsonl`` records (for the work actually done where it is not fixed).

  Returns:
    (low, high) units, or None for an experiment without a cost model.
  """
  if experiment == "gramian_training":
    units = float(cfg["steps"]) * (len(cfg.get("methods") or ()) or 1)
    return units, units
  if experiment == "gramian_scaling":  # per seed, method and corpus size; a larger corpus costs more per step
    units = float(cfg["steps"]) * len(cfg["methods"]) * cfg.get("seeds", 1) * sum(cfg["sizes"]) / 10_000
    return units, units
  if experiment == "gramian_estimation":
    units = float(cfg["steps"]) * len(cfg.get("batch_sizes") or (1,))
    return units, units
  if experiment == "bc_aligner":
    units = float(cfg["epochs"]) * (9 + len(cfg.get("lambda_sweep") or ()))
    return units, units
  if experiment == "icl":
    if metrics is not None:  # every method-epoch the run logged, pre-training included
      done = sum(1 for m in metrics if "epoch" in m and "method" in m)
      return float(done), float(done)
    methods = len(cfg.get("methods") or ()) + 1  # + pre-training
    alphas = 1 + len(cfg.get("alpha_sweep") or ())
    low, high = _icl_epochs(cfg)
    scale = methods * alphas * cfg.get("runs", 1)
    return scale * low, scale * high
  if experiment in ("conceptors_sts", "embedding_upgrade"):
    return 1.0, 1.0
  return None


# The config fields each cost model accounts for; an archived run that differs from the request in any other field
# (a model width, a corpus size, a learning rate that changes how long convergence takes is kept: it is in the range)
# measures another cost and is not used.
WORK_FIELDS = {
  "gramian_training": {"steps", "methods", "eval_every", "alpha", "penalty_batch_size", "seed"},
  "gramian_scaling": {"steps", "methods", "seeds", "sizes", "eval_every", "alpha"},
  "gramian_estimation": {"steps", "batch_sizes", "seed"},
  "bc_aligner": {"epochs", "lambda_sweep", "seed", "finetune_epochs", "posthoc_epochs", "eval_every"},
  "icl": {
    "methods",
    "alpha",
    "alpha_sweep",
    "runs",
    "patience",
    "max_epochs",
    "min_epochs",
    "convergence",
    "learning_rate",
    "speedup",
    "heldout",  # a tenth of the samples held out: a little less to train on, scored outside the timed loop
    "seed",
  },
  "conceptors_sts": {"alpha", "alpha_rule", "seed"},
  "embedding_upgrade": {"seed"},
}


def _differs(experiment: str, a: Mapping, b: Mapping) -> list[str]:
  free = WORK_FIELDS.get(experiment, set())
  a, b = json.loads(json.dumps(a)), json.loads(json.dumps(b))  # tuples and lists alike, as config.json stores them
  return sorted(k for k in set(a) | set(b) if k not in free and a.get(k) != b.get(k))


def _archived(archive: Path) -> list[tuple[dict, list[dict]]]:
  out = []
  if not archive.is_dir():
    return out
  for config_file in sorted(archive.glob("*/*/config.json.gz")):
    metrics_file = config_file.with_name("metrics.jsonl.gz")
    if not metrics_file.is_file():
      continue
    config = json.loads(gzip.decompress(config_file.read_bytes()))
    metrics = [json.loads(x) for x in gzip.decompress(metrics_file.read_bytes()).decode().splitlines() if x.strip()]
    out.append((config, metrics))
  return out


def _wall(metrics: list[dict]) -> float | None:
  finished = [m for m in metrics if m.get("event") == "finished"]
  return (finished[-1].get("load") or {}).get("wall_seconds") if finished else None


def estimate(experiment: str, dataset: str | None, cfg: Mapping, cpu: str, archive: Path = ARCHIVE) -> Estimate:
  """The wall time of a run of ``experiment`` on ``dataset`` with config ``cfg`` on a CPU named ``cpu``.

  Returns:
    The range from the median seconds per unit of the archived runs of the same experiment and data set (those on
    this CPU model where any), with the leave-one-out error of that median over them.
  """
  wanted = work(experiment, cfg)
  if wanted is None:
    return Estimate(None, None, f"no cost model for the {experiment} experiment")
  rates, unlike = [], set()
  for config, metrics in _archived(archive):
    if config.get("experiment") != experiment or config.get("dataset") != dataset:
      continue
    differs = _differs(experiment, cfg, config["config"])
    if differs:
      unlike.update(differs)
      continue
    wall, done = _wall(metrics), work(experiment, config["config"], metrics)
    if wall is None or done is None or done[0] <= 0:
      continue
    model = (config.get("provenance") or {}).get("cpu", {}).get("model")
    rates.append((wall / done[0], model))
  if not rates:
    why = f" (the archived ones differ in {', '.join(sorted(unlike))})" if unlike else ""
    return Estimate(
      None,
      None,
      f"no archived {experiment} run on {dataset or 'its default data'} at these model and "
      f"data settings to measure from{why}",
    )
  same = [r for r, model in rates if model == cpu]
  used, where = (same, f"on this CPU ({cpu})") if same else ([r for r, _ in rates], "on other CPUs")
  rate = statistics.median(used)
  errors = (
    [abs(statistics.median(used[:i] + used[i + 1 :]) / r - 1.0) for i, r in enumerate(used)] if len(used) > 1 else []
  )
  off = f"; leave-one-out error up to {max(errors):.0%}" if errors else "; one run, so no error estimate"
  basis = f"{rate:.3g} s per unit from {len(used)} archived run(s) {where}{off}"
  return Estimate(wanted[0] * rate, wanted[1] * rate, basis)
