r"""Noise-aware comparisons: every difference or ratio a report prints, with its interval, and an order only where
the interval excludes a tie.

Two systems scored on the same units (queries, val users, examples, or independent runs) are compared by a
statistic of their paired scores :math:`(a_i, b_i)`, i = 1..n:

* :func:`difference`: :math:`\bar a - \bar b` (optionally a weighted sum over strata, e.g. versions);
* :func:`relative_change`: :math:`100\,(\bar a / \bar b - 1)` % (optionally over strata), e.g. "SOGram improves
  MAP@10 by +10.9 %" or a method's intended degradation relative to Keep-All;
* :func:`ratio_of_means`: :math:`\bar a / \bar b`, e.g. a speed-up, the ratio of mean times over paired runs;
* :func:`t_difference`: :math:`\overline{a - b}` over a few paired runs, e.g. a trained encoder's accuracy less a
  random one's (and :func:`t_mean`, one system's mean over its runs).

The first two are over many units (queries, val users): their intervals are paired percentile bootstraps (Efron &
Tibshirani 1993, §13.3), the units redrawn with replacement, *both* systems' scores together, so what they share
(how hard a query is) cancels; :func:`difference` uses :func:`bcjax.metrics.paired_bootstrap`, the relative change
redraws the same way on the host. :func:`ratio_of_means` is over a few independent runs, where a bootstrap has too
few distinct redraws to hold its level (three runs give ten): its interval is the delta method's with Student's t on
n − 1 degrees of freedom,

.. math::
  r = \bar a / \bar b, \qquad d_i = a_i - r\,b_i, \qquad
  \mathrm{se}(r) = \frac{s_d}{\sqrt n\,\bar b}, \qquad r \exp(\pm t_{n-1,\,0.975}\,\mathrm{se}(r) / r)

(on the log scale, so that a speed-up's interval stays positive). :func:`t_mean` and :func:`t_difference` are
over a few runs too: Student's t interval of a mean, :math:`\bar x \pm t_{n-1,\,0.975}\, s_x / \sqrt n`, of the
paired differences :math:`x_i = a_i - b_i` for the latter.

A comparison with fewer than :data:`MIN_UNITS` (three) units has no interval (``low`` and ``high`` None) and orders
nothing: two runs give a "95 % interval" that is their two values, and one run measures no noise at all.
:meth:`Comparison.order` ranks one system above another only when the interval excludes the tie, and
:func:`tied_ranks` turns pairwise orders into average ranks in which unresolved pairs share their places.
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import numpy as np
from scipy import stats

from bcjax.metrics import bootstrap_means, paired_bootstrap

LEVEL = 0.95
REPLICATES = 2000
# The fewest paired units an interval (and so an order) is computed from.
MIN_UNITS = 3


class Comparison(NamedTuple):
  """A statistic of paired scores and its interval.

  ``estimate``: the statistic on the observed units; ``low``, ``high``: its interval at ``level`` (None when fewer
  than :data:`MIN_UNITS` units were compared); ``over``: what the interval redraws ("validation queries", "runs");
  ``units``: how many there were; ``null``: the value that means "no difference" (0 for a difference or a relative
  change, 1 for a ratio)."""

  estimate: float
  low: float | None
  high: float | None
  over: str
  units: int
  null: float = 0.0
  level: float = LEVEL
  why: str | None = None  # why there is no interval, where ``units`` alone does not say

  @property
  def measured(self) -> bool:
    """Whether there is an interval: bounds, from at least :data:`MIN_UNITS` units."""
    return self.low is not None and self.high is not None and self.units >= MIN_UNITS

  def order(self) -> int:
    """+1 when the interval lies above the null, -1 below it, 0 when it holds the null or there is none (a tie)."""
    if not self.measured:
      return 0
    return 1 if self.low > self.null else -1 if self.high < self.null else 0

  def verdict(self, above: str = "ahead", below: str = "behind") -> str:
    """``above``/``below`` when the interval excludes the null, else "tied (within the noise)" or, without an
    interval, why: "no interval: 2 runs; 3 give one"."""
    if not self.measured:
      return self._missing()
    return {1: above, -1: below, 0: "tied (within the noise)"}[self.order()]

  def cell(self, fmt: str = "+.2f", unit: str = "") -> str:
    """``"+10.9 % [-3.1, +25.0]"``; without an interval ``"+10.9 % (no interval: 2 runs; 3 give one)"``."""
    value = f"{self.estimate:{fmt}}{unit}"
    if not self.measured:
      return f"{value} ({self._missing()})"
    return f"{value} [{self.low:{fmt}}, {self.high:{fmt}}]"

  def _missing(self) -> str:
    """Why there is no interval: ``why``, else too few units."""
    return self.why or no_interval(self.units, self.over)

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


def no_interval(units: int, over: str = "runs") -> str:
  """Why a comparison of ``units`` paired units has no interval: ``"no interval: 2 runs; 3 give one"``."""
  return f"no interval: {_count(units, over)}; {MIN_UNITS} give one"


def _few(strata: list[np.ndarray], over: str) -> str:
  """Why strata of these sizes give no interval: the whole comparison's count, or the smallest stratum's."""
  if len(strata) == 1:
    return no_interval(strata[0].size, over)
  fewest = min(x.size for x in strata)
  return f"no interval: a stratum has {_count(fewest, over)}; {MIN_UNITS} give one"


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
  (the same draw for both: paired; strata redrawn independently): :func:`bcjax.metrics.bootstrap_means`."""
  both = bootstrap_means([np.stack([x, y], axis=1) for x, y in pairs], key, num_samples=num_samples)
  return both[:, 0], both[:, 1]


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
  if min(d.size for d in diffs) < MIN_UNITS:
    return Comparison(estimate, None, None, over, units, 0.0, level, _few(diffs, over))
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
  over a fixed reference. No interval when a stratum has fewer than :data:`MIN_UNITS` units, or when so many
  redraws of a sparse ``b`` have a zero mean that the interval has no upper end.
  """
  pairs = _strata("relative_change", a, b)
  mean_a = float(np.mean([x.mean() for x, _ in pairs]))
  mean_b = float(np.mean([y.mean() for _, y in pairs]))
  if mean_b <= 0:
    raise ValueError(f"relative_change: the reference `b` must have a positive mean, got {mean_b:g}")
  estimate = 100.0 * (mean_a / mean_b - 1.0)
  units = sum(x.size for x, _ in pairs)
  if min(x.size for x, _ in pairs) < MIN_UNITS:
    return Comparison(estimate, None, None, over, units, 0.0, level, _few([x for x, _ in pairs], over))
  ma, mb = _replicate_means(pairs, key, num_samples)
  # A redraw whose reference mean is 0 (every drawn unit scored 0) has no ratio: an unbounded change, which sorts
  # above every other. When more of them than the interval's upper tail holds occur, the interval has no upper end:
  # no interval is reported (never an infinite or NaN bound).
  unbounded = mb <= 0
  if np.mean(unbounded) > (1.0 - level) / 2.0:
    return Comparison(estimate, None, None, over, units, 0.0, level, "no interval: its upper end is unbounded")
  rel = np.where(unbounded, np.inf, 100.0 * (ma / np.where(unbounded, 1.0, mb) - 1.0))
  low, high = np.quantile(rel, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], method="inverted_cdf")
  return Comparison(estimate, float(low), float(high), over, units, 0.0, level)


def ratio_of_means(a: Sequence, b: Sequence, *, over: str = "runs", level: float = LEVEL) -> Comparison:
  r""":math:`r = \bar a / \bar b` over paired units (``b`` positive) with its delta-method t-interval.

  With :math:`d_i = a_i - r b_i` (mean zero at :math:`r`), :math:`\mathrm{se}(r) = s_d / (\sqrt n\, \bar b)`, and the
  interval is taken on the log scale, :math:`r \exp(\pm t_{n-1}\,\mathrm{se}(r) / r)`, so that a ratio of positive
  quantities (a speed-up) keeps a positive interval (Student's t on n − 1 degrees of freedom: it holds its level at
  three runs, where a percentile bootstrap over runs has ten distinct redraws); a zero ratio keeps the plain
  :math:`r \pm t\,\mathrm{se}`. None for fewer than :data:`MIN_UNITS` pairs.
  """
  a, b = _paired("ratio_of_means", a, b)
  if np.any(b <= 0):
    raise ValueError(f"ratio_of_means: the denominators `b` must be positive, got min {b.min():g}")
  estimate = float(a.mean() / b.mean())
  if a.size < MIN_UNITS:
    return Comparison(estimate, None, None, over, a.size, 1.0, level)
  d = a - estimate * b
  half = float(stats.t.ppf(0.5 + level / 2.0, a.size - 1) * np.std(d, ddof=1) / (np.sqrt(a.size) * b.mean()))
  if estimate <= 0.0:
    return Comparison(estimate, estimate - half, estimate + half, over, a.size, 1.0, level)
  spread = np.exp(half / estimate)
  return Comparison(estimate, estimate / spread, estimate * spread, over, a.size, 1.0, level)


def t_mean(values: Sequence, *, over: str = "runs", null: float = 0.0, level: float = LEVEL) -> Comparison:
  r""":math:`\bar x` over independent units (runs) with Student's t interval,
  :math:`\bar x \pm t_{n-1}\, s_x / \sqrt n`; none for fewer than :data:`MIN_UNITS` values. ``null`` is the value
  :meth:`Comparison.order` compares with (0 for a difference)."""
  x, _ = _paired("t_mean", values, values)
  estimate = float(x.mean())
  if x.size < MIN_UNITS:
    return Comparison(estimate, None, None, over, x.size, null, level)
  half = float(stats.t.ppf(0.5 + level / 2.0, x.size - 1) * np.std(x, ddof=1) / np.sqrt(x.size))
  return Comparison(estimate, estimate - half, estimate + half, over, x.size, null, level)


def t_difference(a: Sequence, b: Sequence, *, over: str = "runs", level: float = LEVEL) -> Comparison:
  r""":math:`\overline{a - b}` over paired units (runs that share a split) with Student's t interval of the paired
  differences (:func:`t_mean`); none for fewer than :data:`MIN_UNITS` pairs. Its order is +1 when the interval lies
  above 0 (``a`` resolved above ``b``), -1 below, 0 when it holds 0."""
  a, b = _paired("t_difference", a, b)
  return t_mean(a - b, over=over, level=level)


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
