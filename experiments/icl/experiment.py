"""The ICL experiment (Tables 3–4, Figs. 2–3 as numbers, Fig. 5 and, with --alpha-sweep, Fig. 4) as a harness
experiment."""

import time

import jax
import numpy as np
from tqdm.auto import tqdm

from bcjax.parallel import DATA_AXIS
from experiments import harness
from experiments.icl import report
from experiments.icl.configs import PRESETS, Config
from experiments.icl.datasets import DATASETS, known_dataset, load_dataset
from experiments.icl.evaluate import (
  accuracies,
  check_splits,
  embed,
  heldout_loss,
  majority_shares,
  make_heldout,
  make_probe,
  probe_accuracy,
  run_splits,
)
from experiments.icl.methods import METHODS, Context, pretrain, train_method
from experiments.icl.target import TargetRule
from experiments.icl.train import split_encoder

SUBSETS = ("all", "old", "new")


def alphas_of(cfg: Config) -> list[float]:
  """The growth ratios of a run: --alpha first, then the sweep's others."""
  return [cfg.alpha] + [a for a in cfg.alpha_sweep if a != cfg.alpha]


def methods_of(cfg: Config) -> tuple[str, ...]:
  return tuple(m for m in METHODS if m in set(cfg.methods) | {"retrain"})


def planned_splits(num: int, alphas, cfg) -> dict:
  """The old/new split of every (α, run), exactly as :func:`run_alpha` will draw it."""
  return {
    f"α = {alpha:g}, run {run}": run_splits(num, alpha, cfg.heldout, cfg.seed + 1000 * run)[:2]
    for alpha in alphas
    for run in range(cfg.runs)
  }


def run_alpha(data, alpha: float, methods, cfg, run: int, log, bar, mesh=None) -> tuple[dict, dict, dict, dict]:
  """One independent run at growth ratio α: split (holding out ``cfg.heldout`` of the samples), pre-train on X,
  train every method (data-parallel over ``mesh`` when given); returns the per-method records, their epoch losses,
  and the quality of the pre-trained encoder and of the randomly initialised one (retraining's start): SVM
  accuracies, probe accuracy and, with held-out samples, the held-out NCE-I loss."""
  seed = cfg.seed + 1000 * run
  if mesh is not None and mesh.devices.size == 1:
    mesh = None  # one device: the plain steps (the same numbers, without the collectives)
  old, new, held = run_splits(data.num, alpha, cfg.heldout, seed)
  ctx = Context(data, old, new, alpha, cfg, mesh)
  k_model, k_pre, k_methods = jax.random.split(jax.random.fold_in(jax.random.key(cfg.seed), run), 3)
  fresh = split_encoder(data.new_model(cfg, k_model, None if mesh is None else DATA_AXIS))

  def logger(name):
    def write(**record):
      log(alpha=alpha, run=run, **record)
      bar.set_postfix(alpha=alpha, run=run, method=name, epoch=record["epoch"], loss=f"{record['loss']:.4f}")

    return write

  pre, loss0 = pretrain(ctx, fresh, k_pre, seed, logger("pretrain"))
  bar.update()
  svm = lambda encoder: accuracies(encoder, data, old, new, cfg.svm_folds, seed, cfg.svm_c_grid)
  pre_acc = svm(pre.encoder)
  pre_acc["majority"] = majority_shares(data.labels, old, new)
  probe = make_probe(data.labels, old, new, cfg.probe_samples, seed)
  score = lambda encoder: probe_accuracy(embed(encoder, data, probe.index), probe)
  pre_acc["probe"] = score(pre.encoder)  # where every incremental method starts: a target it meets is no time to it
  random_acc = {**svm(fresh), "probe": score(fresh)}  # where retraining starts
  heldout = None
  if len(held):
    views = make_heldout(data, held, cfg.batch_size, cfg.temperature, seed)
    heldout = lambda encoder: heldout_loss(encoder, views)
    pre_acc["heldout_loss"], random_acc["heldout_loss"] = heldout(pre.encoder), heldout(fresh)
  records, losses = {}, {}
  for m in methods:
    # each method's streams from its place in METHODS, not in this run's list: a method's numbers must not depend
    # on which other methods run beside it
    i = METHODS.index(m)
    key = jax.random.fold_in(k_methods, i)
    r = train_method(m, ctx, pre.encoder, fresh, loss0, key, seed + i + 1, logger(m), score, heldout)
    records[m] = {
      "epochs": r.epochs,
      "train_seconds": r.train_seconds,
      "compile_seconds": r.compile_seconds,
      "stopped": r.stopped,
      "loss_status": r.curve,
      "accuracy": svm(r.encoder),
      "seconds_by_epoch": r.seconds,
      "probe_by_epoch": r.quality,
      "probe_majority": probe.majority,
    }
    if heldout is not None:
      start = random_acc if m == "retrain" else pre_acc
      records[m]["heldout_start"] = start["heldout_loss"]  # the method's starting encoder (epoch 0)
      records[m]["heldout_loss"] = heldout(r.encoder)  # the reported (best) epoch's encoder
      records[m]["heldout_by_epoch"] = r.heldout
    losses[m] = r.losses
    bar.update()
  return records, losses, pre_acc, random_acc


class ICL(harness.Experiment):
  name = "icl"
  description = (
    "Incremental contrastive learning: pre-train on the old data X, then grow it by ΔX (growth ratio "
    "α = |ΔX| / |X ∪ ΔX|) and train each method until convergence; speed-ups vs retraining, SVM "
    "accuracy on all/old/new data, and every encoder's quality (SVM, probe, InfoNCE on held-out new data) beside a "
    "random and the pre-trained encoder's, with whether each measure sees training. Writes config.json, "
    "metrics.jsonl, stages/ (one per α and run), results.json, table.md, figure5.png (and figure4.png with "
    "--alpha-sweep)."
  )
  config = Config
  presets = PRESETS
  data_parallel = True
  default_dataset = "synthetic-graphs"
  datasets = (
    f"one of {', '.join(DATASETS)}; tu:NAME reads any TU dataset (e.g. tu:IMDB-BINARY) from --data-dir "
    f"(its folder or zip, or a folder holding NAME/ or NAME.zip) or, with --download, from the TU Dortmund "
    f"collection"
  )

  def check(self, args, cfg):
    if not known_dataset(args.dataset):
      raise harness.UsageError("--dataset", f"must be one of {', '.join(DATASETS)}; got {args.dataset!r}")

  def check_mesh(self, args, cfg, devices):
    if cfg.batch_size % devices:
      raise harness.UsageError(
        "--devices",
        f"{devices} devices do not divide the batch of {cfg.batch_size} samples "
        f"(batch_size): each device takes an equal block of every batch",
      )

  def describe(self, args, cfg):
    return {"dataset": args.dataset, "alphas": alphas_of(cfg), "methods": methods_of(cfg)}

  def load(self, args, cfg):
    data = load_dataset(
      args.dataset, args.data_dir, download=args.download, seed=cfg.seed, image_size=cfg.image_size, ldp_std=cfg.ldp_std
    )
    check_splits(data.labels, planned_splits(data.num, alphas_of(cfg), cfg), cfg.svm_folds)
    for note in data.notes:
      print(f"data: {note}")
    return data

  def execute(self, run, args, cfg, data):
    started = time.perf_counter()
    alphas, methods = alphas_of(cfg), methods_of(cfg)
    sweep, pretrained, untrained, curves = {}, {}, {}, {}
    with tqdm(
      total=len(alphas) * cfg.runs * (len(methods) + 1), desc="pre-training + methods", disable=not run.progress
    ) as bar:
      for alpha in alphas:
        per_run, pre_runs, random_runs = {m: [] for m in methods}, [], []
        for r in range(cfg.runs):
          stored = run.stage(
            f"alpha={alpha:g}/run{r}",
            lambda alpha=alpha, r=r: run_alpha(data, alpha, methods, cfg, r, run.log, bar, args.mesh),
          )
          records, losses, pre_acc, random_acc = stored if len(stored) == 4 else (*stored, None)  # older stages: 3
          for m, rec in records.items():
            per_run[m].append(rec)
          pre_runs.append(pre_acc)
          random_runs.append(random_acc)
          if r == 0:
            curves[f"{alpha:g}"] = losses
        target = TargetRule(cfg.probe_window, cfg.target_hold, cfg.target_noise_sds)
        key = jax.random.fold_in(jax.random.key(cfg.seed), int(round(alpha * 1000)))
        # stages saved before the pre-trained encoder's probe was measured have none
        pre_probe = [p["probe"] for p in pre_runs] if all("probe" in p for p in pre_runs) else None
        sweep[f"{alpha:g}"] = {"methods": report.summarise(per_run, cfg.speedup, target, key, pre_probe)}
        pretrained[f"{alpha:g}"] = {s: float(np.mean([p[s] for p in pre_runs])) for s in ("all", "old", "new")}
        if pre_probe is not None:
          pretrained[f"{alpha:g}"]["probe"] = float(np.mean(pre_probe))
        if all("majority" in p for p in pre_runs):  # stages saved before the majority shares have none
          majority = {s: float(np.mean([p["majority"][s] for p in pre_runs])) for s in SUBSETS}
          pretrained[f"{alpha:g}"]["majority"] = majority
          sweep[f"{alpha:g}"]["svm_uninformative"] = report.uninformative_svm(sweep[f"{alpha:g}"]["methods"], majority)
        if all(p is not None for p in random_runs):  # stages saved before the random encoder was scored have none
          sweep[f"{alpha:g}"]["quality"] = report.quality(per_run, pre_runs, random_runs)
          report.blind_probe(sweep[f"{alpha:g}"]["methods"], sweep[f"{alpha:g}"]["quality"])
          shared = set.intersection(*(set(p) for p in random_runs))
          untrained[f"{alpha:g}"] = {k: float(np.mean([p[k] for p in random_runs])) for k in sorted(shared)}
          if all("heldout_loss" in p for p in pre_runs):
            pretrained[f"{alpha:g}"]["heldout_loss"] = float(np.mean([p["heldout_loss"] for p in pre_runs]))
    main_alpha = f"{alphas[0]:g}"
    return {
      "dataset": args.dataset,
      "alpha": alphas[0],
      "methods": sweep[main_alpha]["methods"],
      "preset": args.preset,
      "runs": cfg.runs,
      "seed": cfg.seed,
      "num_samples": data.num,
      "pretrained": pretrained,
      "random_encoder": untrained,
      "heldout": cfg.heldout,
      "alpha_sweep": sweep,
      "data_notes": list(data.notes),
      "loss_curves": curves,
      "seconds": time.perf_counter() - started,
    }

  def report(self, run, args, cfg, results):
    table = report.tables(results)
    run.write_text("table.md", table)
    main_alpha = f"{results['alpha']:g}"
    report.figure_5(run.out / "figure5.png", results["loss_curves"][main_alpha], f"{args.dataset}, α = {main_alpha}")
    if len(results["alpha_sweep"]) > 1:
      report.figure_4(
        run.out / "figure4.png", {a: b["methods"] for a, b in results["alpha_sweep"].items()}, args.dataset
      )
    return f"{table}\n({results['seconds']:.0f} s)"


EXPERIMENT = ICL()
