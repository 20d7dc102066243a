"""A run's stages on disk: the failure of one, and model state written as orbax checkpoints of arrays and numbers
(read back through the stage's :class:`Checkpoint`, graph definitions rebuilt from the run's config)."""

import shutil
import traceback
import typing
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp

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


PICKLE_SUFFIX, CHECKPOINT_SUFFIX = ".pkl", ".orbax"


class _Missing:
  def __repr__(self) -> str:
    return "MISSING"


MISSING = _Missing()
"""What :meth:`Run.stored` returns for a stage this run does not have yet (a stage's value may be None)."""


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
