"""Command line of the ICL experiment (Tables 3–4, Figs. 2–3 as numbers, Fig. 5 and, with --alpha-sweep, Fig. 4).

  python -m experiments.icl --preset quick                                       # embedded synthetic graphs
  python -m experiments.icl --dataset proteins-full --data-dir DIR --alpha-sweep 0.3,0.5,0.7 --preset quick
  python -m experiments.icl --dataset digits-2 --preset quick                    # embedded 8×8 digits
  python -m experiments.icl --dataset mnist-2 --data-dir mnist/ --preset paper --runs 5
"""

import argparse
import dataclasses
import sys
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from bcjax.data import growth_split
from experiments import common
from experiments.icl import report
from experiments.icl.configs import PRESETS
from experiments.icl.datasets import DATASETS, known_dataset, load_dataset
from experiments.icl.evaluate import accuracies, check_splits
from experiments.icl.methods import METHODS, Context, pretrain, train_method
from experiments.icl.train import split_encoder


def parse_args(argv):
  parser = argparse.ArgumentParser(
      prog="python -m experiments.icl",
      description="Incremental contrastive learning: pre-train on the old data X, then grow it by ΔX (growth ratio "
                  "α = |ΔX| / |X ∪ ΔX|) and train each method until convergence; speed-ups vs retraining, SVM "
                  "accuracy on all/old/new data. Writes config.json, metrics.jsonl, results.json, table.md, "
                  "figure5.png (and figure4.png with --alpha-sweep).")
  parser.add_argument("--dataset", default="synthetic-graphs",
                      help=f"one of {', '.join(DATASETS)}; tu:NAME reads any TU dataset (e.g. tu:IMDB-BINARY) from "
                           f"--data-dir (its folder or zip, or a folder holding NAME/ or NAME.zip) or, with --download, "
                           f"from the TU Dortmund collection")
  parser.add_argument("--data-dir", help="folder with the dataset's files (TU folder/zip, GIN zip, MNIST idx)")
  parser.add_argument("--download", action="store_true", help="download missing public files into the cache")
  parser.add_argument("--alpha", type=float, default=0.3, help="growth ratio α in (0, 1) (default 0.3)")
  parser.add_argument("--alpha-sweep", help="comma-separated α values, e.g. 0.1,0.3,0.5,0.7,0.9 (Fig. 4)")
  parser.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)} (retrain always runs: the "
                                        f"speed-ups are relative to it)")
  parser.add_argument("--preset", choices=sorted(PRESETS), default="quick",
                      help="quick: minutes on CPU; paper: the paper's protocol; test: seconds")
  parser.add_argument("--out", help="new or empty output directory (default: runs/icl-<time>)")
  parser.add_argument("--patience", type=int, help="epochs without a new loss minimum before stopping "
                                                   "(paper 50, reference code 20)")
  parser.add_argument("--max-epochs", type=int, help="override the preset's epoch cap")
  parser.add_argument("--runs", type=int, help="independent runs averaged (paper 5)")
  parser.add_argument("--learning-rate", type=float, help="Adam learning rate (paper: searched in 1e-3..1e-5)")
  parser.add_argument("--inner-rule", choices=("paper", "batch-ratio"),
                      help="meta inner steps: max(ceil((1-α)/α), 1) (paper) or the code's batch ratio")
  parser.add_argument("--meta-outer", choices=("adam", "sgd"), help="ICL w/o LRL's outer step: SGD with lr_q (eq. 12, "
                                                                    "default) or Adam (the reference code)")
  parser.add_argument("--inner-learning-rate", type=float, help="ICL w/o LRL's support SGD rate lr_s (default 1e-2)")
  parser.add_argument("--outer-learning-rate", type=float, help="ICL w/o LRL's query SGD rate lr_q (default 1e-2)")
  parser.add_argument("--agent-hidden", type=int, help="LSTM width of the DDPG actors (paper 20, code 10)")
  parser.add_argument("--agent-layer-norm", action="store_true",
                      help="reproduce the reference actor's size-1 LayerNorm (makes the learned rate constant)")
  parser.add_argument("--ldp-std", choices=("population", "torch_scatter"),
                      help="std of the local degree profiles (featureless graphs): population (default) or the "
                           "reference's pinned PyG 1.6.3 (torch_scatter: unbiased, 1e-6 in the divisor)")
  parser.add_argument("--gcn-self-loops", choices=("always", "remaining"),
                      help="GCN self-loops: one added to every node (default) or PyG's gcn_norm (replaces the "
                           "data's loops; the same on loop-free graphs)")
  parser.add_argument("--image-encoder", choices=("cnn", "resnet18"), help="image encoder (paper: resnet18)")
  parser.add_argument("--image-size", type=int, help="crop side of the image views (paper: 224)")
  parser.add_argument("--seed", type=int, help="PRNG seed of splits, models, views and SVM folds (default 0)")
  parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
  args = parser.parse_args(argv)
  if not known_dataset(args.dataset):
    parser.error(f"--dataset {args.dataset!r} is not one of {', '.join(DATASETS)}")
  cfg = PRESETS[args.preset]
  changes = {name: getattr(args, name) for name in ("patience", "max_epochs", "runs", "learning_rate", "inner_rule",
                                                    "meta_outer", "agent_hidden", "seed", "image_encoder", "image_size",
                                                    "ldp_std", "gcn_self_loops",
                                                    "inner_learning_rate", "outer_learning_rate")
             if getattr(args, name) is not None}
  for name in ("patience", "max_epochs", "runs", "agent_hidden", "image_size"):
    if name in changes and changes[name] < 1:
      parser.error(f"--{name.replace('_', '-')} must be >= 1, got {changes[name]}")
  for name in ("learning_rate", "inner_learning_rate", "outer_learning_rate"):
    if name in changes and not changes[name] > 0:
      parser.error(f"--{name.replace('_', '-')} must be > 0, got {changes[name]}")
  if args.agent_layer_norm:
    changes["agent_layer_norm"] = True
  cfg = dataclasses.replace(cfg, **changes)
  alphas = [args.alpha]
  if args.alpha_sweep:
    try:
      alphas = [float(a) for a in args.alpha_sweep.split(",") if a.strip()]
    except ValueError:
      parser.error(f"--alpha-sweep must be comma-separated numbers, got {args.alpha_sweep!r}")
    if not alphas:
      parser.error("--alpha-sweep got no value")
    if args.alpha not in alphas:
      alphas.insert(0, args.alpha)
  bad = [a for a in alphas if not 0.0 < a < 1.0]
  if bad:
    parser.error(f"growth ratios must lie in (0, 1), got {bad}")
  methods = METHODS
  if args.methods:
    chosen = {m.strip() for m in args.methods.split(",") if m.strip()}
    unknown = sorted(chosen - set(METHODS))
    if unknown:
      parser.error(f"unknown method(s) {unknown}; choose from {','.join(METHODS)}")
    methods = tuple(m for m in METHODS if m in chosen | {"retrain"})
  return args, cfg, alphas, methods


def planned_splits(num: int, alphas, cfg) -> dict:
  """The old/new split of every (α, run), exactly as :func:`run_alpha` will draw it."""
  return {f"α = {alpha:g}, run {run}": growth_split(num, alpha, np.random.default_rng(cfg.seed + 1000 * run))
          for alpha in alphas for run in range(cfg.runs)}


def run_alpha(data, alpha: float, methods, cfg, run: int, log, bar) -> tuple[dict, dict, dict]:
  """One independent run at growth ratio α: split, pre-train on X, train every method; returns the per-method
  records, their epoch losses and the pre-trained encoder's accuracies."""
  seed = cfg.seed + 1000 * run
  old, new = growth_split(data.num, alpha, np.random.default_rng(seed))
  ctx = Context(data, old, new, alpha, cfg)
  k_model, k_pre, k_methods = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), run), 3)
  fresh = split_encoder(data.new_model(cfg, k_model))

  def logger(name):
    def write(**record):
      log(alpha=alpha, run=run, **record)
      bar.set_postfix(alpha=alpha, run=run, method=name, epoch=record["epoch"], loss=f"{record['loss']:.4f}")
    return write
  pre, loss0 = pretrain(ctx, fresh, k_pre, seed, logger("pretrain"))
  bar.update()
  pre_acc = accuracies(pre.encoder, data, old, new, cfg.svm_folds, seed)
  records, losses = {}, {}
  for i, m in enumerate(methods):
    r = train_method(m, ctx, pre.encoder, fresh, loss0, jax.random.fold_in(k_methods, i), seed + i + 1, logger(m))
    records[m] = {"epochs": r.epochs, "train_seconds": r.train_seconds, "compile_seconds": r.compile_seconds,
                  "stopped": r.stopped, "accuracy": accuracies(r.encoder, data, old, new, cfg.svm_folds, seed)}
    losses[m] = r.losses
    bar.update()
  return records, losses, pre_acc


def main(argv=None) -> int:
  args, cfg, alphas, methods = parse_args(argv)
  started = time.perf_counter()
  def load():
    data = load_dataset(args.dataset, args.data_dir, download=args.download, seed=cfg.seed,
                        image_size=cfg.image_size, ldp_std=cfg.ldp_std)
    check_splits(data.labels, planned_splits(data.num, alphas, cfg), cfg.svm_folds)
    return data
  opened = common.open_run(args.out, "icl", load)
  if opened is None:
    return 2
  out, data = opened
  for note in data.notes:
    print(f"data: {note}")
  common.write_json(out / "config.json", {"dataset": args.dataset, "preset": args.preset, "alphas": alphas,
                                          "methods": methods, **dataclasses.asdict(cfg)})
  sweep, pretrained, curves = {}, {}, {}
  with common.MetricWriter(out / "metrics.jsonl") as writer, \
      tqdm(total=len(alphas) * cfg.runs * (len(methods) + 1), desc="pre-training + methods",
           disable=args.no_progress) as bar:
    for alpha in alphas:
      per_run, pre_runs = {m: [] for m in methods}, []
      for run in range(cfg.runs):
        records, losses, pre_acc = run_alpha(data, alpha, methods, cfg, run, writer.write, bar)
        for m, rec in records.items():
          per_run[m].append(rec)
        pre_runs.append(pre_acc)
        if run == 0:
          curves[f"{alpha:g}"] = losses
      sweep[f"{alpha:g}"] = {"methods": report.summarise(per_run)}
      pretrained[f"{alpha:g}"] = {s: float(np.mean([p[s] for p in pre_runs])) for s in ("all", "old", "new")}
  main_alpha = f"{alphas[0]:g}"
  results = {"dataset": args.dataset, "alpha": alphas[0], "methods": sweep[main_alpha]["methods"],
             "preset": args.preset, "runs": cfg.runs, "seed": cfg.seed, "num_samples": data.num,
             "pretrained": pretrained, "alpha_sweep": sweep, "data_notes": list(data.notes),
             "seconds": time.perf_counter() - started}
  common.write_json(out / "results.json", common.jsonable(results))
  table = report.tables(results)
  common.write_text(out / "table.md", table)
  report.figure_5(out / "figure5.png", curves[main_alpha], f"{args.dataset}, α = {main_alpha}")
  if len(alphas) > 1:
    report.figure_4(out / "figure4.png", {a: b["methods"] for a, b in sweep.items()}, args.dataset)
  print(table)
  print(f"results in {out} ({results['seconds']:.0f} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
