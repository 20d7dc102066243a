r"""Noise-aware comparisons: every difference or ratio a report prints, with its interval, and an order only where
the interval excludes a tie.

Two systems scored on the same units (queries, val users, examples, or independent runs) are compared by a
statistic of their paired scores :math:`(a_i, b_i)`, i = 1..n:

* :func:`difference`: :math:`\bar a - \bar b` (optionally a weighted sum over strata, e.g. versions);
* :func:`relative_change`: :math:`100\,(\bar a / \bar b - 1)` % (optionally over strata), e.g. "SOGram improves
  MAP@10 by +10.9 %" or a method's intended degradation relative to Keep-All;
* :func:`ratio_of_means`: :math:`\bar a / \bar b`, e.g. a speed-up, the ratio of mean times over paired runs.

Each interval is a paired percentile bootstrap (Efron & Tibshirani 1993, §13.3): the units are redrawn with
replacement, *both* systems' scores together, so what they share (how hard a query is, how fast a run's machine
was) cancels. :func:`difference` uses :func:`bcjax.metrics.paired_bootstrap`; the two ratios redraw the same way
on the host. A comparison with fewer than two units has no interval (``low`` and ``high`` None): one run measures
no noise. :meth:`Comparison.order` ranks one system above another only when the interval excludes the tie, and
:func:`tied_ranks` turns pairwise orders into average ranks in which unresolved pairs share their places.
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import numpy as np

from bcjax.metrics import paired_bootstrap

LEVEL = 0.95
REPLICATES = 2000
# Redraws drawn at a time: the index block [replicates, n_s] stays near 2^24 entries whatever n_s is.
_BLOCK_ENTRIES = 1 << 24


class Comparison(NamedTuple):
  """A statistic of paired scores and its bootstrap interval.

  ``estimate``: the statistic on the observed units; ``low``, ``high``: its percentile interval at ``level`` (None
  when fewer than two units were compared); ``over``: what the interval redraws ("validation queries", "runs");
  ``units``: how many there were; ``null``: the value that means "no difference" (0 for a difference or a relative
  change, 1 for a ratio)."""

  estimate: float
  low: float | None
  high: float | None
  over: str
  units: int
  null: float = 0.0
  level: float = LEVEL

  @property
  def measured(self) -> bool:
    """Whether there is an interval (at least two units)."""
    return self.low is not None

  def order(self) -> int:
    """+1 when the interval lies above the null, -1 below it, 0 when it holds the null or there is none (a tie)."""
    if not self.measured:
      return 0
    return 1 if self.low > self.null else -1 if self.high < self.null else 0

  def verdict(self, above: str = "ahead", below: str = "behind") -> str:
    """``above``/``below`` when the interval excludes the null, else "tied (within the noise)" or, without an
    interval, "no interval (one unit)"."""
    if not self.measured:
      return f"no interval ({_count(self.units, self.over)})"
    return {1: above, -1: below, 0: "tied (within the noise)"}[self.order()]

  def cell(self, fmt: str = "+.2f", unit: str = "") -> str:
    """``"+10.9 % [-3.1, +25.0]"``; without an interval ``"+10.9 % (1 run: no interval)"``."""
    value = f"{self.estimate:{fmt}}{unit}"
    if not self.measured:
      return f"{value} ({_count(self.units, self.over)}: no interval)"
    return f"{value} [{self.low:{fmt}}, {self.high:{fmt}}]"

  def to_json(self) -> dict:
    return {
      "estimate": self.estimate,
      "ci95" if self.level == 0.95 else f"ci{self.level:g}": None if not self.measured else [self.low, self.high],
      "over": self.over,
      "units": self.units,
      "resolved": self.order() != 0,
    }


def _count(units: int, over: str) -> str:
  """``"1 run"``, ``"5 runs"``: ``over`` is plural."""
  if units != 1:
    return f"{units} {over}"
  words = over.split()
  return " ".join([str(units), *words[:-1], words[-1].removesuffix("s")])


def _paired(fn: str, a, b) -> tuple[np.ndarray, np.ndarray]:
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.ndim != 1 or a.shape != b.shape or a.size == 0:
    raise ValueError(
      f"{fn}: `a` and `b` must be non-empty 1-D arrays of paired scores, got shapes {a.shape} and {b.shape}"
    )
  if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
    bad = int(np.sum(~np.isfinite(a)) + np.sum(~np.isfinite(b)))
    raise ValueError(f"{fn}: `a` and `b` must be finite; got {bad} non-finite scores")
  return a, b


def _strata(fn: str, a, b) -> list[tuple[np.ndarray, np.ndarray]]:
  """Paired scores ``[n]``, or one ``[n_s]`` array per stratum in each, as a list of (a_s, b_s) pairs."""
  strata_a = [a] if np.ndim(a[0]) == 0 else list(a)
  strata_b = [b] if np.ndim(b[0]) == 0 else list(b)
  if len(strata_a) != len(strata_b):
    raise ValueError(f"{fn}: `a` has {len(strata_a)} strata but `b` has {len(strata_b)}")
  return [_paired(fn, x, y) for x, y in zip(strata_a, strata_b)]


def _replicate_means(
  pairs: list[tuple[np.ndarray, np.ndarray]], key: jax.Array, num_samples: int
) -> tuple[np.ndarray, np.ndarray]:
  """Both systems' means over strata of their stratum means, for ``num_samples`` redraws of every stratum's units
  (the same draw for both: paired; strata redrawn independently), drawn in blocks of about 2^24 indices."""
  entropy = [int(v) for v in np.asarray(jax.random.key_data(key)).ravel()]
  ma, mb = np.zeros(num_samples), np.zeros(num_samples)
  for s, (x, y) in enumerate(pairs):
    rng = np.random.default_rng([*entropy, s])
    block = max(1, _BLOCK_ENTRIES // x.size)
    for start in range(0, num_samples, block):
      idx = rng.integers(0, x.size, size=(min(block, num_samples - start), x.size))
      ma[start : start + len(idx)] += x[idx].mean(axis=1) / len(pairs)
      mb[start : start + len(idx)] += y[idx].mean(axis=1) / len(pairs)
  return ma, mb


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
  low, high = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
  return float(low), float(high)


def difference(
  a: Sequence | Sequence[Sequence],
  b: Sequence | Sequence[Sequence],
  key: jax.Array,
  *,
  over: str,
  weights: Sequence[float] | None = None,
  scale: float = 1.0,
  num_samples: int = REPLICATES,
  level: float = LEVEL,
) -> Comparison:
  r""":math:`\text{scale} \cdot \sum_s w_s (\bar a_s - \bar b_s)` with its paired, stratified bootstrap interval.

  Args:
    a, b: paired scores ``[n]``, or one ``[n_s]`` array per stratum (e.g. per version), the same units in both.
    key: PRNG key of the redraws.
    over: what the units are, plural ("val users"), for the reports.
    weights: stratum weights (default 1/S each).
    scale: a constant factor (e.g. 100 / x̄₀ for a degradation in %).
  """
  pairs = _strata("difference", a, b)
  w = np.full(len(pairs), 1.0 / len(pairs)) if weights is None else np.asarray(weights, np.float64)
  diffs = [x - y for x, y in pairs]
  units = sum(d.size for d in diffs)
  estimate = float(scale * sum(ws * d.mean() for ws, d in zip(w, diffs)))
  if min(d.size for d in diffs) < 2:
    return Comparison(estimate, None, None, over, units, 0.0, level)
  iv = paired_bootstrap(diffs, key, weights=list(scale * w), num_samples=num_samples, level=level)
  return Comparison(estimate, iv.low, iv.high, over, units, 0.0, level)


def relative_change(
  a: Sequence | Sequence[Sequence],
  b: Sequence | Sequence[Sequence],
  key: jax.Array,
  *,
  over: str,
  num_samples: int = REPLICATES,
  level: float = LEVEL,
) -> Comparison:
  r""":math:`100\,(\bar a / \bar b - 1)` % with its paired bootstrap interval.

  Args:
    a, b: paired scores ``[n]``, or one ``[n_s]`` array per stratum (e.g. per version); with strata,
      :math:`\bar a` is the mean over strata of the stratum means, and every stratum's units are redrawn on their own.
      ``b``'s mean must be positive.
    key: PRNG key of the redraws.
    over: what the units are, plural, for the reports.

  Both means are redrawn together, so the interval is that of the ratio (never below -100 %), not of a difference
  over a fixed reference. No interval when a stratum has one unit, or when so many redraws of a sparse ``b`` have a
  zero mean that the interval has no upper end.
  """
  pairs = _strata("relative_change", a, b)
  mean_a = float(np.mean([x.mean() for x, _ in pairs]))
  mean_b = float(np.mean([y.mean() for _, y in pairs]))
  if mean_b <= 0:
    raise ValueError(f"relative_change: the reference `b` must have a positive mean, got {mean_b:g}")
  estimate = 100.0 * (mean_a / mean_b - 1.0)
  units = sum(x.size for x, _ in pairs)
  if min(x.size for x, _ in pairs) < 2:
    return Comparison(estimate, None, None, over, units, 0.0, level)
  ma, mb = _replicate_means(pairs, key, num_samples)
  # A redraw whose reference mean is 0 (every drawn unit scored 0) has no ratio: an unbounded change, which sorts
  # above every other. When more of them than the interval's upper tail holds occur, the interval has no upper end:
  # no interval is reported (never an infinite or NaN bound).
  unbounded = mb <= 0
  if np.mean(unbounded) > (1.0 - level) / 2.0:
    return Comparison(estimate, None, None, over, units, 0.0, level)
  rel = np.where(unbounded, np.inf, 100.0 * (ma / np.where(unbounded, 1.0, mb) - 1.0))
  low, high = np.quantile(rel, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], method="inverted_cdf")
  return Comparison(estimate, float(low), float(high), over, units, 0.0, level)


def ratio_of_means(
  a: Sequence, b: Sequence, key: jax.Array, *, over: str = "runs", num_samples: int = REPLICATES, level: float = LEVEL
) -> Comparison:
  r""":math:`\bar a / \bar b` over paired units with its paired bootstrap interval (``b`` positive)."""
  a, b = _paired("ratio_of_means", a, b)
  if np.any(b <= 0):
    raise ValueError(f"ratio_of_means: the denominators `b` must be positive, got min {b.min():g}")
  estimate = float(a.mean() / b.mean())
  if a.size < 2:
    return Comparison(estimate, None, None, over, a.size, 1.0, level)
  ma, mb = _replicate_means([(a, b)], key, num_samples)
  low, high = _interval(ma / mb, level)
  return Comparison(estimate, low, high, over, a.size, 1.0, level)


def tied_ranks(orders: Mapping[tuple[str, str], int], names: Sequence[str]) -> dict[str, float]:
  """Average ranks (1 = best) from pairwise orders: ``orders[(x, y)]`` is +1 when x is resolved above y, -1 below,
  0 tied (a missing pair is a tie). Each name's rank is 1 + the number resolved above it + half the number tied with
  it, so unresolved names share their places, as tied values do in an ordinary average rank."""
  ranks = {}
  for x in names:
    above = tied = 0
    for y in names:
      if y == x:
        continue
      o = orders.get((x, y), -orders.get((y, x), 0))
      above += o < 0
      tied += o == 0
    ranks[x] = 1.0 + above + tied / 2.0
  return ranks
