"""Command line of the BC-Aligner experiment (Table 3, Fig. 3 and, with --lambda-sweep, Fig. 5).

  python -m experiments.bc_aligner --preset quick                                    # synthetic default
  python -m experiments.bc_aligner --dataset movielens-100k --data-dir ml-100k/ --preset paper --epochs 100
  python -m experiments.bc_aligner --dataset amazon-Musical_Instruments --download --preset paper
"""

import argparse
import dataclasses
import os
import sys
import time

import jax
from tqdm.auto import tqdm

from bcjax.data import GRAPH_DATASETS, MOVIELENS_VARIANTS, TASKS, load_graph_dataset
from experiments import common
from experiments.bc_aligner import report
from experiments.bc_aligner.configs import JOINT, METHODS, PRESETS, Config, preset
from experiments.bc_aligner.consumers import plan_tasks, unintended_aucs
from experiments.bc_aligner.data import attribute_sizes, check_versions, version_data, with_item_ids
from experiments.bc_aligner.methods import MethodRunner

BASELINES = ("fix-m0", "non-bc")  # the degradations are relative to these; they always run


def parse_args(argv):
  parser = argparse.ArgumentParser(
      prog="python -m experiments.bc_aligner",
      description="Backward-compatible embeddings on an evolving user-item graph: nine methods (Keep-All, Fix-M0, "
                  "Finetune-M0, Non-BC, post-hoc and joint alignment, BC-Aligner) over five versions of a GraphSAGE "
                  "recommender; intended task = link prediction (val Recall@50), unintended = five version-0 "
                  "consumer tasks (ROC-AUC). Writes config.json, metrics.jsonl, results.json, table.md, figure3.png "
                  "(figure5.png with --lambda-sweep) and the linear methods' registries.")
  parser.add_argument("--dataset", default="synthetic", help=f"one of {', '.join(GRAPH_DATASETS)}")
  parser.add_argument("--data-dir", help="folder with the dataset's files (a MovieLens folder of any variant; Amazon "
                                         "reviews and metadata .json.gz of the 2014 or 2018 release)")
  parser.add_argument("--reviews", help="Amazon: the reviews file itself (instead of --data-dir)")
  parser.add_argument("--meta", help="Amazon: the product metadata file (optional: without it items have no "
                                     "attributes and get learned id embeddings)")
  parser.add_argument("--download", action="store_true", help="download missing public files into the cache")
  parser.add_argument("--preset", choices=sorted(PRESETS), default="quick",
                      help="quick: minutes on CPU; paper: the reference's protocol; test: seconds")
  parser.add_argument("--out", help="new or empty output directory (default: runs/bc_aligner-<time>)")
  parser.add_argument("--lambda", dest="lam", type=float, help="alignment weight λ (default 16)")
  parser.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)} (fix-m0 and non-bc always "
                                        f"run: the degradations are relative to them)")
  parser.add_argument("--seed", type=int, help="PRNG seed of models, sampling and the synthetic data (default 42)")
  parser.add_argument("--epochs", type=int, help="override the preset's epochs per version; finetune gets half, and the evaluation interval and the "
                           "epoch > N selection rule scale by the same factor")
  parser.add_argument("--consumer-hidden", help="override the consumer grid's hidden widths, e.g. 128,256")
  parser.add_argument("--consumer-dropout", help="override the consumer grid's dropout rates, e.g. 0,0.25,0.5")
  parser.add_argument("--consumer-seeds", type=int, help="override the number of consumer seeds (paper: 10)")
  parser.add_argument("--consumer-epochs", type=int, help="override the consumer epochs (paper: 300)")
  parser.add_argument("--lambda-sweep", help="comma-separated λ values for BC-Aligner (Fig. 5), e.g. 1,2,4,8,16,32")
  parser.add_argument("--item-std", choices=("unbiased", "torch_scatter"),
                      help="std of binary-item-rating-std: unbiased (default) or the reference code's torch_scatter "
                           "convention (1e-6 in the divisor: an item whose std is exactly 1.0 gets label 0)")
  parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
  args = parser.parse_args(argv)
  amazon = args.dataset.startswith("amazon-") and len(args.dataset) > len("amazon-")
  movielens = args.dataset.removeprefix("movielens-") in MOVIELENS_VARIANTS and args.dataset.startswith("movielens-")
  if not (args.dataset == "synthetic" or amazon or movielens):
    parser.error(f"--dataset {args.dataset!r} is not one of {', '.join(GRAPH_DATASETS)}")
  if (args.reviews or args.meta) and not amazon:
    parser.error("--reviews and --meta go with an amazon-<Category> dataset")
  for flag, path in (("--reviews", args.reviews), ("--meta", args.meta), ("--data-dir", args.data_dir)):
    if path is not None and not os.path.exists(path):
      parser.error(f"{flag} {path} does not exist")
  cfg = preset(args.preset, args.dataset)
  if args.seed is not None:
    cfg = dataclasses.replace(cfg, seed=args.seed)
  if args.lam is not None:
    cfg = dataclasses.replace(cfg, lam=args.lam)
  if args.item_std is not None:
    cfg = dataclasses.replace(cfg, item_std=args.item_std)
  if args.epochs is not None:
    if args.epochs < 1:
      parser.error(f"--epochs must be >= 1, got {args.epochs}")
    scale = args.epochs / cfg.epochs  # the evaluation cadence and the selection rule scale with the schedule
    cfg = dataclasses.replace(cfg, epochs=args.epochs, finetune_epochs=max(args.epochs // 2, 1),
                              eval_every=max(1, round(cfg.eval_every * scale)),
                              select_after=int(cfg.select_after * scale))
  cfg = _consumer_overrides(parser, args, cfg)
  methods = METHODS
  if args.methods:
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
      parser.error(f"unknown method(s) {unknown}; choose from {','.join(METHODS)}")
    methods = tuple(m for m in METHODS if m in set(methods) | set(BASELINES))
  sweep = list(_numbers(parser, "--lambda-sweep", args.lambda_sweep, float, lambda v: v > 0)) if args.lambda_sweep \
      else []
  return args, cfg, methods, sweep


def _numbers(parser, flag: str, text: str, kind, valid) -> tuple:
  try:
    values = tuple(kind(x) for x in text.split(",") if x.strip())
  except ValueError:
    parser.error(f"{flag} must be comma-separated numbers, got {text!r}")
  if not values or any(not valid(v) for v in values):
    parser.error(f"{flag} got {text!r}, which has no value or an out-of-range one")
  return values


def _consumer_overrides(parser, args, cfg: Config) -> Config:
  """The consumer protocol's budget knobs (the reference's grid × 300 epochs × 10 seeds is hours on a CPU)."""
  changes = {}
  if args.consumer_hidden:
    changes["consumer_hidden"] = _numbers(parser, "--consumer-hidden", args.consumer_hidden, int, lambda v: v >= 1)
  if args.consumer_dropout:
    changes["consumer_dropout"] = _numbers(parser, "--consumer-dropout", args.consumer_dropout, float,
                                           lambda v: 0.0 <= v < 1.0)
  for name in ("consumer_seeds", "consumer_epochs"):
    value = getattr(args, name)
    if value is not None:
      if value < 1:
        parser.error(f"--{name.replace('_', '-')} must be >= 1, got {value}")
      changes[name] = value
  return dataclasses.replace(cfg, **changes)


def main(argv=None) -> int:
  args, cfg, methods, sweep = parse_args(argv)
  started = time.perf_counter()
  def load():
    extra = {"reviews": args.reviews, "meta": args.meta} if args.reviews or args.meta else dict(cfg.synthetic)
    graph = with_item_ids(load_graph_dataset(args.dataset, args.data_dir, download=args.download, seed=cfg.seed,
                                             **extra))
    versions = version_data(graph)
    check_versions(versions)
    return graph, versions, plan_tasks([v.split for v in versions], cfg.item_std)
  opened = common.open_run(args.out, "bc_aligner", load)
  if opened is None:
    return 2
  out, (graph, versions, (tau, left_out)) = opened
  for note in graph.notes:
    print(f"data: {note}")
  for task, reason in left_out.items():
    print(f"consumer task {task} left out: {reason}")
  tasks = tuple(t for t in TASKS if t not in left_out)
  common.write_json(out / "config.json", {"dataset": args.dataset, "preset": args.preset, "methods": methods,
                                          "lambda_sweep": sweep, "reviews": args.reviews, "meta": args.meta,
                                          **common.jsonable(dataclasses.asdict(cfg))})
  splits = [v.split for v in versions]
  key = jax.random.key(cfg.seed)
  with common.MetricWriter(out / "metrics.jsonl") as writer:
    runner = MethodRunner(versions, attribute_sizes(graph), cfg, key, out / "registries", writer.write)
    sweep_runners = {lam: runner.with_lambda(lam) for lam in sweep if lam != cfg.lam}
    total = runner.epochs_needed(methods) + sum(r.epochs_needed(("bc-aligner",)) - cfg.epochs
                                                for r in sweep_runners.values())
    with tqdm(total=total, desc="embedding models (epochs)", disable=args.no_progress) as bar:
      runner.progress = bar
      runs = {m: runner.run(m) for m in methods}
      for lam, r in sweep_runners.items():
        r.progress = bar
        runs[f"bc-aligner@{lam:g}"] = r.run("bc-aligner")
    if sweep and cfg.lam in sweep and "bc-aligner" not in runs:
      runs["bc-aligner"] = runner.run("bc-aligner")
    published = {m: r.published for m, r in runs.items()}
    n_consumers = len(tasks) * (len(cfg.consumer_hidden) * len(cfg.consumer_dropout) + cfg.consumer_seeds)
    with tqdm(total=n_consumers, desc="consumer models", disable=args.no_progress) as bar:
      consumers = unintended_aucs(splits, runs["fix-m0"].published, published, tau, cfg, writer.write, bar, tasks)
  summary = report.summarise({m: r.recall_by_version for m, r in runs.items()}, published, consumers)
  results = {"dataset": args.dataset, "preset": args.preset, "seed": cfg.seed, "config": {"lam": cfg.lam},
             "graph": {"users": graph.num_users, "items": graph.num_items, "edges": graph.num_edges,
                       "versions": [{"users": s.num_users, "items": s.num_items, "train_edges": len(s.train_user),
                                     "val_edges": len(s.val_user)} for s in splits]},
             "data_notes": list(graph.notes), "consumers_left_out": left_out,
             "methods": {m: summary[m] for m in methods},
             "consumers": {t: {k: c[k] for k in ("config", "steps", "stop_auc")} for t, c in consumers.items()}}
  if sweep:
    results["lambda_sweep"] = {f"{lam:g}": summary["bc-aligner" if lam == cfg.lam else f"bc-aligner@{lam:g}"]
                               for lam in sweep}
  results["seconds"] = time.perf_counter() - started
  common.write_json(out / "results.json", results)
  table = report.table_3(results)
  common.write_text(out / "table.md", table)
  report.figure_3(out / "figure3.png", results)
  if sweep:
    report.figure_5(out / "figure5.png", results["lambda_sweep"])
  print(table)
  print(f"results in {out} ({results['seconds']:.0f} s)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
