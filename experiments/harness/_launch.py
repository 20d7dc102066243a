"""The command line's lifecycle (:func:`main`): parse and validate, join the processes, load the data, open or
resume the run directory, run the stages, report; the launch flags kept out of the stored command line."""

import argparse
import dataclasses
import datetime
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import jax

from bcjax._compile_cache import use_compilation_cache
from bcjax.files import write_atomic
from experiments import common
from experiments.harness._errors import UsageError
from experiments.harness._estimate import estimate
from experiments.harness._experiment import Experiment
from experiments.harness._run import Run
from experiments.harness._stages import REPEATED_ON_RESUME, StageFailed
from experiments.provenance import Activity, LoadMonitor, cpu_description, provenance

LAUNCH_FLAGS = ("--devices", "--num-processes", "--process-id", "--coordinator", "--peer-timeout")


def _split_launch(argv: list[str]) -> tuple[list[str], list[str]]:
  """``(run flags, launch flags)``: the launch flags (devices, processes) say how this process runs, not what the run
  computes, so they are neither stored in config.json nor fixed by --resume."""
  run, launch, i = [], [], 0
  while i < len(argv):
    name = argv[i].partition("=")[0]
    if name in LAUNCH_FLAGS:
      takes_value = "=" not in argv[i] and i + 1 < len(argv)
      launch += argv[i : i + 1 + takes_value]
      i += 1 + takes_value
    else:
      run.append(argv[i])
      i += 1
  return run, launch


# Flags about this process, not the run: allowed with --resume, which adds them to the stored command line.
_PROCESS_FLAGS = ("--no-progress", "--no-compile-cache")


class _NoRun(ValueError):
  """--resume names a folder that holds no unfinished run: reported in one line, without the usage text (the flags
  are right; the folder is not)."""


def _resume_argv(parser: argparse.ArgumentParser, argv: list[str], out: Path) -> list[str]:
  """The stored command line of the run in ``out``; --resume takes no other flag but --no-progress and the launch
  flags.

  Raises:
    _NoRun: ``out`` is missing, holds no run (no config.json, or one that is not a run's) or a finished one.
  """
  argv, launch = _split_launch(argv)
  others = [a for a in argv if a not in _PROCESS_FLAGS]
  if len(others) != 2:
    parser.error(
      "--resume DIR takes no other flag (the run keeps its own settings) except --no-progress, --no-compile-cache "
      "and the "
      f"launch flags ({', '.join(LAUNCH_FLAGS)})"
    )
  if not out.is_dir():
    raise _NoRun(f"--resume {out}: no such folder")
  config = out / "config.json"
  if not config.is_file():
    raise _NoRun(f"--resume {out}: no run there (missing config.json)")
  if (out / "results.json").exists():
    raise _NoRun(f"--resume {out}: that run has finished (results.json exists)")
  try:
    stored = list(json.loads(config.read_text())["argv"])
  except (ValueError, KeyError, TypeError) as e:
    raise _NoRun(f"--resume {out}: config.json is not a run's ({type(e).__name__}: {e})") from e
  return stored + [a for a in _PROCESS_FLAGS if a in argv] + launch


def _absolute_paths(argv: list[str], flags: Sequence[str]) -> list[str]:
  """``argv`` with the values of the path ``flags`` made absolute (``--flag VALUE`` and ``--flag=VALUE``)."""
  out, i = [], 0
  while i < len(argv):
    arg = argv[i]
    name, eq, value = arg.partition("=")
    if name in flags and eq:
      out.append(f"{name}={os.path.abspath(value)}")
    elif arg in flags and i + 1 < len(argv):
      out += [arg, os.path.abspath(argv[i + 1])]
      i += 1
    else:
      out.append(arg)
    i += 1
  return out


def main(experiment: Experiment, argv: Sequence[str] | None = None) -> int:
  """Parses, validates, joins the processes and builds the mesh, loads the data, opens (or resumes) the run
  directory, runs the stages, reports. In a multi-process run only process 0 writes the run directory.

  The run computes in JAX's default precision whatever the caller's ``jax_enable_x64``: a run started from a
  session with float64 on (a notebook, the test suite) gives the numbers the command line gives, instead of
  promoting its float64 inputs (node features, Python floats) through float32 models. Experiments that need float64
  somewhere enable it there themselves."""
  with jax.enable_x64(False):
    return _main(experiment, argv)


def dry_run(experiment: Experiment, args: argparse.Namespace, cfg) -> str:
  """What ``--dry-run`` prints: the run's wall-time estimate on this CPU (:mod:`experiments.harness._estimate`)."""
  described = experiment.describe(args, cfg)
  cpu = cpu_description()["model"]
  found = estimate(experiment.name, described.get("dataset"), dataclasses.asdict(cfg), cpu)
  return f"{experiment.name} --preset {args.preset}: {found.text()}"


def _main(experiment: Experiment, argv: Sequence[str] | None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser, args, cfg = experiment.parse(argv)
  if args.dry_run:
    if args.resume is not None:
      print("error: --dry-run estimates a new run: it takes no --resume", file=sys.stderr)
      return 2
    print(dry_run(experiment, args, cfg))
    return 0
  use_compilation_cache(not args.no_compile_cache)
  resumed = args.resume is not None
  writer = args.process_id == 0
  if resumed:
    out = Path(args.resume)
    try:
      argv = _resume_argv(parser, argv, out)
    except _NoRun as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    parser, args, cfg = experiment.parse(argv)
  else:
    out = Path(args.out or f"runs/{experiment.name}-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    if writer:
      try:
        common.check_out_dir(out)
      except FileExistsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
  try:
    experiment.launch(args, cfg)
  except UsageError as e:
    parser.error(str(e))
  except ConnectionError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  try:
    data = experiment.load(args, cfg)
  except common.LOAD_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  inputs = [
    path
    for flag in ("--data-dir", *experiment.path_flags)
    if (path := getattr(args, flag.removeprefix("--").replace("-", "_"), None)) is not None
  ]
  if writer and not resumed:
    out.mkdir(parents=True, exist_ok=True)
    stored = _absolute_paths(_split_launch(argv)[0], ("--data-dir", "--out", *experiment.path_flags))
    common.write_json(
      out / "config.json",
      common.jsonable(
        {
          "experiment": experiment.name,
          "argv": stored,
          "preset": args.preset,
          **experiment.describe(args, cfg),
          "config": dataclasses.asdict(cfg),
          "provenance": provenance(inputs),
        }
      ),
    )
  run = Run(out, resumed=resumed, progress=not args.no_progress and writer, writer=writer)
  # what else ran on the machine meanwhile: a timing is only as good as the quiet it was taken in
  monitor, activity = LoadMonitor(), Activity(out.resolve()) if writer else None
  try:
    if resumed:
      run.log(event="resumed", finished_stages=run.finished_stages())
    try:
      try:
        results = experiment.execute(run, args, cfg, data)
      except StageFailed:
        raise
      except Exception as e:
        raise StageFailed("(between stages)", e) from e
    except StageFailed as e:
      resumable = not isinstance(e.error, REPEATED_ON_RESUME)
      partial = {
        "failed_stage": e.stage,
        "error": f"{type(e.error).__name__}: {e.error}",
        "finished_stages": run.finished_stages(),
        "resume": f"python -m experiments.{experiment.name} --resume {out}" if resumable else None,
      }
      # the run's own status file: a second failure after --resume replaces the first one's
      if writer:
        write_atomic(out / "results.partial.json", (json.dumps(partial, indent=2) + "\n").encode(), overwrite=True)
      advice = (
        f"after fixing the cause, continue with --resume {out}"
        if resumable
        else "the error follows from the run's stored flags and data, so resuming it would fail the same way: "
        "start a new run with other flags"
      )
      print(
        f"error{'' if writer else f' (process {args.process_id})'}: {e}\nfinished stages are kept in "
        f"{out / 'stages'}; {advice}",
        file=sys.stderr,
      )
      return 1
    run.log(
      event="finished",
      stages_read_back=run.loaded,
      stages_computed=run.computed,
      load=monitor.summary(),
      concurrent_runs=activity.finish() if activity is not None else [],
    )
    activity = None
    run.write_json("results.json", results)
    if writer:  # the failure status of an earlier attempt, which this resumed run has finished
      (out / "results.partial.json").unlink(missing_ok=True)
    text = experiment.report(run, args, cfg, results)
  finally:
    if activity is not None:  # a failed run: its end line, so that later runs do not count it as still running
      activity.finish()
    run.close()
  if writer:
    print(text)
    print(f"outputs in {out}")
  return 0
