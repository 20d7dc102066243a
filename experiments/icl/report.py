"""Aggregation and presentation of the ICL experiment: the results.json method blocks, the layout of the paper's
Tables 3–4 (speed-ups "time, epoch" per α with the average rank), the accuracy table (Figs. 2–3 as numbers), the
loss curves of Fig. 5 and the speed-up-vs-α plot of Fig. 4."""

from pathlib import Path

import numpy as np

from experiments import common
from experiments.icl.convergence import runs_for_precision

LABELS = {
  "retrain": "Retraining",
  "finetune": "Fine-tuning",
  "replay": "Replay",
  "distill": "Distillation",
  "icl": "ICL",
  "meta": "ICL w/o LRL",
  "lrl": "ICL w/o M",
  "nce2-only": "ICL w/o M+LRL",
}
TABLE_ORDER = ("finetune", "replay", "distill", "icl", "meta", "lrl", "nce2-only")


def summarise(runs: dict[str, list[dict]], rule: str = "target", margin: float = 1.0) -> dict:
  """Per method the means over independent runs of epochs, training and compile time and accuracies, and the
  speed-ups over retraining in time and in epochs (ratios of the means over the runs, which are paired: the same
  split and pre-trained encoder).

  ``rule="target"`` (the default) times each method to target quality, as MLPerf times training: the training
  seconds (and epochs) up to the first epoch whose probe accuracy reaches retraining's, at retraining's reported
  epoch, less ``margin`` points; retraining's own time is its first epoch at that target. ``rule="convergence"``
  is the paper's: the times of the reported (converged) epochs. Either way a method that diverged in any run
  (its loss rose after its best epoch and stayed up) has no speed-up, nor, under the target rule, one that did not
  reach the target in every run, nor any method when retraining's probe accuracy is no better than predicting the
  majority class. ``speedup_status`` says which: ``reached`` (or ``converged``), ``did not reach``, ``diverged`` or
  ``not measurable``.
  """
  out = {}
  for m, rs in runs.items():
    out[m] = {
      "epochs": float(np.mean([r["epochs"] for r in rs])),
      "train_seconds": float(np.mean([r["train_seconds"] for r in rs])),
      "compile_seconds": float(np.mean([r["compile_seconds"] for r in rs])),
      "accuracy": {s: float(np.mean([r["accuracy"][s] for r in rs])) for s in ("all", "old", "new")},
      "stopped": [r["stopped"] for r in rs],
      "runs": rs,
      "speedup_rule": rule,
    }
  base = out.get("retrain")
  if base is None:
    return out
  targets, unmeasurable = None, None
  if rule == "target":
    targets, unmeasurable = _targets(base["runs"], margin)
  for m, o in out.items():
    o["time_speedup"] = o["epoch_speedup"] = None
    if unmeasurable is not None:
      o["speedup_status"], o["speedup_note"] = "not measurable", unmeasurable
      continue
    if "diverged" in o["stopped"]:
      o["speedup_status"] = "diverged"
      continue
    if targets is None:
      times = [(r["train_seconds"], r["epochs"]) for r in o["runs"]]
      base_times = [(r["train_seconds"], r["epochs"]) for r in base["runs"]]
      o["speedup_status"] = "converged"
    else:
      reached = [_time_to(r, t) for r, t in zip(o["runs"], targets)]
      if any(t is None for t in reached):
        o["speedup_status"] = "did not reach"
        continue
      times = reached
      base_times = [_time_to(r, t) for r, t in zip(base["runs"], targets)]
      o["speedup_status"] = "reached"
      o["target_accuracy"] = float(np.mean(targets))
      o["time_to_target_seconds"] = float(np.mean([t for t, _ in times]))
      o["epochs_to_target"] = float(np.mean([e for _, e in times]))
    seconds, epochs = np.mean([t for t, _ in times]), np.mean([e for _, e in times])
    o["time_speedup"] = float(np.mean([t for t, _ in base_times]) / seconds) if seconds > 0 else None
    o["epoch_speedup"] = float(np.mean([e for _, e in base_times]) / epochs)
    o["time_speedups_by_run"] = [b[0] / t[0] if t[0] > 0 else None for b, t in zip(base_times, times)]
    o["time_speedup_runs_for_10pct"] = runs_for_precision(o["time_speedups_by_run"])
  return out


def _targets(retrain_runs: list[dict], margin: float) -> tuple[list[float] | None, str | None]:
  """Each run's target probe accuracy (retraining's at its reported epoch, less ``margin``), or why there is none."""
  targets = []
  for r in retrain_runs:
    quality = r.get("probe_by_epoch")
    if not quality:
      return None, "the runs have no per-epoch probe accuracy (saved before it existed): use --speedup convergence"
    reached = quality[r["epochs"] - 1]
    if reached <= r["probe_majority"]:
      return None, (
        f"retraining's probe accuracy, {reached:.2f} %, is no better than predicting the majority class "
        f"({r['probe_majority']:.2f} %): there is no quality to reach"
      )
    targets.append(reached - margin)
  return targets, None


def _time_to(record: dict, target: float) -> tuple[float, int] | None:
  """(training seconds, 1-based epoch) at the first epoch whose probe accuracy reaches ``target``; None if none."""
  for epoch, (accuracy, seconds) in enumerate(zip(record["probe_by_epoch"], record["seconds_by_epoch"]), 1):
    if accuracy >= target:
      return seconds, epoch
  return None


# An SVM this close (points) to the majority-class share predicts that class, up to the folds' rounding.
MAJORITY_TOLERANCE = 0.5


def uninformative_svm(methods: dict, majority: dict[str, float]) -> list[str]:
  """The subsets (all, old, new) on which every method's SVM accuracy is within ``MAJORITY_TOLERANCE`` of the
  majority-class share or below it: there the SVM predicts one class and its accuracies rank nothing."""
  return [
    s
    for s in ("all", "old", "new")
    if all(o["accuracy"][s] <= majority[s] + MAJORITY_TOLERANCE for o in methods.values())
  ]


def _ranks(values: list[float | None]) -> list[float | None]:
  """Rank 1 = the largest speed-up; ties share the mean rank."""
  present = [v for v in values if v is not None]
  return [
    None if v is None else 1 + sum(w > v for w in present) + (sum(w == v for w in present) - 1) / 2 for v in values
  ]


def speedup_table(by_alpha: dict[str, dict]) -> str:
  """Tables 3–4: "time×, epoch×" relative to retraining for every incremental method and α, and the average rank."""
  alphas = list(by_alpha)
  methods = [m for m in TABLE_ORDER if any(m in by_alpha[a] for a in alphas)]
  time_ranks, epoch_ranks = {m: [] for m in methods}, {m: [] for m in methods}
  for a in alphas:
    cells = [by_alpha[a].get(m, {}) for m in methods]
    for m, t, e in zip(
      methods, _ranks([c.get("time_speedup") for c in cells]), _ranks([c.get("epoch_speedup") for c in cells])
    ):
      time_ranks[m].append(t)
      epoch_ranks[m].append(e)
  rows = []
  for m in methods:
    cells = []
    for a in alphas:
      c = by_alpha[a].get(m)
      if c is None:
        cells.append("–")
      elif c["time_speedup"] is None:
        cells.append(c.get("speedup_status", "–"))
      else:
        cells.append(f"{c['time_speedup']:.1f}, {c['epoch_speedup']:.1f}")
    t = [r for r in time_ranks[m] if r is not None]
    e = [r for r in epoch_ranks[m] if r is not None]
    rows.append([LABELS[m], *cells, f"{np.mean(t):.1f}, {np.mean(e):.1f}" if t else "–"])
  return common.markdown_table(["method", *[f"α={a}" for a in alphas], "avg rank"], rows)


def detail_table(by_alpha: dict[str, dict]) -> str:
  """Absolute numbers: converged epoch, training and compile seconds (compiling, or reading a compiled step back from
  the persistent cache: see :mod:`experiments.harness`), SVM accuracy on all/old/new data, and the
  runs a ±10 % time speed-up estimate needs (from the runs' spread; – with one run)."""
  rows = []
  for a, methods in by_alpha.items():
    for m, c in methods.items():
      acc = c["accuracy"]
      needed = c.get("time_speedup_runs_for_10pct")
      rows.append(
        [
          a,
          LABELS.get(m, m),
          f"{c['epochs']:.1f}",
          f"{c['train_seconds']:.1f}",
          f"{c['compile_seconds']:.1f}",
          f"{acc['all']:.2f}",
          f"{acc['old']:.2f}",
          f"{acc['new']:.2f}",
          "–" if needed is None or m == "retrain" else str(needed),
        ]
      )
  return common.markdown_table(
    ["α", "method", "epoch", "train s", "compile / cache s", "acc all %", "acc old %", "acc new %", "runs for ±10 %"],
    rows,
  )


def tables(results: dict) -> str:
  by_alpha = {a: block["methods"] for a, block in results["alpha_sweep"].items()}
  pre = results["pretrained"]
  lines = [
    f"# ICL on {results['dataset']} (preset {results['preset']}, {results['runs']} run(s))",
    "",
    _speedup_caption(by_alpha),
    "",
    speedup_table(by_alpha),
    *_notes(results),
    "Converged epochs, times and SVM accuracies:",
    "",
    detail_table(by_alpha),
    "Pre-trained encoder (old data only), SVM accuracy all/old/new %: "
    + ", ".join(f"α={a}: {p['all']:.2f}/{p['old']:.2f}/{p['new']:.2f}" for a, p in pre.items()),
    "",
  ]
  return "\n".join(lines)


def _speedup_caption(by_alpha: dict[str, dict]) -> str:
  cells = [c for methods in by_alpha.values() for c in methods.values()]
  rule = cells[0].get("speedup_rule", "convergence") if cells else "convergence"
  what = (
    "time to target quality (the first epoch whose probe accuracy reaches retraining's, less the target margin)"
    if rule == "target"
    else "time to convergence (the paper's rule)"
  )
  return f"Speed-ups vs retraining (time, epoch) in {what}, the layout of the paper's Tables 3–4:"


def _notes(results: dict) -> list[str]:
  """What the tables cannot carry: speed-ups that are not measurable, and SVMs that predict the majority class."""
  lines = []
  for a, block in results["alpha_sweep"].items():
    notes = {c.get("speedup_note") for c in block["methods"].values()} - {None}
    lines += [f"α={a}: speed-ups not measurable: {n}." for n in sorted(notes)]
    majority = results["pretrained"].get(a, {}).get("majority")
    for s in block.get("svm_uninformative", []):
      lines.append(
        f"α={a}: the SVM on {s} data is uninformative: every method scores the majority-class share "
        f"({majority[s]:.2f} %) or less, so those accuracies do not rank the methods."
      )
  return ["", *lines, ""] if lines else []


def figure_5(path: Path, losses: dict[str, list[float]], title: str) -> None:
  """Average loss per epoch of every method (the paper's Fig. 5 shows NCE-I + Adam = retraining, NCE-II + Adam =
  ICL w/o M+LRL and NCE-II + LRL = ICL w/o M)."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(6.5, 4))
  for m, curve in losses.items():
    bold = m in ("retrain", "nce2-only", "lrl")
    ax.plot(
      np.arange(1, len(curve) + 1), curve, label=LABELS.get(m, m), lw=2.0 if bold else 1.0, alpha=1.0 if bold else 0.6
    )
  ax.set_xlabel("epoch")
  ax.set_ylabel("average loss")
  ax.set_title(title)
  ax.legend(fontsize=8)
  fig.tight_layout()
  common.save_figure(fig, path)


def figure_4(path: Path, by_alpha: dict[str, dict], title: str) -> None:
  """Speed-up vs α (time and epochs) of ICL, with the other incremental methods for comparison."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  alphas = sorted(by_alpha, key=float)
  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for ax, key, name in zip(axes, ("time_speedup", "epoch_speedup"), ("time", "epochs")):
    for m in TABLE_ORDER:
      points = [(float(a), by_alpha[a][m][key]) for a in alphas if m in by_alpha[a] and by_alpha[a][m][key] is not None]
      if points:
        x, y = zip(*points)
        ax.plot(x, y, marker="o", label=LABELS[m], lw=2.5 if m == "icl" else 1.0)
    ax.axhline(1.0, color="grey", ls=":")
    ax.set_xlabel("growth ratio α")
    ax.set_ylabel(f"speed-up vs retraining ({name})")
  axes[0].legend(fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  common.save_figure(fig, path)
