r"""Paired, stratified bootstrap interval of a difference between two systems scored on the same queries.

Two systems scored per query on the same queries (two recommenders' Recall@K per val user) differ by
:math:`d_{s,q}` on query q of stratum s (a version's val window). The statistic is a weighted sum of stratum means,

.. math::
  \hat\theta = \sum_s w_s \, \frac{1}{n_s} \sum_{q=1}^{n_s} d_{s,q},

e.g. the difference of two methods' intended Recall@50 averaged over versions (:math:`w_s = 1/S`). Each bootstrap
replicate redraws every stratum's :math:`n_s` queries with replacement, independently across strata (a
stratified bootstrap), and recomputes :math:`\theta`. Pairing removes what the two systems share (how hard each
query is), so the interval measures how much the *difference* depends on which queries were sampled. The interval
is the percentile interval (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, §13.3); its standard
error tends to :math:`\sqrt{\sum_s w_s^2 \hat\sigma_s^2 / n_s}` (:math:`\hat\sigma_s^2` the plug-in variance of
stratum s) as the number of replicates grows.

It measures the sampling noise of the evaluation queries only: not the noise of training (another seed draws
another model), which needs repeated runs.
"""

from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from bcjax import _checks

# Replicates drawn at a time: the index block [replicates, n_s] stays near 2^24 entries whatever n_s is.
_BLOCK_ENTRIES = 1 << 24


class BootstrapInterval(NamedTuple):
  r"""A bootstrap interval.

  ``estimate``: :math:`\hat\theta` on the observed queries; ``std``: the replicates' standard deviation (the bootstrap
  standard error); ``low``, ``high``: the percentile interval at the requested level.
  """

  estimate: float
  std: float
  low: float
  high: float


def paired_bootstrap(
  differences: Sequence,
  key: jax.Array,
  *,
  weights: Sequence | None = None,
  num_samples: int = 2000,
  level: float = 0.95,
) -> BootstrapInterval:
  r"""Percentile bootstrap interval of :math:`\theta = \sum_s w_s \operatorname{mean}(d_s)`.

  Each stratum's queries redrawn with replacement.

  Args:
    differences: one 1-D array per stratum, ``[n_s]``: system A's per-query score minus system B's on the same
      queries (finite, at least one query each).
    key: PRNG key of the redraws (the same key gives the same interval).
    weights: ``[S]`` stratum weights :math:`w_s` (finite); default 1/S each (the mean over strata).
    num_samples: bootstrap replicates.
    level: coverage of the interval, in (0, 1).

  Returns:
    :class:`BootstrapInterval` (Python floats).

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for a stratum without queries, weights not one per stratum, or a level outside (0,
      1).
  """
  fn = "paired_bootstrap"
  if isinstance(differences, (str, bytes)) or not isinstance(differences, Sequence) or not differences:
    raise ValueError(
      f"{fn}: `differences` must be a non-empty sequence of 1-D arrays (one per stratum), got "
      f"{type(differences).__name__}"
    )
  strata = []
  for s, d in enumerate(differences):
    d = _checks.as_float_array(fn, f"differences[{s}]", d, ndim=1, numpy=True).astype(np.float64)
    if d.size == 0:
      raise ValueError(f"{fn}: `differences[{s}]` has no queries; every stratum needs at least one")
    strata.append(d)
  if weights is None:
    w = np.full(len(strata), 1.0 / len(strata))
  else:
    w = _checks.as_float_array(fn, "weights", np.asarray(weights, np.float64), ndim=1, numpy=True)
    if w.shape != (len(strata),):
      raise ValueError(f"{fn}: `weights` must have one entry per stratum, shape ({len(strata)},), got {w.shape}")
  is_key = isinstance(key, jax.Array) and (
    jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) or (key.dtype == np.uint32 and key.shape == (2,))
  )
  if not is_key:
    raise TypeError(
      f"{fn}: `key` must be a PRNG key (jax.random.key(seed)), got {type(key).__name__} "
      f"{getattr(key, 'dtype', '')} {np.shape(key)}"
    )
  num_samples = _checks.as_int(fn, "num_samples", num_samples, low=2)
  level = _checks.as_float_in(fn, "level", level, 0.0, 1.0, low_open=True, high_open=True)
  replicates = bootstrap_means([d[:, None] for d in strata], key, num_samples=num_samples, weights=w)[:, 0]
  estimate = float(sum(ws * d.mean() for ws, d in zip(w, strata)))
  low, high = np.quantile(replicates, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
  return BootstrapInterval(estimate, float(replicates.std(ddof=1)), float(low), float(high))


def bootstrap_means(
  strata: Sequence[np.ndarray], key: jax.Array, *, num_samples: int, weights: Sequence | np.ndarray | None = None
) -> np.ndarray:
  r"""Stratified bootstrap replicates of weighted means of paired columns: the one resampler every interval uses.

  Replicate r redraws each stratum's rows with replacement (independently across strata, the same rows for every
  column of a stratum: paired) and returns :math:`\sum_s w_s \bar x^{(r)}_{s,c}` for each column c.

  Args:
    strata: one ``[n_s, C]`` float array per stratum (rows: units, e.g. queries; columns: paired scores, e.g. two
      systems), each with at least one row and the same C.
    key: PRNG key of the redraws: the draws come from NumPy generators seeded by its data and the stratum's index, in
      blocks of about 2^24 indices, so any size costs no compilation and the same key gives the same replicates.
    num_samples: replicates.
    weights: ``[S]`` stratum weights (default 1/S each).

  Returns:
    ``[num_samples, C]`` float64 replicates.
  """
  w = np.full(len(strata), 1.0 / len(strata)) if weights is None else np.asarray(weights, np.float64)
  raw = not jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)  # a legacy uint32 [2] key is its own data
  entropy = [int(v) for v in np.asarray(key if raw else jax.random.key_data(key)).ravel()]
  replicates = np.zeros((num_samples, strata[0].shape[1]))
  for s, x in enumerate(strata):
    rng = np.random.default_rng([*entropy, s])
    columns = [np.ascontiguousarray(x[:, c], np.float64) for c in range(x.shape[1])]  # each mean summed as a row
    block = max(1, _BLOCK_ENTRIES // x.shape[0])
    for start in range(0, num_samples, block):
      rows = min(block, num_samples - start)
      idx = rng.integers(0, x.shape[0], size=(rows, x.shape[0]))
      for c, column in enumerate(columns):
        replicates[start : start + rows, c] += w[s] * column[idx].mean(axis=1)
  return replicates
