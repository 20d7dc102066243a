"""Command line of the training comparison (Table 2 / Figure 3; App. F, Figure 9 on MovieLens).

  python -m experiments.gramian_training --preset quick                          # synthetic default
  python -m experiments.gramian_training --dataset movielens-100k --data-dir ml-100k/ --preset paper
"""

import argparse
import dataclasses
import sys
from pathlib import Path

from experiments import common
from experiments.gramian_training.configs import METHODS, PRESETS, SAMPLINGS, preset
from experiments.gramian_training.run import time_to_reach, train_method
from experiments.two_tower.cli import add_data_arguments, open_run


def table_2(results: dict) -> str:
  """Final validation MAP@10 per sampling distribution, SOGram vs the baseline (the paper's Table 2 layout)."""
  rows = []
  for s in SAMPLINGS:
    base, ours = results["methods"].get(f"sampling-{s}"), results["methods"].get(f"sogram-{s}")
    if base is None or ours is None:
      continue
    gain = 100.0 * (ours["final_map@10"] / base["final_map@10"] - 1.0) if base["final_map@10"] > 0 else float("nan")
    reach = time_to_reach(ours["curve"], base["final_map@10"])
    rows.append([s, base["final_map@10"], ours["final_map@10"], f"{gain:+.1f}%",
                 "never" if reach is None else f"{100 * reach / max(ours['train_seconds'], 1e-9):.0f}%",
                 base["exact"]["recall@50"], ours["exact"]["recall@50"]])
  return common.markdown_table(["sampling", "baseline MAP@10", "SOGram MAP@10", "improvement",
                                "SOGram time to baseline's final", "baseline Recall@50 (exact)",
                                "SOGram Recall@50 (exact)"], rows)


def figure_3(path: Path, results: dict) -> None:
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(6, 4))
  colors = dict(zip(SAMPLINGS, ("C0", "C1", "C2")))
  for name, res in results["methods"].items():
    kind, _, s = name.partition("-")
    ax.plot([c["train_seconds"] for c in res["curve"]], [c["map@10"] for c in res["curve"]],
            "-" if kind == "sogram" else "--", color=colors[s], label=name)
  ax.set(xlabel="training time (s)", ylabel="validation MAP@10", title=results["dataset"])
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  common.save_figure(fig, path)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.gramian_training",
                                   description="Two-tower training with SOGram vs candidate sampling (uniform, "
                                               "linear, sqrt): validation MAP@10 over training time. Writes "
                                               "results.json, table.md (Table 2 layout), figure3.png, metrics.jsonl.")
  parser.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)}")
  parser.add_argument("--steps", type=int, help="override the preset's number of steps")
  parser.add_argument("--alpha", type=float, help="override SOGram's alpha")
  add_data_arguments(parser, PRESETS, "gramian_training")
  args = parser.parse_args(argv)
  cfg = dataclasses.replace(preset(args.preset, args.dataset), seed=args.seed)
  if args.methods:
    methods = tuple(m.strip() for m in args.methods.split(","))
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
      parser.error(f"unknown method(s) {unknown}; choose from {','.join(METHODS)}")
    cfg = dataclasses.replace(cfg, methods=methods)
  if args.steps:
    cfg = dataclasses.replace(cfg, steps=args.steps, eval_every=min(cfg.eval_every, args.steps))
  if args.alpha:
    cfg = dataclasses.replace(cfg, alpha=args.alpha)
  opened = open_run(args, cfg, "gramian_training")
  if opened is None:
    return 2
  out, corpus = opened
  results = {"dataset": args.dataset, "preset": args.preset, "seed": cfg.seed,
             "corpus": {"left": corpus.left.num_entities, "right": corpus.right.num_entities,
                        "train_pairs": len(corpus.train.left), "val_pairs": len(corpus.val.left)}, "methods": {}}
  with common.MetricWriter(out / "metrics.jsonl") as writer:
    for method in cfg.methods:
      results["methods"][method] = train_method(method, corpus, cfg, progress=not args.no_progress, log=writer.write)
  common.write_json(out / "results.json", common.jsonable(results))
  table = table_2(results)
  common.write_text(out / "table.md", table)
  figure_3(out / "figure3.png", results)
  print(f"\n{args.dataset}: final validation MAP@10 against {min(cfg.num_candidates, corpus.right.num_entities)} "
        f"candidates (Table 2 layout):\n")
  print(table)
  print(f"outputs in {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
