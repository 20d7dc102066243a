r"""How much of one run's intended comparison is the draw of its val users.

Version k's val Recall@50 is a mean over that version's val users, so a method's intended degradation,
:math:`100 (\bar x_m / \bar x_0 - 1)` with :math:`\bar x` the mean over the K versions, is a ratio of two means of
per-user scores on the same users (Keep-All serves Non-BC's models), and the intended gap between two methods is a
weighted sum of per-user differences, with weights :math:`100 / (K \bar x_0)`. Paired bootstraps
(:mod:`experiments.compare`) redraw every version's val users and give 95 % intervals of both. They hold the
trained models fixed: another seed (other models, another graph) adds its own noise, which only repeated runs
measure (``python -m experiments.bc_aligner.seeds``).
"""

import jax
import numpy as np

from experiments.bc_aligner.data import VersionData
from experiments.bc_aligner.report import rank_backward_compatible
from experiments.bc_aligner.train import user_recall50
from experiments.compare import difference, relative_change

REFERENCE = "non-bc"  # Keep-All's intended models


def user_recalls(serving: dict[str, list[np.ndarray]], versions: list[VersionData]) -> dict[str, list]:
  """Each method's per-version (val users, Recall@50 per user) of its serving embeddings; methods that serve the
  same arrays (Keep-All, Non-BC and the post-hoc methods share Non-BC's models) are scored once."""
  scored = {}
  for zs in serving.values():
    for z, vd in zip(zs, versions):
      if id(z) not in scored:
        scored[id(z)] = user_recall50(z, vd)
  return {method: [scored[id(z)] for z in zs] for method, zs in serving.items()}


def _differences(a: list, b: list) -> list[np.ndarray]:
  for k, ((users_a, _), (users_b, _)) in enumerate(zip(a, b)):
    if not np.array_equal(users_a, users_b):
      raise ValueError(f"version {k}: the two methods were scored on different val users")
  return [ra - rb for (_, ra), (_, rb) in zip(a, b)]


def _weights(per_user: dict[str, list], x0: float) -> list[float]:
  versions = len(per_user[REFERENCE])
  return [100.0 / (versions * x0)] * versions


def intended_intervals(per_user: dict[str, list], key: jax.Array) -> dict[str, list[float]]:
  r"""Method -> the 95 % interval [low, high] of its intended degradation (%),
  :math:`100 (\bar x_m / \bar x_0 - 1)`, over redrawn val users: both means (over versions of the per-version means)
  are redrawn together (:func:`experiments.compare.relative_change`), so the interval is the ratio's and never falls
  below -100 %."""
  out = {}
  for i, method in enumerate(sorted(per_user)):
    scores, reference = per_user[method], per_user[REFERENCE]
    _differences(scores, reference)  # the same val users in both
    c = relative_change([r for _, r in scores], [r for _, r in reference], jax.random.fold_in(key, i), over="val users")
    out[method] = None if not c.measured else [c.low, c.high]
  return out


def gap_interval(results: dict, per_user: dict[str, list], key: jax.Array) -> dict | None:
  """The two best backward-compatible methods of ``results`` (``best``, ``next``), the gap of their combined
  degradations (``gap_pct``, points) and its 95 % interval (``ci95``) with the val users redrawn and the consumers'
  AUCs held fixed (their unintended gap is added to the intended gap's interval, ``intended_ci95``). None with fewer
  than two ranked methods, or with too few val users in a version for an interval
  (:data:`experiments.compare.MIN_UNITS`)."""
  ranked = rank_backward_compatible(results)
  if len(ranked) < 2:
    return None
  methods = results["methods"]
  best, runner_up = ranked[:2]
  x0 = methods[REFERENCE]["intended_recall50_mean"]
  _differences(per_user[best], per_user[runner_up])  # the same val users in both
  iv = difference(
    [r for _, r in per_user[best]],
    [r for _, r in per_user[runner_up]],
    key,
    over="val users",
    weights=[1.0] * len(per_user[best]),
    scale=_weights(per_user, x0)[0],
  )
  if not iv.measured:
    return None
  unintended = methods[best]["unintended_degradation_pct"] - methods[runner_up]["unintended_degradation_pct"]
  return {
    "best": best,
    "next": runner_up,
    "gap_pct": methods[best]["combined_degradation_pct"] - methods[runner_up]["combined_degradation_pct"],
    "intended_ci95": [iv.low, iv.high],
    "ci95": [iv.low + unintended, iv.high + unintended],
  }
