"""The verdict rules of the reproduction page: each claim kind's rule and its edges, and every row a referee read
against the papers (issues 54 and 64), with the numbers measured then and the verdicts the rules give them now."""

import math
import unittest

import numpy as np
from scipy import stats

from experiments.reproduction import rules
from experiments.reproduction.rules import (
  CEILING,
  DIRECTION,
  FLOOR,
  LEVEL,
  Interval,
  budget_trend,
  effect_verdict,
  ordering_verdict,
  parity_verdict,
)
from tests._tolerance import assert_close


class LevelTest(unittest.TestCase):
  """About x, or inside [a, b]: the estimate must be inside; an effect wholly outside is named larger or smaller."""

  def test_each_verdict(self):
    paper = (4.0, 19.5)
    cases = {
      rules.REPRODUCED: Interval(6.0, 3.0, 9.0),  # estimate inside the range
      rules.CONSISTENT_SHORT: Interval(3.0, 1.0, 5.0),  # the interval reaches 4, the estimate does not
      rules.CONSISTENT_BEYOND: Interval(21.0, 18.0, 24.0),
      rules.SMALLER: Interval(2.0, 1.0, 3.0),
      rules.LARGER: Interval(30.0, 25.0, 35.0),  # wholly beyond: no longer "at least as large, so reproduced"
      # the null inside, and the paper's range beyond the far end: its size is excluded (Table 2 linear, +0.91
      # [-0.54, +2.36] against +10.7 ... +19.5 %), which "inconclusive" would hide
      rules.SHORT: Interval(1.0, -1.0, 3.0),
      rules.INCONCLUSIVE: Interval(2.0, -1.0, 5.0),  # the null and the paper's range both inside
      rules.OPPOSITE: Interval(-15.7, -16.3, -15.1),
    }
    for verdict, measured in cases.items():
      with self.subTest(verdict):
        self.assertEqual(effect_verdict(measured, paper, kind=LEVEL), verdict)

  def test_a_single_value_is_reproduced_when_the_interval_holds_it(self):
    self.assertEqual(effect_verdict(Interval(9.0, 6.0, 12.0), 10.1, kind=LEVEL, null=1.0), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(4.0, 2.0, 6.0), 10.1, kind=LEVEL, null=1.0), rules.SMALLER)
    self.assertEqual(effect_verdict(Interval(16.0, 12.0, 20.0), 10.1, kind=LEVEL, null=1.0), rules.LARGER)

  def test_below_the_null_claims_fold_onto_the_papers_side(self):
    paper = (-30.81, -22.07)
    self.assertEqual(effect_verdict(Interval(-26.0, -28.0, -24.0), paper, kind=LEVEL), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(-10.0, -12.0, -8.0), paper, kind=LEVEL), rules.SMALLER)
    self.assertEqual(effect_verdict(Interval(-40.0, -45.0, -35.0), paper, kind=LEVEL), rules.LARGER)
    self.assertEqual(effect_verdict(Interval(3.0, 1.0, 5.0), paper, kind=LEVEL), rules.OPPOSITE)


class FloorTest(unittest.TestCase):
  """At least x: the estimate must reach it; an interval that only reaches it is consistent, estimate short."""

  def test_each_verdict(self):
    cases = {
      rules.REPRODUCED: Interval(5.0, 3.0, 7.0),
      rules.CONSISTENT_SHORT: Interval(3.0, 2.0, 4.0),  # touches 4 at its far end
      rules.SMALLER: Interval(2.0, 0.5, 3.9),
      rules.SHORT: Interval(2.0, 0.0, 3.9),  # touching the null does not exclude it; the floor lies beyond
      rules.INCONCLUSIVE: Interval(2.0, 0.0, 4.5),
      rules.OPPOSITE: Interval(-1.0, -2.0, -0.5),
    }
    for verdict, measured in cases.items():
      with self.subTest(verdict):
        self.assertEqual(effect_verdict(measured, 4.0, kind=FLOOR), verdict)
    self.assertEqual(effect_verdict(Interval(30.0, 25.0, 35.0), 4.0, kind=FLOOR), rules.REPRODUCED)

  def test_a_ratio_uses_its_null(self):
    self.assertEqual(effect_verdict(Interval(3.5, 1.2, 9.0), 10.1, kind=FLOOR, null=1.0), rules.SMALLER)
    self.assertEqual(effect_verdict(Interval(3.5, 0.8, 9.0), 10.1, kind=FLOOR, null=1.0), rules.SHORT)
    self.assertEqual(effect_verdict(Interval(3.5, 0.8, 12.0), 10.1, kind=FLOOR, null=1.0), rules.INCONCLUSIVE)
    self.assertEqual(effect_verdict(Interval(0.5, 0.4, 0.6), 10.1, kind=FLOOR, null=1.0), rules.OPPOSITE)


class CeilingTest(unittest.TestCase):
  """At most x ("only around 0.5 %"): the whole interval must lie within it; no effect at all is within it too."""

  def test_each_verdict(self):
    ceiling = -3.0  # a degradation of at most 3 %
    cases = {
      rules.REPRODUCED: Interval(-1.0, -2.0, 0.5),
      rules.CONSISTENT_CROSSES: Interval(-2.0, -4.0, 0.0),
      rules.CONSISTENT_BEYOND: Interval(-3.5, -4.5, -2.5),
      rules.LARGER: Interval(-5.0, -6.0, -4.0),
    }
    for verdict, measured in cases.items():
      with self.subTest(verdict):
        self.assertEqual(effect_verdict(measured, ceiling, kind=CEILING), verdict)
    self.assertEqual(effect_verdict(Interval(1.0, 0.5, 1.5), ceiling, kind=CEILING), rules.REPRODUCED)


class DirectionTest(unittest.TestCase):
  def test_each_verdict(self):
    self.assertEqual(effect_verdict(Interval(2.6, 2.4, 2.8), None, kind=DIRECTION, null=1.0, side=1), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(0.9, 0.8, 0.95), None, kind=DIRECTION, null=1.0, side=1), rules.OPPOSITE)
    self.assertEqual(
      effect_verdict(Interval(0.9, 0.8, 0.95), None, kind=DIRECTION, null=1.0, side=-1), rules.REPRODUCED
    )
    self.assertEqual(
      effect_verdict(Interval(1.0, 0.5, 2.0), None, kind=DIRECTION, null=1.0, side=1), rules.INCONCLUSIVE
    )


class OrderingTest(unittest.TestCase):
  def test_every_difference_must_hold(self):
    ahead, unsure, behind = Interval(2.0, 1.0, 3.0), Interval(0.5, -1.0, 2.0), Interval(-2.0, -3.0, -1.0)
    self.assertEqual(ordering_verdict([ahead, ahead]), rules.REPRODUCED)
    self.assertEqual(ordering_verdict([ahead, unsure]), rules.INCONCLUSIVE)
    self.assertEqual(ordering_verdict([ahead, unsure, behind]), rules.OPPOSITE)
    self.assertEqual(ordering_verdict([ahead, Interval(1.0, None, None)]), rules.ONE_RUN)
    self.assertEqual(ordering_verdict([ahead, None]), rules.NO_RUN)


class CommonTest(unittest.TestCase):
  def test_a_choice_made_on_the_test_data_cannot_earn_reproduced(self):
    measured = Interval(6.0, 3.0, 9.0)
    self.assertEqual(effect_verdict(measured, 4.0, kind=FLOOR, chosen_on_test=True), rules.CHOSEN_ON_TEST)
    self.assertEqual(effect_verdict(Interval(-1.0, -2.0, -0.5), 4.0, kind=FLOOR, chosen_on_test=True), rules.OPPOSITE)
    self.assertEqual(
      effect_verdict(Interval(3.0, 1.0, 5.0), 4.0, kind=FLOOR, chosen_on_test=True), rules.CONSISTENT_SHORT
    )

  def test_no_interval_is_one_run_and_nothing_is_no_run(self):
    for kind in (FLOOR, LEVEL, CEILING):
      self.assertEqual(effect_verdict(None, 4.0, kind=kind), rules.NO_RUN)
      self.assertEqual(effect_verdict(Interval(6.0, None, None), 4.0, kind=kind), rules.ONE_RUN)
    self.assertEqual(parity_verdict(Interval(0.0, None, None), (-1.0, 1.0)), rules.ONE_RUN)

  def test_bad_input_is_refused(self):
    with self.assertRaisesRegex(ValueError, "includes the null"):
      effect_verdict(Interval(1.0, 0.5, 1.5), (-1.0, 1.0), kind=LEVEL)
    with self.assertRaisesRegex(ValueError, "disagrees"):
      effect_verdict(Interval(1.0, 0.5, 1.5), 4.0, kind=FLOOR, side=-1)
    with self.assertRaisesRegex(ValueError, "needs the paper's value"):
      effect_verdict(Interval(1.0, 0.5, 1.5), None, kind=LEVEL, side=1)
    with self.assertRaisesRegex(ValueError, "`kind`"):
      effect_verdict(Interval(1.0, 0.5, 1.5), 4.0, kind="parity")
    with self.assertRaisesRegex(ValueError, "above `high`"):
      Interval(1.0, 2.0, 0.5)
    with self.assertRaisesRegex(ValueError, "NaN"):
      Interval(float("nan"), 0.0, 1.0)
    with self.assertRaisesRegex(ValueError, "both"):
      Interval(1.0, 0.0, None)


class ParityVerdictTest(unittest.TestCase):
  def test_each_verdict(self):
    band = (-1.37, 1.26)
    self.assertEqual(parity_verdict(Interval(0.2, -0.5, 0.9), band), rules.EQUIVALENT)
    self.assertEqual(parity_verdict(Interval(0.2, -2.0, 0.9), band), rules.INCONCLUSIVE)
    self.assertEqual(parity_verdict(Interval(-3.0, -4.0, -2.0), band), rules.OUTSIDE_BAND)
    self.assertEqual(parity_verdict(None, band), rules.NO_RUN)
    self.assertEqual(parity_verdict(Interval(0.2, -0.5, 0.9), band, chosen_on_test=True), rules.CHOSEN_ON_TEST)


class RefereedRowsTest(unittest.TestCase):
  """The rows issue 64's referee found kinder than their numbers, as measured then, under the claim kinds the
  catalogue now gives them."""

  def test_the_rows(self):
    rows = {
      # Finetune-M0 "degrades by 5-7 %" (a level, Table 3's -7.46 ... -5.52): -10.7 is wholly beyond it
      "finetune-m0 5-7 %": (effect_verdict(Interval(-10.7, -12.9, -8.45), (-7.46, -5.52), kind=LEVEL), rules.LARGER),
      # BC-Aligner "only ... around 3 % (resp. 0.5 %)" degradation: ceilings
      "bc-aligner 3 %": (effect_verdict(Interval(-1.36, -5.02, 2.30), -3.0, kind=CEILING), rules.CONSISTENT_CROSSES),
      "bc-aligner 0.5 %": (effect_verdict(Interval(-2.33, -3.29, -1.37), -0.5, kind=CEILING), rules.LARGER),
      # Gramian Table 2 at 1,500 steps, uniform (+4.2 ... +13.0 %): the far end reaches 4.2, the estimate does not
      "gramian table 2": (
        effect_verdict(Interval(2.74, 0.08, 5.32), (4.2, 13.0), kind=LEVEL),
        rules.CONSISTENT_SHORT,
      ),
      # linear SOGram at 10K pages (+10.7 ... +19.5 %)
      "gramian linear 10K": (effect_verdict(Interval(-4.50, -7.67, -1.33), (10.7, 19.5), kind=LEVEL), rules.OPPOSITE),
      # Drift-Adapter's 95-99 % (a level against the no-map 70.6 %): the estimate lies inside the range
      "drift-adapter": (
        effect_verdict(Interval(95.5, 94.5, 96.5), (95.0, 99.0), kind=LEVEL, null=70.6),
        rules.REPRODUCED,
      ),
      # importance sampling, linear: a ratio of 1.00 holds the null
      "importance linear": (
        effect_verdict(Interval(1.00, 0.96, 1.03), None, kind=DIRECTION, null=1.0, side=1),
        rules.INCONCLUSIVE,
      ),
      # ICL's 10.1x (a level on PROTEINS, alpha = 0.3): every point estimate below 1x
      "icl 10.1x": (effect_verdict(Interval(0.45, 0.21, 0.63), 10.1, kind=LEVEL, null=1.0), rules.OPPOSITE),
    }
    for name, (got, want) in rows.items():
      with self.subTest(name):
        self.assertEqual(got, want)


class BudgetTrendTest(unittest.TestCase):
  def test_weighted_slope_and_its_interval_against_the_closed_form(self):
    # equal errors: ordinary least squares; slope 4 per doubling; se = sigma / sqrt(sum (x - mean)^2) = s / sqrt(2)
    z = stats.norm.ppf(0.975)
    s = 1.0
    points = [(b, Interval(e, e - z * s, e + z * s)) for b, e in ((100, -16.0), (200, -12.0), (400, -8.0))]
    trend = budget_trend(points)
    assert_close(trend.per_doubling, 4.0, op="elementwise", precision="float64")
    assert_close(trend.high - trend.per_doubling, z * s / math.sqrt(2.0), op="elementwise", precision="float64")
    self.assertTrue(trend.resolved)
    self.assertEqual(trend.points, 3)

  def test_a_noisy_point_barely_moves_the_line(self):
    z = stats.norm.ppf(0.975)
    sharp = [(1, Interval(0.0, -z * 0.1, z * 0.1)), (2, Interval(1.0, 1 - z * 0.1, 1 + z * 0.1))]
    noisy = (4, Interval(-10.0, -10 - z * 100, -10 + z * 100))
    # weighted least squares in float64 NumPy (weights 1 / se^2): the noisy point barely moves the line (OLS: -5)
    x, y, w = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, -10.0]), 1 / np.array([0.1, 0.1, 100.0]) ** 2
    xm, ym = np.sum(w * x) / w.sum(), np.sum(w * y) / w.sum()
    wls = np.sum(w * (x - xm) * (y - ym)) / np.sum(w * (x - xm) ** 2)
    assert_close(budget_trend([*sharp, noisy]).per_doubling, wls, op="reduction", precision="float64")
    self.assertGreater(wls, 0.99)
    unresolved = budget_trend([(1, Interval(0.0, -5, 5)), (2, Interval(0.1, -5, 5)), (4, Interval(0.2, -5, 5))])
    self.assertFalse(unresolved.resolved)

  def test_bad_points(self):
    one = Interval(1.0, 0.0, 2.0)
    with self.assertRaisesRegex(ValueError, "three or more"):
      budget_trend([(1, one), (2, one)])
    with self.assertRaisesRegex(ValueError, "all different"):
      budget_trend([(1, one), (1, one), (2, one)])
    with self.assertRaisesRegex(ValueError, "no interval"):
      budget_trend([(1, one), (2, one), (4, Interval(1.0, None, None))])


if __name__ == "__main__":
  unittest.main()
