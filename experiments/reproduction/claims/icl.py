"""Claims of Ji et al., "Unbiased and Efficient Self-Supervised Incremental Contrastive Learning" (WSDM 2023; seed
002), typed and located.

Table 4's cells (PROTEINS and REDDIT at α = 0.3, 0.5, 0.7; time and epoch speed-ups over retraining) are single
values: a claim stated by one is a level the interval must hold. The primary measurement of every PROTEINS claim is
the ``paper`` preset (Adam 1e-5 with the reference code's weight decay 1e-5, patience 50 on the raw loss, at most
1,000 epochs, 5 paired runs, every method), named before its runs; the quick preset's runs (Adam 1e-3, the smoothed
rule) and the patience and learning-rate variants are sensitivity rows.
"""

import dataclasses

from experiments.reproduction.claims._types import QUALITATIVE, Claim, Measurement
from experiments.reproduction.rules import DIRECTION, LEVEL, ORDERING, PARITY

DATA = (
  "PROTEINS (TU) as in the paper. The primary rows are the `paper` preset (the paper's patience 50, the reference "
  "code's Adam 1e-5, 5 runs); the quick preset (Adam 1e-3, patience 10 on the smoothed loss, at most 200 epochs, 3 "
  "paired runs), patience 5, 10 and 20 and Adam 1e-4 are sensitivity rows. REDDIT-BINARY, ImageNet-2 and MNIST-2 "
  "are not measured on this machine (the GPU suite runs REDDIT-BINARY and MNIST-2; ImageNet-2 is not available "
  "offline)."
)

ALL = ("finetune", "replay", "distill", "nce2-only", "meta", "lrl", "icl")
ABLATIONS = ("nce2-only", "meta", "lrl")
PAPER = (
  "python -m experiments.icl --dataset proteins --data-dir DIR --preset paper --speedup convergence "
  "--alpha-sweep 0.3,0.5,0.7 (8 methods × 3 α × 5 runs of up to 1,000 epochs: many hours on 2 cores; issue 65)"
)
PAPER_A09 = (
  "python -m experiments.icl --dataset proteins --data-dir DIR --preset paper --speedup convergence --alpha 0.9 "
  "--methods retrain,icl (retraining and ICL × 5 runs: about 11 minutes on 2 cores)"
)
DEVELOPMENT = "icl-proteins-devlr"
DEVELOPMENT_RULE = (
  "Adam's rate picked from the paper's own search grid, 1e-5 / 1e-4 / 1e-3, on ENZYMES and COX2 by "
  "`experiments/reproduction/development.py`'s rule (committed as `experiments/icl/learning_rate.py`) before any of"
  " its runs was read: the smallest rate at which retraining and ICL train in every run, else the one at which most"
  " of their runs train (1e-4: 13 of 20, against 9 at 1e-5 and 8 at 1e-3; no rate trains every run)"
)
DEVELOPMENT_CAVEATS = (
  "What the choice was not blind to: the rule was committed (1622912, 23:38:55 UTC on 27 Nov 2026) while the first "
  "development run (ENZYMES at 1e-5, started 23:35:31 from b0461b1) was running, and read after it ended; that cell"
  " was rerun from a commit after the rule (cec3020, `docs/reproduction/development/icl-learning-rate-rerun/`): the"
  " same stopping epochs and pairs that train, and the same choice (a test checks it). PROTEINS itself had been run"
  " at 1e-4 (quick preset, patience 5, 10 and 20) and at 1e-3 (quick) in earlier sessions, so the choice was made "
  "knowing that retraining trains there at both rates. The held-out clause has no noise margin and is harder for "
  "ICL, which starts from the pre-trained encoder, than for retraining, which starts at random; 13 against 9 pairs "
  "of 20 is not a significant difference. On PROTEINS at 1e-4 retraining trains in every run, but ICL's loss stays "
  "flat in 2 of 5 runs and its held-out loss worsens (the quality table above), so the stand-in rows stay not "
  "converged: the rate mends the baseline, not the method. Stand-ins are given only to the measures of the two "
  "methods the rule judged (ICL against retraining)."
)
DEVELOPMENT_COMMAND = (
  "python -m experiments.reproduction.development --runs <the six development runs> --out FILE, then python -m "
  "experiments.icl --dataset proteins --data-dir DIR --preset paper --speedup convergence --alpha 0.3 "
  "--learning-rate 1e-4 (the chosen rate; 8 methods × 5 runs: about an hour on 2 cores)"
)
# group -> (label, methods run besides retraining, growth ratios, patience (a budget), series, command if not run)
GROUPS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...], int | None, str | None, str | None]] = {
  "icl-proteins-paper": (
    "paper preset: Adam 1e-5, patience 50 (raw loss), 5 runs",
    ALL,
    (0.3, 0.5, 0.7),
    None,
    None,
    PAPER,
  ),
  "icl-proteins-paper-p20": (
    "paper preset's runs replayed at the reference code's patience 20 (each curve stopped where patience 20 stops)",
    ALL,
    (0.3, 0.5, 0.7),
    None,
    None,
    PAPER,
  ),
  "icl-proteins-paper-a0.9": (
    "paper preset: Adam 1e-5, patience 50 (raw loss), 5 runs of retraining and ICL",
    ("icl",),
    (0.9,),
    None,
    None,
    PAPER_A09,
  ),
  "icl-proteins-paper-a0.9-p20": (
    "paper preset's α = 0.9 runs replayed at the reference code's patience 20",
    ("icl",),
    (0.9,),
    None,
    None,
    PAPER_A09,
  ),
  DEVELOPMENT: (
    "paper preset but Adam 1e-4, the rate chosen on development sets (ENZYMES, COX2): patience 50 (raw loss), 5 runs",
    ALL,
    (0.3,),
    None,
    None,
    DEVELOPMENT_COMMAND,
  ),
  f"{DEVELOPMENT}-p20": (
    "the development rate's runs (Adam 1e-4) replayed at the reference code's patience 20",
    ALL,
    (0.3,),
    None,
    None,
    DEVELOPMENT_COMMAND,
  ),
  "icl-proteins-quick": (
    "quick: Adam 1e-3, patience 10 (smoothed), 3 runs",
    (*ABLATIONS, "icl"),
    (0.3, 0.5, 0.7),
    10,
    "quick",
    None,
  ),
  "icl-budget-p5": ("quick, patience 5, 3 runs", ("icl",), (0.3,), 5, "quick", None),
  "icl-budget-p10": (
    "quick, patience 10, 3 runs (a second run of the quick setting)",
    ("icl",),
    (0.3,),
    None,
    None,
    None,
  ),
  "icl-budget-p20": ("quick, patience 20, 3 runs", ("icl",), (0.3,), 20, "quick", None),
  "icl-ablation-p5": ("quick, patience 5, 3 runs", ABLATIONS, (0.3,), 5, "quick", None),
  "icl-ablation-p20": ("quick, patience 20, 3 runs", ABLATIONS, (0.3,), 20, "quick", None),
  "icl-lr1e-4-p5": ("Adam 1e-4, patience 5, 3 runs", ("icl",), (0.3,), 5, "Adam 1e-4", None),
  "icl-lr1e-4-p10": ("Adam 1e-4, patience 10, 3 runs", ("icl",), (0.3,), 10, "Adam 1e-4", None),
  "icl-lr1e-4-p20": ("Adam 1e-4, patience 20, 3 runs", ("icl",), (0.3,), 20, "Adam 1e-4", None),
}


# groups read from another group's runs: their loss curves replayed under a shorter patience (the paper's rule stops
# at patience 20 no later than at 50, on the very same curve): group -> (the runs' group, the measures' key suffix).
# Only stopping measures are replayed: accuracy, epoch cost and the target rule belong to the runs as they ran.
REPLAYS = {
  "icl-proteins-paper-p20": ("icl-proteins-paper", "_p20"),
  "icl-proteins-paper-a0.9-p20": ("icl-proteins-paper-a0.9", "_p20"),
  f"{DEVELOPMENT}-p20": (DEVELOPMENT, "_p20"),
}
REPLAYED = ("time_speedup", "epoch_speedup", "pair_speedup", "pair_epoch_speedup")


def _read_at(group: str, key: str) -> tuple[str, str] | None:
  """(group, key) where ``key`` of ``group`` is read: its own runs, or a replay's source under the suffixed key;
  None for a measure a replay does not give."""
  if group not in REPLAYS:
    return group, key
  source, suffix = REPLAYS[group]
  head, _, rest = key.partition(".")
  return (source, f"{head}{suffix}.{rest}") if head in REPLAYED else None


def _read_all(group: str, keys: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
  """:func:`_read_at` for the keys of one row (each a measure a replay gives)."""
  read = [_read_at(group, k) for k in keys]
  if any(r is None for r in read):
    raise ValueError(f"{group} does not give every one of {keys}")
  return read[0][0], tuple(r[1] for r in read)  # type: ignore[index]


# groups that ran one setting twice: their rows are replicates, pooled on the page when they disagree
REPLICATES = {"icl-proteins-quick": "quick, patience 10", "icl-budget-p10": "quick, patience 10"}


def _rows(key: str, method: str, alpha: float, value=None, *, target: bool = True) -> tuple[Measurement, ...]:
  """Every group that ran ``method`` at ``alpha``: ``key.method.a<alpha>`` under the paper's rule, then (``target``)
  the same speed-up to retraining's accuracy under bcjax's target rule. The paper preset first: the primary."""
  rows = []
  kinds = [("", key)] + ([(", time to retraining's accuracy (bcjax's target rule)", f"target_{key}")] if target else [])
  for suffix, k in kinds:
    for group, (label, methods, alphas, patience, series, command) in GROUPS.items():
      at = _read_at(group, f"{k}.{method}.a{alpha}")
      if method in methods and alpha in alphas and at is not None:
        rows.append(
          Measurement(
            f"PROTEINS, α = {alpha}, {label}{suffix}",
            *at,
            value,
            budget=patience if series else None,
            series=f"{series}, α = {alpha}{suffix}" if series else None,
            command=command,
            replicate=REPLICATES.get(group),
          )
        )
  return tuple(rows)


def _speedup(key, where, quote, values: dict[float, float], method, *, kind="time", verbatim=False) -> Claim:
  """A Table 4 cell at α = 0.3 (the primary rows first) and the same method's cells at α = 0.5 and 0.7 as
  sensitivity rows, each against its own paper value."""
  what = "training time" if kind == "time" else "converged epoch"
  rows = tuple(
    dataclasses.replace(r, paper=values[a])
    for a in sorted(values, key=lambda a: a != 0.3)
    for r in _rows(f"{kind}_speedup", method, a, target=kind == "time")
  )
  return Claim(
    key,
    "icl",
    where,
    quote,
    LEVEL,
    values[0.3],
    f"retraining's {what} over the method's, to the converged epoch (the paper's rule), ratio of means over paired "
    "runs with its t-interval",
    rows,
    null=1.0,
    unit="×",
    verbatim=verbatim,
    budget_unit="epochs of patience",
  )


_NAMES = {
  "icl": "ICL (Ours)",
  "finetune": "Fine-tuning",
  "replay": "Replay",
  "distill": "Distillation",
  "meta": "ICL (w/o LRL)",
  "lrl": "ICL (w/o M)",
  "nce2-only": "ICL (w/o M+LRL)",
}
TABLE_4 = {  # PROTEINS: α -> (time, epoch) speed-ups over retraining
  "icl": {0.3: (10.1, 10.5), 0.5: (5.8, 6.1), 0.7: (2.6, 2.7)},
  "finetune": {0.3: (25.7, 8.0), 0.5: (8.1, 3.9), 0.7: (2.7, 1.9)},
  "replay": {0.3: (2.9, 2.1), 0.5: (1.6, 1.0), 0.7: (1.4, 1.4)},
  "distill": {0.3: (18.2, 7.3), 0.5: (5.2, 2.7), 0.7: (0.9, 0.8)},
  "meta": {0.3: (3.8, 14.6), 0.5: (1.6, 1.7), 0.7: (1.0, 1.1)},
  "lrl": {0.3: (2.6, 3.6), 0.5: (2.1, 2.9), 0.7: (1.4, 2.1)},
  "nce2-only": {0.3: (2.5, 2.9), 0.5: (1.9, 2.0), 0.7: (1.1, 1.2)},
}
_VERBATIM = {  # the cells the text quotes in words
  ("icl", "time"): (
    "Table 4, §4.2 (High Efficiency (b))",
    "For GRL datasets, ICL also achieves a speedup of up to 10.1×",
  ),
  ("meta", "epoch"): (
    "§4.2 (Fast Convergence (b)), Table 4",
    "For GRL datasets, the experimental results are identical. ICL with its variants achieves a speedup of up to 14.6×",
  ),
}


def _table_4(method: str, kind: str) -> Claim:
  col = 0 if kind == "time" else 1
  values = {a: v[col] for a, v in TABLE_4[method].items()}
  key = f"icl.table-4.{method}" + ("" if kind == "time" else ".epochs")
  if (method, kind) in _VERBATIM:
    where, quote = _VERBATIM[method, kind]
    return _speedup(key, where, quote, values, method, kind=kind, verbatim=True)
  cells = " / ".join(f"{values[a]}×" for a in (0.3, 0.5, 0.7))
  what = "training time" if kind == "time" else "convergence epochs"
  quote = f"{_NAMES[method]} {cells} {what} on PROTEINS at α = 0.3 / 0.5 / 0.7"
  return _speedup(key, "Table 4", quote, values, method, kind=kind)


def _ablation_gap(key: str, where: str, quote: str, other: str, meaning: str) -> Claim:
  """§4.5's headings: ICL against one ablation (``other``), its training time over ICL's, paired (α = 0.3 primary)."""
  return Claim(
    key,
    "icl",
    where,
    quote,
    DIRECTION,
    None,
    f"{_NAMES[other]}'s training time over ICL's, to the converged epoch (> 1: {meaning}); α = 0.3 first",
    tuple(
      Measurement(f"PROTEINS, α = {a}, {label}", *_read_at(g, f"pair_speedup.icl.{other}.a{a}"), command=cmd)  # type: ignore[misc]
      for a in (0.3, 0.5, 0.7)
      for g, (label, methods, alphas, _, _, cmd) in GROUPS.items()
      if {"icl", other} <= set(methods) and a in alphas
    ),
    null=1.0,
    side=1,
    unit="×",
  )


CLAIMS: tuple[Claim, ...] = (
  *(_table_4(m, kind) for m in TABLE_4 for kind in ("time", "epoch")),
  Claim(
    "icl.figure-4.alpha",
    "icl",
    "Figure 4, §4.4",
    "Overall, ICL achieves a 2.2×-18.3× speedup of training time and a 2.7×-22.9× speedup of convergence epoch",
    LEVEL,
    (2.2, 18.3),
    "ICL's training-time speed-up at each growth ratio α (the paper's range spans α = 0.1 … 0.9 on ImageNet-2 and "
    "PROTEINS)",
    tuple(r for a in (0.5, 0.3, 0.7) for r in _rows("time_speedup", "icl", a, target=False)),
    null=1.0,
    unit="×",
    figure="icl-proteins-paper-figure4.png",
  ),
  Claim(
    "icl.alpha-falls",
    "icl",
    "§4.4 (Limited Superiority by the Ratio of New Data)",
    "As α increases, the speedup of ICL becomes smaller due to a large amount of new data",
    DIRECTION,
    None,
    "ICL's mean per-run time speed-up at α = 0.3 minus at α = 0.7 (Welch t-interval over the runs)",
    tuple(
      Measurement(f"PROTEINS, {label}", g, "alpha_drop.icl", command=cmd)
      for g, (label, methods, alphas, _, _, cmd) in GROUPS.items()
      if "icl" in methods and len(alphas) > 1 and g not in REPLAYS
    ),
    side=1,
    unit="×",
  ),
  _ablation_gap(
    "icl.meta-essential",
    "§4.5 (Meta-optimization is essential.)",
    "without meta-optimization, the efficiency is significantly lowered",
    "lrl",
    "meta-optimization helps",
  ),
  _ablation_gap(
    "icl.lrl-vital",
    "§4.5",
    "Learning Rate Learning has a vital contribution to the improvement of efficiency",
    "meta",
    "learned rates help",
  ),
  Claim(
    "icl.accuracy-parity",
    "icl",
    "§4.3",
    "the difference between ICL and the others falls in [−0.0137, +0.0126] with an average improvement of 0.002",
    PARITY,
    (-1.37, 1.26),
    "ICL's SVM accuracy on all data minus retraining's (points), t-interval over the runs (the paper's band is ICL "
    "against every other method; retraining is the one measured here)",
    tuple(r for a in (0.3, 0.5, 0.7, 0.9) for r in _rows("accuracy_gap", "icl", a, target=False)),
    unit=" pts",
    budget_unit="epochs of patience",
  ),
  Claim(
    "icl.epoch-cost",
    "icl",
    "§4.2",
    "although the time complexity of ICL is larger",
    DIRECTION,
    None,
    "ICL's seconds per epoch over retraining's (> 1: an ICL epoch costs more), t-interval over the runs: the "
    'sentence\'s premise only; its conclusion, "the superiority of ICL in terms of efficiency", is judged by the '
    "speed-up claims above",
    tuple(r for a in (0.3, 0.5, 0.7, 0.9) for r in _rows("epoch_cost", "icl", a, target=False)),
    null=1.0,
    side=1,
    unit="×",
    budget_unit="epochs of patience",
  ),
  Claim(
    "icl.nce2-beats-baselines",
    "icl",
    "§4.2 (High Efficiency (b))",
    "It is worth mentioning that ICL can beat replay and distillation with only NCE-II",
    ORDERING,
    None,
    "replay's and distillation's training time over ICL (w/o M+LRL)'s, to the converged epoch, α = 0.3: both > 1 (on "
    "PROTEINS the paper's own Table 4 has NCE-II alone at 2.5× against replay's 2.9× and distillation's 18.2×: the "
    "sentence, which follows REDDIT's 5.9×, holds there, 5.9× against 2.9× and 2.4×; no REDDIT run here)",
    tuple(
      Measurement(
        f"PROTEINS, α = {a}, " + GROUPS[g][0],
        *_read_all(g, (f"pair_speedup.nce2-only.replay.a{a}", f"pair_speedup.nce2-only.distill.a{a}")),
        command=PAPER,
      )
      for a in (0.3, 0.5, 0.7)
      for g in ("icl-proteins-paper", "icl-proteins-paper-p20", DEVELOPMENT, f"{DEVELOPMENT}-p20")
      if a in GROUPS[g][2]
    ),
    null=1.0,
    side=1,
    unit="×",
  ),
  Claim(
    "icl.convergence-exceeds-all",
    "icl",
    "§4.2 (Fast Convergence (a))",
    "Similar to training time, the convergence speedup of ICL exceeds all methods",
    ORDERING,
    None,
    "each other method's converged epoch over ICL's, α = 0.3: all > 1 (the sentence is §4.2's (a) For CV datasets; "
    "the paper's own Table 4 has ICL (w/o LRL) at 14.6× against ICL's 10.5× on PROTEINS, the graph set measured "
    "here)",
    tuple(
      Measurement(
        f"PROTEINS, α = {a}, " + GROUPS[g][0],
        *_read_all(g, tuple(f"pair_epoch_speedup.icl.{m}.a{a}" for m in GROUPS[g][1] if m != "icl")),
        command=GROUPS[g][5],
      )
      for a in (0.3, 0.5, 0.7)
      for g in ("icl-proteins-paper", "icl-proteins-paper-p20", DEVELOPMENT, f"{DEVELOPMENT}-p20", "icl-proteins-quick")
      if a in GROUPS[g][2]
    ),
    null=1.0,
    side=1,
    unit="×",
  ),
  Claim(
    "icl.alpha-0.9",
    "icl",
    "§4.4 (Limited Superiority by the Ratio of New Data)",
    "ICL nevertheless gains a 2.2×-5.3× speedup when the amount of the new data is 9 times the old one",
    LEVEL,
    (2.2, 5.3),
    "ICL's training-time speed-up at α = 0.9 (PROTEINS and ImageNet-2 in the paper, Fig. 4: the range likely spans "
    "the two data sets); the sentence does not say whether its speed-up is of time or of converged epochs (§4.4's "
    "overall ranges: 2.2–18.3× time, 2.7–22.9× epochs), so the converged-epoch speed-up is shown beside it against "
    "the same band",
    _rows("time_speedup", "icl", 0.9)
    + tuple(
      dataclasses.replace(r, label=r.label + ", converged epochs")
      for r in _rows("epoch_speedup", "icl", 0.9, target=False)
    ),
    null=1.0,
    unit="×",
  ),
  Claim(
    "icl.baselines-near-retraining",
    "icl",
    "§4.4 (Adaption Ability with a Large Ratio of New Data)",
    "ICL consistently achieves faster convergence while the other baselines nearly equal the retraining",
    QUALITATIVE,
    None,
    '"nearly equal" gives no band; the baselines\' epoch speed-ups are in the Table 4 rows above',
    (),
    needs='the paper gives no band for "nearly equal"',
  ),
  Claim(
    "icl.abstract.convergence",
    "icl",
    "Abstract, Table 3",
    "ICL achieves up to 16.7× training speedup and 16.8× faster convergence with competitive results",
    LEVEL,
    16.8,
    "retraining's converged epoch over ICL's on ImageNet-2, α = 0.3",
    (),
    null=1.0,
    unit="×",
    needs="ImageNet-2 is not available offline",
  ),
  Claim(
    "icl.nce2-only.reddit",
    "icl",
    "§4.2 (Fast Training (b)), Table 4",
    "and still 5.9× without the meta-optimization and LRL",
    LEVEL,
    5.9,
    "retraining's training time over ICL (w/o M+LRL)'s on REDDIT-BINARY, α = 0.3",
    (
      Measurement(
        "REDDIT-BINARY, α = 0.3",
        "icl-reddit-quick",
        "time_speedup.nce2-only.a0.3",
        command="python -m experiments.icl --dataset reddit-binary --data-dir DIR --preset quick --speedup "
        "convergence --runs 3 (2,000 graphs of ~430 nodes: hours on 2 CPU cores; in make reproduce-gpu)",
      ),
    ),
    null=1.0,
    unit="×",
  ),
  Claim(
    "icl.table-4.reddit",
    "icl",
    "Table 4",
    "ICL (Ours) 2.7× time, 2.5× epochs on REDDIT at α = 0.3",
    LEVEL,
    2.7,
    "retraining's training time over ICL's on REDDIT-BINARY, α = 0.3",
    (
      Measurement(
        "REDDIT-BINARY, α = 0.3",
        "icl-reddit-quick",
        "time_speedup.icl.a0.3",
        command="python -m experiments.icl --dataset reddit-binary --data-dir DIR --preset quick --speedup "
        "convergence --runs 3 (hours on 2 CPU cores; in make reproduce-gpu)",
      ),
    ),
    null=1.0,
    unit="×",
    verbatim=False,
  ),
  Claim(
    "icl.table-3.cv",
    "icl",
    "Table 3",
    "ICL (Ours) 14.2× training time on MNIST-2 at α = 0.3 (16.7× at α = 0.5)",
    LEVEL,
    14.2,
    "retraining's training time over ICL's on MNIST-2, α = 0.3",
    (
      Measurement(
        "MNIST-2 (test split only)",
        "icl-mnist-quick",
        "time_speedup.icl.a0.3",
        command="python -m experiments.icl --dataset mnist-2 --data-dir DIR --preset quick --speedup convergence "
        "--runs 3 (in make reproduce-gpu)",
      ),
    ),
    null=1.0,
    unit="×",
    verbatim=False,
    data="ImageNet-2 is not available offline; MNIST's test split (10,000 images) is, its training split is not, so "
    "MNIST-2 here has a sixth of the paper's images.",
  ),
  Claim(
    "icl.figure-5.loss",
    "icl",
    "Figure 5, §4.5 (ImageNet-2 and REDDIT)",
    "From Figure 5, NCE-II's decrease rate of loss is faster than only applying NCE-I",
    DIRECTION,
    None,
    "the epoch loss's decrease per epoch, NCE-II's over NCE-I's, on the figure's data (ImageNet-2, REDDIT)",
    (),
    side=1,
    needs="REDDIT-BINARY runs (make reproduce-gpu) and a loss-rate measure over their curves; ImageNet-2 is not "
    "available offline. bcjax's PROTEINS curves are in the figure",
    figure="icl-proteins-paper-figure5.png",
  ),
  Claim(
    "icl.figure-5.lrl",
    "icl",
    "Figure 5, §4.5",
    "In Figure 5, it is obvious that the loss declines faster with LRL compared with the Adam algorithm",
    DIRECTION,
    None,
    "the epoch loss's decrease per epoch with learned rates over Adam's, on the figure's data",
    (),
    side=1,
    needs="REDDIT-BINARY runs (make reproduce-gpu) and a loss-rate measure over their curves",
  ),
)


# the methods the development rule judged (experiments.reproduction.development.JUDGED): only claims comparing these two
# get a stand-in; a rate chosen on retraining's and ICL's curves says nothing about whether the baselines train
JUDGED_KEYS = ("time_speedup.icl.a0.3", "epoch_speedup.icl.a0.3", "accuracy_gap.icl.a0.3", "epoch_cost.icl.a0.3")


def _stands_in(claim: Claim) -> Claim:
  """``claim`` with its development-rate row marked as standing in for the ``paper`` preset's primary (the same
  measure at the same α), for the measures of the methods the rule judged: at Adam 1e-5 retraining's loss does not
  train on PROTEINS in most runs."""
  if not claim.measurements:
    return claim
  primary = claim.measurements[claim.primary]
  if primary.group != "icl-proteins-paper" or primary.key not in JUDGED_KEYS:
    return claim
  marked = tuple(
    dataclasses.replace(m, stands_in=DEVELOPMENT_RULE) if m.group == DEVELOPMENT and m.key == primary.key else m
    for m in claim.measurements
  )
  return dataclasses.replace(claim, measurements=marked)


CLAIMS = tuple(_stands_in(c) for c in CLAIMS)
