"""Aggregation and presentation of the ICL experiment: the results.json method blocks, the layout of the paper's
Tables 3–4 (speed-ups "time, epoch" per α with the average rank), the accuracy table (Figs. 2–3 as numbers), the
loss curves of Fig. 5 and the speed-up-vs-α plot of Fig. 4."""

from pathlib import Path

import jax
import numpy as np

from experiments import common
from experiments.compare import MIN_UNITS, ratio_of_means, tied_ranks
from experiments.icl.convergence import runs_for_precision
from experiments.icl.target import Target, TargetRule, calibrate, judged_too_late, lost, reach

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


_DEFAULT_TARGET = TargetRule()


def summarise(
  runs: dict[str, list[dict]],
  rule: str = "target",
  target: TargetRule = _DEFAULT_TARGET,
  key: jax.Array | None = None,
  pretrained_probe: list[float] | None = None,
) -> dict:
  """Per method the means over independent runs of epochs, training and compile time and accuracies, and the
  speed-ups over retraining in time and in epochs: ratios of the means over the runs (which are paired: the same
  split and pre-trained encoder), each with its delta-method t-interval over the runs
  (:func:`experiments.compare.ratio_of_means`; none, and no order, with fewer than three runs).

  ``rule="target"`` (the default) times each method to target quality (:mod:`experiments.icl.target`): the first
  epoch from which its smoothed probe accuracy stays at or above the target calibrated on retraining's plateau and
  the probe's measured noise; retraining is timed the same way. ``rule="convergence"`` is the paper's: the times of
  the reported (converged) epochs. Each run's loss curve has a status (:func:`~experiments.icl.convergence.
  curve_status`). Every speed-up is ``not measurable`` (``speedup_note`` says why) when retraining's loss diverged
  or did not improve, when it never plateaued (stopped at the epoch cap) or, under the target rule, when its
  plateau is too short or no better than the majority class, or when its smoothed probe already meets the target at
  the first epoch the rule judges (:func:`~experiments.icl.target.judged_too_late`; the note then gives the
  pre-trained encoder's probe accuracy, the mean of ``pretrained_probe`` over the runs, where the run has it).
  Otherwise a method whose loss diverged or did not improve has none (``diverged``, ``did not improve``), under
  either rule, and under the target rule nor one that did not reach the target in every run (``did not reach``) or
  lost it again before the end of training in some run (``did not hold``; ``target_by_run`` gives each run's reach
  and the epoch it was lost). ``speedup_status`` is ``reached`` (or ``converged``) for the rest, and only they (and
  those that did not reach) have ``reached_by_run``; ``time_order`` and ``epoch_order`` give, for each other method
  with a speed-up, +1 / -1 where the runs resolve it faster / slower and 0 for a tie (always, with fewer than three
  runs). ``key`` is accepted for callers that pass one; the intervals need no randomness.
  """
  del key  # the t-intervals are closed forms
  out = {}
  for m, rs in runs.items():
    out[m] = {
      "epochs": float(np.mean([r["epochs"] for r in rs])),
      "train_seconds": float(np.mean([r["train_seconds"] for r in rs])),
      "compile_seconds": float(np.mean([r["compile_seconds"] for r in rs])),
      "accuracy": {s: float(np.mean([r["accuracy"][s] for r in rs])) for s in ("all", "old", "new")},
      "stopped": [r["stopped"] for r in rs],
      "loss_status": [loss_status(r) for r in rs],
      "runs": rs,
      "speedup_rule": rule,
    }
  base = out.get("retrain")
  if base is None:
    return out
  targets, unmeasurable = _baseline(base, rule, target, pretrained_probe)
  timed = {}
  for m, o in out.items():
    o["time_speedup"] = o["epoch_speedup"] = None
    if unmeasurable is not None:
      o["speedup_status"], o["speedup_note"] = "not measurable", unmeasurable
      continue
    if targets is not None:
      o["target_accuracy"] = float(np.mean([t.accuracy for t in targets]))
    if "diverged" in o["loss_status"]:
      o["speedup_status"] = "diverged"
      continue
    if targets is None:
      if "did not improve" in o["loss_status"]:
        o["speedup_status"] = "did not improve"
        continue
      times = [(r["train_seconds"], r["epochs"]) for r in o["runs"]]
      o["speedup_status"] = "converged"
    else:
      reached = [reach(r, t.accuracy, target) for r, t in zip(o["runs"], targets)]
      o["target_by_run"] = [
        {"reached": at, "lost_epoch": None if at is None else lost(r, t.accuracy, target, at[1])}
        for r, t, at in zip(o["runs"], targets, reached)
      ]
      if any(t is None for t in reached):
        o["reached_by_run"] = reached
        o["speedup_status"] = "did not reach"
        continue
      o["time_to_target_seconds"] = float(np.mean([t for t, _ in reached]))
      o["epochs_to_target"] = float(np.mean([e for _, e in reached]))
      if "did not improve" in o["loss_status"]:
        o["speedup_status"] = "did not improve"
        continue
      if any(r["lost_epoch"] is not None for r in o["target_by_run"]):
        o["speedup_status"] = "did not hold"
        continue
      o["reached_by_run"] = times = reached
      o["speedup_status"] = "reached"
    timed[m] = times
  base_times = timed.get("retrain")
  if base_times is None:  # retraining reached its own target and lost it again (or its loss did not improve)
    for m in timed:
      out[m]["speedup_status"] = "not measurable"
      out[m]["speedup_note"] = f"retraining has no time to its own target ({out['retrain']['speedup_status']})"
    return out
  for m, times in timed.items():
    o = out[m]
    if min(t for t, _ in times) <= 0:
      o["speedup_status"] = "not measurable"
      o["speedup_note"] = "a run reached it before any timed training (0 s): no ratio"
      continue
    time_ratio = ratio_of_means([b for b, _ in base_times], [t for t, _ in times], over="runs")
    epoch_ratio = ratio_of_means([b for _, b in base_times], [e for _, e in times], over="runs")
    o["time_speedup"], o["epoch_speedup"] = time_ratio.estimate, epoch_ratio.estimate
    o["time_speedup_ci95"] = None if not time_ratio.measured else [time_ratio.low, time_ratio.high]
    o["epoch_speedup_ci95"] = None if not epoch_ratio.measured else [epoch_ratio.low, epoch_ratio.high]
    o["time_speedups_by_run"] = [b[0] / t[0] for b, t in zip(base_times, times)]
    o["time_speedup_runs_for_10pct"] = runs_for_precision(o["time_speedups_by_run"])
  # each pair compared once, so the two directions always agree
  ranked = [m for m in timed if out[m]["time_speedup"] is not None]
  for which, col in (("time_order", 0), ("epoch_order", 1)):
    for m in ranked:
      out[m][which] = {}
    for i, m in enumerate(ranked):
      for n in ranked[i + 1 :]:
        # m faster than n: n's time over m's above 1
        o = ratio_of_means([t[col] for t in timed[n]], [t[col] for t in timed[m]], over="runs").order()
        out[m][which][n], out[n][which][m] = o, -o
  return out


def loss_status(record: dict) -> str:
  """A run's loss-curve status; stages saved before it was recorded have their old ``stopped`` only."""
  return record.get("loss_status") or ("diverged" if record["stopped"] == "diverged" else "improved")


def _baseline(
  base: dict, rule: str, target: TargetRule, pretrained_probe: list[float] | None = None
) -> tuple[list[Target] | None, str | None]:
  """Each run's target (None under the paper's rule), or why no speed-up is measurable against retraining."""
  for r, (status, stopped) in enumerate(zip(base["loss_status"], base["stopped"])):
    if stopped not in ("patience", "non-finite loss"):
      n = len(base["runs"][r]["seconds_by_epoch"] or [])
      return None, (
        f"retraining never plateaued (run {r} stopped: {stopped}, after {n} epoch{'' if n == 1 else 's'}): its time "
        f"is not a time to quality; raise --max-epochs"
      )
    if status in ("diverged", "did not improve", "non-finite"):
      return None, f"retraining's loss {status} (run {r}): there is no baseline to be faster than"
  if rule != "target":
    return None, None
  targets = []
  for r in base["runs"]:
    t, why = calibrate(r, target)
    if t is None:
      return None, why
    targets.append(t)
  for i, (r, t) in enumerate(zip(base["runs"], targets)):
    early = judged_too_late(r, t.accuracy, target)
    if early is not None:
      pre = (
        ""
        if not pretrained_probe
        else f"; the pre-trained encoder's probe scores {float(np.mean(pretrained_probe)):.2f} % before any training"
      )
      which = f" (run {i})" if len(targets) > 1 else ""
      return None, (
        f"the probe meets the target before training can be judged: {early}{which}, so every time to it is the "
        f"cost of the first {target.window} epochs{pre}"
      )
  return targets, None


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


def _speedup_cell(c: dict) -> str:
  """``"3.0 [2.1, 4.4], 1.5"`` (time× with its interval over runs, epoch×), or the status when there is none."""
  if c["time_speedup"] is None:
    return c.get("speedup_status", "–")
  ci = c.get("time_speedup_ci95")
  interval = "" if ci is None else f" [{ci[0]:.1f}, {ci[1]:.1f}]"
  return f"{c['time_speedup']:.1f}{interval}, {c['epoch_speedup']:.1f}"


def speedup_table(by_alpha: dict[str, dict]) -> str:
  """Tables 3–4: "time× [95 % over runs], epoch×" relative to retraining for every incremental method and α, and
  the average rank, in which two methods share their places unless the runs resolve which is faster
  (:func:`experiments.compare.tied_ranks`)."""
  alphas = list(by_alpha)
  methods = [m for m in TABLE_ORDER if any(m in by_alpha[a] for a in alphas)]
  time_ranks, epoch_ranks = {m: [] for m in methods}, {m: [] for m in methods}
  for a in alphas:
    ranked = [m for m in methods if by_alpha[a].get(m, {}).get("time_speedup") is not None]
    for ranks, which in ((time_ranks, "time_order"), (epoch_ranks, "epoch_order")):
      orders = {(m, n): o for m in ranked for n, o in by_alpha[a][m].get(which, {}).items() if n in ranked}
      for m, r in tied_ranks(orders, ranked).items():
        ranks[m].append(r)
  rows = []
  for m in methods:
    cells = ["–" if by_alpha[a].get(m) is None else _speedup_cell(by_alpha[a][m]) for a in alphas]
    t, e = time_ranks[m], epoch_ranks[m]
    rows.append([LABELS[m], *cells, f"{np.mean(t):.1f}, {np.mean(e):.1f}" if t else "–"])
  return common.markdown_table(["method", *[f"α={a}" for a in alphas], "avg rank"], rows)


def _reached_cell(c: dict) -> str:
  """``"3.0 / 1.5 s"`` (mean epoch and time at which the target was reached), and where it was lost again:
  ``"3.0 / 1.5 s, lost at epoch 5"`` (one run) or ``"..., lost in 2 of 3 runs (epochs 5, 7)"``."""
  if c.get("time_to_target_seconds") is None:
    return "–"
  cell = f"{c['epochs_to_target']:.1f} / {c['time_to_target_seconds']:.1f} s"
  by_run = c.get("target_by_run") or []
  lost = [r["lost_epoch"] for r in by_run if r["lost_epoch"] is not None]
  if not lost:
    return cell
  if len(by_run) == 1:
    return f"{cell}, lost at epoch {lost[0]}"
  return f"{cell}, lost in {len(lost)} of {len(by_run)} runs (epochs {', '.join(map(str, lost))})"


def detail_table(by_alpha: dict[str, dict]) -> str:
  """Absolute numbers: reported epoch, training and compile seconds (compiling, or reading a compiled step back from
  the persistent cache: see :mod:`experiments.harness`), SVM accuracy on all/old/new data, why each run stopped and
  its loss curve's status, the target probe accuracy, the epoch and time each method reached it (and the epoch it
  lost it again, if it did), its speed-up status, and the runs a ±10 % time speed-up estimate needs (from the runs'
  spread; – with one run)."""
  rows = []
  for a, methods in by_alpha.items():
    for m, c in methods.items():
      acc = c["accuracy"]
      needed = c.get("time_speedup_runs_for_10pct")
      target = c.get("target_accuracy")
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
          ", ".join(sorted(set(c["stopped"]))),
          ", ".join(sorted(set(c.get("loss_status", ["–"])))),
          "–" if target is None else f"{target:.2f}",
          _reached_cell(c),
          c.get("speedup_status", "–"),
          "–" if needed is None or m == "retrain" else str(needed),
        ]
      )
  return common.markdown_table(
    [
      "α",
      "method",
      "epoch",
      "train s",
      "compile / cache s",
      "acc all %",
      "acc old %",
      "acc new %",
      "stopped",
      "loss curve",
      "target %",
      "reached (epoch / s; held to the end unless lost)",
      "speed-up",
      "runs for ±10 %",
    ],
    rows,
  )


def tables(results: dict) -> str:
  by_alpha = {a: block["methods"] for a, block in results["alpha_sweep"].items()}
  pre = results["pretrained"]
  lines = [
    f"# ICL on {results['dataset']} (preset {results['preset']}, {results['runs']} run(s))",
    "",
    _speedup_caption(by_alpha, results["runs"]),
    "",
    speedup_table(by_alpha),
    *_notes(results),
    "Reported epochs, times, SVM accuracies, stops, loss curves and targets:",
    "",
    detail_table(by_alpha),
    "Pre-trained encoder (old data only), SVM accuracy all/old/new %: "
    + ", ".join(
      f"α={a}: {p['all']:.2f}/{p['old']:.2f}/{p['new']:.2f}" + (f" (probe {p['probe']:.2f} %)" if "probe" in p else "")
      for a, p in pre.items()
    ),
    "",
  ]
  return "\n".join(lines)


def _speedup_caption(by_alpha: dict[str, dict], runs: int) -> str:
  cells = [c for methods in by_alpha.values() for c in methods.values()]
  rule = cells[0].get("speedup_rule", "convergence") if cells else "convergence"
  what = (
    "time to target quality (the first epoch from which the smoothed probe accuracy stays at or above a target set "
    "below retraining's plateau by the probe's measured noise; see the target column)"
    if rule == "target"
    else "time to convergence (the paper's rule)"
  )
  noise = (
    "in brackets the 95 % t-interval over the runs; ranks tie unless the runs resolve the order"
    if runs >= MIN_UNITS
    else f"{runs} run{'' if runs == 1 else 's'}: no interval, and every rank is a tie ({MIN_UNITS} runs give one: use "
    f"--runs {MIN_UNITS} or more to order the methods)"
  )
  return f"Speed-ups vs retraining (time, epoch) in {what}, the layout of the paper's Tables 3–4; {noise}:"


def _notes(results: dict) -> list[str]:
  """What the tables cannot carry: speed-ups that are not measurable, targets reached and lost again or reached
  by a loss that did not improve, data notes, and SVMs that predict the majority class."""
  lines = [f"Data: {n}" for n in results.get("data_notes", [])]
  for a, block in results["alpha_sweep"].items():
    notes = {c.get("speedup_note") for c in block["methods"].values()} - {None}
    lines += [f"α={a}: speed-ups not measurable: {n}." for n in sorted(notes)]
    for m, c in block["methods"].items():
      if c.get("speedup_status") == "did not hold":
        lines.append(
          f"α={a}: {LABELS.get(m, m)} reached the target but lost it again before the end of training "
          f"({_reached_cell(c)}): no speed-up."
        )
      elif c.get("speedup_status") == "did not improve" and c.get("time_to_target_seconds") is not None:
        lines.append(
          f"α={a}: {LABELS.get(m, m)} reached the target but its loss did not improve: no speed-up under any rule."
        )
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
