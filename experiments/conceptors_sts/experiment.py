"""The conceptor STS time-course experiment as a harness experiment."""

import dataclasses
from pathlib import Path

import numpy as np

from bcjax.sentence import load_sts_genres, load_word_frequencies, load_word_vectors
from experiments import common, harness
from experiments.conceptors_sts.pipeline import APERTURE_RULES, check_inputs, run_time_course
from experiments.conceptors_sts.synthetic import make_synthetic_sts
from experiments.harness import option


@dataclasses.dataclass(frozen=True)
class Config:
  alpha: str = option(
    "1",
    help="aperture α of every conceptor: a positive number (paper: 1), or 'auto' to pick each "
    "conceptor's from its own correlation matrix by --alpha-rule (no labels used)",
  )
  alpha_rule: str = option(
    "jaeger",
    help="rule of --alpha auto: Jaeger's norm-gradient optimum, or the mean eigenvalue put at x = 2",
    choices=tuple(APERTURE_RULES),
  )
  sif_a: float = option(1e-3, help="SIF constant a (paper: 1e-3)", low=0.0, low_open=True)
  seed: int = option(0, help="seed of the synthetic default corpus and of the bootstrap intervals", low=0)


PRESETS = {"quick": Config(), "paper": Config(), "test": Config()}


def aperture(cfg: Config) -> float | str:
  """--alpha as run_time_course takes it: a positive float, or for 'auto' the name of --alpha-rule."""
  if cfg.alpha.strip().lower() == "auto":
    return cfg.alpha_rule
  try:
    value = float(cfg.alpha)
  except ValueError:
    raise harness.UsageError("--alpha", f"must be a positive number or 'auto', got {cfg.alpha!r}") from None
  if not (value > 0 and np.isfinite(value)):
    raise harness.UsageError("--alpha", f"must be a positive finite number or 'auto', got {cfg.alpha!r}")
  if cfg.alpha_rule != Config.alpha_rule:  # a rule would be ignored by a fixed aperture: refuse, do not drop it
    raise harness.UsageError(
      "--alpha-rule", f"{cfg.alpha_rule!r} applies only with --alpha auto, got --alpha {cfg.alpha}"
    )
  return value


LABELS = {"sif": "train-from-scratch SIF", "zero-shot-ca": "zero-shot CA", "ca": "CA"}


def table_1(results: dict) -> str:
  """Time-course averaged PCC x 100 in the layout of the paper's Table 1 (rows: methods, columns: genres)."""
  genres = results["genres"]
  rows = []
  for key, label in LABELS.items():
    avg = results["methods"][key]["time_course_average"]
    rows.append([label] + [round(avg[g], 1) for g in genres] + [round(float(np.mean(list(avg.values()))), 1)])
  return common.markdown_table(["method"] + genres + ["mean"], rows, floatfmt=".1f")


def aperture_line(results: dict) -> str:
  """The apertures the conceptors used (C_0's, then each step's) and their spread."""
  by_step = results.get("alpha_by_step")
  if by_step is None:  # a run saved before apertures were recorded
    return f"Aperture α = {results['alpha']} for every conceptor."
  rule = f"--alpha auto ({results['alpha']} rule)" if isinstance(results["alpha"], str) else f"α = {results['alpha']:g}"
  spread = results["alpha_spread"]
  return (
    f"Apertures, {rule}: "
    + ", ".join(f"{k} {v:.3g}" for k, v in by_step.items())
    + f" (geometric mean {spread['geometric_mean']:.3g}, max/min {spread['max_over_min']:.3g}). Quota of C_0, "
    "then of C_t: " + ", ".join(f"{v:.3f}" for v in results["quota_by_step"].values()) + "."
  )


def figure_2(path: Path, results: dict) -> None:
  """Per-genre PCC over the corpora seen, in the layout of the paper's Figure 2."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  genres = results["genres"]
  steps = np.arange(1, len(genres) + 1)
  fig, axes = plt.subplots(1, len(genres), figsize=(4 * len(genres), 3.6), sharex=True)
  for j, (ax, genre) in enumerate(zip(np.atleast_1d(axes), genres)):
    for key, style in (("ca", "o-"), ("sif", "s-")):
      ax.plot(steps, [row[j] for row in results["methods"][key]["pcc_by_step"]], style, label=LABELS[key])
    ax.axhline(results["methods"]["zero-shot-ca"]["pcc_by_step"][0][j], color="gray", ls="--", label="zero-shot CA")
    ax.axhline(results["corpus_specialized_sif"][genre], color="k", ls=":", label="corpus-specialized SIF")
    ax.set(title=genre, xlabel="corpora seen", ylabel="PCC × 100" if j == 0 else None)
    ax.set_xticks(steps, [g[:4] for g in genres])
    ax.grid(alpha=0.3)
  np.atleast_1d(axes)[0].legend(fontsize=7)
  fig.tight_layout()
  common.save_figure(fig, path)


class ConceptorsSTS(harness.Experiment):
  name = "conceptors_sts"
  description = (
    "Continual sentence encoders with conceptors: the STS time-course protocol (train-from-scratch "
    "SIF, zero-shot CA, CA). Without --vectors/--freq/--sts-dir it runs on the embedded synthetic "
    "corpus. Writes config.json, metrics.jsonl, stages/, results.json, table.md (Table 1 layout), "
    "figure2.png."
  )
  config = Config
  presets = PRESETS
  path_flags = ("--vectors", "--freq", "--sts-dir")
  data_parallel = True

  def add_arguments(self, parser):
    parser.add_argument("--vectors", help="word vectors in GloVe text format (.txt, .gz or .zip)")
    parser.add_argument("--freq", help="word-frequency file ('word count' lines, e.g. enwiki_vocab_min200.txt)")
    parser.add_argument("--sts-dir", help="directory with STSBenchmark/ and STS12/, STS13/, STS14/")

  def check(self, args, cfg):
    aperture(cfg)
    given = [p is not None for p in (args.vectors, args.freq, args.sts_dir)]
    if any(given) and not all(given):
      raise harness.UsageError(
        "--vectors", "--freq and --sts-dir go together (omit all three for the synthetic default)"
      )

  def source(self, args, cfg) -> dict:
    if args.vectors is None:
      return {"synthetic_seed": cfg.seed}
    return {"vectors": args.vectors, "freq": args.freq, "sts_dir": args.sts_dir}

  def describe(self, args, cfg):
    return {"data": self.source(args, cfg)}

  def load(self, args, cfg):
    if args.vectors is not None:
      genres = load_sts_genres(args.sts_dir)
      vectors = load_word_vectors(args.vectors)
      counts = load_word_frequencies(args.freq)
    else:
      vectors, counts, genres = make_synthetic_sts(cfg.seed)
    check_inputs(vectors, genres)
    return vectors, counts, genres

  def execute(self, run, args, cfg, data):
    vectors, counts, genres = data
    alpha = aperture(cfg)
    label = f"auto-{alpha}" if isinstance(alpha, str) else f"{alpha:g}"
    results = run.stage(
      f"time_course/alpha={label}",
      lambda: run_time_course(
        vectors,
        counts,
        genres,
        alpha=alpha,
        a=cfg.sif_a,
        progress=run.progress,
        log=run.log,
        mesh=args.mesh,
        bootstrap_seed=cfg.seed,
      ),
    )
    return dict(results, data=self.source(args, cfg))

  def report(self, run, args, cfg, results):
    table = table_1(results) + "\n" + aperture_line(results) + "\n"
    run.write_text("table.md", table)
    figure_2(run.out / "figure2.png", results)
    wins = [
      g
      for g in results["genres"]
      if results["methods"]["ca"]["time_course_average"][g] > results["methods"]["sif"]["time_course_average"][g]
    ]
    diff = results["differences"]["ca_minus_sif"]
    return (
      f"\nTime-course averaged PCC x 100 (Table 1 layout):\n\n{table}\nCA beats train-from-scratch SIF on "
      f"{len(wins)}/{len(results['genres'])} genres: {', '.join(wins)}; mean CA − SIF "
      f"{diff['estimate']:+.2f} [{diff['low']:+.2f}, {diff['high']:+.2f}] points (95 % bootstrap over pairs)"
    )


EXPERIMENT = ConceptorsSTS()
