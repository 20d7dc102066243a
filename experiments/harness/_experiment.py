"""What an experiment declares (:class:`Experiment`): its config, presets, flags, checks, data and stages; and how
a process joins a run (``--devices``, ``--num-processes``) before the run directory exists."""

import abc
import argparse
import os
from collections.abc import Sequence

from bcjax import parallel
from experiments.harness._errors import InputError, UsageError
from experiments.harness._flags import add_config_flags, apply_flags
from experiments.harness._run import Run


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
      "--dry-run",
      action="store_true",
      help="validate the flags, print an estimate of the run's wall time on this machine (from the comparable runs "
      "kept in docs/reproduction/runs) and exit without running or writing anything",
    )
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
