"""The development rule that picks the ICL learning rate when the paper's optimiser does not train.

At the ``paper`` preset (Adam 1e-5) retraining's epoch loss on PROTEINS never falls below its first epoch's by more
than its own noise in 3 of 5 runs, so the paper's stopping rule (patience 50 on the raw loss) times noise and Table
4's speed-ups are not measurable there. A learning rate at which they are is chosen here, on development TU sets
only (never on PROTEINS, the data that judges the claims), by a rule fixed before any development run was read:

1. a (method, run) pair *trains* when its loss curve ``improved``
   (:func:`experiments.icl.convergence.curve_status`), the paper's rule stopped it by patience rather than the epoch
   cap, and its InfoNCE loss on the held-out samples ended below where it started;
2. retraining and ICL are judged (the two methods of the 10.1× claim), in every run, on every development set;
3. the chosen rate is the smallest candidate (the nearest to the reference code's 1e-5) at which every judged pair
   trains; when none does, the candidate with the most pairs that train, the smaller on a tie.

No speed-up, accuracy or any other outcome of the claims enters the rule.

Usage::

  python -m experiments.reproduction.development --runs DIR [DIR ...] --out FILE

where each DIR is a finished ``python -m experiments.icl`` run on a development set at one candidate rate, all at
one growth ratio and otherwise the same settings.
"""

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bcjax.files import write_atomic
from experiments.reproduction.archive import read_run

CANDIDATES = (1e-5, 1e-4, 1e-3)
JUDGED = ("retrain", "icl")
# the claims' judging data: the rule must never read it
JUDGING = ("proteins", "tu:PROTEINS")
RULE = (
  "a (method, run) pair trains when its loss curve improved, the paper's rule stopped it by patience (not the epoch "
  "cap) and its held-out InfoNCE loss ended below its start",
  "retraining and ICL are judged, in every run, on every development set (never PROTEINS)",
  "the smallest candidate rate at which every judged pair trains; when none, the one with the most pairs that "
  "train, the smaller on a tie",
)


def pair_trains(run: Mapping) -> bool:
  """Whether one (method, run) pair trains (rule 1 of the module docstring), from its entry in ``results.json``."""
  return (
    run["loss_status"] == "improved"
    and run["stopped"] == "patience"
    and float(run["heldout_loss"]) < float(run["heldout_start"])
  )


def count_training(results: Mapping) -> tuple[int, int]:
  """(pairs that train, pairs judged) over :data:`JUDGED` and every run of one run directory's ``results.json``."""
  pairs = [r for m in JUDGED for r in results["methods"][m]["runs"]]
  return sum(pair_trains(r) for r in pairs), len(pairs)


def count_loss_improved(results: Mapping) -> int:
  """Pairs whose training loss alone passes (improved, stopped by patience), the held-out clause aside: which clause
  holds a rate back (evidence shown beside the rule, not part of it)."""
  runs = [r for m in JUDGED for r in results["methods"][m]["runs"]]
  return sum(r["loss_status"] == "improved" and r["stopped"] == "patience" for r in runs)


def rate_text(rate: float) -> str:
  """``1e-4`` for 0.0001: a rate as the paper's grid writes it."""
  mantissa, exponent = f"{rate:.0e}".split("e")
  return f"{mantissa}e{int(exponent)}"


def choose(counts: Mapping[str, Mapping[float, tuple[int, int]]]) -> float:
  """The rate of rule 3 from ``counts[dataset][rate] = (pairs that train, pairs judged)``; every dataset must
  hold every rate of :data:`CANDIDATES`."""
  for dataset, by_rate in counts.items():
    missing = [lr for lr in CANDIDATES if lr not in by_rate]
    if missing:
      raise ValueError(f"choose: dataset {dataset!r} has no run at learning rate(s) {missing}")
  every = [lr for lr in CANDIDATES if all(c[lr][0] == c[lr][1] for c in counts.values())]
  if every:
    return every[0]
  trained = {lr: sum(c[lr][0] for c in counts.values()) for lr in CANDIDATES}
  return max(CANDIDATES, key=lambda lr: (trained[lr], -lr))


def _read(run_dir: Path) -> tuple[str, float, float, dict, dict]:
  """(dataset, rate, α, the settings that must agree, results) of one finished run folder, plain or archived."""
  try:
    run = read_run(run_dir)
  except FileNotFoundError as error:
    raise ValueError(f"--runs: {error}") from None
  if run.config.get("experiment") != "icl":
    raise ValueError(f"--runs: {run_dir} is a {run.config.get('experiment')!r} run, not an icl one")
  settings = dict(run.config["config"])
  rate, alpha = float(settings.pop("learning_rate")), float(settings.pop("alpha"))
  settings.pop("seed", None)
  return run.config["dataset"], rate, alpha, settings, run.results


def choice_from(folders: Sequence[Path]) -> dict:
  """The rule's choice and its evidence from finished development run folders (plain or archived): the rule, the
  candidates, α, each run folder's dataset and rate, the pairs that train per dataset and rate, and the rate chosen.

  Raises:
    ValueError: a folder is not a finished icl run, ran on PROTEINS or at a rate outside :data:`CANDIDATES`, two
      folders ran one dataset at one rate, the folders differ in another setting, or a candidate has no run.
  """
  read = [(Path(d), *_read(Path(d))) for d in folders]
  judging = [str(d) for d, ds, *_ in read if ds in JUDGING]
  if judging:
    raise ValueError(f"--runs: {judging} ran on PROTEINS, the judging data; the rule reads development sets only")
  if len({a for *_, a, _s, _r in read}) != 1 or any(s != read[0][4] for *_, s, _r in read):
    raise ValueError("--runs: the runs differ in a setting other than the learning rate and the seed")
  counts: dict[str, dict[float, tuple[int, int]]] = {}
  improved: dict[str, dict[float, int]] = {}
  for d, dataset, rate, *_rest, results in read:
    if rate not in CANDIDATES:
      raise ValueError(f"--runs: {d} ran at learning rate {rate}, not one of {CANDIDATES}")
    if rate in counts.setdefault(dataset, {}):
      raise ValueError(f"--runs: two runs of {dataset} at learning rate {rate}")
    counts[dataset][rate] = count_training(results)
    improved.setdefault(dataset, {})[rate] = count_loss_improved(results)
  return {
    "rule": list(RULE),
    "candidates": list(CANDIDATES),
    "judged": list(JUDGED),
    "alpha": read[0][3],
    "runs": {d.name: {"dataset": ds, "learning_rate": lr} for d, ds, lr, *_ in sorted(read, key=lambda r: r[0].name)},
    "trains": {ds: {rate_text(lr): list(c) for lr, c in sorted(by.items())} for ds, by in sorted(counts.items())},
    "loss_improved": {ds: {rate_text(lr): n for lr, n in sorted(by.items())} for ds, by in sorted(improved.items())},
    "chosen": choose(counts),
  }


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog="python -m experiments.reproduction.development", description=__doc__.split("\n")[0]
  )
  parser.add_argument("--runs", nargs="+", type=Path, required=True, help="finished icl runs on development sets")
  parser.add_argument("--out", type=Path, required=True, help="the choice and its evidence (JSON; never overwritten)")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  try:
    if args.out.exists():
      raise ValueError(f"--out: {args.out} exists; the choice is never overwritten")
    out = choice_from(args.runs)
  except ValueError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  write_atomic(args.out, (json.dumps(out, indent=2, sort_keys=True) + "\n").encode())
  print(f"chosen learning rate: {rate_text(out['chosen'])}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
