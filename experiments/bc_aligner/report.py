"""Aggregation of the BC-Aligner experiment in the reference notebook's way, the Table 3 layout and Figs. 3 and 5.

* intended degradation = 100 (x - x_nonbc) / x_nonbc with x the mean val Recall@50 over versions 0..4 (Keep-All
  serves the latest model, so its intended performance is Non-BC's);
* unintended degradation = 100 (y - y_fixm0) / y_fixm0 with y the ROC-AUC averaged over consumer seeds and reported
  steps per task, then over the five tasks (Keep-All feeds C_0 true version-0 embeddings, i.e. Fix-M0's);
* combined = intended + unintended; alignment error per version = the mean Euclidean distance, over all users and
  items, between the published version-0-space embedding and M_0's embedding of the same graph.
"""

from pathlib import Path

import numpy as np

from experiments import common
from experiments.bc_aligner.chance import AT_CHANCE_SDS
from experiments.bc_aligner.configs import INTENDED_K, JOINT, LINEAR, METHODS
from experiments.bc_methods import transform_name
from experiments.compare import MIN_UNITS


def alignment_errors(published: list[np.ndarray], reference: list[np.ndarray]) -> list[float]:
  return [float(np.mean(np.linalg.norm(p.astype(np.float64) - r, axis=1))) for p, r in zip(published, reference)]


def summarise(
  recalls: dict[str, list[dict]],
  published: dict[str, list[np.ndarray]],
  consumers: dict,
  published_recalls: dict[str, list[float]] | None = None,
  chains: dict | None = None,
  measured: set[str] | None = None,
  intended_measured: bool = True,
) -> dict:
  r"""The ``methods`` block of results.json (keys of the issue's schema) for every method in ``recalls``.

  Beyond the paper: ``negative_flip_pct`` (mean over tasks of the consumers' negative-flip rate, in %, averaged over
  seeds and reported steps; a negative flip is an example classified right on true version-0 embeddings and wrong on
  the published ones) and, given ``published_recalls`` (val Recall@50 of each method's published version-0-space
  embeddings per version), ``recall_recovery_pct`` = 100 · their mean / Keep-All's re-embedded mean (Non-BC's
  intended Recall@50): how much of re-embedding with M_k a version-0 index keeps when fed the published embeddings;
  given ``chains`` (a method's ``ChainStats``, or None without matrix B_k), ``chain_norm_by_version``: the spectral
  norm :math:`\lVert W_1 \cdots W_k \rVert_2`, k = 1..K, the factor by which the published chain can amplify an
  error of :math:`z_k` (the error amplification that the multi-step loss, eq. 9, is meant to suppress); and
  ``multistep_weight_by_version``: :math:`\kappa_k`, the pull of the multi-step loss (eq. 10) at version k on this
  chain, relative to the single-step loss's, for an isotropic residual (the mean eigenvalue of ``multi_step_pull``'s
  R), and ``multistep_pull_range_by_version``: R's smallest and largest eigenvalues, the least and most it pulls
  along one direction (1/k along directions no carried map reaches). κ_1 = 1: the two losses are equal at version 1.
  None for the other methods.

  ``intended_measured=False`` (Keep-All's reference at chance, :mod:`experiments.bc_aligner.chance`) leaves the
  intended and combined degradations and the recall recovery None: relative to a ranker at chance they measure
  nothing.
  """
  measured = set(consumers) if measured is None else measured
  intended = {m: float(np.mean([r["recall@50"] for r in rs])) for m, rs in recalls.items()}
  by_task = {m: {t: float(np.mean(c["auc"][m])) for t, c in consumers.items()} for m in recalls}
  # Only the measured tasks (version-0 consumers above chance) enter the unintended side; without any (degenerate
  # data) there is no unintended measurement: None, never NaN.
  unintended = {
    m: float(np.mean([a for t, a in v.items() if t in measured])) if measured & set(v) else None
    for m, v in by_task.items()
  }
  x0, y0 = intended["non-bc"], unintended["fix-m0"]
  out = {}
  for m in recalls:
    by_step = {}
    for t, c in consumers.items():
      if t not in measured:
        continue
      for s, col in zip(c["steps"], np.mean(c["auc"][m], axis=0)):
        by_step.setdefault(s, []).append(float(col))
    flips = {
      t: 100.0 * float(np.mean(c["negative_flips"][m])) for t, c in consumers.items() if "negative_flips" in c
    }  # a consumers stage saved before flips were measured has none
    measured_flips = [f for t, f in flips.items() if t in measured]
    errors = alignment_errors(published[m], published["fix-m0"])
    di = 100.0 * (intended[m] - x0) / x0 if intended_measured else None
    du = None if y0 is None else 100.0 * (unintended[m] - y0) / y0
    out[m] = {
      "intended_recall50_by_version": [r["recall@50"] for r in recalls[m]],
      "intended_recall_by_version": recalls[m],
      "intended_recall50_mean": intended[m],
      "unintended_auc_by_task": by_task[m],
      "unintended_auc_by_step": {str(s): float(np.mean(v)) for s, v in sorted(by_step.items())},
      "unintended_auc_mean": unintended[m],
      "intended_degradation_pct": di,
      "unintended_degradation_pct": du,
      "combined_degradation_pct": None if du is None or di is None else di + du,
      "alignment_error_by_version": errors,
      "alignment_error": float(np.mean(errors)),
      "negative_flip_pct_by_task": flips,
      "negative_flip_pct": float(np.mean(measured_flips)) if measured_flips else None,
    }
    if published_recalls is not None:
      out[m]["published_recall50_by_version"] = published_recalls[m]
      recovery = 100.0 * float(np.mean(published_recalls[m])) / x0
      out[m]["recall_recovery_pct"] = recovery if intended_measured else None
    if chains is not None:
      chain = chains.get(m)
      out[m]["chain_norm_by_version"] = None if chain is None else chain.norm
      out[m]["multistep_weight_by_version"] = None if chain is None else chain.multistep_weight
      out[m]["multistep_pull_range_by_version"] = None if chain is None else chain.pull_range
  return out


def _transform_name(config: dict) -> str:
  """``linear``, ``affine(rank=8)``, ...; runs written before other kinds existed are linear."""
  return transform_name(config.get("transform", "linear"), config.get("transform_hparams"))


def _backward_column(method: str, config: dict) -> str:
  """What maps a method's z_k back to version 0: its B_k kind, NoTrans (the first d_0 coordinates) or nothing."""
  if method in LINEAR:
    return _transform_name(config)
  return "NoTrans" if method in ("non-bc", "joint-notrans") else "—"


def _pct(v) -> str:
  return "n/a" if v is None else f"{v:+.2f}"


def _plain(v) -> str:
  return "n/a" if v is None else f"{v:.2f}"


def _interval(v) -> str:
  return "—" if v is None else f"[{v[0]:+.2f}, {v[1]:+.2f}]"


def _chance_level(results: dict) -> dict | None:
  """A random ranking's intended Recall@50 (``mean``, ``sd`` over versions; runs from before it have none)."""
  return (results.get("intended_chance") or {}).get(f"recall@{INTENDED_K}")


def _chance_cell(results: dict, method: str) -> str:
  """``"0.0605 ± 0.0074: at chance"`` beside a method's Recall@50 (``"—"`` for runs without the level)."""
  level = _chance_level(results)
  if level is None:
    return "—"
  verdict = "at chance" if method in (results.get("intended_at_chance") or ()) else "above"
  return f"{level['mean']:.4f} ± {level['sd']:.4f}: {verdict}"


def table_3(results: dict) -> str:
  """One row per method (the paper's Table 3 columns for one dataset) plus the raw metrics behind them."""
  rows = []
  unmeasured = "not measurable" if results.get("intended_not_measurable") else None
  for m in METHODS:
    r = results["methods"].get(m)
    if r is None:
      continue
    rows.append(
      [
        m,
        _backward_column(m, results["config"]),
        unmeasured or _pct(r["intended_degradation_pct"]),
        unmeasured or _interval(r.get("intended_degradation_ci95")),
        _pct(r["unintended_degradation_pct"]),
        unmeasured or _pct(r["combined_degradation_pct"]),
        r["intended_recall50_mean"],
        _chance_cell(results, m),
        "n/a" if r["unintended_auc_mean"] is None else r["unintended_auc_mean"],
        r["alignment_error"],
        r["alignment_error_by_version"][-1],
        _plain(r.get("negative_flip_pct")),
        unmeasured or _plain(r.get("recall_recovery_pct")),
        *_chain_columns(r),
      ]
    )
  one_class_tasks = sorted(results.get("consumers_left_out") or {})
  chance_tasks = sorted(results.get("consumers_at_chance") or {})
  reasons = "; ".join(
    part
    for part in (
      f"{', '.join(one_class_tasks)}: one class" if one_class_tasks else "",
      f"{', '.join(chance_tasks)}: version-0 consumers not above chance" if chance_tasks else "",
    )
    if part
  )
  if results.get("unintended_not_measurable"):
    tasks = (
      f"no consumer task (the unintended side is not measurable on this data: left out: {reasons}; fewer than two "
      f"tasks measured, see results.json)"
    )
  elif not reasons:
    tasks = "the consumer tasks"
  else:
    tasks = (
      f"the {5 - len(one_class_tasks) - len(chance_tasks)} consumer tasks measured (left out: {reasons}; see "
      f"results.json)"
    )
  one_class = sorted(
    t
    for t, c in (results.get("consumers") or {}).items()
    if all(s in (0.0, 1.0) for s in c.get("predicted_positive_share_by_seed", [c.get("predicted_positive_share")]))
  )
  flips_note = (
    f" The version-0 consumers of {', '.join(one_class)} each predict one class for every example, so their "
    f"negative flips can only be examples leaving that class."
    if one_class
    else ""
  )
  head = (
    f"Dataset {results['dataset']}, preset {results['preset']}, seed {results['seed']}, "
    f"λ={results['config']['lam']}, B_k: {_transform_name(results['config'])}. Degradation (%) relative to "
    f"Keep-All, 100 (method − Keep-All) / Keep-All: negative is worse than Keep-All, positive better (the paper's "
    f"sign); Recall@50 = mean over versions 0-4, beside a random ranking's of the same candidates and val items "
    f"(mean ± sd; at chance: at most {AT_CHANCE_SDS:g} sd above it); AUC = mean over {tasks}, seeds and reported "
    f"steps. Negative flips: % of consumer examples right on "
    f"true version-0 embeddings and wrong on the published ones; recall recovery: Recall@50 of the published "
    f"version-0-space embeddings as % of re-embedding with M_k; intended 95 %: the intended degradation's "
    f"interval over redrawn val users (the models held fixed). The unintended and combined degradations and the "
    f"recall recovery have no interval: they are one seed's values, whose seed-to-seed noise (and the consumers') "
    f"only repeated runs measure ({MIN_UNITS} seeds give one: python -m experiments.bc_aligner.seeds). "
    f"‖W_1⋯W_K‖₂: the spectral norm of the latest version's composed backward map, by which it can amplify an "
    f"error of z_K; multi-step κ_K: the multi-step "
    f"loss's pull at the latest version on that method's chain, relative to the single-step loss's, for an "
    f"isotropic residual (below 1, it relaxes the alignment on average).{flips_note}\n\n"
  )
  below = notes(results)
  return (
    head
    + common.markdown_table(
      [
        "method",
        "B_k",
        "intended degr. %",
        "intended 95 %",
        "unintended degr. %",
        "combined degr. %",
        "Recall@50",
        "random-ranking Recall@50",
        "unintended AUC",
        "align. err (mean)",
        "align. err (last)",
        "neg. flips %",
        "recall recovery %",
        *CHAIN_HEADER,
      ],
      rows,
    )
    + "".join(f"\n{line}\n" for line in below)
  )


def notes(results: dict) -> list[str]:
  """Lines under the table: the data's notes; a random ranking's Recall@K at every cut-off, the models at or below
  it, and whether the intended side is measurable at all; and, when the never-updated model (Fix-M0) beats
  Keep-All's updated models on the intended side, what that does to the intended column."""
  lines = [f"Data: {n}" for n in results.get("data_notes", [])]
  lines += chance_notes(results)
  fix = results["methods"].get("fix-m0")
  ci = None if fix is None else fix.get("intended_degradation_ci95")
  if fix is not None and fix["intended_degradation_pct"] is not None and fix["intended_degradation_pct"] > 0:
    where = "" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}] over redrawn val users"
    if ci is not None and ci[0] > 0:
      lines.append(
        f"Never updating beats updating here: Fix-M0 (M_0 serves every version) is "
        f"{fix['intended_degradation_pct']:+.2f} %{where} above Keep-All (the latest model re-embedded), so on "
        f"this data the model updates did not improve retrieval and every intended degradation is measured from a "
        f"reference that updating made worse."
      )
    else:
      lines.append(
        f"Fix-M0 (never updating) is {fix['intended_degradation_pct']:+.2f} %{where} from Keep-All: whether the "
        f"updates improved retrieval is within the noise of the val users' draw."
      )
  return lines


def chance_notes(results: dict) -> list[str]:
  """The chance level of every logged cut-off, the models at chance on the intended task, and why the intended side
  is not measurable (:mod:`experiments.bc_aligner.chance`); nothing for runs from before the levels."""
  levels = results.get("intended_chance")
  if not levels:
    return []
  cutoffs = sorted(levels, key=lambda name: int(name.partition("@")[2]))
  lines = [
    "Chance: a random ranking of each version's candidates (its items up to t_(k+1) less the user's train items) "
    "scores, as the mean over versions ± its sd, "
    + ", ".join(f"Recall@{n.partition('@')[2]} {levels[n]['mean']:.4f} ± {levels[n]['sd']:.4f}" for n in cutoffs)
    + "."
  ]
  named = results.get("intended_at_chance") or []
  if named:
    level = levels[f"recall@{INTENDED_K}"]
    lines.append(
      f"At chance on the intended task (Recall@{INTENDED_K} at most {AT_CHANCE_SDS:g} sd above a random ranking's "
      f"{level['mean']:.4f} ± {level['sd']:.4f}): {', '.join(named)}."
    )
  if results.get("intended_not_measurable"):
    lines.append(
      f"Intended side not measurable on this data: {results['intended_not_measurable']}. Its degradations, the "
      f"combined ones and the recall recovery compare rankers at chance, so none is given and no method is ranked."
    )
  return lines


CHAIN_HEADER = ("‖W_1⋯W_K‖₂", "multi-step κ_K")


def _chain_columns(r: dict) -> list[str]:
  """The latest version's ‖W_1⋯W_K‖₂ and κ_K; dashes for methods without a matrix chain (and runs from before
  them)."""
  return [
    "—" if not r.get(key) else f"{r[key][-1]:.2f}" for key in ("chain_norm_by_version", "multistep_weight_by_version")
  ]


BACKWARD_COMPATIBLE = (
  "fix-m0",
  "finetune-m0",
  "post-lin-sloss",
  "post-lin-mloss",
  "joint-notrans",
  "joint-lin-sloss",
  "bc-aligner",
)  # the methods whose published embeddings a version-0 consumer can read


def rank_backward_compatible(results: dict) -> list[str]:
  """The backward-compatible methods of a run, best combined degradation first (those without one left out; none
  when the intended side is not measurable)."""
  methods = results["methods"]
  if results.get("intended_not_measurable"):
    return []
  return sorted(
    (m for m in BACKWARD_COMPATIBLE if m in methods and methods[m]["combined_degradation_pct"] is not None),
    key=lambda m: -methods[m]["combined_degradation_pct"],
  )


def same_models(gap: dict) -> bool:
  """The two methods of a ``gap`` serve the same models (the post-hoc pair): the val users' draw cannot move it."""
  return gap["intended_ci95"][0] == gap["intended_ci95"][1]


def headline(results: dict) -> str:
  """One line saying what the table shows: which backward-compatible method degrades least overall, and at what
  intended cost."""
  methods = results["methods"]
  ranked = rank_backward_compatible(results)
  intended = results.get("intended_not_measurable")
  if intended:
    return (
      f"Intended side not measurable on this data: {intended}. No best backward-compatible method is named; the "
      f"recalls stand beside a random ranking's in the table (intended_chance in results.json)."
    )
  reason = results.get("unintended_not_measurable")
  if reason:
    return (
      f"Unintended side not measurable on this data: {reason}. No best backward-compatible method is named; the "
      f"intended side stands alone in the table (consumers_left_out and consumers_at_chance in results.json)."
    )
  if not ranked:
    return "No combined degradation: every consumer task was left out."
  best, rest = ranked[0], ranked[1:]
  r = methods[best]
  runner_up = f"; next: {rest[0]} {methods[rest[0]]['combined_degradation_pct']:+.2f} %" if rest else ""
  line = (
    f"Best backward-compatible trade-off: {best}, combined {r['combined_degradation_pct']:+.2f} % "
    f"(intended {r['intended_degradation_pct']:+.2f} % vs Keep-All, unintended "
    f"{r['unintended_degradation_pct']:+.2f} % vs Fix-M0){runner_up}."
  )
  gap = results.get("gap")  # runs finished before the val-user intervals have none
  if gap is None or gap["best"] != best:
    return line
  low, high = gap["ci95"]
  if same_models(gap):
    return (
      f"{line} Both serve the same models, so the lead of {gap['gap_pct']:.2f} points is all on the consumer "
      f"tasks, whose noise one run does not measure."
    )
  verdict = (
    "it holds when the val users are redrawn"
    if low > 0
    else "within the noise of the val users' draw: one run does not order the two (compare seeds with "
    "python -m experiments.bc_aligner.seeds)"
  )
  return (
    f"{line} The lead of {gap['gap_pct']:.2f} points has a 95 % interval of [{low:+.2f}, {high:+.2f}] "
    f"over redrawn val users (consumer AUCs held fixed): {verdict}."
  )


def transform_table(results: dict) -> str:
  """The transform sweep: one row per B_k kind and method with a transformation (joint or post-hoc training)."""
  rows = []
  for sweep in results["transform_sweep"].values():
    for m, r in sweep["methods"].items():
      rows.append(
        [
          sweep["transform"],
          m,
          "joint" if m in JOINT else "post-hoc",
          _pct(r["combined_degradation_pct"]),
          _pct(r["intended_degradation_pct"]),
          _pct(r["unintended_degradation_pct"]),
          r["alignment_error"],
          _plain(r.get("negative_flip_pct")),
          _plain(r.get("recall_recovery_pct")),
          *_chain_columns(r),
        ]
      )
  head = (
    "Backward transformation kinds (--transform-sweep): each method with a transformation trained with a B_k of "
    "every kind on the same M_0 and Non-BC models. Degradations (%) as above; alignment error = mean distance "
    "of the published version-0-space embeddings to M_0's, averaged over versions.\n\n"
  )
  return head + common.markdown_table(
    [
      "B_k",
      "method",
      "training",
      "combined degr. %",
      "intended degr. %",
      "unintended degr. %",
      "align. err (mean)",
      "neg. flips %",
      "recall recovery %",
      *CHAIN_HEADER,
    ],
    rows,
  )


def transform_headline(results: dict) -> str:
  """One line per training mode: the B_k kind with the best combined degradation, and its intended cost (none when
  the intended side is not measurable)."""
  if results.get("intended_not_measurable"):
    return "No best B_k is named: the intended side is not measurable on this data (see above)."
  lines = []
  for mode, in_mode in (("joint", lambda m: m in JOINT), ("post-hoc", lambda m: m not in JOINT)):
    scored = [
      (r["combined_degradation_pct"], sweep["transform"], m, r)
      for sweep in results["transform_sweep"].values()
      for m, r in sweep["methods"].items()
      if in_mode(m) and r["combined_degradation_pct"] is not None
    ]
    if scored:
      combined, kind, m, r = max(scored, key=lambda row: row[0])
      lines.append(
        f"Best B_k, {mode}: {kind} ({m}), combined {combined:+.2f} % (intended "
        f"{r['intended_degradation_pct']:+.2f} %, negative flips {_plain(r.get('negative_flip_pct'))} %)."
      )
  return "\n".join(lines)


def transform_figure(path: Path, results: dict) -> None:
  """Combined degradation and negative-flip rate per B_k kind, one group of bars per method."""
  plt = _plt()
  sweep = results["transform_sweep"]
  kinds = list(sweep)
  methods = [m for m in METHODS if any(m in s["methods"] for s in sweep.values())]
  fig, axes = plt.subplots(1, 2, figsize=(12, 4))
  width = 0.8 / max(len(kinds), 1)
  for i, kind in enumerate(kinds):
    for ax, key in zip(axes, ("combined_degradation_pct", "negative_flip_pct")):
      values = [sweep[kind]["methods"].get(m, {}).get(key) for m in methods]
      ax.bar(
        np.arange(len(methods)) + i * width,
        [np.nan if v is None else v for v in values],
        width,
        label=sweep[kind]["transform"],
      )
  for ax, title in zip(axes, ("combined degradation (%)", "negative flips (%)")):
    ax.set_xticks(np.arange(len(methods)) + width * (len(kinds) - 1) / 2, methods, fontsize=8)
    ax.set(title=title)
    ax.grid(alpha=0.3, axis="y")
  axes[0].legend(fontsize=8)
  fig.suptitle(f"B_k kinds: {results['dataset']} ({results['preset']}, seed {results['seed']})")
  fig.tight_layout()
  common.save_figure(fig, path)


def _plt():
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def figure_3(path: Path, results: dict) -> None:
  """Metrics over versions: intended Recall@50, unintended AUC (mean over tasks), alignment error."""
  plt = _plt()
  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  for m in METHODS:
    r = results["methods"].get(m)
    if r is None:
      continue
    style = "-" if m == "bc-aligner" else "--" if m in ("keep-all", "fix-m0", "non-bc") else ":"
    axes[0].plot(
      range(len(r["intended_recall50_by_version"])), r["intended_recall50_by_version"], style, marker="o", label=m
    )
    steps = sorted(r["unintended_auc_by_step"], key=int)
    axes[1].plot([int(s) for s in steps], [r["unintended_auc_by_step"][s] for s in steps], style, marker="o")
    axes[2].plot(range(len(r["alignment_error_by_version"])), r["alignment_error_by_version"], style, marker="o")
  for ax, title in zip(
    axes, ("intended task: val Recall@50", "unintended tasks: ROC-AUC of C_0", "alignment error to M_0")
  ):
    ax.set(xlabel="version k", title=title)
    ax.grid(alpha=0.3)
  axes[0].legend(fontsize=7)
  fig.suptitle(f"{results['dataset']} ({results['preset']})")
  fig.tight_layout()
  common.save_figure(fig, path)


def figure_5(path: Path, sweep: dict) -> None:
  """BC-Aligner's intended and unintended degradation as λ varies."""
  plt = _plt()
  lams = sorted(sweep, key=float)
  fig, ax = plt.subplots(figsize=(6, 4))
  for key, label in (
    ("intended_degradation_pct", "intended"),
    ("unintended_degradation_pct", "unintended"),
    ("combined_degradation_pct", "combined"),
  ):
    ax.plot(
      [float(x) for x in lams],
      [np.nan if sweep[x][key] is None else sweep[x][key] for x in lams],
      marker="o",
      label=label,
    )
  ax.set(xscale="log", xlabel="λ", ylabel="degradation (%)", title="BC-Aligner: effect of λ")
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  common.save_figure(fig, path)
