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


def summarise(runs: dict[str, list[dict]]) -> dict:
  """Per method the means over independent runs of epochs, training and compile time and accuracies, and the
  speed-ups time_retrain / time_method and epoch_retrain / epoch_method (ratios of the means)."""
  out = {}
  for m, rs in runs.items():
    out[m] = {
      "epochs": float(np.mean([r["epochs"] for r in rs])),
      "train_seconds": float(np.mean([r["train_seconds"] for r in rs])),
      "compile_seconds": float(np.mean([r["compile_seconds"] for r in rs])),
      "accuracy": {s: float(np.mean([r["accuracy"][s] for r in rs])) for s in ("all", "old", "new")},
      "stopped": [r["stopped"] for r in rs],
      "runs": rs,
    }
  base = out.get("retrain")
  for m, o in out.items():
    o["time_speedup"] = base["train_seconds"] / o["train_seconds"] if base and o["train_seconds"] > 0 else None
    o["epoch_speedup"] = base["epochs"] / o["epochs"] if base else None
    if base:  # paired by run: the same split and pre-trained encoder
      o["time_speedups_by_run"] = [
        b["train_seconds"] / r["train_seconds"] if r["train_seconds"] > 0 else None
        for b, r in zip(base["runs"], o["runs"])
      ]
      o["time_speedup_runs_for_10pct"] = runs_for_precision(o["time_speedups_by_run"])
  return out


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
      cells.append(
        "–" if c is None or c["time_speedup"] is None else f"{c['time_speedup']:.1f}, {c['epoch_speedup']:.1f}"
      )
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
    "Speed-ups vs retraining (time, epoch), the layout of the paper's Tables 3–4:",
    "",
    speedup_table(by_alpha),
    "Converged epochs, times and SVM accuracies:",
    "",
    detail_table(by_alpha),
    "Pre-trained encoder (old data only), SVM accuracy all/old/new %: "
    + ", ".join(f"α={a}: {p['all']:.2f}/{p['old']:.2f}/{p['new']:.2f}" for a, p in pre.items()),
    "",
  ]
  return "\n".join(lines)


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
