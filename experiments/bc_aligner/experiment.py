"""The BC-Aligner experiment (Table 3, Fig. 3 and, with --lambda-sweep, Fig. 5) as a harness experiment."""

import dataclasses
import time

import jax
from tqdm.auto import tqdm

from bcjax.data import GRAPH_DATASETS, MOVIELENS_VARIANTS, TASKS, load_graph_dataset, sample_users
from experiments import harness
from experiments.bc_aligner import chance, noise, report
from experiments.bc_aligner.configs import BASELINES, INTENDED_K, LINEAR, METHODS, PRESETS, Config, preset
from experiments.bc_aligner.consumers import above_chance, plan_tasks, unintended_aucs
from experiments.bc_aligner.data import attribute_sizes, check_cutoffs, check_versions, version_data, with_item_ids
from experiments.bc_aligner.methods import MethodRunner
from experiments.bc_aligner.train import recall
from experiments.bc_methods import check_transform_rank, transform_name

# The unintended side averages tasks; one task alone is that task's noise, not a side of the trade-off.
MIN_CONSUMER_TASKS = 2
CHANCE_KEYS = ("reference_auc", "reference_auc_ci95", "predicted_positive_share", "predicted_positive_share_by_seed")


class BCAligner(harness.Experiment):
  name = "bc_aligner"
  description = (
    "Backward-compatible embeddings on an evolving user-item graph: nine methods (Keep-All, Fix-M0, "
    "Finetune-M0, Non-BC, post-hoc and joint alignment, BC-Aligner) over five versions of a GraphSAGE "
    "recommender; intended task = link prediction (val Recall@50), unintended = five version-0 "
    "consumer tasks (ROC-AUC). Writes config.json, metrics.jsonl, stages/, results.json, table.md, "
    "figure3.png (figure5.png with --lambda-sweep, transforms.png with --transform-sweep) and the "
    "registries of the methods with a transformation."
  )
  config = Config
  presets = PRESETS
  path_flags = ("--reviews", "--meta")
  data_parallel = True
  datasets = (
    f"one of {', '.join(GRAPH_DATASETS)}; --data-dir: a MovieLens folder of any variant, or Amazon "
    f"reviews and metadata .json.gz of the 2014 or 2018 release"
  )

  def add_arguments(self, parser):
    parser.add_argument("--reviews", help="Amazon: the reviews file itself (instead of --data-dir)")
    parser.add_argument(
      "--meta",
      help="Amazon: the product metadata file (optional: without it items have no "
      "attributes and get learned id embeddings)",
    )

  def preset(self, args):
    base = preset(args.preset, args.dataset)
    epochs = harness.given_positive_int(args, "epochs")
    if epochs is not None:
      # the evaluation cadence, the selection rule and fine-tuning scale with the schedule
      scale = epochs / base.epochs
      base = dataclasses.replace(
        base,
        finetune_epochs=max(epochs // 2, 1),
        eval_every=max(1, round(base.eval_every * scale)),
        select_after=int(base.select_after * scale),
      )
    return base

  def check(self, args, cfg):
    amazon = args.dataset.startswith("amazon-") and len(args.dataset) > len("amazon-")
    movielens = args.dataset.startswith("movielens-") and args.dataset.removeprefix("movielens-") in MOVIELENS_VARIANTS
    if not (args.dataset == "synthetic" or amazon or movielens):
      raise harness.UsageError("--dataset", f"must be one of {', '.join(GRAPH_DATASETS)}; got {args.dataset!r}")
    if (args.reviews or args.meta) and not amazon:
      raise harness.UsageError("--reviews", "and --meta go with an amazon-<Category> dataset")
    check_transform_rank((cfg.transform, *cfg.transform_sweep), cfg.transform_rank, [d for _, d in cfg.versions])
    if cfg.transform_sweep and cfg.lambda_sweep:
      raise harness.UsageError("--transform-sweep", "and --lambda-sweep each multiply the runs: give one of them")
    if cfg.transform_sweep and not set(cfg.methods) & set(LINEAR):
      raise harness.UsageError(
        "--transform-sweep", f"needs a method with a transformation ({', '.join(LINEAR)}) in --methods"
      )

  def check_mesh(self, args, cfg, devices):
    if cfg.batch_size % devices:
      raise harness.UsageError(
        "--batch-size",
        f"{cfg.batch_size} is not divisible by the {devices} devices of the "
        f"data mesh (--devices): each device takes an equal share of the rows",
      )

  def methods(self, cfg) -> tuple[str, ...]:
    return tuple(m for m in METHODS if m in set(cfg.methods) | set(BASELINES))

  def describe(self, args, cfg):
    return {"dataset": args.dataset, "reviews": args.reviews, "meta": args.meta, "methods": self.methods(cfg)}

  def load(self, args, cfg):
    extra = {"reviews": args.reviews, "meta": args.meta} if args.reviews or args.meta else dict(cfg.synthetic)
    graph = load_graph_dataset(args.dataset, args.data_dir, download=args.download, seed=cfg.seed, **extra)
    if cfg.max_edges is not None:
      graph = sample_users(graph, cfg.max_edges, seed=cfg.seed)
    graph = with_item_ids(graph)
    versions = version_data(graph)
    check_versions(versions)
    check_cutoffs(versions, cfg.ks, INTENDED_K, given=getattr(args, "ks", None) is not None)
    tau, left_out = plan_tasks([v.split for v in versions], cfg.item_std)
    for note in graph.notes:
      print(f"data: {note}")
    for task, reason in left_out.items():
      print(f"consumer task {task} left out: {reason}")
    return graph, versions, tau, left_out

  def execute(self, run, args, cfg, data):
    graph, versions, tau, left_out = data
    started = time.perf_counter()
    methods, sweep = self.methods(cfg), cfg.lambda_sweep
    tasks = tuple(t for t in TASKS if t not in left_out)
    splits = [v.split for v in versions]
    runner = MethodRunner(versions, attribute_sizes(graph), cfg, jax.random.key(cfg.seed), run, mesh=args.mesh)
    sweep_runners = {lam: runner.with_lambda(lam) for lam in sweep if lam != cfg.lam}
    transformed = tuple(m for m in methods if m in LINEAR)  # the methods a transform sweep repeats
    kind_runners = {kind: runner.with_transform(kind) for kind in cfg.transform_sweep if kind != cfg.transform}
    total = (
      runner.epochs_needed(methods)
      + sum(r.epochs_needed(("bc-aligner",), shared=False) for r in sweep_runners.values())
      + sum(r.epochs_needed(transformed, shared=False) for r in kind_runners.values())
    )
    with tqdm(total=total, desc="embedding models (epochs)", disable=not run.progress) as bar:
      for r in (runner, *sweep_runners.values(), *kind_runners.values()):
        r.progress = bar
      runs = {m: runner.run(m) for m in methods}
      for lam, r in sweep_runners.items():
        runs[f"bc-aligner@{lam:g}"] = r.run("bc-aligner")
      for kind, r in kind_runners.items():
        runs.update({f"{m}[{kind}]": r.run(m) for m in transformed})
    if sweep and cfg.lam in sweep and "bc-aligner" not in runs:
      runs["bc-aligner"] = runner.run("bc-aligner")
    published = {m: r.published for m, r in runs.items()}
    n_consumers = len(tasks) * (len(cfg.consumer_hidden) * len(cfg.consumer_dropout) + cfg.consumer_seeds)
    with tqdm(total=n_consumers, desc="consumer models", disable=not run.progress) as bar:
      consumers = unintended_aucs(
        splits, runs["fix-m0"].published, published, tau, cfg, run.log, bar, tasks, stage=run.stage
      )
    kept, at_chance = above_chance(consumers)
    measured = set(kept)
    for task, reason in at_chance.items():
      print(f"consumer task {task} left out of the unintended side: {reason}")
    not_measurable = None
    if len(measured) < MIN_CONSUMER_TASKS:
      not_measurable = (
        f"{len(measured)} consumer task(s) left with version-0 consumers clearly above chance "
        f"(at least {MIN_CONSUMER_TASKS} needed): {len(left_out)} had one class, {len(at_chance)} were at chance"
      )
      measured = set()
    published_recalls = {
      m: [recall(z, vd, ())[f"recall@{INTENDED_K}"] for z, vd in zip(zs, versions)] for m, zs in published.items()
    }
    # what a random ranking of the same candidates scores: a reference at it leaves nothing to degrade
    level = chance.intended_chance(splits, (*cfg.ks, INTENDED_K))
    recalls = {m: r.recall_by_version for m, r in runs.items()}
    ranked_at_chance, intended_not_measurable = chance.assess(recalls, level, f"recall@{INTENDED_K}", noise.REFERENCE)
    if intended_not_measurable:
      print(f"intended side not measurable: {intended_not_measurable}")
    summary = report.summarise(
      recalls,
      published,
      consumers,
      published_recalls,
      {m: r.chain for m, r in runs.items()},
      measured=measured,
      intended_measured=intended_not_measurable is None,
    )
    results = {
      "dataset": args.dataset,
      "preset": args.preset,
      "seed": cfg.seed,
      "config": {"lam": cfg.lam, "transform": cfg.transform, "transform_hparams": _hparams(runner.transform)},
      "graph": {
        "users": graph.num_users,
        "items": graph.num_items,
        "edges": graph.num_edges,
        "versions": [
          {"users": s.num_users, "items": s.num_items, "train_edges": len(s.train_user), "val_edges": len(s.val_user)}
          for s in splits
        ],
      },
      "data_notes": list(graph.notes),
      "consumers_left_out": left_out,
      "consumers_at_chance": at_chance,
      "unintended_not_measurable": not_measurable,
      "intended_chance": level,
      "intended_at_chance": [m for m in methods if m in ranked_at_chance],
      "intended_not_measurable": intended_not_measurable,
      "methods": {m: summary[m] for m in methods},
      "consumers": {
        t: {k: c[k] for k in ("config", "steps", "stop_auc", *CHANCE_KEYS) if k in c} for t, c in consumers.items()
      },
    }
    self._val_user_noise(results, runs, versions, cfg)
    if sweep:
      results["lambda_sweep"] = {
        f"{lam:g}": summary["bc-aligner" if lam == cfg.lam else f"bc-aligner@{lam:g}"] for lam in sweep
      }
    if cfg.transform_sweep:
      # kind -> its name with hyper-parameters and the transformed methods' summaries (the run's own kind included)
      results["transform_sweep"] = {
        kind: {
          "transform": transform_name(kind, _hparams(r.transform)),
          "methods": {m: summary[m if kind == cfg.transform else f"{m}[{kind}]"] for m in transformed},
        }
        for kind, r in {cfg.transform: runner, **kind_runners}.items()
        if kind in cfg.transform_sweep
      }
    results["seconds"] = time.perf_counter() - started
    return results

  @staticmethod
  def _val_user_noise(results, runs, versions, cfg):
    """95 % intervals over redrawn val users: each backward-compatible method's intended degradation, and the gap
    between the two best (:mod:`experiments.bc_aligner.noise`)."""
    # every backward-compatible method shown gets its interval, whether or not the unintended side ranks it
    shown = [m for m in report.BACKWARD_COMPATIBLE if m in results["methods"]]
    per_user = noise.user_recalls({m: runs[m].serving for m in (noise.REFERENCE, *shown)}, versions)
    key = jax.random.fold_in(jax.random.key(cfg.seed), 7)
    for m, interval in noise.intended_intervals(per_user, key).items():
      results["methods"][m]["intended_degradation_ci95"] = interval
    gap = noise.gap_interval(results, per_user, jax.random.fold_in(key, 1_000))
    if gap is not None:
      results["gap"] = gap

  def report(self, run, args, cfg, results):
    table = report.table_3(results)
    sweep_table = report.transform_table(results) if "transform_sweep" in results else None
    written = f"{table}\n{report.headline(results)}\n"
    run.write_text("table.md", written if sweep_table is None else f"{written}\n{sweep_table}")
    report.figure_3(run.out / "figure3.png", results)
    if cfg.lambda_sweep:
      report.figure_5(run.out / "figure5.png", results["lambda_sweep"])
    lines = [table, report.headline(results)]
    if sweep_table is not None:
      report.transform_figure(run.out / "transforms.png", results)
      lines[1:1] = ["", sweep_table]
      lines.append(report.transform_headline(results))
    return "\n".join(lines) + f"\n({results['seconds']:.0f} s)"


def _hparams(transform) -> dict:
  return {} if transform is None else {k: v for k, v in transform.hparams if v is not None}


EXPERIMENT = BCAligner()
