r"""When an ICL method has converged: the rule every method of a run shares.

``paper``: the epoch loss has not reached a new minimum (:math:`L_e \le \min_{e' < e} L_{e'}`) for ``patience``
epochs; the reported epoch is the minimum's. One lucky low epoch ends a run early and one unlucky high epoch
stalls it, so speed-ups measured with it carry the loss's epoch-to-epoch noise.

``smoothed`` (the default): the same patience test on an exponential moving average of the epoch loss,
:math:`S_e = \beta S_{e-1} + (1 - \beta) L_e` (:math:`S_1 = L_1`, β = ``smoothing``), where an epoch improves only if
:math:`S_e < S^* - \delta_e`: the margin :math:`\delta_e` is the noise of :math:`S` estimated from the raw losses,

.. math::
  \hat\sigma = \frac{1.4826\,\mathrm{MAD}(L_e - L_{e-1})}{\sqrt 2}, \qquad
  \delta_e = \hat\sigma \sqrt{\frac{1 - \beta}{1 + \beta}}

(the MAD of first differences ignores a steady trend; differencing doubles the variance; an EMA of white noise has
variance :math:`\sigma^2 (1 - \beta) / (1 + \beta)`), with :math:`\delta_e = 0` until three differences exist. No run
stops before ``min_epochs``. The reported epoch is the best smoothed one.

Whatever the stopping rule, :func:`curve_status` judges the whole loss curve on its smoothed values against its own
noise: ``diverged`` when the mean of the last ``patience`` raw losses lies above the level around the best smoothed
epoch (the mean of the raw losses the moving average mostly weighs there, its last :math:`\lceil 1/(1-\beta)\rceil`)
by more than ``DIVERGED_Z`` standard errors of that difference (from :math:`\hat\sigma`) and by more than
``DIVERGED_RISE`` of its size; ``did not improve`` when the smoothed loss never fell below its first value by more
than :math:`\delta`; ``improved`` otherwise. One lucky low epoch moves the smoothed curve by only
:math:`(1-\beta)` of its dip, and comparing window means (not a single raw loss against the best one) keeps a noisy
but flat or falling curve from reading as a divergence. A curve of fewer than ``MIN_JUDGED`` epochs (four: three
first differences) has no measured noise, so it is not judged (``too short``) rather than judged against a noise
of 0.
"""

import math
from typing import NamedTuple

import numpy as np

RULES = ("smoothed", "paper")
CURVE_STATUSES = ("improved", "did not improve", "diverged", "too short")
# The fewest epoch losses a curve is judged from: σ̂ needs three first differences.
MIN_JUDGED = 4
# A diverged curve's end sits this many standard errors above the level at its best smoothed epoch (3.5: the best
# epoch is the curve's minimum, chosen on the same noise, so the test must clear that selection as well) ...
DIVERGED_Z = 3.5
# ... and this far above it relative to its size (a rise of a few per cent is a plateau, not a divergence).
DIVERGED_RISE = 0.05


class Rule(NamedTuple):
  name: str = "smoothed"
  patience: int = 10
  min_epochs: int = 10
  smoothing: float = 0.7


class Tracker:
  """Feeds epoch losses one at a time: ``update(loss) -> (improved, stop)``."""

  def __init__(self, rule: Rule):
    if rule.name not in RULES:
      raise ValueError(f"convergence rule must be one of {RULES}, got {rule.name!r}")
    if not 0.0 <= rule.smoothing < 1.0:
      raise ValueError(f"convergence smoothing must be in [0, 1), got {rule.smoothing}")
    self.rule = rule
    self.losses: list[float] = []
    self.smoothed: float | None = None
    self.best = math.inf
    self.wait = 0

  def margin(self) -> float:
    """δ_e of the module docstring (0 for the paper's rule)."""
    if self.rule.name == "paper":
      return 0.0
    return smoothed_margin(self.losses, self.rule.smoothing)

  def update(self, loss: float) -> tuple[bool, bool]:
    self.losses.append(float(loss))
    if self.rule.name == "paper":
      value, improved = loss, loss <= self.best
    else:
      beta = self.rule.smoothing
      self.smoothed = loss if self.smoothed is None else beta * self.smoothed + (1.0 - beta) * loss
      value, improved = self.smoothed, self.smoothed < self.best - self.margin()
    if improved:
      self.best, self.wait = value, 0
    else:
      self.wait += 1
    minimum = self.rule.min_epochs if self.rule.name == "smoothed" else 1
    return improved, self.wait >= self.rule.patience and len(self.losses) >= minimum


def noise_sd(losses) -> float:
  """σ̂ of the module docstring: the raw losses' epoch-to-epoch noise from the MAD of their first differences (0
  until three differences exist)."""
  if len(losses) < MIN_JUDGED:
    return 0.0
  diffs = np.diff(np.asarray(losses, np.float64))
  return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2.0))


def smoothed_margin(losses, smoothing: float) -> float:
  """δ of the module docstring: the noise of the moving average of ``losses``."""
  return noise_sd(losses) * math.sqrt((1.0 - smoothing) / (1.0 + smoothing))


def smoothed(losses, smoothing: float) -> np.ndarray:
  """The moving average :math:`S_e = \beta S_{e-1} + (1 - \beta) L_e`, :math:`S_1 = L_1`."""
  out = np.empty(len(losses))
  for e, loss in enumerate(losses):
    out[e] = loss if e == 0 else smoothing * out[e - 1] + (1.0 - smoothing) * loss
  return out


def curve_status(losses, smoothing: float, patience: int) -> str:
  """``improved``, ``did not improve`` or ``diverged`` (the module docstring) for a run's finite epoch losses;
  ``too short`` for fewer than ``MIN_JUDGED`` of them, whose noise is not measured."""
  losses = np.asarray(losses, np.float64)
  if len(losses) < MIN_JUDGED:
    return "too short"
  s = smoothed(losses, smoothing)
  sigma = noise_sd(losses)
  best = int(np.argmin(s))
  window = min(best + 1, math.ceil(1.0 / (1.0 - smoothing)))
  level = float(np.mean(losses[best + 1 - window : best + 1]))
  tail = losses[best + 1 :][-patience:]
  if len(tail) >= patience:
    rise = float(np.mean(tail)) - level
    standard_error = sigma * math.sqrt(1.0 / window + 1.0 / len(tail))
    if rise > max(DIVERGED_Z * standard_error, DIVERGED_RISE * abs(level)):
      return "diverged"
  if s[1:].min() >= s[0] - smoothed_margin(losses, smoothing):
    return "did not improve"
  return "improved"


def runs_for_precision(values, precision: float = 0.10, z: float = 1.96) -> int | None:
  """Independent runs needed for the mean of ``values`` (e.g. per-run speed-ups) to be within ± ``precision``
  (relative) with ~95 % confidence: :math:`\\lceil (z\\, s / (\\text{precision}\\, |\\bar x|))^2 \\rceil` from the
  runs at hand (None with fewer than two, or a zero mean)."""
  values = np.asarray([v for v in values if v is not None], np.float64)
  if len(values) < 2 or np.mean(values) == 0:
    return None
  cv = np.std(values, ddof=1) / abs(np.mean(values))
  return max(int(math.ceil((z * cv / precision) ** 2)), 1)
