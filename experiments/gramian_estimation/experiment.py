"""The Gramian-estimation experiment (Figure 2a: all estimators at |B| = 128 and 1024; Figure 2b: SOGram's
bias-variance trade-off over α) as a harness experiment."""

import dataclasses
from pathlib import Path

from experiments import common, harness
from experiments.gramian_estimation.run import PRESETS, Config, track
from experiments.two_tower.experiment import TwoTowerExperiment


def table(results: dict, cfg) -> str:
  """Mean normalised Frobenius error over the second half of the trajectory, per method (rows) and |B| (columns)."""
  methods = {}
  for spec in results["specs"]:
    label = spec["method"] if spec["alpha"] is None else f"sogram (alpha={spec['alpha']})"
    methods.setdefault(label, {})[spec["batch"]] = spec["name"]
  rows = []
  for label, by_batch in methods.items():
    row = [label]
    for b in cfg.batch_sizes:
      name = by_batch.get(b)
      row += [results["mean_error_second_half"][side][name] if name else "" for side in ("left", "right")]
    rows.append(row)
  header = ["estimator"] + [f"{side} B={b}" for b in cfg.batch_sizes for side in ("G_u", "G_v")]
  return common.markdown_table(header, rows)


def figures(out: Path, results: dict, cfg) -> None:
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  steps = results["steps"]
  curves = results["errors"]["left"]
  fig, axes = plt.subplots(1, len(cfg.batch_sizes), figsize=(5.5 * len(cfg.batch_sizes), 4), sharey=True)
  for ax, b in zip(list(getattr(axes, "flat", [axes])), cfg.batch_sizes):
    for spec in results["specs"]:
      if spec["batch"] == b and (spec["alpha"] in (None, cfg.alpha)):
        ax.plot(steps, curves[spec["name"]], label=spec["name"].split(" B=")[0])
    ax.set(yscale="log", xlabel="step", title=f"|B| = {b}", ylabel=r"$\|\hat G_u - G_u\|_F / \|G_u\|_F$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  fig.tight_layout()
  common.save_figure(fig, out / "figure2a.png")
  fig, ax = plt.subplots(figsize=(5.5, 4))
  b = min(cfg.batch_sizes)
  for spec in results["specs"]:
    if spec["method"] == "sogram" and spec["batch"] == b:
      ax.plot(steps, curves[spec["name"]], label=f"alpha = {spec['alpha']}")
  ax.set(yscale="log", xlabel="step", title=f"SOGram, |B| = {b}", ylabel=r"$\|\hat G_u - G_u\|_F / \|G_u\|_F$")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  common.save_figure(fig, out / "figure2b.png")


class GramianEstimation(TwoTowerExperiment):
  name = "gramian_estimation"
  description = (
    "Gramian estimation error of SAGram (both β), SOGram and the sampling baselines on one common "
    "training trajectory. Writes config.json, metrics.jsonl, stages/, results.json, table.md, "
    "figure2a.png, figure2b.png."
  )
  config = Config
  presets = PRESETS

  def preset(self, args):
    cfg = PRESETS[args.preset]
    if args.dataset.startswith("movielens") and args.preset != "test":
      cfg = dataclasses.replace(cfg, input_dim=32, sizes=(64, 35), lam=1.0)  # App. F's model: k = 35, λ = 1
    return cfg

  data_parallel = True

  def check_mesh(self, args, cfg, devices):
    if any(b % devices for b in cfg.batch_sizes):
      raise harness.UsageError(
        "--batch-sizes",
        f"{','.join(map(str, cfg.batch_sizes))}: every batch must be "
        f"divisible by the {devices} devices of the data mesh (--devices)",
      )
    if cfg.train_batch_size % devices:
      raise harness.UsageError(
        "--devices", f"{devices}: the trajectory's batch of {cfg.train_batch_size} is not divisible by it"
      )

  def load(self, args, cfg):
    corpus = super().load(args, cfg)
    if cfg.shard_tables:
      devices = args.mesh.devices.size
      for side in ("left", "right"):
        n = getattr(corpus, side).num_entities
        if n % devices:
          raise ValueError(
            f"--shard-tables: the {side} side has {n} entities, not divisible by the {devices} devices "
            f"(--devices) that would split SAGram's cache; choose a device count that divides it"
          )
    return corpus

  def execute(self, run, args, cfg, corpus):
    results = run.stage("trajectory", lambda: track(corpus, cfg, progress=run.progress, log=run.log, mesh=args.mesh))
    return dict(results, dataset=args.dataset, preset=args.preset, seed=cfg.seed, data_notes=self.data_notes(corpus))

  def report(self, run, args, cfg, results):
    text = table(results, cfg)
    run.write_text("table.md", text)
    figures(run.out, results, cfg)
    return f"\n{args.dataset}: mean normalised Frobenius error over the second half of the trajectory:\n\n{text}"


EXPERIMENT = GramianEstimation()
