"""Command line of the conceptor STS time-course experiment.

Real data: ``python -m experiments.conceptors_sts --vectors glove.840B.300d.txt --freq enwiki_vocab_min200.txt
--sts-dir STS/ --out DIR``. Without the three paths it runs on the embedded synthetic corpus.
"""

import argparse
import datetime
import sys
from pathlib import Path

import numpy as np

from bcjax.sentence import load_sts_genres, load_word_frequencies, load_word_vectors
from experiments import common
from experiments.conceptors_sts.pipeline import check_inputs, run_time_course
from experiments.conceptors_sts.synthetic import make_synthetic_sts

LABELS = {"sif": "train-from-scratch SIF", "zero-shot-ca": "zero-shot CA", "ca": "CA"}


def table_1(results: dict) -> str:
  """Time-course averaged PCC x 100 in the layout of the paper's Table 1 (rows: methods, columns: genres)."""
  genres = results["genres"]
  rows = []
  for key, label in LABELS.items():
    avg = results["methods"][key]["time_course_average"]
    rows.append([label] + [round(avg[g], 1) for g in genres] + [round(float(np.mean(list(avg.values()))), 1)])
  return common.markdown_table(["method"] + genres + ["mean"], rows, floatfmt=".1f")


def figure_2(path: Path, results: dict) -> None:
  """Per-genre PCC over the corpora seen, in the layout of the paper's Figure 2."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
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


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m experiments.conceptors_sts",
                                   description="Continual sentence encoders with conceptors: the STS time-course "
                                               "protocol (train-from-scratch SIF, zero-shot CA, CA). Writes "
                                               "results.json, table.md (Table 1 layout), figure2.png, metrics.jsonl.")
  parser.add_argument("--vectors", help="word vectors in GloVe text format (.txt, .gz or .zip)")
  parser.add_argument("--freq", help="word-frequency file ('word count' lines, e.g. enwiki_vocab_min200.txt)")
  parser.add_argument("--sts-dir", help="directory with STSBenchmark/ and STS12/, STS13/, STS14/")
  parser.add_argument("--out", default=None, help="new or empty output directory (default: runs/conceptors_sts-"
                                                  "<time>)")
  parser.add_argument("--alpha", type=float, default=1.0, help="aperture of every conceptor (paper: 1)")
  parser.add_argument("--sif-a", type=float, default=1e-3, help="SIF constant a (paper: 1e-3)")
  parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic default corpus")
  parser.add_argument("--no-progress", action="store_true")
  args = parser.parse_args(argv)

  given = [p is not None for p in (args.vectors, args.freq, args.sts_dir)]
  if any(given) and not all(given):
    parser.error("--vectors, --freq and --sts-dir go together (omit all three for the synthetic default)")
  try:
    out = common.prepare_out_dir(args.out or f"runs/conceptors_sts-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    if all(given):
      genres = load_sts_genres(args.sts_dir)
      vectors = load_word_vectors(args.vectors)
      counts = load_word_frequencies(args.freq)
      source = {"vectors": args.vectors, "freq": args.freq, "sts_dir": args.sts_dir}
    else:
      vectors, counts, genres = make_synthetic_sts(args.seed)
      source = {"synthetic_seed": args.seed}
    check_inputs(vectors, genres)
    common.write_json(out / "config.json", {"alpha": args.alpha, "sif_a": args.sif_a, **source})
    with common.MetricWriter(out / "metrics.jsonl") as writer:
      results = run_time_course(vectors, counts, genres, alpha=args.alpha, a=args.sif_a,
                                progress=not args.no_progress, log=writer.write)
  except (FileNotFoundError, FileExistsError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  results["data"] = source
  common.write_json(out / "results.json", common.jsonable(results))
  table = table_1(results)
  common.write_text(out / "table.md", table)
  figure_2(out / "figure2.png", results)
  print("\nTime-course averaged PCC x 100 (Table 1 layout):\n")
  print(table)
  wins = [g for g in results["genres"] if results["methods"]["ca"]["time_course_average"][g]
          > results["methods"]["sif"]["time_course_average"][g]]
  print(f"CA beats train-from-scratch SIF on {len(wins)}/{len(results['genres'])} genres: {', '.join(wins)}")
  print(f"outputs in {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
