"""What each experiment's ``results.json`` measures for the claims: named numbers, each with its interval where the
run itself holds one (over validation queries, sentence pairs, runs or seeds inside the run).

An extractor returns ``{name: Measured}``. A group of runs that differ only in their seed is summarised by
:mod:`experiments.reproduction.summary`, which takes the mean of each number over the runs and its t-interval over
the seeds; a single run keeps the extractor's own interval. An interval over runs needs three of them: two runs give
a mean and no interval (a t-interval on one degree of freedom spans ±12.7 standard errors, and a percentile
bootstrap of two values is their range).

A time-to-reach measure that some run never reached is *censored*: the run's value is the cap (the whole budget),
and ``censored`` counts such runs, so that a page can say "never reached" instead of reading the cap as a value.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats


class Measured(NamedTuple):
  """One number of one run: its estimate, and its interval with what the interval redraws (None without one)."""

  estimate: float | None
  low: float | None = None
  high: float | None = None
  over: str | None = None
  units: int | None = None
  note: str | None = None  # why there is no estimate or no interval
  censored: int | None = None  # runs that never reached (a time-to-reach measure; their value is the cap)
  status: str | None = None  # "not converged: ..." when the number measures a run that did not converge
  values: tuple[float, ...] | None = None  # the per-run values of a mean over runs (what pooling needs)
  pairs: tuple[tuple[float, float], ...] | None = None  # per-run (numerator, denominator) of a ratio of means
  # (estimate, low, high) of a speed-up whose method did not train in some runs, those runs counted as converged at
  # their first epoch: under the ratio of means, the most favourable reading of a claimed speed-up
  # (:func:`warm_start_bound`)
  bound: tuple[float, float, float] | None = None


MIN_RUNS = 3  # the fewest runs an interval over runs is computed from


def t_interval(values: Sequence[float], level: float = 0.95, over: str = "seeds") -> Measured:
  """The mean of ``values`` and its Student-t interval over them (none for fewer than :data:`MIN_RUNS`)."""
  x = np.asarray([v for v in values if v is not None], np.float64)
  if len(x) == 0:
    return Measured(None)
  mean, kept = float(x.mean()), tuple(float(v) for v in x)
  if len(x) < MIN_RUNS:
    return Measured(mean, units=len(x), note=_too_few(len(x)), values=kept)
  half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
  return Measured(mean, mean - half, mean + half, over, len(x), values=kept)


def _too_few(n: int) -> str:
  return f"{n} run{'s' if n != 1 else ''}: no interval ({MIN_RUNS} runs give one)"


def ratio_t_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95, over: str = "runs") -> Measured:
  """The ratio of means over paired runs and its delta-method t-interval on the log scale
  (:func:`experiments.compare.ratio_of_means`, the one every report uses), with the pairs kept for pooling.

  Raises:
    ValueError: ``a`` and ``b`` differ in length, or a ``b`` is not positive.
  """
  from experiments.compare import ratio_of_means

  if len(a) != len(b):
    raise ValueError(f"ratio_t_interval: `a` and `b` must pair up, got {len(a)} and {len(b)}")
  c = ratio_of_means(a, b, over=over, level=level)
  pairs = tuple((float(x), float(y)) for x, y in zip(a, b))
  if not c.measured:
    return Measured(c.estimate, units=c.units, note=_too_few(c.units), pairs=pairs)
  return Measured(c.estimate, c.low, c.high, over, c.units, pairs=pairs)


def pooled(measures: Sequence[Mapping]) -> Measured | None:
  """One measure pooled over the runs of several groups that ran one setting (summary dicts): the ratio of means
  over every run's pair, or the mean over every run's value, with its t-interval; None when a group keeps neither."""
  if all(m.get("pairs") for m in measures):
    pairs = [p for m in measures for p in m["pairs"]]
    return ratio_t_interval([a for a, _ in pairs], [b for _, b in pairs])
  if all(m.get("per_run") and None not in m["per_run"] for m in measures):
    return t_interval([v for m in measures for v in m["per_run"]], over="runs")
  return None


def _from_ci(estimate: float | None, ci: Sequence[float] | None, over: str, units: int | None = None) -> Measured:
  if estimate is None:
    return Measured(None)
  if ci is None:
    return Measured(float(estimate), units=units)
  return Measured(float(estimate), float(ci[0]), float(ci[1]), over, units)


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
  """Least-squares slope of ys on xs."""
  x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
  return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


# ----------------------------------------------------------------------------------------------------------- BC
BC_OTHERS = ("joint-lin-sloss", "joint-notrans", "post-lin-sloss", "post-lin-mloss", "finetune-m0", "fix-m0", "non-bc")


def bc_aligner(results: Mapping) -> dict[str, Measured]:
  """One BC-Aligner run (:mod:`experiments.bc_aligner`): Table 3's degradations (%) and alignment errors, BC-Aligner's
  lead over each method (its combined degradation minus the method's: positive = BC-Aligner degrades less), the
  growth of the alignment error over versions (Fig. 3 (3)) and the λ sweep's slopes per doubling of λ (Fig. 5)."""
  methods = results["methods"]
  out: dict[str, Measured] = {}
  for m, r in methods.items():
    for side in ("intended", "unintended", "combined"):
      value = r.get(f"{side}_degradation_pct")
      if value is not None:
        out[f"{side}.{m}"] = Measured(float(value))
    out[f"alignment_error.{m}"] = Measured(float(r["alignment_error"]))
  bca = methods.get("bc-aligner")
  if bca is not None:
    for m in BC_OTHERS:
      other = methods.get(m)
      if other is None:
        continue
      for side in ("combined", "intended", "unintended"):
        a, b = bca.get(f"{side}_degradation_pct"), other.get(f"{side}_degradation_pct")
        if a is not None and b is not None:
          out[f"lead.{side}.{m}"] = Measured(float(a - b))
      out[f"alignment_lead.{m}"] = Measured(float(other["alignment_error"] - bca["alignment_error"]))
    jls = methods.get("joint-lin-sloss")
    if jls is not None:
      growth = [r["alignment_error_by_version"][-1] - r["alignment_error_by_version"][0] for r in (jls, bca)]
      out["error_growth_gap.joint-lin-sloss"] = Measured(float(growth[0] - growth[1]))
  jls, jnt = methods.get("joint-lin-sloss"), methods.get("joint-notrans")
  if (
    jls is not None
    and jnt is not None
    and None not in (jls.get("intended_degradation_pct"), jnt.get("intended_degradation_pct"))
  ):
    out["intended_gap.joint-lin-sloss.joint-notrans"] = Measured(
      float(jls["intended_degradation_pct"] - jnt["intended_degradation_pct"])
    )
  # §5.2's correlation: over the methods, the alignment error against the size of the unintended degradation
  pairs = [
    (float(r["alignment_error"]), -float(r["unintended_degradation_pct"]))
    for r in methods.values()
    if r.get("unintended_degradation_pct") is not None
  ]
  if len(pairs) >= 3 and len({a for a, _ in pairs}) > 1 and len({u for _, u in pairs}) > 1:
    out["correlation.alignment_unintended"] = Measured(float(np.corrcoef(np.asarray(pairs, np.float64).T)[0, 1]))
  if bca is not None:
    out.update(_over_time(methods, bca))
  sloss, mloss = methods.get("post-lin-sloss"), methods.get("post-lin-mloss")
  if sloss is not None and mloss is not None and sloss.get("unintended_degradation_pct") is not None:
    out["mloss_minus_sloss.unintended"] = Measured(
      float(mloss["unintended_degradation_pct"] - sloss["unintended_degradation_pct"])
    )
  sweep = results.get("lambda_sweep")
  if sweep and len(sweep) >= 2:
    lams = sorted(sweep, key=float)
    log_lam = [math.log2(float(v)) for v in lams]
    for side in ("intended", "unintended"):
      ys = [sweep[v][f"{side}_degradation_pct"] for v in lams]
      if all(y is not None for y in ys):
        out[f"lambda_slope.{side}"] = Measured(_slope(log_lam, ys))
    out["lambda_slope.alignment_error"] = Measured(_slope(log_lam, [sweep[v]["alignment_error"] for v in lams]))
  return out


FIGURE_3 = ("joint-notrans", "joint-lin-sloss", "post-lin-sloss", "post-lin-mloss", "finetune-m0")


def _over_time(methods: Mapping, bca: Mapping) -> dict[str, Measured]:
  """Figure 3's version-by-version measures: the share of (version, metric) cells, versions 1…K of intended
  Recall@50, mean unintended AUC and alignment error, where BC-Aligner is at least as good as every method of
  :data:`FIGURE_3` that updates the model (Fix-M0, Keep-All and Non-BC each win one metric by construction), and
  the growth of its alignment error over the K composed maps against linear growth, e_K / (K e_1) (< 1: sublinear,
  §3.2.2)."""
  out: dict[str, Measured] = {}
  others = [methods[m] for m in FIGURE_3 if m in methods]
  errors = bca["alignment_error_by_version"]
  steps = sorted(int(k) for k in bca.get("unintended_auc_by_step", {}))
  if others and steps and len(errors) > max(steps):
    cells = wins = 0
    for v in steps:
      for field, better in (("intended_recall50_by_version", max), ("alignment_error_by_version", min)):
        mine = bca[field][v]
        wins += mine == better([mine, *(o[field][v] for o in others)])
        cells += 1
      mine = bca["unintended_auc_by_step"][str(v)]
      wins += all(mine >= o["unintended_auc_by_step"][str(v)] for o in others)
      cells += 1
    out["best_share.bc-aligner"] = Measured(wins / cells)
  first = next((e for e in errors if e > 0), None)
  if first is not None and len(errors) > 2:
    out["error_growth.bc-aligner"] = Measured(errors[-1] / ((len(errors) - 1) * first))
  return out


# ------------------------------------------------------------------------------------------------------ Gramian
def _estimation_error(results: Mapping, name: str) -> float | None:
  sides = [results["mean_error_second_half"][s].get(name) for s in ("left", "right")]
  return None if any(v is None for v in sides) else float(np.mean(sides))


def gramian_estimation(results: Mapping) -> dict[str, Measured]:
  """One Fig. 2 run (:mod:`experiments.gramian_estimation`): ratios of mean relative Gramian errors over the second
  half of the common trajectory (both sides), > 1 where the second-named estimator is better, per batch size B (the
  paper's 128 and 1024), and Fig. 2b's bias-variance measures for SOGram's α at the smallest batch."""
  err = {name: _estimation_error(results, name) for name in results["mean_error_second_half"]["left"]}
  out: dict[str, Measured] = {}

  def ratio(name: str, a: str, b: str) -> None:
    if err.get(a) and err.get(b):
      out[name] = Measured(err[a] / err[b])

  batches = sorted({int(name.rsplit("B=", 1)[1]) for name in err})
  for batch in batches:
    samplings = [f"sampling-{s} B={batch}" for s in ("uniform", "linear", "sqrt")]
    best_sampling = min((s for s in samplings if err.get(s)), key=lambda s: err[s], default=None)
    if best_sampling is not None:
      ratio(f"sampling_over_sogram.B{batch}", best_sampling, f"sogram(a=0.1) B={batch}")
    sagram = [f"sagram-{v} B={batch}" for v in ("sag", "saga")]
    if all(err.get(s) for s in sagram):
      others = [e for n, e in err.items() if n.endswith(f" B={batch}") and not n.startswith("sagram") and e]
      out[f"others_over_sagram.B{batch}"] = Measured(min(others) / max(err[s] for s in sagram))
    for s in ("linear", "sqrt"):
      ratio(f"uniform_over_{s}.B{batch}", f"sampling-uniform B={batch}", f"sampling-{s} B={batch}")
  small, large = batches[0], batches[-1]
  if large > small:  # §4.2: a larger batch improves every estimate: each estimator's error at |B| small over large
    for name, e in err.items():
      if name.endswith(f" B={small}") and e:
        base = name.rsplit(" B=", 1)[0]
        if err.get(f"{base} B={large}"):
          out[f"batch_gain.{base}"] = Measured(e / err[f"{base} B={large}"])
  large_sampling = [err.get(f"sampling-{s} B={large}") for s in ("uniform", "linear", "sqrt")]
  if large > small and err.get(f"sogram(a=0.1) B={small}") and any(large_sampling):
    out["sogram_small_over_sampling_large"] = Measured(
      err[f"sogram(a=0.1) B={small}"] / min(e for e in large_sampling if e)
    )
  # Fig. 2b: the variance a high α keeps late, the bias a low α has early
  curves = {
    name: np.mean([results["errors"][s][name] for s in ("left", "right")], axis=0)
    for name in results["errors"]["left"]
    if name.startswith("sogram(") and name.endswith(f" B={small}")
  }
  alphas = sorted((float(n.split("a=")[1].split(")")[0]), n) for n in curves)
  if len(alphas) >= 2:
    (_, low_name), (_, high_name) = alphas[0], alphas[-1]
    half = len(results["steps"]) // 2
    early = max(2, len(results["steps"]) // 10)
    late_sd = {n: float(np.std(np.diff(curves[n][half:]))) for n in (low_name, high_name)}
    if late_sd[low_name] > 0:
      out["late_variability_high_over_low_alpha"] = Measured(late_sd[high_name] / late_sd[low_name])
    early_err = {n: float(np.mean(curves[n][1:early])) for n in (low_name, high_name)}
    if early_err[high_name] > 0:
      out["early_error_low_over_high_alpha"] = Measured(early_err[low_name] / early_err[high_name])
  return out


def _first_reach_fraction(curve: Sequence[Mapping], target: float) -> float | None:
  """The share of the training steps after which ``curve`` first reaches ``target`` (None if it never does)."""
  step = _first_reach_step(curve, target)
  return None if step is None else step / curve[-1]["step"]


def _first_reach_step(curve: Sequence[Mapping], target: float) -> float | None:
  """The training step after which ``curve`` first reaches ``target`` (None if it never does)."""
  return next((float(point["step"]) for point in curve if point["map@10"] >= target), None)


def reach_ratio(base: Mapping, ours: Mapping) -> tuple[float, bool]:
  """SOGram's steps to first reach its baseline's final MAP@10 over the baseline's own steps to first reach it, and
  whether SOGram never did (then the ratio is its whole run over the baseline's steps: a lower bound, censored).

  §4.3 measures the first against the whole budget, which is the same thing when the baseline is still rising at the
  end of its budget, as the paper's were; a baseline that peaks early and falls back reaches its own final value long
  before the end, and against the whole budget SOGram would look fast for reaching it no sooner than the baseline
  did. The baseline's first reach is its last evaluation when its curve never shows its final value."""
  target = float(base["final_map@10"])
  own = _first_reach_step(base["curve"], target)
  if own is None or own <= 0:
    own = float(base["curve"][-1]["step"])
  reached = _first_reach_step(ours["curve"], target)
  if reached is None:
    return float(ours["curve"][-1]["step"]) / own, True
  return reached / own, False


SAMPLINGS = ("uniform", "linear", "sqrt")


def gramian_training(results: Mapping) -> dict[str, Measured]:
  """One Table 2 run (:mod:`experiments.gramian_training`): SOGram's relative change in final MAP@10 over each
  sampling baseline (%) with its bootstrap interval over validation queries, the share of the steps SOGram takes to
  reach each baseline's final MAP@10 (Section 4.3's share of the budget, censored at 1) and those steps over the
  steps the baseline itself took to reach it (:func:`reach_ratio`), and linear SOGram's lead over the best other
  method."""
  methods = results["methods"]
  out: dict[str, Measured] = {}
  for s, entry in results.get("improvements", {}).items():
    if entry.get("estimate") is not None:
      # one seed's interval is over its validation queries: the noise between seeds (initialisation, batches) is
      # not in it, so it is kept as a note and the run stands as one run; seeds give the interval
      ci = entry.get("ci95")
      note = None if ci is None else f"one seed; over its validation queries alone [{ci[0]:+.2f}, {ci[1]:+.2f}]"
      out[f"improvement_pct.{s}"] = Measured(float(entry["estimate"]), units=1, note=note)
  for s in SAMPLINGS:
    base, ours = methods.get(f"sampling-{s}"), methods.get(f"sogram-{s}")
    if base is not None and ours is not None and "step" in ours["curve"][-1]:
      fraction = _first_reach_fraction(ours["curve"], base["final_map@10"])
      out[f"reach_fraction.{s}"] = Measured(1.0 if fraction is None else fraction, censored=int(fraction is None))
      ratio, never = reach_ratio(base, ours)
      out[f"reach_ratio.{s}"] = Measured(ratio, censored=int(never))
  for s, gap in results.get("oracle_gaps", {}).items():  # in MAP@10 points (x 100)
    ci = gap.get("oracle_gap_ci95")
    out[f"oracle_gap_pts.{s}"] = _from_ci(
      100.0 * gap["oracle_gap"], None if ci is None else [100.0 * c for c in ci], "validation queries"
    )
  for m, r in methods.items():  # each method's final MAP@10 in points, for comparisons across groups
    out[f"final_map.{m}"] = Measured(100.0 * float(r["final_map@10"]))
    later = [p for p in r["curve"] if p.get("step", 0) > 0]
    if later:  # and at its first evaluation after the start: how fast it began (App. E.3's "initially slower")
      out[f"first_map.{m}"] = Measured(100.0 * float(later[0]["map@10"]))
  if "sogram-linear" in methods:
    others = [r["final_map@10"] for m, r in methods.items() if m != "sogram-linear" and not m.startswith("exact")]
    if others:  # in MAP@10 points (x 100)
      out["linear_sogram_lead"] = Measured(100.0 * (methods["sogram-linear"]["final_map@10"] - max(others)))
  return out


def gramian_scaling(results: Mapping) -> dict[str, Measured]:
  """One scaling run (:mod:`experiments.gramian_scaling`): per corpus size n, SOGram's relative change in final
  MAP@10 over its sampling baseline (%) and the share of the steps it takes to reach the baseline's final MAP@10,
  each as the mean over the run's seeds with its t-interval."""
  out: dict[str, Measured] = {}
  for n, by_seed in results["runs"].items():
    for s in SAMPLINGS:
      gains, fractions, never = [], [], 0
      for by_method in by_seed.values():
        base, ours = by_method.get(f"sampling-{s}"), by_method.get(f"sogram-{s}")
        if base is None or ours is None or base["final_map@10"] <= 0:
          continue
        gains.append(100.0 * (ours["final_map@10"] / base["final_map@10"] - 1.0))
        fraction = _first_reach_fraction(ours["curve"], base["final_map@10"])
        fractions.append(1.0 if fraction is None else fraction)
        never += fraction is None
      if gains:
        out[f"improvement_pct.{s}.n{n}"] = t_interval(gains)
        out[f"reach_fraction.{s}.n{n}"] = t_interval(fractions)._replace(censored=never)
  sizes = sorted(results["runs"], key=int)
  if len(sizes) >= 2:  # §4.3: larger corpora, larger gains; paired by seed, smallest against largest
    small, large = results["runs"][sizes[0]], results["runs"][sizes[-1]]
    for s in SAMPLINGS:
      diffs = []
      for seed in sorted(set(small) & set(large)):
        g = [_gain(by_seed[seed], s) for by_seed in (small, large)]
        if None not in g:
          diffs.append(g[1] - g[0])
      if diffs:
        out[f"size_gain.{s}"] = t_interval(diffs)
  return out


def _gain(by_method: Mapping, s: str) -> float | None:
  base, ours = by_method.get(f"sampling-{s}"), by_method.get(f"sogram-{s}")
  if base is None or ours is None or base["final_map@10"] <= 0:
    return None
  return 100.0 * (ours["final_map@10"] / base["final_map@10"] - 1.0)


# ---------------------------------------------------------------------------------------------------------- ICL
NOT_CONVERGED = {
  "did not improve": "its smoothed epoch loss never fell below its first epoch's by more than the curve's own noise "
  "(no measurable training), so where the paper's rule stops is set by noise",
  "diverged": "its loss diverged",
}


def _convergence_speedup(o: Mapping, base: Mapping, col: str) -> Measured:
  """Retraining's mean ``col`` (``train_seconds`` or ``epochs``) to its converged epoch over the method's, with the
  delta-method t-interval over the paired runs: the paper's rule taken literally, whatever the curves did. A method
  (or a retraining) whose loss did not converge in some run is marked ``not converged`` with the number beside it."""
  a = [float(r[col]) for r in base["runs"]]
  b = [float(r[col]) for r in o["runs"]]
  if len(a) != len(b) or min(b) <= 0 or min(a) <= 0:
    return Measured(None, note=f"no ratio: {col} of zero or unpaired runs")
  m = ratio_t_interval(a, b)._replace(bound=warm_start_bound(o, base, col))
  why = []
  for who, block in (("retraining", base), ("the method", o)):
    statuses = block.get("loss_status") or []
    for status, words in NOT_CONVERGED.items():
      k = sum(x == status for x in statuses)
      if k:
        why.append(f"{who}: {words} in {k} of {len(statuses)} runs")
  return m._replace(status="not converged: " + "; ".join(why)) if why else m


def warm_start_bound(o: Mapping, base: Mapping, col: str) -> tuple[float, float, float] | None:
  """The speed-up ``base``/``o`` in ``col`` with each of the method's runs whose loss did not improve counted as
  converged at its first epoch (one epoch, that epoch's seconds): no reading of a flat curve gives the method less
  time, so under the ratio of means no reading gives a larger speed-up (only its estimate and upper end bound; the
  mean of per-run ratios can give more). The page shows it and never judges it. Defined only where it bounds:
  ``base`` (retraining, or the other method of a pair) improved and stopped by patience in every run, and no run of
  the method diverged; None otherwise, or without an interval."""
  base_statuses = base.get("loss_status") or [r.get("loss_status") for r in base["runs"]]
  if any(s != "improved" or r.get("stopped") != "patience" for s, r in zip(base_statuses, base["runs"])):
    return None
  statuses = o.get("loss_status") or [r.get("loss_status") for r in o["runs"]]
  if "did not improve" not in statuses or "diverged" in statuses:
    return None
  if any(s == "did not improve" and not r.get("seconds_by_epoch") for s, r in zip(statuses, o["runs"])):
    return None

  def first(r: Mapping) -> float:
    return 1.0 if col == "epochs" else float(r["seconds_by_epoch"][0])

  b = [first(r) if s == "did not improve" else float(r[col]) for s, r in zip(statuses, o["runs"])]
  m = ratio_t_interval([float(r[col]) for r in base["runs"]], b)
  return None if m.low is None else (float(m.estimate), float(m.low), float(m.high))  # type: ignore[arg-type]


def _target_speedup(o: Mapping, base: Mapping) -> Measured:
  """Retraining's mean time to target quality over the method's (bcjax's target rule), t-interval over paired runs;
  a method that never reached the target in any run is censored in all of them."""
  status = o.get("speedup_status")
  if status == "not measurable":
    return Measured(None, note=f"not measurable: {o.get('speedup_note', '')}".rstrip(": "))
  if status == "diverged":
    return Measured(None, status="not converged: " + NOT_CONVERGED["diverged"], note="diverged")
  reached = o.get("reached_by_run")
  if reached is None:
    return Measured(None, note=status or "no speed-up")
  never = sum(t is None for t in reached)
  if never:
    note = f"{never} of {len(reached)} runs never reached retraining's target accuracy"
    return Measured(None, note=note, censored=never, units=len(reached))
  base_times = [t for t, _ in base["reached_by_run"]]
  return ratio_t_interval(base_times, [t for t, _ in reached])


# (method, other): the other's time (or epochs) over the method's, per run. §4.5's ablations, §4.2's "ICL can beat
# replay and distillation with only NCE-II" and "the convergence speedup of ICL exceeds all methods".
PAIRS = (
  ("icl", "lrl"),
  ("icl", "meta"),
  ("icl", "nce2-only"),
  ("icl", "finetune"),
  ("icl", "replay"),
  ("icl", "distill"),
  ("nce2-only", "replay"),
  ("nce2-only", "distill"),
)


# The reference code's patience (../shared/reference/icl.md), replayed on the curves of a run stopped at a longer one:
# the paper rule's stop at patience P comes at or before its stop at any longer patience, on the very same curve.
REPLAY_PATIENCE = 20


def replay_stop(losses: Sequence[float], seconds: Sequence[float], patience: int, smoothing: float) -> dict | None:
  """A run record as the paper's convergence rule would have ended it at ``patience``, from its logged epoch losses
  and cumulative training seconds: the converged epoch E* (the last new raw minimum before the stop), its time, why
  it stopped, and the truncated curve's status; None when the logged curve ends before that rule stops it (it
  stopped earlier for another reason, so the replay cannot say where patience ``patience`` would have)."""
  from experiments.icl.convergence import Rule, Tracker, curve_status

  tracker, best = Tracker(Rule("paper", patience, 1, smoothing)), -1
  for e, loss in enumerate(losses):
    if not math.isfinite(loss):
      return None
    improved, stop = tracker.update(loss)
    best = e if improved else best
    if stop:
      return {
        "epochs": best + 1,
        "train_seconds": float(seconds[best]),
        "stopped": "patience",
        "loss_status": curve_status(list(losses[: e + 1]), smoothing, patience),
      }
  return None


def _logged_curves(metrics: Sequence[Mapping]) -> dict[tuple[str, int, str], tuple[list[float], list[float]]]:
  """(α as results.json spells it, run, method) -> (epoch losses, cumulative training seconds), from a run's
  metrics.jsonl; a stage computed twice (a resumed run) keeps its last computation."""
  curves: dict[tuple[str, int, str], tuple[list[float], list[float]]] = {}
  for m in metrics:
    if "method" not in m or "epoch" not in m or "alpha" not in m:
      continue
    key = (str(m["alpha"]), int(m["run"]), m["method"])
    if m["epoch"] == 1:
      curves[key] = ([], [])
    losses, seconds = curves.setdefault(key, ([], []))
    losses.append(float(m["loss"]))
    seconds.append(float(m["train_seconds"]))
  return curves


def _replayed(methods: Mapping, alpha: str, curves: Mapping, patience: int, smoothing: float) -> dict | None:
  """``methods`` with every run's stop replayed at ``patience``; None when any run's curve is not logged or ends
  before that rule stops it."""
  out = {}
  for m, o in methods.items():
    runs = []
    for r in range(len(o["runs"])):
      curve = curves.get((alpha, r, m))
      stop = None if curve is None else replay_stop(*curve, patience, smoothing)
      if stop is None:
        return None
      runs.append(stop)
    out[m] = {**o, "runs": runs}
  return out


def _convergence(methods: Mapping, alpha: str, suffix: str = "") -> dict[str, Measured]:
  """Speed-ups to the converged epoch (the paper's rule) over retraining and between :data:`PAIRS`, in time and in
  epochs; keys ``time_speedup<suffix>.<method>.a<alpha>`` and the like."""
  out: dict[str, Measured] = {}
  with_status = {m: {**o, "loss_status": [loss_status_of(r) for r in o["runs"]]} for m, o in methods.items()}
  base = with_status["retrain"]
  for m, o in with_status.items():
    if m != "retrain":
      out[f"time_speedup{suffix}.{m}.a{alpha}"] = _convergence_speedup(o, base, "train_seconds")
      out[f"epoch_speedup{suffix}.{m}.a{alpha}"] = _convergence_speedup(o, base, "epochs")
  for mine, other in PAIRS:  # §4.2, §4.5: a method against another, paired by run (the other's time over mine)
    if mine in methods and other in methods:
      a, b = with_status[mine], with_status[other]
      out[f"pair_speedup{suffix}.{mine}.{other}.a{alpha}"] = _convergence_speedup(a, b, "train_seconds")
      out[f"pair_epoch_speedup{suffix}.{mine}.{other}.a{alpha}"] = _convergence_speedup(a, b, "epochs")
  return out


def loss_status_of(record: Mapping) -> str:
  """A run record's loss-curve status (:func:`experiments.icl.report.loss_status`)."""
  from experiments.icl.report import loss_status

  return loss_status(dict(record))


def icl(results: Mapping, metrics: Sequence[Mapping] = (), config: Mapping | None = None) -> dict[str, Measured]:
  """One ICL run (:mod:`experiments.icl`), per growth ratio α: each method's speed-ups over retraining in time and
  in epochs to the converged epoch (the paper's rule, taken literally; ratio of means over the paired runs with its
  delta-method t-interval, and ``status`` "not converged" where a curve never improved or diverged), the time
  speed-up to retraining's accuracy recomputed from the stored per-epoch probes (bcjax's target rule,
  :mod:`experiments.icl.target`, at its defaults), its accuracy minus retraining's (points, t-interval over the runs)
  and its cost per epoch over retraining's. A run under the paper's rule at a patience above
  :data:`REPLAY_PATIENCE` also gives the speed-ups that patience would have (``time_speedup_p20`` and the like),
  replayed from the loss curves in its ``metrics``; ``config`` is its config.json."""
  import jax

  from experiments.icl.target import TargetRule

  settings = (config or {}).get("config") or {}
  replay = settings.get("convergence") == "paper" and settings.get("patience", 0) > REPLAY_PATIENCE
  curves = _logged_curves(metrics) if replay else {}
  out: dict[str, Measured] = {}
  for alpha, block in results["alpha_sweep"].items():
    methods = block["methods"]
    base = methods.get("retrain")
    if base is None:
      continue
    if all("probe_by_epoch" in r for o in methods.values() for r in o["runs"]):
      from experiments.icl.report import summarise

      key = jax.random.fold_in(jax.random.key(0), int(round(float(alpha) * 1000)))
      by_target = summarise({m: o["runs"] for m, o in methods.items()}, "target", TargetRule(), key)
      for m, o in by_target.items():
        if m != "retrain":
          out[f"target_time_speedup.{m}.a{alpha}"] = _target_speedup(o, by_target["retrain"])
    out.update(_convergence(methods, alpha))
    if replay:
      replayed = _replayed(methods, alpha, curves, REPLAY_PATIENCE, float(settings.get("smoothing", 0.7)))
      if replayed is not None:
        out.update(_convergence(replayed, alpha, f"_p{REPLAY_PATIENCE}"))
    for m, o in methods.items():
      if m == "retrain":
        continue
      acc = [r["accuracy"]["all"] - b["accuracy"]["all"] for r, b in zip(o["runs"], base["runs"])]  # in % already
      out[f"accuracy_gap.{m}.a{alpha}"] = t_interval(acc, over="runs")
      per_epoch = [
        (r["train_seconds"] / r["epochs"]) / (b["train_seconds"] / b["epochs"])
        for r, b in zip(o["runs"], base["runs"])
        if r["epochs"] > 0 and b["epochs"] > 0
      ]
      out[f"epoch_cost.{m}.a{alpha}"] = t_interval(per_epoch, over="runs")
    for m in methods:  # a method that did not converge: every measure of it says so, not its speed-up alone
      status = out.get(f"time_speedup.{m}.a{alpha}", Measured(None)).status
      if status is None:
        continue
      for key in list(out):
        # seconds per epoch do not depend on where the rule stopped: the epoch cost keeps its verdict
        gated = not key.startswith(("time_speedup", "epoch_cost"))
        if key.endswith(f".{m}.a{alpha}") and out[key].status is None and gated:
          out[key] = out[key]._replace(status=status)
  for alpha, block in results["alpha_sweep"].items():
    out.update(_icl_quality(block.get("quality"), alpha))
  alphas = sorted(results["alpha_sweep"], key=float)
  if len(alphas) >= 2:  # §4.4: the speed-up falls as α grows; Welch t over the two α's runs
    first, last = (results["alpha_sweep"][a]["methods"] for a in (alphas[0], alphas[-1]))
    for m in set(first) & set(last) - {"retrain"}:
      per_run = [
        [b["train_seconds"] / r["train_seconds"] for r, b in zip(block[m]["runs"], block["retrain"]["runs"])]
        for block in (first, last)
      ]
      drop = welch_interval(per_run[0], per_run[1])
      flat = [out[f"time_speedup.{m}.a{a}"].status for a in (alphas[0], alphas[-1])]
      flat = [f"α = {a}: {x.removeprefix('not converged: ')}" for a, x in zip((alphas[0], alphas[-1]), flat) if x]
      out[f"alpha_drop.{m}"] = drop._replace(status="not converged: " + "; ".join(flat)) if flat else drop
  return out


def _icl_quality(q: Mapping | None, alpha: str) -> dict[str, Measured]:
  """The quality block of an ICL run (:func:`experiments.icl.report.quality`): each encoder's score on each measure
  (``quality.<measure>.<encoder>``, mean over runs with its t-interval), each method's final − start
  (``moved.<measure>.<method>``) and, per measure, whether it can time training (``sees.<measure>``: 1 sees
  training, 0 blind, no estimate when not judged; the statement in the note)."""
  out: dict[str, Measured] = {}
  if not q:
    return out
  for name, by in q["encoders"].items():
    for k, c in by.items():
      ci = c.get("ci95")
      out[f"quality.{k}.{name}.a{alpha}"] = _from_ci(c["mean"], ci, "runs", c.get("runs"))
  for m, by in q["moved"].items():
    for k, c in by.items():
      if "estimate" in c:
        low, high = c.get("ci95") or (None, None)
        out[f"moved.{k}.{m}.a{alpha}"] = Measured(
          c["estimate"], low, high, "runs" if low is not None else None, c.get("units"), note=c.get("verdict")
        )
  for k, sep in q["separation"].items():
    status = sep.get("status", "sees training")
    estimate = {"sees training": 1.0, "blind": 0.0}.get(status)
    out[f"sees.{k}.a{alpha}"] = Measured(estimate, note=sep.get("statement") or status)
  return out


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Measured:
  """mean(a) − mean(b) with Welch's t-interval (independent samples); none unless each has :data:`MIN_RUNS`."""
  x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
  d = float(x.mean() - y.mean())
  if min(x.size, y.size) < MIN_RUNS:
    return Measured(d, units=int(min(x.size, y.size)), note=_too_few(int(min(x.size, y.size))))
  vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
  se = math.sqrt(vx + vy)
  if se == 0.0:
    return Measured(d, d, d, "runs", int(x.size + y.size))
  df = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
  half = float(stats.t.ppf(0.5 + level / 2, df) * se)
  return Measured(d, d - half, d + half, "runs", int(x.size + y.size))


# --------------------------------------------------------------------------------------------------- Conceptors
def conceptors_sts(results: Mapping) -> dict[str, Measured]:
  """One STS time-course run (:mod:`experiments.conceptors_sts`): CA's and zero-shot CA's lead over
  train-from-scratch SIF in Table 1's mean PCC × 100, with the bootstrap interval over sentence pairs, the number of
  genres each wins, and CA's forgetting (Fig. 2: PCC on a genre after the last corpus minus right after its own)."""
  out: dict[str, Measured] = {}
  for name, d in results.get("differences", {}).items():
    out[name] = Measured(d["estimate"], d["low"], d["high"], d["over"], d["units"])
  genres, methods = results["genres"], results["methods"]
  for key in ("ca", "zero-shot-ca"):
    avg, sif = methods[key]["time_course_average"], methods["sif"]["time_course_average"]
    out[f"wins.{key}"] = Measured(float(sum(avg[g] > sif[g] for g in genres)))
  for key in ("ca", "sif"):  # SIF's own forgetting beside CA's: how much of CA's is the encoder's, not the conceptors'
    steps = methods[key]["pcc_by_step"]
    out[f"forgetting.{key}"] = Measured(float(np.mean([steps[-1][j] - steps[j][j] for j in range(len(genres))])))
  out["forgetting_gap.ca"] = Measured(out["forgetting.ca"].estimate - out["forgetting.sif"].estimate)
  for key in ("ca", "sif", "zero-shot-ca"):
    out[f"mean_pcc.{key}"] = Measured(float(np.mean([methods[key]["time_course_average"][g] for g in genres])))
  return out


def embedding_upgrade(results: Mapping) -> dict[str, Measured]:
  """One upgrade run (:mod:`experiments.embedding_upgrade`): per model pair (``old>new``), kind and paired fraction,
  Recall@10 recovery (%) of re-embedding's with its bootstrap interval over the held-out queries, and the recovery
  with no map at all (new queries straight against the old index)."""
  out: dict[str, Measured] = {}
  queries = results["corpus"]["queries"]
  for pair in results["pairs"]:
    name = f"{pair['old']}>{pair['new']}"
    out[f"no_map.{name}"] = Measured(100.0 * pair["no_map"]["flat"] / pair["reference"]["flat"])
    for row in pair["rows"]:
      r = row.get("recall_recovery")
      if r is None:
        continue
      key = f"recovery.{name}.{row['kind']}.f{row['fraction']:g}"
      out[key] = Measured(100.0 * r["value"], 100.0 * r["low"], 100.0 * r["high"], "held-out queries", queries)
  return out


# experiments whose measures also read the run's metrics.jsonl and config.json: extractor(results, metrics, config)
READS_RUN = frozenset({"icl"})
EXTRACTORS: dict[str, Callable[..., dict[str, Measured]]] = {
  "embedding_upgrade": embedding_upgrade,
  "bc_aligner": bc_aligner,
  "gramian_estimation": gramian_estimation,
  "gramian_training": gramian_training,
  "gramian_scaling": gramian_scaling,
  "icl": icl,
  "conceptors_sts": conceptors_sts,
}
