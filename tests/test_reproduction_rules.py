"""The verdict rules of the reproduction page: each rule, its edges, and the seven rows a referee read against the
papers (issue 54), with the verdicts the rules give them."""

import math
import unittest

from experiments.reproduction import rules
from experiments.reproduction.rules import Interval, budget_trend, effect_verdict, parity_verdict
from tests._tolerance import assert_close


class EffectVerdictTest(unittest.TestCase):
  def test_each_verdict(self):
    paper = (4.0, 19.5)
    cases = {
      rules.REPRODUCED: Interval(6.0, 3.0, 9.0),  # overlaps the range
      rules.SMALLER: Interval(2.0, 1.0, 3.0),  # same side, short of 4
      rules.INCONCLUSIVE: Interval(1.0, -1.0, 3.0),
      rules.OPPOSITE: Interval(-15.7, -16.3, -15.1),
    }
    for verdict, measured in cases.items():
      with self.subTest(verdict):
        self.assertEqual(effect_verdict(measured, paper), verdict)

  def test_an_effect_larger_than_the_papers_is_reproduced(self):
    self.assertEqual(effect_verdict(Interval(30.0, 25.0, 35.0), (4.0, 19.5)), rules.REPRODUCED)

  def test_edges(self):
    # touching the paper's smallest value reaches it; touching the null does not exclude it
    self.assertEqual(effect_verdict(Interval(3.0, 2.0, 4.0), 4.0), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(2.0, 0.0, 3.9), 4.0), rules.INCONCLUSIVE)
    self.assertEqual(effect_verdict(Interval(2.0, 0.5, 3.9), 4.0), rules.SMALLER)

  def test_below_the_null_claims_fold_onto_the_papers_side(self):
    # a degradation of 22-31 % (negative numbers): a measured -26 % reproduces it, -10 % is a smaller effect
    self.assertEqual(effect_verdict(Interval(-26.0, -28.0, -24.0), (-30.81, -22.07)), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(-10.0, -12.0, -8.0), (-30.81, -22.07)), rules.SMALLER)
    self.assertEqual(effect_verdict(Interval(3.0, 1.0, 5.0), (-30.81, -22.07)), rules.OPPOSITE)

  def test_a_ratio_claim_uses_its_null(self):
    self.assertEqual(effect_verdict(Interval(3.5, 1.2, 9.0), 10.1, null=1.0), rules.SMALLER)
    self.assertEqual(effect_verdict(Interval(3.5, 0.8, 9.0), 10.1, null=1.0), rules.INCONCLUSIVE)
    self.assertEqual(effect_verdict(Interval(0.5, 0.4, 0.6), 10.1, null=1.0), rules.OPPOSITE)

  def test_direction_only_claims(self):
    self.assertEqual(effect_verdict(Interval(2.6, 2.4, 2.8), None, null=1.0, side=1), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(0.9, 0.8, 0.95), None, null=1.0, side=1), rules.OPPOSITE)
    self.assertEqual(effect_verdict(Interval(0.9, 0.8, 0.95), None, null=1.0, side=-1), rules.REPRODUCED)
    self.assertEqual(effect_verdict(Interval(1.0, 0.5, 2.0), None), rules.QUALITATIVE)

  def test_a_choice_made_on_the_test_data_cannot_earn_reproduced(self):
    measured = Interval(6.0, 3.0, 9.0)
    self.assertEqual(effect_verdict(measured, 4.0, chosen_on_test=True), rules.CHOSEN_ON_TEST)
    # ... and it does not soften a verdict against the claim
    self.assertEqual(effect_verdict(Interval(-1.0, -2.0, -0.5), 4.0, chosen_on_test=True), rules.OPPOSITE)

  def test_no_interval_is_not_measured(self):
    self.assertEqual(effect_verdict(None, 4.0), rules.NOT_MEASURED)
    self.assertEqual(effect_verdict(Interval(6.0, None, None), 4.0), rules.NOT_MEASURED)

  def test_bad_input_is_refused(self):
    with self.assertRaisesRegex(ValueError, "includes the null"):
      effect_verdict(Interval(1.0, 0.5, 1.5), (-1.0, 1.0))
    with self.assertRaisesRegex(ValueError, "disagrees"):
      effect_verdict(Interval(1.0, 0.5, 1.5), 4.0, side=-1)
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
    self.assertEqual(parity_verdict(None, band), rules.NOT_MEASURED)
    self.assertEqual(parity_verdict(Interval(0.2, -0.5, 0.9), band, chosen_on_test=True), rules.CHOSEN_ON_TEST)


class ReviewedRowsTest(unittest.TestCase):
  """The seven rows of docs/reproduction.md that issue 54 read against the papers, with their measured numbers then,
  get the verdicts the rules give (the page itself is generated from the committed summaries)."""

  def test_the_seven_rows(self):
    rows = {
      # BC Table 3: BC-Aligner's combined lead over Joint-Lin-SLoss, paper 1.07-1.79 points
      "bc lead": (effect_verdict(Interval(0.13, -0.21, 0.46), (1.07, 1.79)), rules.INCONCLUSIVE),
      # Gramian Table 2: SOGram vs sampling, paper +4.2 ... +19.5 %
      "gramian table 2": (effect_verdict(Interval(-15.7, -16.9, -14.5), (4.2, 19.5)), rules.OPPOSITE),
      # ICL Table 4, PROTEINS alpha = 0.3: time speed-up 10.1x, per-run speed-ups spread over 0.27 ... 12.2
      "icl speed-up": (effect_verdict(Interval(3.5, 0.8, 7.0), 10.1, null=1.0), rules.INCONCLUSIVE),
      # ICL section 4.2: "the time complexity of ICL is larger": per-epoch cost ratio above 1
      "icl epoch cost": (effect_verdict(Interval(2.58, 2.4, 2.8), None, null=1.0, side=1), rules.REPRODUCED),
      # CA Table 1 at alpha = 4 chosen on the test genres: cannot be reproduced
      "ca alpha 4": (effect_verdict(Interval(1.4, 0.5, 2.3), 3.84, chosen_on_test=True), rules.SMALLER),
      # the upgrade: Drift-Adapter's 95-99 % recovery against the no-map level of 70 %
      "upgrade": (effect_verdict(Interval(93.8, 92.6, 94.9), (95.0, 99.0), null=70.6), rules.SMALLER),
      # the exact-Gramian oracle: not a claim of the paper, so no verdict (a bcjax measurement)
      "exact gramian": (effect_verdict(Interval(1.5, 0.3, 2.7), None), rules.QUALITATIVE),
    }
    for name, (got, want) in rows.items():
      with self.subTest(name):
        self.assertEqual(got, want)


class BudgetTrendTest(unittest.TestCase):
  def test_slope_per_doubling_and_extrapolation(self):
    trend = budget_trend([(100, -16.0), (200, -12.0), (400, -8.0)], (4.2, 19.5))
    assert_close(trend.per_doubling, 4.0, op="elementwise", precision="float64")
    self.assertTrue(trend.towards_paper)
    assert_close(trend.doublings_to_paper, (4.2 + 8.0) / 4.0, op="elementwise", precision="float64")

  def test_moving_away(self):
    trend = budget_trend([(1, 1.0), (2, 0.5), (4, 0.0)], 3.0)
    self.assertFalse(trend.towards_paper)
    self.assertIsNone(trend.doublings_to_paper)

  def test_beyond_the_papers_value_counts_as_reached(self):
    # as "reproduced" counts an effect at least as large: 8.2 points against the paper's 3.1-6.6
    self.assertEqual(budget_trend([(40, -2.3), (80, 6.9), (160, 8.2)], (3.08, 6.63)).doublings_to_paper, 0.0)
    # below the null: a degradation of -30 % against the paper's -22 ... -31 %
    self.assertEqual(budget_trend([(1, -29.9), (2, -29.5), (4, -30.0)], (-30.81, -22.07)).doublings_to_paper, 0.0)
    # a ratio's null: 1.1 > 1, the paper's side of a direction claim
    self.assertEqual(budget_trend([(1, 0.5), (2, 0.6), (4, 1.1)], (1.0, math.inf), null=1.0).doublings_to_paper, 0.0)

  def test_already_there(self):
    self.assertEqual(budget_trend([(1, 1.0), (2, 3.0), (4, 4.0)], (3.5, 5.0)).doublings_to_paper, 0.0)

  def test_bad_budgets(self):
    with self.assertRaisesRegex(ValueError, "three or more"):
      budget_trend([(1, 1.0), (2, 2.0)], 1.0)
    with self.assertRaisesRegex(ValueError, "all different"):
      budget_trend([(1, 1.0), (1, 2.0), (2, 3.0)], 1.0)


if __name__ == "__main__":
  unittest.main()
