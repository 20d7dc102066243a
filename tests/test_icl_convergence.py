"""The ICL convergence rules: the paper's raw-minimum patience, and the smoothed rule whose margin is the noise of
the moving average (against a float64 NumPy computation), which does not stop on a lucky epoch; and the number of
runs a ±10 % estimate needs (closed form)."""

import math

import numpy as np
from absl.testing import absltest

from experiments.icl.convergence import Rule, Tracker, runs_for_precision
from tests._tolerance import assert_close


def feed(rule: Rule, losses) -> tuple[int, int]:
  """(1-based epoch at which the rule stops or len(losses), 1-based best epoch)."""
  tracker, best = Tracker(rule), 0
  for e, loss in enumerate(losses):
    improved, stop = tracker.update(loss)
    best = e + 1 if improved else best
    if stop:
      return e + 1, best
  return len(losses), best


class RuleTest(absltest.TestCase):
  def test_margin_is_the_noise_of_the_moving_average(self):
    losses = [3.0, 2.5, 2.7, 2.2, 2.4, 2.1]
    tracker = Tracker(Rule("smoothed", smoothing=0.6))
    for loss in losses:
      tracker.update(loss)
    d = np.diff(np.asarray(losses, np.float64))
    sigma = 1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0)
    assert_close(tracker.margin(), sigma * math.sqrt(0.4 / 1.6))
    ema = losses[0]
    for loss in losses[1:]:
      ema = 0.6 * ema + 0.4 * loss
    assert_close(tracker.smoothed, ema)
    self.assertEqual(Tracker(Rule("paper")).margin(), 0.0)

  def test_a_lucky_epoch_stops_the_paper_rule_not_the_smoothed_one(self):
    rng = np.random.default_rng(0)
    trend = 2.0 * np.exp(-np.arange(60) / 25.0) + 1.0  # still falling by ~0.03 per epoch at epoch 10
    losses = trend + 0.05 * rng.normal(size=60)
    losses[6] -= 0.4  # one lucky epoch
    paper_stop, paper_best = feed(Rule("paper", patience=5), losses)
    self.assertEqual((paper_stop, paper_best), (12, 7))  # stopped on the lucky epoch's noise
    smooth_stop, smooth_best = feed(Rule("smoothed", patience=5, min_epochs=10), losses)
    self.assertGreater(smooth_stop, 30)
    self.assertGreater(smooth_best, 25)

  def test_a_flat_noisy_loss_stops_after_min_epochs_and_patience(self):
    losses = 1.0 + 0.05 * np.random.default_rng(1).normal(size=200)
    stop, _ = feed(Rule("smoothed", patience=5, min_epochs=12), losses)
    self.assertBetween(stop, 12, 40)
    stop, _ = feed(Rule("smoothed", patience=1, min_epochs=12), [1.0] * 30)
    self.assertEqual(stop, 12)  # never before min_epochs

  def test_bad_rules(self):
    with self.assertRaisesRegex(ValueError, "rule"):
      Tracker(Rule("magic"))
    with self.assertRaisesRegex(ValueError, "smoothing"):
      Tracker(Rule("smoothed", smoothing=1.0))


class RunsTest(absltest.TestCase):
  def test_runs_for_a_ten_percent_estimate(self):
    values = [2.0, 2.4, 1.6, 2.2]
    cv = np.std(values, ddof=1) / np.mean(values)
    self.assertEqual(runs_for_precision(values), math.ceil((1.96 * cv / 0.1) ** 2))
    self.assertEqual(runs_for_precision([3.0, 3.0]), 1)
    self.assertIsNone(runs_for_precision([2.0]))
    self.assertIsNone(runs_for_precision([2.0, None]))


if __name__ == "__main__":
  absltest.main()
