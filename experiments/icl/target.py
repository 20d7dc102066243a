r"""Time to target quality on a smoothed, noise-calibrated probe.

After every epoch a linear probe scores the encoder (:func:`experiments.icl.evaluate.probe_accuracy`); its accuracy
:math:`q_e` is noisy (a few hundred samples, one fit), so a rule that stops the clock at the first epoch above a
target times a spike as often as the model. Here:

* the **smoothed probe** is the trailing median of ``window`` evaluations,
  :math:`\tilde q_e = \operatorname{median}(q_{e-w+1}, \dots, q_e)` (defined from epoch w): one spike cannot lift a
  median of three, where it lifts every mean that holds it;
* retraining's **plateau** is its evaluations from half its reported epoch, :math:`\lceil E^*/2 \rceil`, to its
  last (the epochs after E* are the patience epochs that did not improve); its **level** is their mean
  :math:`\bar q_P`, and the probe's **noise** is :math:`\hat\sigma = \mathrm{sd}(q_e - q_{e-1}) / \sqrt 2` over the
  plateau (first differences ignore a slow trend; differencing doubles the variance);
* the **target** is :math:`T = \bar q_P - z\,c_w\hat\sigma`: the plateau level less ``noise_sds`` standard
  deviations of the smoothed probe (:math:`c_w` is the standard deviation of the median of w standard normal draws:
  1, :math:`1/\sqrt2`, 0.670, ...), so a method at retraining's quality reaches it with probability about
  :math:`\Phi(z)` per evaluation;
* a method **reaches** the target at the first epoch e from which :math:`\tilde q` stays at or above T for ``hold``
  consecutive evaluations; its time is the training time at that epoch. It **holds** it when :math:`\tilde q` never
  again stays below T for ``hold`` consecutive evaluations up to the end of training; otherwise it **lost** it at the
  first epoch of the first such run (:func:`lost`).

A target is not measurable when retraining's plateau has fewer than three evaluations (it never plateaued) or the
target is no better than predicting the majority class. A time to target is not measurable either when
retraining's smoothed probe is at the target at the first epoch the rule can judge, epoch ``window``
(:func:`judged_too_late`): retraining then starts at the quality it is timed to, so every "time to target" is the
cost of the first ``window`` epochs, a ratio of per-epoch costs (and when every method reaches the target at that
first epoch, retraining does too: the same case).
"""

import functools
import math
from typing import NamedTuple

import numpy as np


class TargetRule(NamedTuple):
  """``window``: evaluations in the smoothed probe; ``hold``: consecutive smoothed evaluations at or above the
  target; ``noise_sds``: z, the margin below retraining's plateau in standard deviations of the smoothed probe."""

  window: int = 3
  hold: int = 2
  noise_sds: float = 2.0


class Target(NamedTuple):
  """A run's target accuracy (%) and what calibrated it: retraining's plateau level and the probe's noise σ̂."""

  accuracy: float
  level: float
  noise: float
  plateau_epochs: tuple[int, int]  # 1-based, inclusive


MIN_PLATEAU = 3


def smoothed_probe(values, window: int) -> np.ndarray:
  """The trailing median of ``window`` evaluations; NaN before the first full window."""
  q = np.asarray(values, np.float64)
  out = np.full(q.shape, np.nan)
  if len(q) >= window:
    out[window - 1 :] = np.median(np.lib.stride_tricks.sliding_window_view(q, window), axis=1)
  return out


@functools.cache
def median_sd(window: int) -> float:
  """:math:`c_w`: the standard deviation of the median of ``window`` independent standard normal draws (exact for 1
  and 2; otherwise from 200,000 fixed-seed draws, within 0.3 %)."""
  if window <= 2:
    return 1.0 / math.sqrt(window)
  draws = np.random.default_rng(0).standard_normal((200_000, window))
  return float(np.std(np.median(draws, axis=1)))


def calibrate(record: dict, rule: TargetRule) -> tuple[Target | None, str | None]:
  """Retraining's ``record`` (``probe_by_epoch``, ``epochs`` = E*, ``probe_majority``) -> its :class:`Target`, or
  None and the reason there is none."""
  quality = record.get("probe_by_epoch")
  if not quality:
    return None, "the runs have no per-epoch probe accuracy (saved before it existed): use --speedup convergence"
  start = math.ceil(record["epochs"] / 2)  # 1-based
  plateau = np.asarray(quality[start - 1 :], np.float64)
  if len(plateau) < MIN_PLATEAU:
    return None, (
      f"retraining never plateaued: {len(plateau)} probe evaluation(s) from half its reported epoch "
      f"({record['epochs']}) to its last, fewer than the {MIN_PLATEAU} that measure the probe's noise"
    )
  level = float(plateau.mean())
  noise = float(np.std(np.diff(plateau), ddof=1) / math.sqrt(2.0))
  accuracy = level - rule.noise_sds * median_sd(rule.window) * noise
  if accuracy <= record["probe_majority"]:
    return None, (
      f"retraining's plateau probe accuracy, {level:.2f} %, less {rule.noise_sds:g} noise SDs of the smoothed probe "
      f"({accuracy:.2f} %), is no better than predicting the majority class ({record['probe_majority']:.2f} %): "
      f"there is no quality to reach"
    )
  return Target(accuracy, level, noise, (start, len(quality))), None


def reach(record: dict, target: float, rule: TargetRule) -> tuple[float, int] | None:
  """(training seconds, 1-based epoch) at the first epoch whose smoothed probe stays at or above ``target`` for
  ``rule.hold`` consecutive evaluations; None if none does."""
  above = smoothed_probe(record["probe_by_epoch"], rule.window) >= target
  for e in range(len(above) - rule.hold + 1):
    if above[e : e + rule.hold].all():
      return record["seconds_by_epoch"][e], e + 1
  return None


def lost(record: dict, target: float, rule: TargetRule, reached_epoch: int) -> int | None:
  """The 1-based epoch after ``reached_epoch`` from which the smoothed probe stays below ``target`` for
  ``rule.hold`` consecutive evaluations (the target lost, by the rule that reached it); None if it holds to the end
  of training."""
  below = smoothed_probe(record["probe_by_epoch"], rule.window) < target
  for e in range(reached_epoch, len(below) - rule.hold + 1):
    if below[e : e + rule.hold].all():
      return e + 1
  return None


def judged_too_late(record: dict, target: float, rule: TargetRule) -> str | None:
  """Why retraining's ``record`` has no time to ``target``: its smoothed probe at the first epoch the rule judges
  (epoch ``rule.window``) already meets it; None otherwise."""
  first = smoothed_probe(record["probe_by_epoch"], rule.window)[rule.window - 1 : rule.window]
  if len(first) and first[0] >= target:
    return (
      f"retraining's smoothed probe at epoch {rule.window}, the first the rule can judge, is {first[0]:.2f} %, "
      f"already at the target ({target:.2f} %)"
    )
  return None
