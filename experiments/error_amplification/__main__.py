"""Command line of the error-amplification experiment (the project's demo until the BC-Aligner experiment lands).

Example: ``python -m experiments.error_amplification --preset quick --out runs/demo``.
"""

import argparse
import dataclasses
import datetime
import sys

from experiments.error_amplification.configs import METHODS, PRESETS
from experiments.error_amplification.train import train_and_evaluate


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m experiments.error_amplification",
      description="Chains of embedding versions with drift: backward transforms fitted post hoc and jointly with the "
                  "single-step (eq. 7) and the multi-step (eq. 10) loss; prints the alignment error of every version "
                  "mapped back to version 0. Writes config.json, metrics.jsonl, results.json, table.md, "
                  "alignment_error.png and one keep-latest registry per linear method into --out.")
  parser.add_argument("--preset", choices=sorted(PRESETS), default="quick",
                      help="quick: seconds on CPU; paper: the reference's widths 256..512; test: tiny")
  parser.add_argument("--out", default=None, help="new or empty output directory (default: runs/error_amplification-"
                                                  "<time>)")
  parser.add_argument("--seed", type=int, default=None, help="PRNG seed (same seed, same numbers)")
  parser.add_argument("--lambda", dest="lam", type=float, default=None, help="alignment weight λ of eq. (3)")
  parser.add_argument("--steps", type=int, default=None, help="optimiser steps per version (overrides the preset)")
  parser.add_argument("--methods", default=None, help=f"comma-separated subset of {','.join(METHODS)}")
  parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
  args = parser.parse_args(argv)

  overrides = {}
  if args.seed is not None:
    overrides["seed"] = args.seed
  if args.lam is not None:
    overrides["lam"] = args.lam
  if args.steps is not None:
    overrides["steps"] = overrides["posthoc_steps"] = args.steps
  if args.methods is not None:
    overrides["methods"] = tuple(m.strip() for m in args.methods.split(",") if m.strip())
  cfg = dataclasses.replace(PRESETS[args.preset], **overrides)
  out = args.out or f"runs/error_amplification-{datetime.datetime.now():%Y%m%d-%H%M%S}"
  try:
    results = train_and_evaluate(cfg, out, progress=not args.no_progress)
  except (ValueError, FileExistsError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"\nAlignment error of z̃_0 = B_1∘…∘B_k(z_k) vs z_0 on {cfg.n_test} held-out points "
        f"(preset {args.preset}, seed {cfg.seed}, λ={cfg.lam}):\n")
  print(results["table"])
  print(f"results: {out}/results.json, table: {out}/table.md, plot: {out}/alignment_error.png")
  return 0


if __name__ == "__main__":
  sys.exit(main())
