"""Finished BC-Aligner runs that differ only in their seed, side by side: does the trade-off hold on every seed?

  python -m experiments.bc_aligner --preset quick --seed 1 --out runs/s1      # ... one run per seed, then
  python -m experiments.bc_aligner.seeds runs/s1 runs/s2 runs/s3 [--out seeds.md]

Each run's ``config.json`` and ``results.json`` are read; the runs must share the dataset, its files and every setting
but ``seed`` (otherwise the error names the first setting that differs), and their seeds must differ. The report:

* per method, the combined, intended and unintended degradation (%) as mean ± sample std over the runs, on how
  many runs it has the best combined degradation of the backward-compatible methods, and BC-Aligner's paired lead
  over it (its combined degradation minus the method's, run by run: seeds share the data and M_0, so the paired
  difference is the comparison, not the two means);
* BC-Aligner's paired lead over each backward-compatible method by component: combined, intended and unintended
  degradation, and the consumers' negative-flip rate (lower is better, so the lead is the method's rate minus
  BC-Aligner's), each as the mean over runs with its 95 % t-interval over seeds and the number of runs on which
  BC-Aligner is ahead. A method's lead can hold on one component and drown in another's spread: the multi-step
  loss acts on the unintended side, and the intended side carries the val users' noise;
* per run, the demo's trade-off (issue 15): Keep-All ≥ Finetune-M0 on intended Recall@50, the backward-compatible
  method with the best combined degradation, its lead over the next one with that lead's 95 % interval over redrawn
  val users (runs that stored one), and BC-Aligner's intended cost; then one line saying on how many runs each
  holds.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from experiments import common
from experiments.bc_aligner.configs import METHODS
from experiments.bc_aligner.report import BACKWARD_COMPATIBLE, rank_backward_compatible, same_models
from experiments.compare import MIN_UNITS, no_interval

DEGRADATIONS = ("combined", "intended", "unintended")


class FinishedRun:
  """One finished run: where it is, its stored command settings and its results."""

  def __init__(self, path: Path):
    self.path = path
    for name in ("config.json", "results.json"):
      if not (path / name).is_file():
        hint = (
          " (not finished: `python -m experiments.bc_aligner --resume DIR` finishes it)"
          if name == "results.json" and (path / "config.json").is_file()
          else ""
        )
        raise ValueError(f"run {path}: no {name}{hint}")
    self.config = json.loads((path / "config.json").read_text())
    self.results = json.loads((path / "results.json").read_text())
    if self.config.get("experiment") != "bc_aligner":
      raise ValueError(f"run {path}: not a bc_aligner run (experiment {self.config.get('experiment')!r})")
    for side in ("unintended", "intended"):
      reason = self.results.get(f"{side}_not_measurable")
      if reason:
        raise ValueError(
          f"run {path}: its {side} side is not measurable on this data ({reason}), so its combined "
          f"degradations cannot be compared across seeds"
        )

  @property
  def seed(self) -> int:
    return self.config["config"]["seed"]

  def protocol(self) -> dict:
    """Everything that must match across seeds: the stored settings without the seed, the command line and where
    the run came from (its start time, machine and commit: the summaries record those per run)."""
    settings = {k: v for k, v in self.config.items() if k not in ("argv", "config", "provenance")}
    settings.update({f"config.{k}": v for k, v in self.config["config"].items() if k != "seed"})
    return settings


def check_same_protocol(runs: list[FinishedRun]) -> None:
  """Raises ValueError naming the first setting on which a run differs from the first run, or a repeated seed."""
  first = runs[0].protocol()
  for run in runs[1:]:
    other = run.protocol()
    for key in sorted(set(first) | set(other)):
      if first.get(key) != other.get(key):
        raise ValueError(
          f"runs {runs[0].path} and {run.path} differ in {key}: {first.get(key)!r} vs "
          f"{other.get(key)!r}; only the seed may differ"
        )
  seeds = [run.seed for run in runs]
  repeated = sorted({s for s in seeds if seeds.count(s) > 1})
  if repeated:
    raise ValueError(
      f"seed {repeated[0]} appears in more than one run ({[str(r.path) for r in runs]}); give each seed once"
    )


def trade_off(results: dict) -> dict:
  """The demo's criteria on one run's results."""
  methods = results["methods"]
  ranked = rank_backward_compatible(results)
  finetune = methods.get("finetune-m0", {}).get("intended_degradation_pct")
  bc = methods.get("bc-aligner", {})
  return {
    "keep_all_at_least_finetune": None if finetune is None else finetune <= 0.0,
    "best": ranked[0] if ranked else None,
    "bc_aligner_intended_pct": bc.get("intended_degradation_pct"),
    "gap": results.get("gap") if ranked and results.get("gap", {}).get("best") == ranked[0] else None,
  }


def _gap_cell(gap: dict | None) -> str:
  if gap is None:
    return "n/a"
  if same_models(gap):
    return f"{gap['gap_pct']:.2f} over {gap['next']} (same models: consumers only)"
  low, high = gap["ci95"]
  return f"{gap['gap_pct']:.2f} over {gap['next']} [{low:+.2f}, {high:+.2f}]"


def _mean_std(values: list[float]) -> str:
  if not values:
    return "n/a"
  if len(values) == 1:  # one run has no spread, not a spread of 0
    return f"{values[0]:+.2f} (1 run)"
  return f"{np.mean(values):+.2f} ± {float(np.std(values, ddof=1)):.2f}"


def _paired(results: list[dict], a: str, b: str, key: str = "combined_degradation_pct") -> list[float]:
  """Run-by-run ``key`` of ``a`` minus ``b`` (runs where both have one)."""
  pairs = [(r["methods"].get(a, {}).get(key), r["methods"].get(b, {}).get(key)) for r in results]
  return [x - y for x, y in pairs if x is not None and y is not None]


def _lead_cell(leads: list[float]) -> str:
  """Mean lead, its 95 % t-interval over runs, and on how many runs it is positive; with fewer than three runs the
  mean and ``no interval: 2 runs; 3 give one``."""
  if not leads:
    return "n/a"
  if len(leads) < MIN_UNITS:
    return f"{np.mean(leads):+.2f} ({no_interval(len(leads))}) ({sum(v > 0 for v in leads)} / {len(leads)})"
  mean, half = (
    float(np.mean(leads)),
    float(stats.t.ppf(0.975, len(leads) - 1) * np.std(leads, ddof=1) / np.sqrt(len(leads))),
  )
  return f"{mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}] ({sum(v > 0 for v in leads)} / {len(leads)})"


def lead_table(results: list[dict]) -> str:
  """BC-Aligner's paired lead over each backward-compatible method, by component (module docstring)."""
  rows = []
  for m in BACKWARD_COMPATIBLE:
    if m == "bc-aligner" or not all(m in r["methods"] for r in results):
      continue
    rows.append(
      [
        m,
        *(_lead_cell(_paired(results, "bc-aligner", m, f"{kind}_degradation_pct")) for kind in DEGRADATIONS),
        _lead_cell(_paired(results, m, "bc-aligner", "negative_flip_pct")),
      ]
    )
  head = (
    "BC-Aligner's lead over each backward-compatible method, run by run, by component (positive: BC-Aligner "
    f"ahead): mean [95 % t-interval over seeds; {MIN_UNITS} seeds give one] (runs ahead / runs).\n\n"
  )
  return head + common.markdown_table(
    ["method", "combined (points)", "intended (points)", "unintended (points)", "negative flips (points)"], rows
  )


def report(runs: list[FinishedRun]) -> str:
  """The markdown report (module docstring)."""
  results = [r.results for r in runs]
  seeds = ", ".join(str(r.seed) for r in runs)
  first = runs[0].config
  checks = [trade_off(r) for r in results]
  rows = []
  for m in METHODS:
    if not all(m in r["methods"] for r in results):
      continue
    cells = []
    for kind in DEGRADATIONS:
      values = [r["methods"][m][f"{kind}_degradation_pct"] for r in results]
      cells.append(_mean_std([v for v in values if v is not None]))
    if m in BACKWARD_COMPATIBLE:
      best = f"{sum(c['best'] == m for c in checks)} / {len(runs)}"
      ahead = _mean_std(_paired(results, "bc-aligner", m)) if m != "bc-aligner" else "—"
    else:
      best = ahead = "—"
    rows.append([m, *cells, best, ahead])
  head = (
    f"Dataset {first['dataset']}, preset {first['preset']}, seeds {seeds}: degradation (%) relative to "
    f"Keep-All, mean ± std over {len(runs)} runs; best = runs on which the method has the best combined "
    "degradation of the backward-compatible methods; BC-Aligner ahead = its combined degradation minus the "
    "method's, run by run (positive: BC-Aligner degrades less).\n\n"
  )
  table = common.markdown_table(
    ["method", "combined degr. %", "intended degr. %", "unintended degr. %", "best", "BC-Aligner ahead (points)"], rows
  )
  per_run = []
  for run, c in zip(runs, checks):
    bc = c["bc_aligner_intended_pct"]
    per_run.append(
      [
        str(run.seed),
        "n/a" if c["keep_all_at_least_finetune"] is None else ("yes" if c["keep_all_at_least_finetune"] else "no"),
        c["best"] or "n/a",
        _gap_cell(c["gap"]),
        "n/a" if bc is None else f"{bc:+.2f}",
      ]
    )
  per_run_table = common.markdown_table(
    [
      "seed",
      "Keep-All ≥ Finetune-M0 (intended)",
      "best backward-compatible",
      "its lead (points, 95 % over val users)",
      "BC-Aligner intended %",
    ],
    per_run,
  )
  measured = [c["keep_all_at_least_finetune"] for c in checks if c["keep_all_at_least_finetune"] is not None]
  finetune = (
    f"Keep-All ≥ Finetune-M0 on {sum(measured)} of {len(measured)} seeds" if measured else "Finetune-M0 not run"
  )
  wins = sum(c["best"] == "bc-aligner" for c in checks)
  summary = f"{finetune}; BC-Aligner has the best combined degradation on {wins} of {len(runs)}"
  gaps = [c["gap"] for c in checks if c["gap"] is not None and not same_models(c["gap"])]
  if gaps:
    beyond = sum(g["ci95"][0] > 0 for g in gaps)
    summary += (
      f"; the best method's lead is beyond the val users' sampling noise on {beyond} of the {len(gaps)} "
      "runs that measured it"
    )
  summary += "."
  sections = [head + table]
  if all("bc-aligner" in r["methods"] for r in results):
    sections.append(lead_table(results))
  return "\n".join([*sections, per_run_table, summary + "\n"])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.bc_aligner.seeds", description=__doc__.split("\n\n")[0])
  parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="finished run directories of one protocol")
  parser.add_argument("--out", metavar="FILE", help="also write the report here (never over an existing file)")
  args = parser.parse_args(argv)
  if len(args.runs) < 2:
    parser.error(f"RUN_DIR: give at least two runs to compare seeds, got {len(args.runs)}")
  if args.out is not None and Path(args.out).exists():
    parser.error(f"--out {args.out} exists; choose a new file so the earlier report is kept")
  try:
    runs = [FinishedRun(Path(p)) for p in args.runs]
    check_same_protocol(runs)
  except (ValueError, json.JSONDecodeError) as e:
    parser.error(str(e))
  text = report(runs)
  print(text, end="")
  if args.out is not None:
    common.write_text(Path(args.out), text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
