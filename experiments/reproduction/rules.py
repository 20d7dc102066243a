"""Verdicts by rule: one claim's measured interval set against the paper's number.

The rules are applied in code to every claim on the reproduction page, so that no verdict is chosen by hand. A claim
states an *effect*: a measure (a difference, a ratio, a level) whose *null* value means "no effect" (0 for a
difference, 1 for a ratio, a baseline's level), and a paper value or range on one side of it. A *parity* claim states
instead that a difference stays inside a band (e.g. ICL's accuracy within [−1.37, +1.26] points of retraining's).

============================  =======================================================================================
verdict                       rule (interval = the measured 95 % interval; the paper's side = its value's side of null)
============================  =======================================================================================
reproduced                    the interval excludes the null on the paper's side and reaches the paper's size: it
                              overlaps the paper's value or range, or lies beyond it (an effect at least as large)
smaller effect                the interval excludes the null on the paper's side but lies wholly short of the paper's
                              smallest value
inconclusive                  the interval contains the null: neither the effect nor its absence is shown
opposite                      the interval lies wholly on the other side of the null
chosen on test data           the rules would say *reproduced*, but a setting of the measurement was chosen on the
                              data that judges it, so the number cannot confirm the claim
equivalent / outside band     parity claims: the interval lies inside the paper's band / wholly outside it (overlapping
                              an edge is *inconclusive*)
not measured                  no interval: no run, or a single run where the noise is between runs (the page says
                              what the measurement would take)
qualitative                   the paper gives neither a number nor a testable direction (the figure is shown instead)
============================  =======================================================================================
"""

import dataclasses
import math

REPRODUCED = "reproduced"
SMALLER = "smaller effect"
INCONCLUSIVE = "inconclusive"
OPPOSITE = "opposite"
CHOSEN_ON_TEST = "chosen on test data"
EQUIVALENT = "equivalent"
OUTSIDE_BAND = "outside band"
NOT_MEASURED = "not measured"
QUALITATIVE = "qualitative"

VERDICTS = {
  REPRODUCED: "the interval excludes the null on the paper's side and reaches the paper's value or range (or lies "
  "beyond it: an effect at least as large)",
  SMALLER: "the interval excludes the null on the paper's side but lies wholly short of the paper's smallest value",
  INCONCLUSIVE: "the interval contains the null (or, for a parity claim, crosses an edge of the paper's band)",
  OPPOSITE: "the interval lies wholly on the other side of the null from the paper's value",
  CHOSEN_ON_TEST: "the rules would give *reproduced*, but a setting was chosen on the data that judges the claim",
  EQUIVALENT: "a parity claim whose interval lies inside the paper's band",
  OUTSIDE_BAND: "a parity claim whose interval lies wholly outside the paper's band",
  NOT_MEASURED: "no interval: no run at hand, or one run where the noise lies between runs",
  QUALITATIVE: "the paper states neither a number nor a direction a rule can test; the measured counterpart is shown",
}


@dataclasses.dataclass(frozen=True)
class Interval:
  """A measured estimate and its interval (``low``/``high`` None when the measurement has no interval)."""

  estimate: float
  low: float | None
  high: float | None

  def __post_init__(self):
    if (self.low is None) != (self.high is None):
      raise ValueError(f"Interval: give both `low` and `high` or neither, got {self.low!r}, {self.high!r}")
    for name in ("estimate", "low", "high"):
      value = getattr(self, name)
      if value is not None and math.isnan(value):
        raise ValueError(f"Interval: `{name}` is NaN")
    if self.low is not None and self.high is not None and self.low > self.high:
      raise ValueError(f"Interval: `low` {self.low} is above `high` {self.high}")


def _range(paper: float | tuple[float, float]) -> tuple[float, float]:
  if isinstance(paper, tuple):
    low, high = paper
    if low > high:
      raise ValueError(f"paper range {paper}: its first value must not exceed its second")
    return float(low), float(high)
  return float(paper), float(paper)


def effect_verdict(
  measured: Interval | None,
  paper: float | tuple[float, float] | None,
  *,
  null: float = 0.0,
  side: int | None = None,
  chosen_on_test: bool = False,
) -> str:
  """The verdict of an effect claim.

  Args:
    measured: the measured estimate and interval; None when nothing was measured.
    paper: the paper's value or (low, high) range in the measure's units; None for a claim of direction only
      (then ``side`` says which).
    null: the measure's "no effect" value.
    side: +1 when the paper's effect lies above ``null``, -1 below; taken from ``paper`` when None.
    chosen_on_test: a setting of the measurement was chosen on the data that judges it.

  Returns:
    One of :data:`VERDICTS`' keys.
  """
  if paper is None and side is None:
    return QUALITATIVE
  if paper is not None:
    low, high = _range(paper)
    if low <= null <= high:
      raise ValueError(f"effect_verdict: the paper's value {paper} includes the null {null}: use parity_verdict")
    paper_side = 1 if low > null else -1
    if side is not None and side != paper_side:
      raise ValueError(f"effect_verdict: `side` {side} disagrees with the paper's value {paper} (null {null})")
    side = paper_side
  if measured is None or measured.low is None or measured.high is None:
    return NOT_MEASURED
  # Fold every number onto the paper's side: positive = the paper's direction.
  lo, hi = sorted(((measured.low - null) * side, (measured.high - null) * side))
  if lo <= 0.0 <= hi:
    return INCONCLUSIVE
  if hi < 0.0:
    return OPPOSITE
  if paper is not None:
    smallest = min(abs(v - null) for v in _range(paper))
    if hi < smallest:
      return SMALLER
  return CHOSEN_ON_TEST if chosen_on_test else REPRODUCED


def parity_verdict(measured: Interval | None, band: tuple[float, float], *, chosen_on_test: bool = False) -> str:
  """The verdict of a parity claim: the measured difference stays within the paper's ``band`` (low, high)."""
  low, high = _range(band)
  if measured is None or measured.low is None or measured.high is None:
    return NOT_MEASURED
  if low <= measured.low and measured.high <= high:
    return CHOSEN_ON_TEST if chosen_on_test else EQUIVALENT
  if measured.high < low or measured.low > high:
    return OUTSIDE_BAND
  return INCONCLUSIVE


@dataclasses.dataclass(frozen=True)
class Trend:
  """How a claim's estimate moves with the budget: least squares of the estimate on log2(budget)."""

  per_doubling: float  # change of the estimate per doubling of the budget
  towards_paper: bool | None  # does the estimate move towards the paper's value? None without one
  doublings_to_paper: float | None  # extrapolated doublings from the largest budget to the paper's nearest value


def budget_trend(
  points: list[tuple[float, float]], paper: float | tuple[float, float] | None, *, null: float = 0.0
) -> Trend:
  """The trend of ``points`` = [(budget, estimate), ...] (three or more budgets, each > 0, all different).

  The paper's value is *reached* at the largest budget when the estimate there is at least as large as the paper's
  smallest value on the paper's side of ``null`` (as *reproduced* counts an effect at least as large), or inside a
  band that straddles the null. ``doublings_to_paper`` extrapolates the straight line in log2(budget) from the
  largest budget to the paper's nearest value: 0 when reached, None when the estimate moves away. An extrapolation,
  not a forecast: the page prints it next to the measured points.
  """
  if len(points) < 3:
    raise ValueError(f"budget_trend: needs three or more budgets, got {len(points)}")
  budgets = [b for b, _ in points]
  if min(budgets) <= 0 or len(set(budgets)) != len(budgets):
    raise ValueError(f"budget_trend: budgets must be positive and all different, got {budgets}")
  xs = [math.log2(b) for b in budgets]
  ys = [e for _, e in points]
  mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
  slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
  if paper is None:
    return Trend(slope, None, None)
  low, high = _range(paper)
  last = max(points)[1]
  if low >= null and high > null:  # the paper's effect lies above the null
    reached, target = last >= low, low
  elif high <= null and low < null:  # below it
    reached, target = last <= high, high
  else:  # a band around the null
    reached, target = low <= last <= high, (low if last < low else high)
  if reached:
    return Trend(slope, True, 0.0)
  towards = (target - last) * slope > 0
  return Trend(slope, towards, (target - last) / slope if towards else None)
