"""Pair corpora for two-tower models.

Bag-of-features inputs of left and right entities and observed (left, right, target) pairs split into train and
validation.

Every feature value of every group is an id into one shared input vocabulary (the two towers share their input
embeddings, as in the Gramian paper's models), so a corpus needs only the id matrices and the vocabulary size.
"""

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

PAD = -1  # padding id in a feature bag
"""The id that pads a feature bag to a fixed length (masked out of every bag mean)."""


class FeatureBags(NamedTuple):
  """Inputs of n entities: one padded id matrix per feature group (e.g. id, title n-grams, categories).

  ``groups[g]`` is [n, m_g] int32 with :data:`PAD` padding; every row of the id group has exactly one id.
  """

  groups: tuple[np.ndarray, ...]
  names: tuple[str, ...]

  @property
  def num_entities(self) -> int:
    return self.groups[0].shape[0]


class Pairs(NamedTuple):
  """Observed pairs: left entity [E], right entity [E] and the target similarity [E]."""

  left: np.ndarray  # int32
  right: np.ndarray  # int32
  target: np.ndarray  # float32


class PairCorpus(NamedTuple):
  """A two-tower training corpus. ``left`` and ``right`` may be the same FeatureBags (pages linking to pages)."""

  left: FeatureBags
  right: FeatureBags
  vocab_size: int
  train: Pairs
  val: Pairs
  name: str


class Vocabulary:
  """Assigns consecutive ids to (group, value) keys, so groups never collide in the shared embedding table."""

  def __init__(self):
    self._ids: dict[tuple[str, object], int] = {}

  def __len__(self) -> int:
    return len(self._ids)

  def bags(self, group: str, values: Sequence[Sequence]) -> np.ndarray:
    """The padded id matrix [n, max bag size (at least 1)] of one feature group."""
    width = max([len(v) for v in values] + [1])
    out = np.full((len(values), width), PAD, np.int32)
    for row, bag in enumerate(values):
      for col, value in enumerate(bag):
        out[row, col] = self._ids.setdefault((group, value), len(self._ids))
    return out

  def ids(self, group: str, n: int) -> np.ndarray:
    """The one-hot id group [n, 1] of n entities."""
    return self.bags(group, [(i,) for i in range(n)])


def split_pairs(pairs: Pairs, val_fraction: float, seed: int) -> tuple[Pairs, Pairs]:
  """A seeded random split of the pairs into (train, val).

  Args:
    pairs: the :class:`Pairs`.
    val_fraction: the share held out.
    seed: seeds the split.

  Returns:
    ``(train, val)`` :class:`Pairs`.

  Raises:
    ValueError: ``val_fraction`` outside (0, 1).
  """
  if not 0.0 < val_fraction < 1.0:
    raise ValueError(f"split_pairs: `val_fraction` must lie in (0, 1), got {val_fraction!r}")
  n = len(pairs.left)
  order = np.random.default_rng(seed).permutation(n)
  n_val = int(round(val_fraction * n))
  val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
  return Pairs(*(a[train] for a in pairs)), Pairs(*(a[val] for a in pairs))


def counts(entity: np.ndarray, n: int) -> np.ndarray:
  """Occurrences of each of n entities in a pair column (the frequencies of the paper's linear/sqrt sampling).

  Args:
    entity: a pair column of entity ids, [m].
    n: the number of entities.

  Returns:
    The occurrences per entity, [n].
  """
  return np.bincount(entity, minlength=n).astype(np.float64)
