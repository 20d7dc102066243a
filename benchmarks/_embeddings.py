"""Real embeddings of the same items by two models, read from the .npy files a benchmark is given."""

import numpy as np

from bcjax import upgrade


def paired_embeddings(old_path: str, new_path: str) -> tuple[np.ndarray, np.ndarray] | None:
  """The (old, new) float32 embeddings from ``--old``/``--new`` (row i of each embeds one item), or None for neither.

  Raises:
    ValueError: for one file without the other, or files of different row counts.
  """
  if bool(old_path) != bool(new_path):
    raise ValueError("pass both --old and --new, or neither")
  if not old_path:
    return None
  old, new = upgrade.open_embeddings(old_path, name="--old"), upgrade.open_embeddings(new_path, name="--new")
  if old.shape[0] != new.shape[0]:
    raise ValueError(f"--old has {old.shape[0]} rows, --new {new.shape[0]}: row i of each must embed one item")
  return np.asarray(old, np.float32), np.asarray(new, np.float32)
