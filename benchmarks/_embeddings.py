"""Real embeddings of the same items by two models, read from the .npy files a benchmark is given."""

import numpy as np

from bcjax import upgrade
from experiments import harness


def check_paired(old_path: str, new_path: str, need: int) -> None:
  """Refuse ``--old``/``--new`` before any work: one without the other, unreadable files, different row counts, or
  fewer than ``need`` rows.

  Raises:
    harness.UsageError: naming the flag and the values.
  """
  if bool(old_path) != bool(new_path):
    raise harness.UsageError("--new" if old_path else "--old", "is missing: pass both --old and --new, or neither")
  if not old_path:
    return
  rows = {}
  for flag, path in (("--old", old_path), ("--new", new_path)):
    try:
      rows[flag] = upgrade.open_embeddings(path, name=flag).shape[0]
    except (OSError, ValueError) as err:
      raise harness.UsageError(flag, str(err)) from None
  if rows["--old"] != rows["--new"]:
    raise harness.UsageError("--new", f"{rows['--new']} rows against --old's {rows['--old']}: row i must be one item")
  if rows["--old"] < need:
    raise harness.UsageError("--old", f"{rows['--old']} rows; this run needs {need}")


def paired_embeddings(old_path: str, new_path: str) -> tuple[np.ndarray, np.ndarray] | None:
  """The (old, new) float32 embeddings from ``--old``/``--new`` (checked by :func:`check_paired`), or None."""
  if not old_path:
    return None
  old, new = upgrade.open_embeddings(old_path, name="--old"), upgrade.open_embeddings(new_path, name="--new")
  return np.asarray(old, np.float32), np.asarray(new, np.float32)
