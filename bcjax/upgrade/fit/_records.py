"""What a fit takes and returns: the kinds, the split of the pairs and the fit's record."""

from typing import NamedTuple

import numpy as np

from bcjax.upgrade._map import UpgradeMap

KINDS = ("orthogonal", "linear", "affine", "mlp")
MIN_VALIDATION_ROWS = 50  # from the fewest parameters to the most (auto's preference)
UPGRADE_KINDS = ("auto", *KINDS)
"""The ``kind`` values of :func:`fit_upgrade` and ``bcjax fit --kind``: ``auto`` and each closed-form or MLP kind."""
ALPHAS = (0.0, 1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
RANK_FRACTIONS = (1 / 2, 1 / 4, 1 / 8)
HUBNESS_MODES = ("auto", "on", "off")
HUBNESS_REFERENCE_ROWS = 5000  # mapped rows stored with a map for its hubness correction (7.5 MiB at 384-d)


class PairSplit(NamedTuple):
  """Sorted row ids of the pairs.

  ``train`` (fitting), ``val`` (choices: kind, MLP width and epochs) and ``test`` (held out for the report, never seen
  by the fit).
  """

  train: np.ndarray
  val: np.ndarray
  test: np.ndarray


class SplitError(ValueError):
  """:func:`split_pairs` refused its arguments: ``detail`` says why, naming them as the caller called them."""

  def __init__(self, detail: str):
    super().__init__(f"split_pairs: {detail}")
    self.detail = detail


def split_pairs(
  n: int,
  *,
  test_fraction: float = 0.2,
  val_fraction: float = 0.1,
  seed: int = 0,
  names: tuple[str, str] = ("test_fraction", "val_fraction"),
) -> PairSplit:
  """A random split of n pairs into train, validation and test rows (each sorted).

  Args:
    n: the number of pairs.
    test_fraction: the share held out for the report.
    val_fraction: the share for the choices.
    seed: seeds the permutation.
    names: the two fractions' names in error messages (a command line passes its flags').

  Returns:
    A :class:`PairSplit` of sorted row ids.

  Raises:
    SplitError: (a ValueError) when a fraction is outside [0, 1), they sum to 1 or more, or fewer than 2 training rows
      remain.
  """
  for name, value in zip(names, (test_fraction, val_fraction)):
    if not 0.0 <= value < 1.0:
      raise SplitError(f"`{name}` must lie in [0, 1), got {value!r}")
  if test_fraction + val_fraction >= 1.0:
    raise SplitError(f"`{names[0]}` + `{names[1]}` = {test_fraction + val_fraction:g} leaves no training pairs")
  order = np.random.default_rng(seed).permutation(n)
  n_test, n_val = int(round(test_fraction * n)), int(round(val_fraction * n))
  if n - n_test - n_val < 2:
    raise SplitError(
      f"{n} pairs leave {n - n_test - n_val} for training after {n_test} test and {n_val} validation pairs; at least "
      f"2 are needed"
    )
  test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
  return PairSplit(np.sort(train), np.sort(val), np.sort(test))


class Candidate(NamedTuple):
  """One kind :func:`fit_upgrade` fitted: its chosen settings and its scores (None where not measured).

  ``cv_rank_score`` and ``cv_mse``: the closed forms' cross-validated own-vector rank score and squared error;
  ``val_mse``: the validation pairs' mean squared error; ``val_rank_score`` and ``val_hit_rate``: ``auto``'s
  validation retrieval (the mean own-vector rank score and the top-k hit rate).
  """

  kind: str
  choices: dict
  cv_rank_score: float | None = None
  cv_mse: float | None = None
  val_mse: float | None = None
  val_rank_score: float | None = None
  val_hit_rate: float | None = None


class UpgradeFit(NamedTuple):
  """Result of :func:`fit_upgrade`.

  The chosen ``map``; ``candidates``, one :class:`Candidate` per kind fitted; ``reason``, why this kind (and why the
  hubness correction is kept or left out); ``hubness``, that choice's record (mode, k, and the validation rank
  scores without and with it where they were measured).
  """

  map: UpgradeMap
  candidates: list[Candidate]
  reason: str
  hubness: dict | None = None
