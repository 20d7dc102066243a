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

  python -m experiments.icl.learning_rate --runs DIR [DIR ...] --out FILE

where each DIR is a finished ``python -m experiments.icl`` run on a development set at one candidate rate, all at
one growth ratio and otherwise the same settings.
"""

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bcjax._atomic import write_atomic

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
  """(dataset, rate, α, the settings that must agree, results) of one finished run directory."""
  for name in ("config.json", "results.json"):
    if not (run_dir / name).is_file():
      raise ValueError(f"--runs: {run_dir} has no {name} (not a finished icl run)")
  config = json.loads((run_dir / "config.json").read_text())
  if config.get("experiment") != "icl":
    raise ValueError(f"--runs: {run_dir} is a {config.get('experiment')!r} run, not an icl one")
  settings = dict(config["config"])
  rate, alpha = float(settings.pop("learning_rate")), float(settings.pop("alpha"))
  settings.pop("seed", None)
  return config["dataset"], rate, alpha, settings, json.loads((run_dir / "results.json").read_text())


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m experiments.icl.learning_rate", description=__doc__.split("\n")[0])
  parser.add_argument("--runs", nargs="+", type=Path, required=True, help="finished icl runs on development sets")
  parser.add_argument("--out", type=Path, required=True, help="the choice and its evidence (JSON; never overwritten)")
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  try:
    if args.out.exists():
      raise ValueError(f"--out: {args.out} exists; the choice is never overwritten")
    read = [(d, *_read(d)) for d in args.runs]
    judging = [str(d) for d, ds, *_ in read if ds in JUDGING]
    if judging:
      raise ValueError(f"--runs: {judging} ran on PROTEINS, the judging data; the rule reads development sets only")
    if len({a for *_, a, _s, _r in read}) != 1 or any(s != read[0][4] for *_, s, _r in read):
      raise ValueError("--runs: the runs differ in a setting other than the learning rate and the seed")
    counts: dict[str, dict[float, tuple[int, int]]] = {}
    for d, dataset, rate, *_rest, results in read:
      if rate not in CANDIDATES:
        raise ValueError(f"--runs: {d} ran at learning rate {rate}, not one of {CANDIDATES}")
      if rate in counts.setdefault(dataset, {}):
        raise ValueError(f"--runs: two runs of {dataset} at learning rate {rate}")
      counts[dataset][rate] = count_training(results)
    chosen = choose(counts)
  except ValueError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  out = {
    "rule": list(RULE),
    "candidates": list(CANDIDATES),
    "judged": list(JUDGED),
    "alpha": read[0][3],
    "runs": {str(d): {"dataset": ds, "learning_rate": lr} for d, ds, lr, *_ in read},
    "trains": {ds: {str(lr): list(c) for lr, c in sorted(by.items())} for ds, by in counts.items()},
    "chosen": chosen,
  }
  write_atomic(args.out, (json.dumps(out, indent=2) + "\n").encode())
  print(f"chosen learning rate: {chosen:g}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
