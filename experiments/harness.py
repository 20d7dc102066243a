"""The one harness behind every experiment and benchmark command line.

**Configs become flags.** An experiment's settings are one frozen dataclass; a field declared with :func:`option`
becomes a flag (``--field-name``, or the ``flag`` given), with its allowed range or choices declared next to it.
Presets are instances of that dataclass; a flag overrides its field only when given. Tuples are comma lists.

**Validation comes first.** Every range, every cross-field check (``Experiment.check``) and the data itself
(``Experiment.load``) are checked before anything is written; a bad value exits with status 2 and a message naming
the flag and the allowed range, and no run directory is created.

**Scaling out.** ``--devices``, ``--num-processes``, ``--process-id``, ``--coordinator`` and ``--peer-timeout`` are
launch flags (how this process runs, not what the run computes): a data-parallel experiment (``data_parallel``)
gets ``args.mesh``; every process of a multi-process run joins ``jax.distributed`` first, and only process 0 writes.

**One run-directory lifecycle.** ``config.json`` (with the command line, input paths made absolute, so a run can be
resumed exactly from anywhere), ``metrics.jsonl``, ``stages/`` where every finished stage is written atomically, and at
the end ``results.json``, ``table.md`` and the figures. A stage that holds model state is an orbax-checkpoint folder
(``<stage>.orbax``) of its arrays and numbers only, read back through the stage's :class:`Checkpoint`, which rebuilds
graph definitions from the run's config: a resumed run does not depend on how flax or the experiment laid out their
classes when it was written. Other stages are pickles of host values (resume only run folders you made).
``--resume DIR`` re-reads DIR's command line and skips every finished stage; when a stage fails,
``results.partial.json`` lists the finished stages and names the failed one, and the command exits with status 1.

**Compiled programs are cached.** Unless ``JAX_COMPILATION_CACHE_DIR`` (or ``jax_compilation_cache_dir``) names
another folder, every compiled program is kept in ``<download cache>/xla`` (``~/.cache/bcjax/xla``, see
:func:`bcjax.data.default_cache_dir`): the seeds of a sweep, a resumed run and the next run of a preset read them back
instead of compiling again. ``--no-compile-cache`` turns it off for one run.

Exit status: 0 done; 1 a stage failed (``results.partial.json`` written, and removed when a resumed run finishes); 2 a
usage or data error (nothing written).

Fault injection for tests: ``BCJAX_FAULT=kill:STAGE`` SIGKILLs the process right after STAGE is saved and
``BCJAX_FAULT=fail:STAGE`` raises inside STAGE (STAGE is an ``fnmatch`` pattern).
"""

import abc
import argparse
import dataclasses
import datetime
import fnmatch
import json
import os
import pickle
import shutil
import signal
import sys
import tempfile
import traceback
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp

from bcjax import parallel
from bcjax._compile_cache import use_compilation_cache
from bcjax.files import write_atomic
from experiments import common
from experiments.provenance import provenance

# Before any JAX backend starts: forced CPU devices (XLA_FLAGS) get a client pool their collectives cannot exhaust.
parallel.reserve_collective_threads()

FAULT_ENV = "BCJAX_FAULT"


class UsageError(ValueError):
  """A bad flag value: ``flag`` names it, the message says what is allowed."""

  def __init__(self, flag: str, message: str):
    super().__init__(f"{flag} {message}")
    self.flag = flag


class InputError(UsageError):
  """A flag whose syntax is right but whose data is not there or not usable (a missing path): reported in one
  line, as the loaders' data errors are, without the usage text (which would not help)."""


# Configs and flags ---------------------------------------------------------------------------------------------


def option(
  default=dataclasses.MISSING,
  *,
  help: str,
  flag: str | None = None,
  low: float | None = None,
  high: float | None = None,
  low_open: bool = False,
  high_open: bool = False,
  choices: Sequence | None = None,
  nonempty: bool = True,
):
  """A config field exposed as a flag. ``low``/``high`` bound numbers (closed unless ``*_open``), ``choices`` the
  allowed values; for tuple fields both apply to every element and ``nonempty`` refuses an empty list."""
  meta = {
    "help": help,
    "flag": flag,
    "low": low,
    "high": high,
    "low_open": low_open,
    "high_open": high_open,
    "choices": None if choices is None else tuple(choices),
    "nonempty": nonempty,
  }
  if isinstance(default, (list, dict, set)):
    raise TypeError("option: use a tuple default (configs are frozen)")
  return dataclasses.field(default=default, metadata={"option": meta})


def _options(config_cls) -> list[tuple[dataclasses.Field, dict]]:
  return [(f, f.metadata["option"]) for f in dataclasses.fields(config_cls) if "option" in f.metadata]


def flag_name(field: dataclasses.Field) -> str:
  return field.metadata["option"]["flag"] or "--" + field.name.replace("_", "-")


def _element_type(annotation):
  """(element type, is_tuple, optional) of a field annotation such as ``int``, ``tuple[float, ...]``, ``str | None``."""
  optional = False
  origin = typing.get_origin(annotation)
  if origin in (typing.Union, types.UnionType):
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional, annotation = True, args[0]
    origin = typing.get_origin(annotation)
  if origin is tuple:
    return typing.get_args(annotation)[0], True, optional
  return annotation, False, optional


def _range_text(meta: dict) -> str:
  if meta["choices"] is not None:
    return "one of " + ", ".join(map(str, meta["choices"]))
  parts = []
  if meta["low"] is not None:
    parts.append(f"{'>' if meta['low_open'] else '>='} {meta['low']:g}")
  if meta["high"] is not None:
    parts.append(f"{'<' if meta['high_open'] else '<='} {meta['high']:g}")
  return " and ".join(parts)


def add_config_flags(parser: argparse.ArgumentParser, config_cls) -> None:
  """One flag per :func:`option` field; its default is the preset's, so a flag left out changes nothing."""
  group = parser.add_argument_group("settings (override the preset)")
  for field, meta in _options(config_cls):
    kind, is_tuple, _ = _element_type(field.type)
    allowed = _range_text(meta)
    text = meta["help"] + (
      f" ({'comma-separated, each ' if is_tuple else ''}{allowed})"
      if allowed
      else " (comma-separated)"
      if is_tuple
      else ""
    )
    if kind is bool and not is_tuple:
      group.add_argument(
        flag_name(field), dest=field.name, action=argparse.BooleanOptionalAction, default=None, help=text
      )
    else:
      group.add_argument(flag_name(field), dest=field.name, default=None, metavar=field.name.upper(), help=text)


def _parse_value(field: dataclasses.Field, text: str):
  kind, is_tuple, optional = _element_type(field.type)
  meta = field.metadata["option"]
  name = flag_name(field)

  def one(item: str):
    item = item.strip()
    if optional and item.lower() == "none":
      return None
    try:
      if kind is bool:
        if item.lower() not in ("true", "false", "1", "0"):
          raise ValueError(item)
        return item.lower() in ("true", "1")
      return kind(item)
    except ValueError:
      raise UsageError(
        name,
        f"must be {'comma-separated ' if is_tuple else 'a '}{kind.__name__}"
        f"{' values' if is_tuple else ''}, got {text!r}",
      ) from None

  if not is_tuple:
    return one(text)
  values = tuple(one(item) for item in text.split(",") if item.strip())
  if not values and meta["nonempty"]:
    raise UsageError(name, f"needs at least one value, got {text!r}")
  return values


def check_field(field: dataclasses.Field, value) -> None:
  """Raises :class:`UsageError` when ``value`` is outside the field's declared range or choices."""
  meta = field.metadata["option"]
  _, is_tuple, _ = _element_type(field.type)
  name = flag_name(field)
  values = value if is_tuple else (value,)
  if is_tuple and not values and meta["nonempty"]:
    raise UsageError(name, "needs at least one value")
  for v in values:
    if v is None:
      continue
    if meta["choices"] is not None and v not in meta["choices"]:
      raise UsageError(name, f"must be {_range_text(meta)}; got {v!r}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
      if v != v:  # NaN
        raise UsageError(name, f"must be a number ({_range_text(meta) or 'finite'}), got {v}")
      low, high = meta["low"], meta["high"]
      if (low is not None and (v < low or (meta["low_open"] and v == low))) or (
        high is not None and (v > high or (meta["high_open"] and v == high))
      ):
        raise UsageError(name, f"must be {_range_text(meta)}, got {v:g}")


def apply_flags(args: argparse.Namespace, cfg):
  """The preset ``cfg`` with every given flag applied, every option field validated."""
  changes = {}
  for field, _ in _options(type(cfg)):
    given = getattr(args, field.name, None)
    if given is not None:
      changes[field.name] = given if isinstance(given, bool) else _parse_value(field, given)
  cfg = dataclasses.replace(cfg, **changes)
  for field, _ in _options(type(cfg)):
    check_field(field, getattr(cfg, field.name))
  return cfg


def given_positive_int(args: argparse.Namespace, name: str) -> int | None:
  """The value of flag ``name`` when it was given as a positive integer, else None: for presets whose other fields
  follow a flag (a schedule that scales with ``--epochs``). An invalid value is left to the range check."""
  text = getattr(args, name, None)
  return int(text) if text is not None and text.strip().isdigit() and int(text) >= 1 else None


def parse_config(
  parser: argparse.ArgumentParser,
  argv,
  config_cls,
  preset: Callable[[argparse.Namespace], object],
  check: Callable | None = None,
):
  """Parses ``argv`` into ``(args, cfg)``: the preset, the flags over it, the ranges and ``check(args, cfg)``; any
  :class:`UsageError` exits with status 2 before anything is written. For commands without a run directory
  (the benchmarks)."""
  add_config_flags(parser, config_cls)
  args = parser.parse_args(argv)
  try:
    cfg = apply_flags(args, preset(args))
    if check is not None:
      check(args, cfg)
  except UsageError as e:
    parser.error(str(e))
  return args, cfg


# Runs and stages -----------------------------------------------------------------------------------------------


# A stage that raised one of these would raise it again on --resume, which reruns the same stage on the same stored
# flags and data: bcjax's argument checks (ValueError, TypeError) and a training run that diverged
# (FloatingPointError: the same seed diverges the same way). The failure message does not offer --resume for them.
REPEATED_ON_RESUME = (ValueError, TypeError, FloatingPointError)


class StageFailed(RuntimeError):
  """A stage raised; ``stage`` names it."""

  def __init__(self, stage: str, error: BaseException):
    frames = traceback.extract_tb(error.__traceback__)
    # Where it was raised: an AssertionError (or any error) with an empty message still points at its line.
    where = f" (raised at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    super().__init__(f"stage {stage!r} failed: {type(error).__name__}: {error}{where}")
    self.stage, self.error = stage, error


def _fault(kind: str, stage: str) -> bool:
  spec = os.environ.get(FAULT_ENV, "")
  what, _, pattern = spec.partition(":")
  return what == kind and bool(pattern) and fnmatch.fnmatchcase(stage, pattern)


PICKLE_SUFFIX, CHECKPOINT_SUFFIX = ".pkl", ".orbax"
_NOT_WRITTEN = object()


class Checkpoint(typing.NamedTuple):
  """How :meth:`Run.stage` stores a value that holds model state: ``save(value)`` is a tree of dicts and lists of
  arrays and numbers (no graph definitions, no classes), written with orbax-checkpoint; ``restore(tree)`` rebuilds
  the value from the tree orbax reads back (dict keys as strings, tuples as lists), its graph definitions from the
  run's config, e.g. with :func:`experiments.common.restore_module_state`."""

  save: Callable[[typing.Any], typing.Any]
  restore: Callable[[typing.Any], typing.Any]


def _checkpointer() -> ocp.Checkpointer:
  # Only process 0 checkpoints, with no barrier with the other processes of a multi-process run (they compute the
  # same stages in step and read back as_read_back's copy).
  me = jax.process_index()
  options = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me})
  return ocp.Checkpointer(
    ocp.StandardCheckpointHandler(multiprocessing_options=options), multiprocessing_options=options
  )


def _write_checkpoint(path: Path, tree) -> None:
  """Writes ``tree`` to ``path`` atomically (orbax writes a temporary folder and renames it); a temporary folder left
  by a killed run is this stage's own and is discarded first."""
  path.parent.mkdir(parents=True, exist_ok=True)
  for leftover in path.parent.glob(f"{path.name}.orbax-checkpoint-tmp*"):
    shutil.rmtree(leftover)
  with _checkpointer() as checkpointer:
    checkpointer.save(path.absolute(), tree)


def as_read_back(tree):
  """What orbax reads back of ``tree`` (dict keys as strings, tuples as lists, host arrays of the same dtype, numbers
  as they are), without the disk: the value that a process which writes nothing continues with, as process 0
  continues with what it read back from its checkpoint."""
  if isinstance(tree, dict):
    return {str(key): as_read_back(value) for key, value in tree.items()}
  if isinstance(tree, (list, tuple)):
    return [as_read_back(value) for value in tree]
  if isinstance(tree, (int, float)):
    return tree
  return np.array(tree)


def _read_checkpoint(path: Path):
  with _checkpointer() as checkpointer:
    return checkpointer.restore(path.absolute())


class Run:
  """An open run directory: resumable stages, the metrics log and atomic outputs.

  In a multi-process run the processes other than 0 are not ``writer``: they read the stages that process 0 wrote
  (a stage read back is read back by every process, so all of them take the same collective steps), and everything
  they would write goes to a scratch folder that is deleted on :meth:`close`.
  """

  def __init__(self, out: Path, *, resumed: bool, progress: bool, writer: bool = True):
    self.resumed, self.progress, self.writer = resumed, progress, writer
    self.stages = out / "stages"
    if writer:
      self.out = out
      self.stages.mkdir(exist_ok=True)
      self._metrics = open(out / "metrics.jsonl", "a", buffering=1)  # noqa: SIM115 (open for the run; closed by close())
    else:
      self.out = Path(tempfile.mkdtemp(prefix="bcjax-process-"))
      self._metrics = open(os.devnull, "w")  # noqa: SIM115 (as above)
    self._values: dict = {}  # stages of this process, so a shared stage (M_0) is read once
    self.loaded: list[str] = []
    self.computed: list[str] = []

  def log(self, **record) -> None:
    """Appends one JSON object to ``metrics.jsonl`` (a resumed run appends after the killed one's lines)."""
    record.setdefault("time", datetime.datetime.now(datetime.UTC).isoformat())
    self._metrics.write(json.dumps(common.jsonable(record)) + "\n")

  def _path(self, name: str, suffix: str = PICKLE_SUFFIX) -> Path:
    if not name or any(part in ("", ".", "..") for part in name.split("/")):
      raise ValueError(f"stage name {name!r} must be '/'-separated non-empty parts")
    return self.stages / f"{name}{suffix}"

  def stage(self, name: str, compute: Callable[[], object], checkpoint: "Checkpoint | None" = None):
    """``compute()`` once per run: a stage finished earlier (before a kill, in the run being resumed) is read back
    instead. With ``checkpoint`` the value is written as an orbax checkpoint of ``checkpoint.save(value)`` and read
    back through ``checkpoint.restore``; without, it (host arrays, dicts, NamedTuples) is pickled atomically. A
    stage pickled by an earlier version of the experiment is read back as it was written."""
    if name in self._values:
      return self._values[name]
    pickled, checkpointed = self._path(name), self._path(name, CHECKPOINT_SUFFIX)
    if checkpoint is not None and checkpointed.is_dir():
      value = checkpoint.restore(_read_checkpoint(checkpointed))
    elif pickled.is_file():
      with open(pickled, "rb") as f:
        value = pickle.load(f)
    else:
      value = _NOT_WRITTEN
    if value is not _NOT_WRITTEN:
      self.loaded.append(name)
      self._values[name] = value
      return value
    try:
      if _fault("fail", name):
        raise RuntimeError(f"fault injected by {FAULT_ENV}")
      value = compute()
    except StageFailed:
      raise
    except Exception as e:
      raise StageFailed(name, e) from e
    # What later stages see is what a resumed run would read back, so both runs compute the same numbers.
    if checkpoint is None:
      data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
      if self.writer:
        pickled.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(pickled, data)
      value = pickle.loads(data)
    elif self.writer:
      _write_checkpoint(checkpointed, checkpoint.save(value))
      value = checkpoint.restore(_read_checkpoint(checkpointed))
    else:
      value = checkpoint.restore(as_read_back(checkpoint.save(value)))
    self._values[name] = value
    self.computed.append(name)
    if _fault("kill", name):
      os.kill(os.getpid(), signal.SIGKILL)
    return value

  def finished_stages(self) -> list[str]:
    if not self.stages.is_dir():
      return []
    pickles = [p for p in self.stages.rglob(f"*{PICKLE_SUFFIX}") if p.is_file()]
    checkpoints = [p for p in self.stages.rglob(f"*{CHECKPOINT_SUFFIX}") if p.is_dir()]
    return sorted(str(p.relative_to(self.stages))[: -len(p.suffix)] for p in pickles + checkpoints)

  def publish_dir(self, name: str, build: Callable[[Path], None]) -> Path:
    """A folder of outputs (e.g. a registry) that appears complete or not at all: ``build`` fills a scratch folder,
    which is renamed into place; a scratch folder left by a killed run is this run's own and is discarded."""
    final = self.out / name
    if final.exists():
      return final
    scratch = final.with_name(f".{final.name}.partial")
    if scratch.exists():
      shutil.rmtree(scratch)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    build(scratch)
    os.rename(scratch, final)
    return final

  def write_json(self, name: str, obj) -> None:
    common.write_json(self.out / name, common.jsonable(obj))

  def write_text(self, name: str, text: str) -> None:
    common.write_text(self.out / name, text)

  def save_figure(self, fig, name: str) -> None:
    common.save_figure(fig, self.out / name)

  def close(self) -> None:
    self._metrics.close()
    if not self.writer:
      shutil.rmtree(self.out, ignore_errors=True)


# Experiments ---------------------------------------------------------------------------------------------------


class Experiment(abc.ABC):
  """What an experiment declares; :func:`main` does the rest.

  Subclasses set ``name``, ``description``, ``config`` (the dataclass) and ``presets`` ({name: config}), and
  implement ``execute`` and ``report``; ``datasets`` (a description) adds ``--dataset``/``--data-dir``/``--download``.
  """

  name: str
  description: str
  config: type
  presets: dict
  default_preset = "quick"
  datasets: str | None = None
  default_dataset = "synthetic"
  path_flags: tuple[str, ...] = ()  # input-file flags besides --data-dir, stored absolute so --resume works anywhere
  # whether execute() runs its train steps on the data mesh of ``--devices`` (``args.mesh``); the others refuse
  # --devices rather than ignore it
  data_parallel = False

  def add_arguments(self, parser: argparse.ArgumentParser) -> None:  # noqa: B027 (an optional hook: the default does nothing)
    """Flags that are not config fields (input files, sweeps)."""

  def preset(self, args: argparse.Namespace):
    """The base config for ``--preset`` (and the dataset, where the presets depend on it)."""
    return self.presets[args.preset]

  def check(self, args: argparse.Namespace, cfg) -> None:  # noqa: B027 (an optional hook: the default does nothing)
    """Cross-field and non-config checks; raise :class:`UsageError`."""

  def load(self, args: argparse.Namespace, cfg):
    """Reads and validates the data before the run directory exists; raise ValueError/FileNotFoundError."""
    return None

  def describe(self, args: argparse.Namespace, cfg) -> dict:
    """What config.json records besides the config (dataset, input files, sweeps)."""
    return {"dataset": getattr(args, "dataset", None)}

  @abc.abstractmethod
  def execute(self, run: Run, args: argparse.Namespace, cfg, data) -> dict:
    """Runs the stages (``run.stage``) and returns the results dictionary."""

  @abc.abstractmethod
  def report(self, run: Run, args: argparse.Namespace, cfg, results: dict) -> str:
    """Writes table.md and the figures; returns what is printed at the end."""

  # The command line -----------------------------------------------------------------------------------------

  def parser(self) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m experiments.{self.name}", description=self.description)
    if self.datasets is not None:
      parser.add_argument("--dataset", default=self.default_dataset, help=self.datasets)
      parser.add_argument("--data-dir", help="folder with the dataset's files")
      parser.add_argument("--download", action="store_true", help="download missing public files into the cache")
    parser.add_argument(
      "--preset",
      choices=sorted(self.presets),
      default=self.default_preset,
      help="quick: minutes on CPU; paper: the paper's protocol; test: the test suite's smallest run (about a "
      "minute on two CPU cores, mostly compiling; the experiments that read large data cap it, see their flags)",
    )
    parser.add_argument("--out", help=f"new or empty output directory (default: runs/{self.name}-<time>)")
    parser.add_argument(
      "--resume",
      metavar="DIR",
      help="finish the run in DIR (its own flags; finished stages are read back, not recomputed)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
      "--no-compile-cache",
      action="store_true",
      help="do not read or write the persistent compilation cache (default: every compiled program is kept in "
      "~/.cache/bcjax/xla, or $BCJAX_DATA/xla, so the next run starts warm)",
    )
    launch = parser.add_argument_group(
      "scaling out (launch settings: not stored with the run, and allowed with --resume)"
    )
    launch.add_argument(
      "--devices",
      type=int,
      metavar="N",
      help="data-parallel over the first N local devices of each process (default: all of them); "
      "batches are split over the devices and every batch reduction is global, so results "
      "match one device"
      if self.data_parallel
      else "not supported by this experiment yet (it runs on one device)",
    )
    launch.add_argument(
      "--num-processes",
      type=int,
      default=1,
      metavar="P",
      help="processes of a multi-process run (jax.distributed); each runs this same command",
    )
    launch.add_argument(
      "--process-id",
      type=int,
      default=0,
      metavar="I",
      help="this process, 0..P-1; process 0 hosts the coordinator and alone writes the outputs",
    )
    launch.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address (with --num-processes > 1)")
    launch.add_argument(
      "--peer-timeout",
      type=int,
      default=120,
      metavar="SECONDS",
      help="how long to wait for the peers to join, and for a silent peer before failing",
    )
    self.add_arguments(parser)
    add_config_flags(parser, self.config)
    return parser

  def parse(self, argv: Sequence[str]):
    parser = self.parser()
    args = parser.parse_args(argv)
    try:
      cfg = apply_flags(args, self.preset(args))
      self.check_paths(args)
      self.check(args, cfg)
    except InputError as e:
      parser.exit(2, f"error: {e}\n")
    except UsageError as e:
      parser.error(str(e))
    return parser, args, cfg

  def check_paths(self, args: argparse.Namespace) -> None:
    """Every input path given (``--data-dir`` and :attr:`path_flags`) exists, in every experiment's words."""
    for flag in ("--data-dir", *self.path_flags):
      path = getattr(args, flag.removeprefix("--").replace("-", "_"), None)
      if path is not None and not os.path.exists(path):
        raise InputError(flag, f"{path} does not exist")

  def check_mesh(self, args: argparse.Namespace, cfg, devices: int) -> None:  # noqa: B027 (an optional hook: the default does nothing)
    """Checks that need the mesh's device count (e.g. batch divisibility); raise :class:`UsageError`."""

  def launch(self, args: argparse.Namespace, cfg) -> None:
    """Joins the multi-process run (``--num-processes``) and sets ``args.mesh``, the data mesh of ``--devices``
    (None for an experiment that is not data-parallel); before the run directory exists."""
    if args.num_processes < 1:
      raise UsageError("--num-processes", f"must be >= 1, got {args.num_processes}")
    if not 0 <= args.process_id < args.num_processes:
      raise UsageError(
        "--process-id",
        f"must be in [0, {args.num_processes - 1}] (--num-processes {args.num_processes}), got {args.process_id}",
      )
    if args.peer_timeout < 1:
      raise UsageError("--peer-timeout", f"must be >= 1 second, got {args.peer_timeout}")
    if args.num_processes != 1 and not self.data_parallel:
      raise UsageError(
        "--num-processes", f"{args.num_processes}: the {self.name} experiment does not run data-parallel yet"
      )
    if not self.data_parallel:
      if args.devices is not None and args.devices != 1:
        raise UsageError(
          "--devices", f"{args.devices}: the {self.name} experiment does not run data-parallel yet; leave --devices out"
        )
      args.mesh = None
      return
    if args.num_processes != 1:
      if args.coordinator is None:
        raise UsageError(
          "--coordinator", f"is needed with --num-processes {args.num_processes} (process 0's HOST:PORT)"
        )
      try:
        parallel.initialize(args.num_processes, args.process_id, args.coordinator, timeout_s=args.peer_timeout)
      except ValueError as e:
        raise UsageError("--coordinator", str(e).removeprefix("initialize: ")) from e
    try:
      args.mesh = parallel.data_mesh(args.devices)
    except ValueError as e:
      raise UsageError("--devices", str(e).removeprefix("data_mesh: `num_devices` (--devices) ")) from e
    self.check_mesh(args, cfg, args.mesh.devices.size)


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


def _resume_argv(parser: argparse.ArgumentParser, argv: list[str], out: Path) -> list[str]:
  """The stored command line of the run in ``out``; --resume takes no other flag but --no-progress and the launch
  flags."""
  argv, launch = _split_launch(argv)
  others = [a for a in argv if a not in _PROCESS_FLAGS]
  if len(others) != 2:
    parser.error(
      "--resume DIR takes no other flag (the run keeps its own settings) except --no-progress, --no-compile-cache "
      "and the "
      f"launch flags ({', '.join(LAUNCH_FLAGS)})"
    )
  config = out / "config.json"
  if not config.is_file():
    parser.error(f"--resume {out}: no run there (missing config.json)")
  if (out / "results.json").exists():
    parser.error(f"--resume {out}: that run has finished (results.json exists)")
  stored = json.loads(config.read_text())
  return list(stored["argv"]) + [a for a in _PROCESS_FLAGS if a in argv] + launch


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


def _main(experiment: Experiment, argv: Sequence[str] | None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser, args, cfg = experiment.parse(argv)
  use_compilation_cache(not args.no_compile_cache)
  resumed = args.resume is not None
  writer = args.process_id == 0
  if resumed:
    out = Path(args.resume)
    argv = _resume_argv(parser, argv, out)
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
          "provenance": provenance(),
        }
      ),
    )
  run = Run(out, resumed=resumed, progress=not args.no_progress and writer, writer=writer)
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
    run.log(event="finished", stages_read_back=run.loaded, stages_computed=run.computed)
    run.write_json("results.json", results)
    if writer:  # the failure status of an earlier attempt, which this resumed run has finished
      (out / "results.partial.json").unlink(missing_ok=True)
    text = experiment.report(run, args, cfg, results)
  finally:
    run.close()
  if writer:
    print(text)
    print(f"outputs in {out}")
  return 0
