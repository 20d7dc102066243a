"""SVM evaluation of frozen embeddings as in the reference code (spec §7.4).

The encoder runs in eval mode (BatchNorm running statistics, no dropout) on the raw inputs; an RBF ``SVC`` with
C ∈ {1e-3, …, 1e3} (``C_GRID``; the test preset searches fewer) is chosen by ``GridSearchCV`` (5-fold, stratified,
unshuffled) inside every fold of an outer ``StratifiedKFold(5, shuffle=True)`` and the mean held-out accuracy is
reported. Unlike the reference the outer split is seeded, so the same seed gives the same accuracy.
"""

from typing import NamedTuple

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import LabelEncoder, StandardScaler
from sklearn.svm import SVC

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
          f"least two classes with >= {folds} samples each (a smaller --alpha, more data, or fewer "
          f"folds)"
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
