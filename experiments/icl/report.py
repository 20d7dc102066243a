"""Aggregation and presentation of the ICL experiment: the results.json method blocks, the layout of the paper's
Tables 3–4 (speed-ups "time, epoch" per α with the average rank), the accuracy table (Figs. 2–3 as numbers), every
encoder's quality beside a random and the pre-trained encoder's with whether each measure sees training
(:func:`quality`), the loss curves of Fig. 5 and the speed-up-vs-α plot of Fig. 4."""

from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from experiments import common
from experiments.compare import MIN_UNITS, Comparison, no_interval, ratio_of_means, t_difference, t_mean, tied_ranks
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


class Measure(NamedTuple):
  """A quality measure every encoder is scored on: its ``label``, +1 when higher is better (-1: lower), the
  format of its values and of their differences."""

  label: str
  better: int
  fmt: str
  diff_fmt: str


MEASURES = {
  "svm": Measure("SVM accuracy on X'", 1, ".2f", "+.2f"),
  "probe": Measure("linear probe (the one the speed-ups are timed on)", 1, ".2f", "+.2f"),
  "heldout_loss": Measure("held-out NCE-I loss", -1, ".3f", "+.3f"),
}
SHORT = {"svm": "SVM %", "probe": "probe %", "heldout_loss": "held-out NCE-I"}
REFERENCE_LABELS = {"random": "Random init", "pretrained": "Pre-trained (old data only)"}
# the encoders a measure must order, the better one first, before it can time training
SEPARATIONS = (("pretrained", "random"), ("retrain", "random"), ("retrain", "pretrained"))
WORDS = {"random": "the random encoder", "pretrained": "the pre-trained encoder", "retrain": "retraining"}
NAMES = {"random": "random", "pretrained": "pre-trained", "retrain": "retraining"}


def _reference_score(d: dict | None, measure: str) -> float | None:
  """A reference encoder's (random or pre-trained: the stage's dict) score on ``measure``, None if not recorded."""
  if d is None:
    return None
  return d.get("all") if measure == "svm" else d.get(measure)


def _final_score(record: dict, measure: str) -> float | None:
  """A method's reported encoder's score on ``measure``: its SVM accuracy on X', its probe at the reported epoch,
  its held-out loss; None if the run has none."""
  if measure == "svm":
    return record["accuracy"]["all"]
  if measure == "probe":
    q = record.get("probe_by_epoch")
    return q[record["epochs"] - 1] if q and len(q) >= record["epochs"] else None
  return record.get(measure)


def _complete(values: list) -> np.ndarray | None:
  """``values`` as an array when every run has one, else None."""
  return None if not values or any(v is None for v in values) else np.asarray(values, np.float64)


def _mean_json(values: np.ndarray) -> dict:
  """The mean over runs with its Student-t interval (:func:`experiments.compare.t_mean`; none from fewer than
  three runs or from a non-finite run) and the runs' values."""
  if not np.all(np.isfinite(values)):
    return {"mean": float(np.mean(values)), "ci95": None, "runs": int(values.size), "by_run": values.tolist()}
  c = t_mean(values)
  return {
    "mean": c.estimate,
    "ci95": [c.low, c.high] if c.measured else None,
    "runs": c.units,
    "by_run": values.tolist(),
  }


def _difference(a: np.ndarray, b: np.ndarray) -> Comparison | None:
  """mean(a − b) over the paired runs with its t-interval; None when a run's score is not finite."""
  if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
    return None
  return t_difference(a, b)


def quality(runs: dict[str, list[dict]], pretrained: list[dict], random: list[dict]) -> dict:
  """Every encoder's quality over the paired runs beside a randomly initialised encoder's (retraining's start) and
  the pre-trained one's (old data only: every incremental method's start), and whether each measure can time
  training.

  For each of :data:`MEASURES` that the runs recorded (the SVM's accuracy on X', the linear probe's accuracy at the
  reported epoch, the held-out NCE-I loss of :func:`experiments.icl.evaluate.heldout_loss`):

  * ``encoders``: per encoder ("random", "pretrained", each method's reported one) the mean over runs with its
    Student-t interval (:func:`experiments.compare.t_mean`; none from fewer than :data:`~experiments.compare.
    MIN_UNITS` runs) and the runs' values;
  * ``separation``: the paired differences (t-intervals over runs, :func:`experiments.compare.t_difference`)
    pre-trained − random, retraining − random and retraining − pre-trained. The measure ``sees training`` when each
    interval excludes 0 on the better side; otherwise it is ``blind`` (it cannot tell a trained encoder from the
    random one, or retraining from the pre-trained one, or ranks them the wrong way round) and ``statement`` says
    that time to quality cannot be measured with it, and why; ``not judged`` with fewer than three runs or a
    non-finite score;
  * ``moved``: per method, its reported encoder's score less its starting encoder's (epoch 0: the random encoder
    for retraining, the pre-trained one for the rest), paired over runs, with ``verdict`` "improved", "worsened",
    "did not move (within the noise)" or why there is no interval.

  Args:
    runs: per method its runs' records (``accuracy``, ``epochs``, ``probe_by_epoch``, ``heldout_loss``).
    pretrained, random: per run the reference encoder's scores (``all``, ``probe``, ``heldout_loss``).
  """
  scores = {}
  for name, refs in (("random", random), ("pretrained", pretrained)):
    scores[name] = {k: _complete([_reference_score(d, k) for d in refs]) for k in MEASURES}
  for m, rs in runs.items():
    scores[m] = {k: _complete([_final_score(r, k) for r in rs]) for k in MEASURES}
  measures = [k for k in MEASURES if scores["random"][k] is not None and scores["pretrained"][k] is not None]
  out = {
    "measures": {
      k: {"label": MEASURES[k].label, "better": "higher" if MEASURES[k].better > 0 else "lower"} for k in measures
    },
    "encoders": {name: {k: _mean_json(by[k]) for k in measures if by[k] is not None} for name, by in scores.items()},
    "separation": {k: _separation(scores, k) for k in measures},
    "moved": {},
  }
  for m, rs in runs.items():
    moved = {}
    for k in measures:
      start = scores["random" if m == "retrain" else "pretrained"][k]
      if k == "heldout_loss" and all("heldout_start" in r for r in rs):
        start = np.asarray([r["heldout_start"] for r in rs], np.float64)
      final = scores[m][k]
      if final is None or start is None:
        continue
      c = _difference(final, start)
      moved[k] = {
        **({} if c is None else c.to_json()),
        "start": float(np.mean(start)),
        "final": float(np.mean(final)),
        "verdict": _moved_verdict(c, MEASURES[k].better),
      }
    out["moved"][m] = moved
  return out


def blind_probe(methods: dict, quality_block: dict) -> dict:
  """Target-rule speed-ups withdrawn where the probe they are timed on is blind (:func:`quality`'s separation).

  A time to a target on a probe that cannot tell a trained encoder from a random one, or retraining from the
  pre-trained encoder, times nothing: every method's speed-up becomes ``not measurable``, with the probe's statement
  as its note (the times to target stay, as the probe saw them). The paper's convergence rule does not use the probe
  and is left as it is.

  Args:
    methods: :func:`summarise`'s output for one α.
    quality_block: :func:`quality`'s output for the same runs.

  Returns:
    ``methods``, changed in place.
  """
  probe = quality_block.get("separation", {}).get("probe", {})
  if probe.get("status") != "blind":
    return methods
  for o in methods.values():
    if o.get("speedup_rule") != "target" or o.get("speedup_status") == "not measurable":
      continue
    o["speedup_status"], o["speedup_note"] = "not measurable", probe["statement"]
    for field in ("time_speedup", "epoch_speedup"):
      o[field] = None
    for field in ("time_speedup_ci95", "epoch_speedup_ci95", "time_order", "epoch_order", "time_speedups_by_run"):
      o.pop(field, None)
  return methods


def _moved_verdict(c: Comparison | None, better: int) -> str:
  """Whether final − start ``c`` shows training moved a measure (``better``: +1 higher is better, -1 lower)."""
  if c is None:
    return "not finite in some run"
  if not c.measured:
    return c.verdict()
  return {1: "improved", -1: "worsened", 0: "did not move (within the noise)"}[c.order() * better]


def _separation(scores: dict, measure: str) -> dict:
  """One measure's ``separation`` block of :func:`quality`."""
  spec = MEASURES[measure]
  block, reasons, unjudged = {"comparisons": {}}, [], []
  for better, worse in SEPARATIONS:
    a, b = scores.get(better, {}).get(measure), scores[worse][measure]
    better_words, worse_words = WORDS[better], WORDS[worse]
    if a is None or b is None:
      continue
    c = _difference(a, b)
    key = f"{better}_minus_{worse}"
    if c is None:
      block["comparisons"][key] = None
      unjudged.append(f"{better_words} or {worse_words} scored a non-finite value in some run")
      continue
    block["comparisons"][key] = c.to_json()
    where = f"{NAMES[better]} − {NAMES[worse]}: {c.cell(spec.diff_fmt)}"
    if not c.measured:
      unjudged.append(c.verdict())
    elif c.order() == 0:
      reasons.append(f"it cannot tell {better_words} from {worse_words} ({where})")
    elif c.order() != spec.better:
      reasons.append(f"it scores {worse_words} better than {better_words} ({where})")
  if reasons:
    block["status"] = "blind"
    block["statement"] = f"time to quality cannot be measured with the {spec.label}: " + "; ".join(reasons)
  elif unjudged:
    block["status"] = "not judged"
    block["statement"] = f"whether the {spec.label} can measure time to quality is not judged: " + "; ".join(
      sorted(set(unjudged))
    )
  else:
    block["status"] = "sees training"
    block["statement"] = (
      f"the {spec.label} sees training: it ranks retraining above the pre-trained encoder and both above the random "
      f"one, each resolved over the runs"
    )
  return block


def quality_table(by_alpha: dict[str, dict]) -> str:
  """Every encoder's quality (mean [95 % t-interval over runs]) on each measure and, per method, its reported
  encoder's score less its starting encoder's (final − start) with the verdict: the random and pre-trained
  encoders beside every method's, and whether training moved each measure."""
  measures = list(dict.fromkeys(k for q in by_alpha.values() for k in q["measures"]))
  rows = []
  for a, q in by_alpha.items():
    for name, by in q["encoders"].items():
      cells = [_mean_cell(by.get(k), MEASURES[k].fmt) for k in measures]
      moved = q["moved"].get(name, {})
      deltas = [_moved_cell(moved.get(k), MEASURES[k].diff_fmt) for k in measures]
      rows.append([a, REFERENCE_LABELS.get(name) or LABELS.get(name, name), *cells, *deltas])
  header = ["α", "encoder", *[SHORT[k] for k in measures], *[f"{SHORT[k]}: final − start" for k in measures]]
  return common.markdown_table(header, rows)


def _mean_cell(c: dict | None, fmt: str) -> str:
  if c is None:
    return "–"
  ci = c["ci95"]
  return f"{c['mean']:{fmt}}" + ("" if ci is None else f" [{ci[0]:{fmt}}, {ci[1]:{fmt}}]")


def _moved_cell(c: dict | None, fmt: str) -> str:
  """``"-0.420 [-0.610, -0.230] improved"``; without an interval the difference alone; – for a reference."""
  if c is None:
    return "–"
  if "estimate" not in c:
    return c["verdict"]
  ci = c["ci95"]
  if ci is None:
    return f"{c['estimate']:{fmt}}"
  return f"{c['estimate']:{fmt}} [{ci[0]:{fmt}}, {ci[1]:{fmt}}] {c['verdict']}"


def _quality_caption(runs: int) -> str:
  noise = (
    "in brackets the 95 % t-interval over the paired runs"
    if runs >= MIN_UNITS
    else f"{no_interval(runs)}, so no measure is judged"
  )
  return (
    "Quality of every encoder beside a randomly initialised one (retraining's start) and the pre-trained one (old "
    "data only: every other method's start); final − start is the reported encoder's score less its starting "
    f"encoder's ({noise}):"
  )


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
  qualities = {a: block["quality"] for a, block in results["alpha_sweep"].items() if "quality" in block}
  if qualities:
    lines += [_quality_caption(results["runs"]), "", quality_table(qualities)]
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
    for sep in block.get("quality", {}).get("separation", {}).values():
      lines.append(f"α={a}: {sep['statement']}.")
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
