r"""The intended task's chance level: what a random ranking scores on the experiment's own val Recall@K.

Version k's val Recall@K (:func:`experiments.bc_aligner.train.recall`) ranks, for each val user u, the
:math:`C_u` items up to :math:`t_{k+1}` that are not u's train items, and divides the hits in its top K by
:math:`R_u`, u's distinct val items, of which :math:`P_u` are ranked (a val item the user also trained on is never
ranked but still counts). A uniformly random ranking of those :math:`C_u` candidates puts
:math:`n_u = \min(K, C_u)` of them in the top K, and its hits are hypergeometric (:math:`C_u` items,
:math:`P_u` relevant, :math:`n_u` drawn):

.. math::
  \mathrm E[\mathrm{recall}_u] = \frac{n_u P_u}{C_u R_u}, \qquad
  \mathrm{Var}[\mathrm{recall}_u] = \frac{n_u\, p_u (1 - p_u)}{R_u^2} \frac{C_u - n_u}{C_u - 1}, \quad
  p_u = P_u / C_u.

The version's **chance level** is the mean of :math:`\mathrm E[\mathrm{recall}_u]` over its Q val users, with the
standard deviation :math:`\sqrt{\sum_u \mathrm{Var}}/Q` of a random ranking's mean (each user ranked on their own);
the intended metric's, the mean over the versions, is the mean of the versions' levels with standard deviation
:math:`\sqrt{\sum_k \mathrm{sd}_k^2}/K`. A model is **at chance** when its Recall@K is at most the chance level
plus ``AT_CHANCE_SDS`` of those standard deviations: a random ranking scores that much or more with probability
about 2.5 %. When the reference of the intended degradations is at chance (Keep-All's models, the mean over the
versions, or version 0's model at version 0, which every backward-compatible method keeps serving) the intended
side compares rankers that rank nothing, and is not measurable.
"""

import numpy as np

from bcjax.data import VersionSplit

AT_CHANCE_SDS = 2.0


def _per_user(split: VersionSplit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(C_u, P_u, R_u) of every val user, ascending by user id: candidates, ranked relevant and relevant items."""
  items = np.int64(split.num_items)
  train = np.unique(split.train_user.astype(np.int64) * items + split.train_item)
  val = np.unique(split.val_user.astype(np.int64) * items + split.val_item)
  users, val_user = np.unique(val // items, return_inverse=True)
  relevant = np.bincount(val_user, minlength=len(users))
  ranked = np.bincount(val_user, weights=~np.isin(val, train), minlength=len(users))
  trained = np.bincount(train // items, minlength=split.num_users)[users]
  return (items - trained).astype(np.float64), ranked.astype(np.float64), relevant.astype(np.float64)


def version_chance(split: VersionSplit, ks) -> dict[str, tuple[float, float]]:
  """``{"recall@K": (mean, sd)}``: a random ranking's expected val Recall@K on ``split`` and the standard deviation
  of its mean over the val users (the module docstring), for every K of ``ks``."""
  c, p, r = _per_user(split)
  out = {}
  for k in sorted(set(ks)):
    n = np.minimum(float(k), c)
    share = np.divide(p, c, out=np.zeros_like(p), where=c > 0)
    mean = n * share / r
    finite = np.divide(c - n, c - 1.0, out=np.zeros_like(c), where=c > 1)
    var = n * share * (1.0 - share) * finite / r**2
    out[f"recall@{k}"] = (float(mean.mean()), float(np.sqrt(var.sum()) / len(mean)))
  return out


def intended_chance(splits: list[VersionSplit], ks) -> dict[str, dict]:
  """Per cut-off ``"recall@K"``: the chance level of the mean over versions (``mean``, ``sd``) and each version's
  (``mean_by_version``, ``sd_by_version``)."""
  by_version = [version_chance(s, ks) for s in splits]
  out = {}
  for name in by_version[0]:
    means = [v[name][0] for v in by_version]
    sds = [v[name][1] for v in by_version]
    out[name] = {
      "mean": float(np.mean(means)),
      "sd": float(np.sqrt(np.sum(np.square(sds))) / len(sds)),
      "mean_by_version": means,
      "sd_by_version": sds,
    }
  return out


def at_chance(value: float, mean: float, sd: float) -> bool:
  """Whether a Recall@K of ``value`` is at or below a random ranking's (``mean``, ``sd``): at most ``AT_CHANCE_SDS``
  standard deviations above its mean."""
  return value <= mean + AT_CHANCE_SDS * sd


def assess(
  recalls: dict[str, list[dict]], chance: dict[str, dict], metric: str, reference: str
) -> tuple[list[str], str | None]:
  """``(methods at chance, why the intended side is not measurable or None)``.

  ``recalls[m]``: method m's per-version recalls (``{metric: value}`` per version); a method is at chance when its
  mean over versions is (:func:`at_chance`). The intended side is not measurable when ``reference``'s mean is, or
  its version-0 value is at version 0's chance level."""
  level = chance[metric]
  named = [
    m for m, rs in recalls.items() if at_chance(float(np.mean([r[metric] for r in rs])), level["mean"], level["sd"])
  ]
  ref = [r[metric] for r in recalls[reference]]
  label = metric.replace("recall@", "Recall@")
  mean0, sd0 = level["mean_by_version"][0], level["sd_by_version"][0]
  if at_chance(float(np.mean(ref)), level["mean"], level["sd"]):
    why = (
      f"Keep-All's {label}, {np.mean(ref):.4f} (mean over versions), is at chance: a random ranking of the same "
      f"candidates scores {level['mean']:.4f} ± {level['sd']:.4f}"
    )
  elif at_chance(ref[0], mean0, sd0):
    why = (
      f"version 0's model scores {label} {ref[0]:.4f} at version 0, at chance: a random ranking of the same "
      f"candidates scores {mean0:.4f} ± {sd0:.4f}, and every backward-compatible method keeps serving that model"
    )
  else:
    why = None
  return named, why
