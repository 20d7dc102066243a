"""Verdicts by rule: one claim's measured estimate and interval set against what the paper states.

The rules are applied in code to every claim on the reproduction page, so that no verdict is chosen by hand. Each
claim says what *kind* of statement it is, and its kind picks the rule:

==========  ==========================================================================================================
kind        what the paper states
==========  ==========================================================================================================
direction   an effect on one side of the *null* (0 for a difference, 1 for a ratio), of no stated size
floor       an effect at least as large as x ("a speed-up of up to 10.1×" read as the size to reach)
ceiling     an effect at most as large as x ("only around 0.5 % degradation")
level       an effect of about x, or inside the range [a, b] the paper reports over its data sets
parity      a difference that stays inside a band around the null
ordering    A beats each of B, C, D (every pairwise difference on A's side of the null)
==========  ==========================================================================================================

Every number is first folded onto the paper's side of the null (positive = the paper's direction), so one set of
rules serves differences below and above the null. "Reproduced" needs the point estimate where the paper says it is
(past a floor, inside a ceiling, inside a level's range) and the interval to exclude the null; an interval that
merely reaches the paper's value is *consistent*, not reproduced. The verdicts:

================================  ====================================================================================
verdict                           rule (interval = the measured 95 % interval over three or more runs or units)
================================  ====================================================================================
reproduced                        the estimate is where the paper says and the interval shows it: past a floor, or
                                  inside a level's range (for a single value, the interval holds it), with the
                                  interval excluding the null; a ceiling: the interval's far end within it (the null
                                  is within a ceiling too); a direction: the interval on the paper's side; an
                                  ordering: every difference
consistent, estimate short        the interval reaches the paper's value or range but the estimate falls short of it
consistent, estimate beyond       a level or ceiling: the interval reaches the paper's range but the estimate lies
                                  beyond it
consistent, interval crosses      a ceiling: the estimate is within it but the interval reaches past it
smaller effect                    the interval excludes the null on the paper's side but lies wholly short of the
                                  paper's value or range
larger effect                     the interval lies wholly beyond the paper's range (a level) or ceiling
short of the paper                the interval contains the null but lies wholly short of the paper's value or range:
                                  the paper's size is excluded, the direction is not resolved
inconclusive                      the interval contains the null (an ordering: some difference does)
opposite                          the interval lies wholly on the other side of the null (an ordering: some does)
equivalent / outside band         parity: the interval lies inside the paper's band / wholly outside it (crossing an
                                  edge is *inconclusive*)
never reached                     a time-to-reach measure none of whose runs reached the target (censored)
chosen on test data               the rules would say *reproduced*, but a setting was chosen on the judging data
one run                           an estimate without an interval: the noise lies between runs
no run                            nothing measured yet (the page gives the command and its cost)
not converged                     the method's training did not converge (its loss never improved, or diverged), so
                                  the paper's rule measures nothing; the number it would give is shown, and for a
                                  speed-up its warm-start reading (the flat runs counted as converged at their
                                  first epoch), never judged
qualitative                       the paper states neither a number nor a direction a rule can test
================================  ====================================================================================
"""

import dataclasses
import math
from collections.abc import Sequence

from scipy import stats

DIRECTION, FLOOR, CEILING, LEVEL, PARITY, ORDERING = "direction", "floor", "ceiling", "level", "parity", "ordering"
KINDS = (DIRECTION, FLOOR, CEILING, LEVEL, PARITY, ORDERING)

REPRODUCED = "reproduced"
CONSISTENT_SHORT = "consistent, estimate short"
CONSISTENT_BEYOND = "consistent, estimate beyond"
CONSISTENT_CROSSES = "consistent, interval crosses"
SMALLER = "smaller effect"
SHORT = "short of the paper"
LARGER = "larger effect"
INCONCLUSIVE = "inconclusive"
OPPOSITE = "opposite"
EQUIVALENT = "equivalent"
OUTSIDE_BAND = "outside band"
NEVER_REACHED = "never reached"
CHOSEN_ON_TEST = "chosen on test data"
ONE_RUN = "one run"
NO_RUN = "no run"
NOT_CONVERGED = "not converged"
QUALITATIVE = "qualitative"

VERDICTS = {
  REPRODUCED: "the interval excludes the null on the paper's side and the estimate is where the paper says: past a "
  "floor, inside a level's range (for a single value, the interval holds it), a ceiling's far end within it, every "
  "difference of an ordering",
  CONSISTENT_SHORT: "the interval reaches the paper's value or range, but the estimate falls short of it",
  CONSISTENT_BEYOND: "a level or a ceiling: the interval reaches the paper's range, but the estimate lies beyond it",
  CONSISTENT_CROSSES: "a ceiling: the estimate is within it, but the interval reaches past it",
  SMALLER: "the interval excludes the null on the paper's side, but lies wholly short of the paper's value",
  LARGER: "the interval lies wholly beyond the paper's range (a level) or its ceiling",
  SHORT: "the interval contains the null but lies wholly short of the paper's value or range: the paper's effect is "
  "excluded, its direction is not resolved",
  INCONCLUSIVE: "the interval contains the null (for a parity claim: crosses an edge of the band)",
  OPPOSITE: "the interval lies wholly on the other side of the null from the paper's",
  EQUIVALENT: "a parity claim whose interval lies inside the paper's band",
  OUTSIDE_BAND: "a parity claim whose interval lies wholly outside the paper's band",
  NEVER_REACHED: "a time-to-reach measure: no run reached the target (the measure is censored)",
  CHOSEN_ON_TEST: "the rules would give *reproduced*, but a setting was chosen on the data that judges the claim",
  ONE_RUN: "a value without an interval: one run, where the noise lies between runs (the row says what gives one)",
  NO_RUN: "nothing measured yet: the row gives the command and its cost",
  NOT_CONVERGED: "the method did not converge (its loss never improved on its first epoch, or diverged): the row "
  "shows the number the paper's rule gives anyway. Where retraining converged in every run, a claimed speed-up also "
  "shows its warm-start reading (the method's flat runs counted as converged at their first epoch): shown, never "
  "judged, since it was defined after the runs it first applied to were read and bounds only the ratio of means",
  QUALITATIVE: "the paper states neither a number nor a direction a rule can test; the measured counterpart is shown",
}

# Verdicts that say the claim does not hold as stated at this setting (the page lists these first).
NOT_REPRODUCED = (
  OPPOSITE,
  SMALLER,
  SHORT,
  LARGER,
  INCONCLUSIVE,
  CONSISTENT_SHORT,
  CONSISTENT_BEYOND,
  CONSISTENT_CROSSES,
  OUTSIDE_BAND,
  NEVER_REACHED,
)
HELD = (REPRODUCED, EQUIVALENT)
NOT_MEASURED = (ONE_RUN, NO_RUN, NOT_CONVERGED)


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


def paper_side(paper: float | tuple[float, float] | None, null: float, side: int | None) -> int:
  """+1 when the paper's effect lies above ``null``, -1 below: from ``paper``, else ``side``.

  Raises:
    ValueError: the paper's value straddles the null (a parity claim), or disagrees with ``side``, or neither is
      given.
  """
  if paper is None:
    if side not in (1, -1):
      raise ValueError(f"a claim without a paper value needs `side` +1 or -1, got {side!r}")
    return side
  low, high = _range(paper)
  if low <= null <= high:
    raise ValueError(f"the paper's value {paper} includes the null {null}: a parity claim")
  found = 1 if low > null else -1
  if side is not None and side != found:
    raise ValueError(f"`side` {side} disagrees with the paper's value {paper} (null {null})")
  return found


def _fold(measured: Interval, null: float, side: int) -> tuple[float, float, float]:
  """(estimate, low, high) measured from the null, positive on the paper's side."""
  est = (measured.estimate - null) * side
  lo, hi = sorted(((measured.low - null) * side, (measured.high - null) * side))
  return est, lo, hi


def _unmeasured(measured: Interval | None) -> str | None:
  if measured is None:
    return NO_RUN
  if measured.low is None or measured.high is None:
    return ONE_RUN
  return None


def effect_verdict(
  measured: Interval | None,
  paper: float | tuple[float, float] | None,
  *,
  kind: str,
  null: float = 0.0,
  side: int | None = None,
  chosen_on_test: bool = False,
) -> str:
  """The verdict of a direction, floor, ceiling or level claim (see the module docstring).

  Args:
    measured: the measured estimate and interval; None when nothing was measured.
    paper: the paper's value or (low, high) range in the measure's units; None for a direction claim.
    kind: :data:`DIRECTION`, :data:`FLOOR`, :data:`CEILING` or :data:`LEVEL`.
    null: the measure's "no effect" value.
    side: +1 when the paper's effect lies above ``null``, -1 below; taken from ``paper`` when None.
    chosen_on_test: a setting of the measurement was chosen on the data that judges it.

  Returns:
    One of :data:`VERDICTS`' keys.

  Raises:
    ValueError: an unknown ``kind``, a floor/ceiling/level without a paper value, or a paper value that straddles the
      null.
  """
  if kind not in (DIRECTION, FLOOR, CEILING, LEVEL):
    raise ValueError(f"effect_verdict: `kind` must be one of direction, floor, ceiling, level; got {kind!r}")
  if kind != DIRECTION and paper is None:
    raise ValueError(f"effect_verdict: a {kind} claim needs the paper's value")
  side = paper_side(paper, null, side)
  missing = _unmeasured(measured)
  if missing is not None:
    return missing
  assert measured is not None
  est, lo, hi = _fold(measured, null, side)
  if kind == CEILING:  # at most x: a null or an effect on the other side is within the ceiling too
    ceiling = abs(_range(paper)[0 if side < 0 else 1] - null)  # type: ignore[arg-type]
    if lo > ceiling:
      return LARGER
    if hi <= ceiling:
      return CHOSEN_ON_TEST if chosen_on_test else REPRODUCED
    return CONSISTENT_CROSSES if est <= ceiling else CONSISTENT_BEYOND
  if hi < 0.0:
    return OPPOSITE
  if lo <= 0.0:
    if kind in (FLOOR, LEVEL) and hi < min(abs(v - null) for v in _range(paper)):  # type: ignore[arg-type]
      return SHORT  # no effect resolved, and the paper's size excluded: stronger than inconclusive
    return INCONCLUSIVE
  verdict = REPRODUCED
  if kind == FLOOR:
    floor = min(abs(v - null) for v in _range(paper))  # type: ignore[arg-type]
    if hi < floor:
      return SMALLER
    if est < floor:
      verdict = CONSISTENT_SHORT
  elif kind == LEVEL:
    a, b = sorted(abs(v - null) for v in _range(paper))  # type: ignore[arg-type]
    if hi < a:
      return SMALLER
    if lo > b:
      return LARGER
    if a < b and est < a:
      verdict = CONSISTENT_SHORT
    elif a < b and est > b:
      verdict = CONSISTENT_BEYOND
  if verdict == REPRODUCED and chosen_on_test:
    return CHOSEN_ON_TEST
  return verdict


def parity_verdict(measured: Interval | None, band: tuple[float, float], *, chosen_on_test: bool = False) -> str:
  """The verdict of a parity claim: the measured difference stays within the paper's ``band`` (low, high)."""
  low, high = _range(band)
  missing = _unmeasured(measured)
  if missing is not None:
    return missing
  assert measured is not None and measured.low is not None and measured.high is not None
  if low <= measured.low and measured.high <= high:
    return CHOSEN_ON_TEST if chosen_on_test else EQUIVALENT
  if measured.high < low or measured.low > high:
    return OUTSIDE_BAND
  return INCONCLUSIVE


def ordering_verdict(differences: Sequence[Interval | None], *, null: float = 0.0, side: int = 1) -> str:
  """The verdict of an ordering claim from its pairwise differences (A minus each other, the paper's side ``side``).

  Opposite when any difference lies wholly on the wrong side; reproduced when every one excludes the null on the
  paper's side; otherwise inconclusive, or not measured when some difference is."""
  if not differences:
    raise ValueError("ordering_verdict: needs at least one difference")
  verdicts = [effect_verdict(d, None, kind=DIRECTION, null=null, side=side) for d in differences]
  for v in (OPPOSITE, NO_RUN, ONE_RUN, INCONCLUSIVE):
    if v in verdicts:
      return v
  return REPRODUCED


@dataclasses.dataclass(frozen=True)
class Trend:
  """How a claim's estimate moves with the budget: weighted least squares of the estimate on log2(budget)."""

  per_doubling: float  # change of the estimate per doubling of the budget
  low: float  # its 95 % interval (normal, from the points' own intervals)
  high: float
  points: int

  @property
  def resolved(self) -> bool:
    """Whether the slope's interval excludes zero."""
    return self.low > 0.0 or self.high < 0.0


def budget_trend(points: Sequence[tuple[float, Interval]], level: float = 0.95) -> Trend:
  """The trend of ``points`` = [(budget, measured interval), ...] over three or more budgets.

  Each point is weighted by the inverse square of its standard error (its interval's half-width over the normal
  quantile), so a point that is barely known barely moves the line; the slope's interval follows from those
  errors. Points without an interval cannot be weighted and are refused: a trend is fitted only on measured noise.
  Nothing is extrapolated.

  Raises:
    ValueError: fewer than three points, a budget that is not positive or repeats, or a point without an interval.
  """
  if len(points) < 3:
    raise ValueError(f"budget_trend: needs three or more budgets, got {len(points)}")
  budgets = [b for b, _ in points]
  if min(budgets) <= 0 or len(set(budgets)) != len(budgets):
    raise ValueError(f"budget_trend: budgets must be positive and all different, got {budgets}")
  z = stats.norm.ppf(0.5 + level / 2)
  xs, ys, ws = [], [], []
  for b, m in points:
    if m.low is None or m.high is None:
      raise ValueError(f"budget_trend: the point at budget {b} has no interval")
    se = max((m.high - m.low) / (2 * z), 1e-12)
    xs.append(math.log2(b))
    ys.append(m.estimate)
    ws.append(1.0 / se**2)
  sw = sum(ws)
  mx = sum(w * x for w, x in zip(ws, xs)) / sw
  my = sum(w * y for w, y in zip(ws, ys)) / sw
  sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
  slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys)) / sxx
  half = z / math.sqrt(sxx)
  return Trend(slope, slope - half, slope + half, len(points))
