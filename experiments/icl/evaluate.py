r"""Evaluation of frozen encoders: the SVM of the reference code (spec §7.4), the per-epoch linear probe and the
InfoNCE loss on held-out new data.

The encoder runs in eval mode (BatchNorm running statistics, no dropout) on the raw inputs; an RBF ``SVC`` with
C ∈ {1e-3, …, 1e3} (``C_GRID``; the test preset searches fewer) is chosen by ``GridSearchCV`` (5-fold, stratified,
unshuffled) inside every fold of an outer ``StratifiedKFold(5, shuffle=True)`` and the mean held-out accuracy is
reported. Unlike the reference the outer split is seeded, so the same seed gives the same accuracy.

The **held-out loss** (:func:`heldout_loss`) needs no labels: NCE-I (eq. 1, in-batch negatives, the training
temperature τ) of the eval-mode encoder on views of samples that neither pre-training nor any method trains on
(:func:`run_splits`), drawn once per run (:func:`make_heldout`: the training views, the same batches for every
encoder), so two encoders' losses differ by the encoders alone. With batches :math:`b` of :math:`n_b` real
samples it is the mean over every held-out anchor,

.. math::
  L_H = \frac{1}{\sum_b n_b} \sum_b n_b\, \mathrm{NCE\text{-}I}(z^a_b, z^+_b; \tau),

lower is better. The SVM and the probe score how well the classes separate, which can stay where it was while
training moves the encoder (the ICL guide shows it on REDDIT-BINARY); the held-out loss scores what the training
objective asks for, on data it never saw.
"""

from typing import NamedTuple

import jax
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import LabelEncoder, StandardScaler
from sklearn.svm import SVC

from bcjax.contrastive import info_nce
from bcjax.data import growth_split
from experiments.icl.train import Encoder, embed_fn

C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3)


def embed(encoder: Encoder, data, index: np.ndarray) -> np.ndarray:
  """Eval-mode embeddings [len(index), D] of the raw samples ``index`` (padded rows dropped)."""
  fn = embed_fn(encoder.eval_def)
  parts = [np.asarray(fn(encoder.params, encoder.stats, batch))[:n] for batch, n in data.raw_batches(index)]
  return np.concatenate(parts).astype(np.float64)


def svm_accuracy(
  x: np.ndarray, y: np.ndarray, folds: int = 5, seed: int = 0, c_grid: tuple[float, ...] = C_GRID
) -> float:
  """Mean outer-fold accuracy of the SVC grid-searched over ``c_grid`` on embeddings ``x`` [N, D] with labels
  ``y`` [N].

  Raises:
    ValueError: non-finite embeddings, a class with fewer than ``folds`` samples (stratification impossible), or an
      empty or non-positive ``c_grid``.
  """
  x, y = np.asarray(x, np.float64), LabelEncoder().fit_transform(np.asarray(y))
  if x.ndim != 2 or len(x) != len(y):
    raise ValueError(f"svm_accuracy: x must be [N, D] with N = len(y) = {len(y)}, got {x.shape}")
  if not np.all(np.isfinite(x)):
    raise ValueError("svm_accuracy: the embeddings contain NaN or inf; the encoder diverged")
  if not c_grid or not all(np.isfinite(c) and c > 0 for c in c_grid):
    raise ValueError(f"svm_accuracy: c_grid must hold positive finite values, got {tuple(c_grid)}")
  counts = np.bincount(y)
  if len(counts) < 2 or counts.min() < folds:
    raise ValueError(f"svm_accuracy: every class needs at least `folds`={folds} samples, got counts {counts.tolist()}")
  outer = StratifiedKFold(folds, shuffle=True, random_state=seed)
  scores = []
  for train, test in outer.split(x, y):
    inner_folds = min(folds, int(np.bincount(y[train]).min()))
    search = GridSearchCV(SVC(), {"C": list(c_grid)}, cv=inner_folds, scoring="accuracy")
    search.fit(x[train], y[train])
    scores.append(search.score(x[test], y[test]))
  return float(np.mean(scores))


def check_splits(labels: np.ndarray, splits: dict, folds: int) -> None:
  """Before any training: every split (``{description: (old, new)}``) must let :func:`svm_accuracy` stratify all,
  old and new data, i.e. give at least two classes and ``folds`` samples of each. Raises ValueError naming the
  split, the subset and its class counts."""
  labels = np.asarray(labels)
  classes = np.unique(labels)
  for what, (old, new) in splits.items():
    for subset, index in (("all", np.concatenate([old, new])), ("old", old), ("new", new)):
      counts = np.array([np.sum(labels[index] == c) for c in classes])
      if (counts > 0).sum() < 2 or counts[counts > 0].min() < folds:
        raise ValueError(
          f"{what}: the {subset} data has class counts {counts.tolist()}; the SVM evaluation needs at "
          f"least two classes, and every class present needs >= {folds} samples (a smaller --alpha, more data, "
          f"or fewer folds)"
        )


def accuracies(
  encoder: Encoder, data, old: np.ndarray, new: np.ndarray, folds: int, seed: int, c_grid: tuple[float, ...] = C_GRID
) -> dict:
  """SVM accuracy (in %) on all of X' = X ∪ ΔX, on the old data X and on the new data ΔX."""
  z_old, z_new = embed(encoder, data, old), embed(encoder, data, new)
  y_old, y_new = data.labels[old], data.labels[new]
  score = lambda x, y: 100 * svm_accuracy(x, y, folds, seed, c_grid)
  return {
    "all": score(np.concatenate([z_old, z_new]), np.concatenate([y_old, y_new])),
    "old": score(z_old, y_old),
    "new": score(z_new, y_new),
  }


class Probe(NamedTuple):
  """A fixed sample of X' scored after every epoch: ``index`` the samples, ``fit`` [len(index)] True for the half
  whose class centroids classify the other half, ``labels`` their labels, ``majority`` the most common class's share
  (%) of the scored half: the accuracy of predicting that class everywhere."""

  index: np.ndarray
  fit: np.ndarray
  labels: np.ndarray
  majority: float


def make_probe(labels: np.ndarray, old: np.ndarray, new: np.ndarray, size: int, seed: int) -> Probe:
  """Up to ``size`` samples of X' = X ∪ ΔX, each class split in halves (centroid fit / scored), drawn once per run so
  every method is scored on the same samples."""
  rng = np.random.default_rng([seed, 2])
  everything = np.concatenate([old, new])
  index = np.sort(rng.choice(everything, min(size, len(everything)), replace=False))
  y = np.asarray(labels)[index]
  fit = np.zeros(len(index), bool)
  for c in np.unique(y):
    members = rng.permutation(np.flatnonzero(y == c))
    fit[members[: len(members) // 2]] = True
  return Probe(index, fit, y, majority_share(y[~fit]))


def probe_accuracy(z: np.ndarray, probe: Probe) -> float:
  """Accuracy (%) on the scored half of a logistic regression (L2, C = 1, on standardised embeddings) fitted on the
  fit half: a linear probe cheap enough to follow every epoch (milliseconds at the probe's few hundred samples),
  deterministic, and strong enough to beat the majority class where the SVM does."""
  z = np.asarray(z, np.float64)
  if not np.all(np.isfinite(z)):
    return 0.0  # a diverged encoder reaches no target
  probe_model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
  probe_model.fit(z[probe.fit], probe.labels[probe.fit])
  return 100.0 * float(probe_model.score(z[~probe.fit], probe.labels[~probe.fit]))


def majority_share(labels: np.ndarray) -> float:
  """The most common class's share (%) of ``labels``: the accuracy of predicting that class everywhere."""
  return 100.0 * float(np.max(np.unique(labels, return_counts=True)[1])) / len(labels)


def majority_shares(labels: np.ndarray, old: np.ndarray, new: np.ndarray) -> dict:
  """:func:`majority_share` of all, old and new data: an SVM that predicts one class scores this."""
  labels = np.asarray(labels)
  return {s: majority_share(labels[i]) for s, i in (("all", np.concatenate([old, new])), ("old", old), ("new", new))}


def heldout_count(num: int, share: float) -> int:
  """How many of ``num`` samples :func:`run_splits` holds out at ``share`` (0 holds none; otherwise at least 2, the
  fewest an in-batch InfoNCE needs)."""
  return 0 if share <= 0 else max(2, round(share * num))


def run_splits(num: int, alpha: float, heldout: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(old X, new ΔX, held-out H) of one run, each sorted: ``heldout_count(num, heldout)`` samples drawn first
  (``default_rng([seed, 3])``) are held out of the arriving data, and the rest split by growth ratio α as
  :func:`bcjax.data.growth_split` does with ``default_rng(seed)``, so X and ΔX keep the ratio α. H is new data no
  encoder trains on: the samples are i.i.d., so the held-out part of the arrival is distributed as ΔX is. With
  ``heldout`` 0 the split is ``growth_split``'s alone (H empty)."""
  count = heldout_count(num, heldout)
  held = np.sort(np.random.default_rng([seed, 3]).choice(num, count, replace=False))
  rest = np.setdiff1d(np.arange(num), held)
  old, new = growth_split(len(rest), alpha, np.random.default_rng(seed))
  return rest[old], rest[new], held


class HeldOut(NamedTuple):
  """Fixed views of the held-out samples: ``batches`` the padded anchor/positive views (each ``Views``-like, with
  ``anchor``, ``positive`` and ``mask``), drawn once; ``index`` the samples; ``temperature`` τ."""

  index: np.ndarray
  batches: list
  temperature: float


def make_heldout(data, index: np.ndarray, batch_size: int, temperature: float, seed: int) -> HeldOut:
  """The training views (``data.views``) of the held-out samples ``index``, in ceil(len / batch_size) batches of
  nearly equal size (none much smaller than the rest: the in-batch negatives stay near the training's B − 1), drawn
  once with ``default_rng([seed, 4])``."""
  rng = np.random.default_rng([seed, 4])
  parts = np.array_split(np.asarray(index), -(-len(index) // batch_size)) if len(index) else []
  return HeldOut(np.asarray(index), [data.views(part, batch_size, rng)[0] for part in parts], temperature)


@jax.jit
def _batch_nce(anchor, positive, mask, temperature):
  return info_nce(anchor, positive, where=mask, temperature=temperature)


def heldout_infonce(batches, temperature: float) -> float:
  """:math:`L_H` (see the module docstring) of embedded batches ``(z_anchor [B, D], z_positive [B, D], mask [B])``:
  each batch's NCE-I over its real rows, weighted by their count."""
  total = count = 0.0
  for z_a, z_p, mask in batches:
    mask = np.asarray(mask, bool)
    z_a, z_p = (np.where(mask[:, None], np.asarray(z, np.float32), np.float32(0.0)) for z in (z_a, z_p))  # padding
    n = float(np.sum(mask))
    total += n * float(_batch_nce(z_a, z_p, mask, temperature))
    count += n
  return total / count


def heldout_loss(encoder: Encoder, heldout: HeldOut) -> float:
  """The held-out NCE-I :math:`L_H` of the eval-mode ``encoder`` on ``heldout``'s fixed views (inf when its
  embeddings are not finite: a diverged encoder)."""
  fn = embed_fn(encoder.eval_def)
  embedded = []
  for v in heldout.batches:
    z_a, z_p = (np.asarray(fn(encoder.params, encoder.stats, x)) for x in (v.anchor, v.positive))
    mask = np.asarray(v.mask)
    if not (np.all(np.isfinite(z_a[mask])) and np.all(np.isfinite(z_p[mask]))):
      return float("inf")
    embedded.append((z_a, z_p, mask))
  return heldout_infonce(embedded, heldout.temperature)
