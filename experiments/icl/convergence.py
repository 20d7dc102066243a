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
"""

import math
from typing import NamedTuple

import numpy as np

RULES = ("smoothed", "paper")


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
    if self.rule.name == "paper" or len(self.losses) < 4:
      return 0.0
    diffs = np.diff(self.losses)
    sigma = 1.4826 * np.median(np.abs(diffs - np.median(diffs))) / math.sqrt(2.0)
    beta = self.rule.smoothing
    return float(sigma * math.sqrt((1.0 - beta) / (1.0 + beta)))

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


def runs_for_precision(values, precision: float = 0.10, z: float = 1.96) -> int | None:
  """Independent runs needed for the mean of ``values`` (e.g. per-run speed-ups) to be within ± ``precision``
  (relative) with ~95 % confidence: :math:`\\lceil (z\\, s / (\\text{precision}\\, |\\bar x|))^2 \\rceil` from the
  runs at hand (None with fewer than two, or a zero mean)."""
  values = np.asarray([v for v in values if v is not None], np.float64)
  if len(values) < 2 or np.mean(values) == 0:
    return None
  cv = np.std(values, ddof=1) / abs(np.mean(values))
  return max(int(math.ceil((z * cv / precision) ** 2)), 1)
