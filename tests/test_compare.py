"""The experiments' noise-aware comparisons against closed forms: the paired difference's interval width against the
standard error of a mean difference, the relative change's against the delta method, the ratio of means over runs
against the delta-method t-interval, no interval and no order from fewer than three units, orders only where the
interval excludes the tie, and tied average ranks."""

import jax
import numpy as np
from absl.testing import absltest

from experiments.compare import (
  Comparison,
  difference,
  ratio_of_means,
  relative_change,
  t_difference,
  t_mean,
  tied_ranks,
)
from tests._tolerance import assert_close

Z95 = 1.959964


class CompareTest(absltest.TestCase):
  def test_difference_has_the_closed_form_width_and_centre(self):
    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.2, 3000)
    b = a - 0.01 + rng.normal(0, 0.05, 3000)  # paired: they share each unit's difficulty
    c = difference(a, b, jax.random.key(0), over="queries")
    d = a - b
    assert_close(c.estimate, float(d.mean()))
    se = d.std() / np.sqrt(d.size)
    assert_close(c.high - c.low, 2 * Z95 * se, "statistical", rtol=0.1, atol=0.0)
    assert_close((c.high + c.low) / 2, float(d.mean()), "statistical", rtol=0.0, atol=0.2 * se)
    self.assertEqual(c.order(), 1)  # 0.01 with a standard error of 0.001
    self.assertEqual(c.verdict(), "ahead")
    # scaled and stratified: 100 / x0 times the mean over strata of the mean differences
    c2 = difference([a[:1000], a[1000:]], [b[:1000], b[1000:]], jax.random.key(0), over="users", scale=100.0 / 0.5)
    assert_close(c2.estimate, 200.0 * 0.5 * (d[:1000].mean() + d[1000:].mean()))
    # unpaired-looking noise: the same difference without the shared part is a tie
    tie = difference(rng.normal(0.5, 0.2, 50), rng.normal(0.5, 0.2, 50), jax.random.key(1), over="queries")
    self.assertEqual((tie.order(), tie.verdict()), (0, "tied (within the noise)"))

  def test_relative_change_matches_the_delta_method(self):
    rng = np.random.default_rng(1)
    b = rng.gamma(2.0, 0.1, 5000)
    a = 1.1 * b + rng.normal(0, 0.05, 5000)
    c = relative_change(a, b, jax.random.key(2), over="queries")
    ma, mb = a.mean(), b.mean()
    assert_close(c.estimate, 100.0 * (ma / mb - 1.0))
    # delta method: var(ā/b̄) ≈ var(a - r b) / (n b̄²) with r = ā/b̄
    r = ma / mb
    se = 100.0 * np.std(a - r * b) / (np.sqrt(a.size) * mb)
    assert_close(c.high - c.low, 2 * Z95 * se, "statistical", rtol=0.1, atol=0.0)
    self.assertEqual(c.order(), 1)
    self.assertRegex(c.cell("+.1f", " %"), r"^\+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]$")
    # a sparse reference whose redraws often score 0: no upper end, so no interval (never inf or NaN)
    sparse = np.zeros(40)
    sparse[0] = 1.0
    none = relative_change(np.full(40, 0.1), sparse, jax.random.key(0), over="queries")
    self.assertEqual((none.estimate, none.measured), (100.0 * (0.1 / 0.025 - 1.0), False))
    with self.assertRaisesRegex(ValueError, "positive mean"):
      relative_change(a, np.zeros(5000), jax.random.key(0), over="queries")

  def test_ratio_of_means_over_runs_is_the_delta_method_t_interval(self):
    base = np.array([10.0, 12.0, 11.0, 9.0])
    ours = np.array([4.0, 5.0, 4.5, 3.5])
    c = ratio_of_means(base, ours)
    # float64 reference: r = mean(a) / mean(b), d = a - r b, se = sd(d) / (sqrt(n) mean(b)), t on n - 1 = 3 df,
    # on the log scale: r exp(-+ t se / r)
    r = base.mean() / ours.mean()
    d = base - r * ours
    se = np.sqrt(np.sum((d - d.mean()) ** 2) / 3) / (2.0 * ours.mean())
    t3 = 3.182446305284263  # Student's t, 97.5 % quantile, 3 degrees of freedom
    assert_close(c.estimate, r)
    assert_close([c.low, c.high], [r * np.exp(-t3 * se / r), r * np.exp(t3 * se / r)], scale=r)
    # three runs that disagree: a wide interval, still above zero (the symmetric one ran below it)
    wide = ratio_of_means([1.0, 0.2, 2.0], [1.0, 1.0, 1.0])
    self.assertGreater(wide.low, 0.0)
    self.assertEqual((c.null, c.order(), c.units, c.over), (1.0, 1, 4, "runs"))
    # the two IMDB-BINARY runs (0.358 and 0.460 per run): no interval, and no order from them
    two = ratio_of_means([0.358, 0.460], [1.0, 1.0])
    self.assertEqual((two.low, two.high, two.measured, two.order()), (None, None, False, 0))
    self.assertEqual(two.cell(".1f"), "0.4 (no interval: 2 runs; 3 give one)")
    self.assertEqual(two.verdict(), "no interval: 2 runs; 3 give one")
    one = ratio_of_means([10.0], [4.0])
    self.assertEqual((one.order(), one.cell(".1f")), (0, "2.5 (no interval: 1 run; 3 give one)"))
    # three runs far apart are resolved, three runs that straddle 1 are not
    self.assertEqual(ratio_of_means([3.0, 3.1, 2.9], [1.0, 1.0, 1.0]).order(), 1)
    self.assertEqual(ratio_of_means([0.5, 1.6, 1.1], [1.0, 1.0, 1.0]).order(), 0)
    with self.assertRaisesRegex(ValueError, "denominators"):
      ratio_of_means([1.0, 2.0], [0.0, 1.0])
    with self.assertRaisesRegex(ValueError, "paired scores"):
      ratio_of_means([1.0, 2.0], [1.0])
    with self.assertRaisesRegex(ValueError, "finite"):
      difference([1.0, np.nan], [1.0, 2.0], jax.random.key(0), over="runs")

  def test_t_mean_and_t_difference_are_students_intervals_over_runs(self):
    a = np.array([74.8, 73.1, 75.9])
    b = np.array([73.6, 73.0, 74.1])
    t2 = 4.302652729911275  # Student's t, 97.5 % quantile, 2 degrees of freedom
    c = t_mean(a)
    half = t2 * np.sqrt(np.sum((a - a.mean()) ** 2) / 2) / np.sqrt(3)
    assert_close([c.estimate, c.low, c.high], [a.mean(), a.mean() - half, a.mean() + half], scale=a.mean())
    d = a - b  # paired: the shared run effect cancels
    c = t_difference(a, b)
    half = t2 * np.sqrt(np.sum((d - d.mean()) ** 2) / 2) / np.sqrt(3)
    assert_close([c.estimate, c.low, c.high], [d.mean(), d.mean() - half, d.mean() + half], scale=np.abs(a).max())
    self.assertEqual((c.order(), c.units, c.over, c.null), (0, 3, "runs", 0.0))  # +1.03 [-1.2, +3.3]: a tie
    self.assertEqual(t_difference([3.0, 3.1, 2.9], [1.0, 1.05, 1.1]).order(), 1)
    self.assertEqual(t_difference([1.0, 1.05, 1.1], [3.0, 3.1, 2.9]).order(), -1)
    two = t_difference([5.0, 5.1], [1.0, 1.1])
    self.assertEqual((two.measured, two.order(), two.cell(".1f")), (False, 0, "4.0 (no interval: 2 runs; 3 give one)"))
    with self.assertRaisesRegex(ValueError, "paired scores"):
      t_difference([1.0, 2.0, 3.0], [1.0, 2.0])
    with self.assertRaisesRegex(ValueError, "finite"):
      t_mean([1.0, np.inf, 2.0])

  def test_fewer_than_three_units_give_no_interval_and_no_order(self):
    # two units far apart: a bootstrap would "resolve" them from the two values alone
    for c in (
      difference([5.0, 5.1], [1.0, 1.1], jax.random.key(0), over="runs"),
      relative_change([5.0, 5.1], [1.0, 1.1], jax.random.key(0), over="runs"),
      difference([[5.0, 5.1], [5.0, 5.2, 5.3]], [[1.0, 1.1], [1.0, 1.2, 1.3]], jax.random.key(0), over="runs"),
      ratio_of_means([5.0, 5.1], [1.0, 1.1]),
    ):
      self.assertEqual((c.measured, c.order(), c.to_json()["resolved"]), (False, 0, False))
      self.assertIsNone(c.to_json()["ci95"])
      self.assertIn("3 give one", c.verdict())
    # three units: an interval, and the order it resolves
    self.assertEqual(difference([5.0, 5.1, 5.2], [1.0, 1.1, 1.0], jax.random.key(0), over="runs").order(), 1)
    # bounds handed over from fewer than three units are refused as well
    self.assertEqual(Comparison(2.0, 1.5, 2.5, "runs", 2).order(), 0)
    self.assertEqual(Comparison(2.0, 1.5, 2.5, "runs", 3).order(), 1)

  def test_tied_ranks(self):
    names = ["a", "b", "c"]
    self.assertEqual(tied_ranks({}, names), {"a": 2.0, "b": 2.0, "c": 2.0})  # nothing resolved: one shared place
    orders = {("a", "b"): 1, ("a", "c"): 1, ("b", "c"): 0}
    self.assertEqual(tied_ranks(orders, names), {"a": 1.0, "b": 2.5, "c": 2.5})
    orders = {("a", "b"): 1, ("c", "a"): 1, ("b", "c"): -1}  # fully resolved: c, a, b
    self.assertEqual(tied_ranks(orders, names), {"a": 2.0, "b": 3.0, "c": 1.0})
    # the ordinary average rank of distinct values, when every pair is resolved
    self.assertEqual(sum(tied_ranks(orders, names).values()), 6.0)

  def test_a_comparison_without_an_interval_orders_nothing(self):
    c = Comparison(5.0, None, None, "runs", 1)
    self.assertEqual((c.measured, c.order()), (False, 0))
    self.assertEqual(c.to_json(), {"estimate": 5.0, "ci95": None, "over": "runs", "units": 1, "resolved": False})


if __name__ == "__main__":
  absltest.main()
