"""Command-line plumbing shared by the Gramian experiments."""

import argparse
import dataclasses
from pathlib import Path

from bcjax.data import MOVIELENS_VARIANTS, PairCorpus
from experiments import common
from experiments.two_tower.data import check_corpus, load_corpus


def add_data_arguments(parser: argparse.ArgumentParser, presets, name: str) -> None:
  parser.add_argument("--dataset", default="synthetic",
                      help=f"synthetic (embedded default), movielens-{{{','.join(MOVIELENS_VARIANTS)}}}, or wikipedia")
  parser.add_argument("--data-dir", help="extracted dataset folder (MovieLens, or pages.tsv + links.tsv)")
  parser.add_argument("--preset", choices=sorted(presets), default="quick")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--out", help=f"new or empty output directory (default: runs/{name}-<time>)")
  parser.add_argument("--no-progress", action="store_true")


def open_run(args, cfg, name: str) -> tuple[Path, PairCorpus] | None:
  """Creates the run directory, loads the corpus and writes config.json; prints the error and returns None when the
  directory is taken or the data cannot be read."""
  opened = common.open_run(args.out, name, lambda: check_corpus(load_corpus(
      args.dataset, args.data_dir, num_pages=cfg.num_pages, num_links=cfg.num_links, seed=cfg.seed)))
  if opened is None:
    return None
  out, corpus = opened
  common.write_json(out / "config.json", {"dataset": args.dataset, "preset": args.preset,
                                          **common.jsonable(dataclasses.asdict(cfg))})
  return out, corpus
