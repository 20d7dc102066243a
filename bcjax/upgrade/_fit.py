r"""Fitting a backward map between two embedding models from paired rows, with every choice made on held-out pairs.

Given the same items embedded by the old model (:math:`z_{k-1}`, [n, D_(k-1)]) and the new one (:math:`z_k`,
[n, D_k]), each kind fits :math:`B(z) = W z + b` or a residual MLP; every kind handles a shift between the spaces
(centring, and a bias stored with the map):

* ``linear``: :math:`W = \bar C (\bar G + \gamma I)^{-1}` on centred statistics (:mod:`bcjax.upgrade._moments`),
  :math:`b = \mu_{k-1} - W\mu_k`, the ridge :math:`\gamma = \alpha\,\mathrm{tr}\,\bar G / D_k` chosen by K-fold
  cross-validation over the training pairs (by out-of-fold retrieval: how highly each held-out prediction ranks its
  own old vector among a sample of old vectors; the squared error breaks ties) (:math:`\alpha = 0` is least squares,
  minimum-norm when
  :math:`\bar G` is singular).
* ``orthogonal``: the centred isometry :math:`Q(z - \mu_k) + \mu_{k-1}`, Q from (projection) Procrustes on the
  centred statistics (:func:`bcjax.alignment.orthogonal_transform` with ``bias``); nothing to choose.
* ``affine``: ridge regression shrunk towards a scaled isometry instead of towards zero (Q the polar factor
  :math:`U V^\top` of :math:`\bar C = U \Sigma V^\top`),
  :math:`W = (\bar C + \gamma s Q)(\bar G + \gamma I)^{-1}` with :math:`s = \langle Q, \bar C\rangle /
  \mathrm{tr}(Q\bar G Q^\top)`, or, for equal widths, towards the identity (two models whose spaces already
  roughly agree, e.g. sharing token embeddings); then optionally reduced to rank r (the fitted values' top-r
  principal subspace, Izenman 1975); the target, :math:`\alpha` and r are chosen by cross-validation. With fewer
  pairs than dimensions this is what keeps
  the map close to a rotation where the data say little (the polar factor is taken on the directions the pairs
  span, so the directions they do not span map to zero, as with ridge).
* ``mlp``: :func:`bcjax.alignment.mlp_transform` warm-started from the cross-validated ``affine`` map (its linear
  branch is that map, its MLP branch starts at zero), trained with Adam on minibatches streamed from the pairs,
  stopped early on the validation pairs' error; the hidden width is chosen on them too.
* ``auto``: fits every kind on the training pairs and keeps the one whose mapped validation rows rank their own old
  vector highest among the validation and (up to 10,000) training old vectors (the mean own-vector rank score: a
  top-k hit rate saturates at 1 for every decent map); a simpler kind within one paired standard error of the best
  is preferred, and the reason is returned. With fewer than 50 validation pairs it ranks the closed-form kinds
  by their cross-validated error instead (and says so).

Hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`): with ``hubness="auto"`` (cosine retrieval) the chosen
kind is judged on the training pairs served as the final map will serve an index, so it has power from a couple of
hundred pairs on (validation pairs alone number 20 at 200 pairs): the folds split in two halves, the kind (the MLP by
its affine branch) fitted on each half with the chosen settings, its images of that half's rows the correction's
reference (in sample, as the final map's reference is), the other half's rows (of the cross-validation's sample, up
to 2,000) mapped as queries ranking their own old rows among that half's old rows with and without the correction
(no old row has its twin in the reference, as in an index). It is kept unless it changes no rank or lowers the mean
own-vector rank score by more than one paired standard error: where the pairs cannot tell, CSLS stays, since a
regression's image of a space has hubs. The kept correction's reference is the final map's image of up to
:data:`HUBNESS_REFERENCE_ROWS` training and validation pairs.

Closed-form kinds stream their rows into float64 sums, so pairs larger than memory fit exactly as in memory; the
final closed-form map is refitted on the training and validation pairs together.
"""

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bcjax._unit import unit_rows
from bcjax.alignment._transforms import affine_transform, mlp_transform, orthogonal_transform, procrustes
from bcjax.upgrade import _files, _hubness, _moments, _retrieval, _scale, _spaces
from bcjax.upgrade._map import UpgradeMap

KINDS = ("orthogonal", "linear", "affine", "mlp")
MIN_VALIDATION_ROWS = 50  # from the fewest parameters to the most (auto's preference)
UPGRADE_KINDS = ("auto", *KINDS)
"""The ``kind`` values of :func:`fit_upgrade` and ``bcjax fit --kind``: ``auto`` and each closed-form or MLP kind."""
ALPHAS = (0.0, 1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
RANK_FRACTIONS = (1 / 2, 1 / 4, 1 / 8)
HUBNESS_MODES = ("auto", "on", "off")
HUBNESS_REFERENCE_ROWS = 5000  # mapped rows stored with a map for its hubness correction (7.5 MiB at 384-d)


class PairSplit(NamedTuple):
  """Sorted row ids of the pairs.

  ``train`` (fitting), ``val`` (choices: kind, MLP width and epochs) and ``test`` (held out for the report, never seen
  by the fit).
  """

  train: np.ndarray
  val: np.ndarray
  test: np.ndarray


def split_pairs(n: int, *, test_fraction: float = 0.2, val_fraction: float = 0.1, seed: int = 0) -> PairSplit:
  """A random split of n pairs into train, validation and test rows (each sorted).

  Args:
    n: the number of pairs.
    test_fraction: the share held out for the report.
    val_fraction: the share for the choices.
    seed: seeds the permutation.

  Returns:
    A :class:`PairSplit` of sorted row ids.

  Raises:
    ValueError: when a fraction is outside [0, 1), they sum to 1 or more, or fewer than 2 training rows remain.
  """
  for name, value in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
    if not 0.0 <= value < 1.0:
      raise ValueError(f"split_pairs: `{name}` must lie in [0, 1), got {value!r}")
  if test_fraction + val_fraction >= 1.0:
    raise ValueError(
      f"split_pairs: `test_fraction` + `val_fraction` = {test_fraction + val_fraction:g} leaves no training pairs"
    )
  order = np.random.default_rng(seed).permutation(n)
  n_test, n_val = int(round(test_fraction * n)), int(round(val_fraction * n))
  if n - n_test - n_val < 2:
    raise ValueError(
      f"split_pairs: {n} pairs leave {n - n_test - n_val} for training after {n_test} test and "
      f"{n_val} validation pairs; at least 2 are needed"
    )
  test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
  return PairSplit(np.sort(train), np.sort(val), np.sort(test))


class UpgradeFit(NamedTuple):
  """Result of :func:`fit_upgrade`.

  The chosen ``map``; ``candidates``, one dict per kind fitted (its choices, its cross-validated or validation mean
  squared error, its validation own-vector hit rate); ``reason``, why this kind (and why the hubness correction is kept
  or left out); ``hubness``, that choice's record (mode, k, and the validation rank scores without and with it where
  they were measured).
  """

  map: UpgradeMap
  candidates: list
  reason: str
  hubness: dict | None = None


# Closed forms from moments -----------------------------------------------------------------------------------------


def _spectrum(gram_c: np.ndarray, count: int):
  lam, vecs = np.linalg.eigh(gram_c)
  lam = np.maximum(lam, 0.0)
  # Least squares keeps the directions the Gram matrix resolves. Its computed eigenvalues carry an absolute rounding
  # error of about eps * max(n, d) * lam_max, so an eigenvalue below that is noise, not a direction the pairs span:
  # inverting it would add a large, arbitrary component (the minimum-norm solution has none). The cutoff is lstsq's
  # relative one applied to the eigenvalues themselves, not squared as it would be on singular values of the data.
  cutoff = np.finfo(np.float64).eps * max(count, gram_c.shape[0]) * (lam.max() if lam.size else 0.0)
  return lam, vecs, cutoff


# The projection Procrustes iteration (a narrower old model) stops when a step lowers the loss by less than this share,
# or after this many steps: each step costs an SVD of a D_new x D_new matrix (0.1 s at 512, 0.5 s at 1024 on two
# cores), and the loss it still gains there no longer changes what the map retrieves.
PROCRUSTES_TOLERANCE = 1e-8
PROCRUSTES_ITERATIONS = 100


def _procrustes(gram_c, cross_c, energy_c) -> np.ndarray:
  with jax.enable_x64(True):
    return np.asarray(
      procrustes(
        jnp.asarray(gram_c), jnp.asarray(cross_c), jnp.asarray(energy_c), PROCRUSTES_TOLERANCE, PROCRUSTES_ITERATIONS
      )
    )


def _shrunk_weight(m: _moments.PairMoments, alpha: float, prior: np.ndarray | None, spectrum=None) -> np.ndarray:
  gram_c, cross_c, _ = m.centred()
  lam, vecs, cutoff = _spectrum(gram_c, m.count) if spectrum is None else spectrum
  gamma = alpha * max(float(np.trace(gram_c)), 0.0) / gram_c.shape[0]
  keep = lam > cutoff if gamma == 0 else np.ones_like(lam, bool)
  inv = np.where(keep, 1.0 / np.where(keep, lam + gamma, 1.0), 0.0)
  target = cross_c if prior is None or gamma == 0 else cross_c + gamma * prior
  return ((target @ vecs) * inv) @ vecs.T


def _reduce_rank(w: np.ndarray, m: _moments.PairMoments, rank: int | None) -> np.ndarray:
  if rank is None or rank >= min(w.shape):
    return w
  gram_c = m.centred()[0]
  _, vecs = np.linalg.eigh(w @ gram_c @ w.T)  # the fitted values' covariance, ascending
  u = vecs[:, -rank:]
  return u @ (u.T @ w)


def _scaled_isometry(m: _moments.PairMoments) -> np.ndarray:
  r"""Affine's shrinkage target s·Q.

  Q the polar factor of the centred cross-covariance on the directions the pairs span (:math:`U_r V_r^\top` over its
  non-zero singular values). Where the pairs span fewer directions than the dimensions, the full isometry's action on
  the rest is arbitrary (any rotation there fits equally well) and would change with the last bit of the sums; the
  partial isometry maps those directions to zero, as ridge does.
  """
  gram_c, cross_c, _ = m.centred()
  u, sv, vt = np.linalg.svd(cross_c, full_matrices=False)
  r = int(np.sum(sv > 1e-10 * (sv.max() if sv.size else 0.0)))
  q = u[:, :r] @ vt[:r]
  denominator = float(np.sum((q @ gram_c) * q))
  return q * (float(np.sum(q * cross_c)) / denominator if denominator > 0 else 1.0)


SHRINKAGE_TARGETS = ("isometry", "identity")


def _prior(m: _moments.PairMoments, target: str) -> np.ndarray:
  if target == "isometry":
    return _scaled_isometry(m)
  if target == "identity":
    if m.cross.shape[0] != m.cross.shape[1]:
      raise ValueError(f"closed_form: the identity target needs equal widths, got {m.cross.shape}")
    return np.eye(m.cross.shape[0])
  raise ValueError(f"closed_form: `target` must be one of {list(SHRINKAGE_TARGETS)}, got {target!r}")


def closed_form(
  kind: str, m: _moments.PairMoments, *, alpha: float = 0.0, rank: int | None = None, target: str = "isometry"
) -> tuple[np.ndarray, np.ndarray]:
  """(W, b) in float64 of a closed-form ``kind`` from the pairs' moments.

  (W, b) in float64 of a closed-form ``kind`` (``linear``, ``orthogonal``, ``affine``) from the pairs' moments with the
  given choices (:mod:`bcjax.upgrade._fit`); ``target`` is affine's shrinkage target: ``isometry`` (the scaled polar
  factor) or ``identity`` (equal widths only: two models whose spaces already roughly agree, e.g. sharing their token
  embeddings).

  Args:
    kind: ``linear``, ``orthogonal`` or ``affine``.
    m: the pairs' :class:`PairMoments`.
    alpha: the ridge (linear) or shrinkage (affine) strength.
    rank: affine's rank (None: full rank).
    target: affine's shrinkage target: ``isometry`` or ``identity``.

  Returns:
    ``(W [D_(k-1), D_k], b [D_(k-1)])`` in float64.

  Raises:
    ValueError: an unknown kind or target, or choices outside their range (``alpha`` a finite number >= 0, ``rank``
      None or an integer >= 1).
  """
  if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not (math.isfinite(alpha) and alpha >= 0):
    raise ValueError(f"closed_form: `alpha` must be a finite number >= 0, got {alpha!r}")
  if rank is not None and (isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1):
    raise ValueError(f"closed_form: `rank` must be None (full rank) or an integer >= 1, got {rank!r}")
  if kind == "orthogonal":
    w = _procrustes(*m.centred())
  elif kind == "linear":
    w = _shrunk_weight(m, alpha, None)
  elif kind == "affine":
    w = _reduce_rank(_shrunk_weight(m, alpha, _prior(m, target)), m, rank)
  else:
    raise ValueError(f"closed_form: `kind` must be 'linear', 'orthogonal' or 'affine', got {kind!r}")
  return w, m.mean_prev - w @ m.mean_new


def moments_mse(w: np.ndarray, b: np.ndarray, m: _moments.PairMoments) -> float:
  r"""Mean over m's pairs of :math:`\lVert W z_k + b - z_{k-1} \rVert^2`, from the moments alone."""
  total = (
    np.sum((w @ m.gram) * w)
    + 2.0 * b @ (w @ m.sum_new)
    + m.count * b @ b
    - 2.0 * np.sum(w * m.cross)
    - 2.0 * b @ m.sum_prev
    + m.energy
  )
  return float(total / max(m.count, 1))


def _minus(a: _moments.PairMoments, b: _moments.PairMoments) -> _moments.PairMoments:
  return _moments.PairMoments(*(x - y for x, y in zip(a, b, strict=True)))  # type: ignore[operator]  # fields: int and arrays


def _plus(a: _moments.PairMoments, b: _moments.PairMoments) -> _moments.PairMoments:
  return _moments.PairMoments(*(x + y for x, y in zip(a, b, strict=True)))  # type: ignore[operator]  # fields: int and arrays


class _Fold(NamedTuple):
  """One cross-validation fold.

  The moments it is scored on, the moments fitted on (the other folds), the fitted side's eigendecomposition and
  shrinkage targets (computed once for every choice tried), and which rows of the retrieval sample it holds out.
  """

  held_out: _moments.PairMoments
  fitted: _moments.PairMoments
  spectrum: tuple
  priors: dict
  sample: np.ndarray  # positions in the CV retrieval sample of this fold's held-out rows


class _RetrievalSample(NamedTuple):
  """Training rows held in memory to score choices by retrieval: their new and old embeddings and their folds."""

  new: np.ndarray
  old: np.ndarray
  fold: np.ndarray


# Training rows whose out-of-fold predictions score each choice by retrieval (their own old vector's rank among
# the sample's old vectors); enough to rank choices, small enough that every choice is scored in milliseconds.
CV_SAMPLE_ROWS = 2000


def _folds(fold_moments, total, kind, sample: _RetrievalSample) -> list[_Fold]:
  out = []
  for f, fold in enumerate(fold_moments):
    fitted = _minus(total, fold)
    spectrum = _spectrum(fitted.centred()[0], fitted.count)
    priors = {t: _prior(fitted, t) for t in _targets(total)} if kind == "affine" else {}
    out.append(_Fold(fold, fitted, spectrum, priors, np.flatnonzero(sample.fold == f)))
  return out


def _targets(total: _moments.PairMoments) -> tuple[str, ...]:
  return SHRINKAGE_TARGETS if total.cross.shape[0] == total.cross.shape[1] else ("isometry",)


def _cv_score(
  kind,
  folds: list[_Fold],
  sample: _RetrievalSample,
  metric: str,
  alpha: float = 0.0,
  rank: int | None = None,
  target: str = "isometry",
) -> tuple[float, float]:
  """(retrieval score, mean squared error) of a choice, cross-validated.

  Each fold's map, fitted on the other folds, predicts the fold's held-out rows. The error is over all held-out pairs
  (from the moments); the score is the mean, over the sample's rows, of the share of the sample's other old vectors that
  their out-of-fold prediction ranks below their own old vector (1 = always first). Ranking, not the squared error, is
  what an index sees: a ridge that shrinks every prediction towards the old mean lowers the error but ranks worse.
  """
  errors, predicted = [], np.zeros_like(sample.old)
  for f in folds:
    if kind == "orthogonal":
      w = _procrustes(*f.fitted.centred())
    else:
      w = _reduce_rank(_shrunk_weight(f.fitted, alpha, f.priors.get(target), f.spectrum), f.fitted, rank)
    b = f.fitted.mean_prev - w @ f.fitted.mean_new
    errors.append(moments_mse(w, b, f.held_out))
    predicted[f.sample] = sample.new[f.sample] @ w.T + b
  error = float(np.average(errors, weights=[f.held_out.count for f in folds]))
  return _retrieval.own_vector_rank_score(predicted, sample.old, metric=metric), error


def _choose_closed_form(
  kind: str, fold_moments, total, d_min: int, sample: _RetrievalSample, metric: str, *, score_orthogonal: bool = False
) -> tuple[dict, float, float]:
  """The choices of a closed-form kind with the best cross-validated retrieval score.

  The squared error breaks ties. Returns the choices with that score and error.
  """
  folds = _folds(fold_moments, total, kind, sample)
  if kind == "orthogonal":  # nothing to choose: scored only when auto must rank the kinds by cross-validation
    return ({}, *_cv_score("orthogonal", folds, sample, metric)) if score_orthogonal else ({}, math.nan, math.nan)
  targets = _targets(total) if kind == "affine" else ("isometry",)
  scores = {(t, alpha): _cv_score(kind, folds, sample, metric, alpha, target=t) for t in targets for alpha in ALPHAS}
  target, alpha = max(scores, key=lambda c: (scores[c][0], -scores[c][1]))
  choices: dict[str, Any] = {"alpha": alpha}
  best = scores[(target, alpha)]
  if kind == "affine":
    choices["target"] = target
  # A reduced rank is tried only where the folds can tell ranks apart (at least two pairs per dimension): with few
  # pairs the folds' fitted values span fewer directions than the final fit's.
  if kind == "affine" and total.count >= 2 * total.gram.shape[0]:
    for rank in sorted({max(1, int(d_min * f)) for f in RANK_FRACTIONS}, reverse=True):
      score = _cv_score(kind, folds, sample, metric, alpha, rank, target)
      if score[0] > best[0]:
        choices, best = {"alpha": alpha, "target": target, "rank": rank}, score
  return (choices, *best)


def _as_map(kind: str, w: np.ndarray, b: np.ndarray, normalize: bool, choices: dict) -> UpgradeMap:
  if kind == "orthogonal":
    return UpgradeMap(orthogonal_transform(bias=True), {"a": w, "b": b}, normalize, kind, choices)
  rank = choices.get("rank")
  if rank is not None and rank < min(w.shape):
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    params = {"u": u[:, :rank] * s[:rank], "v": vt[:rank].T, "b": b}
    return UpgradeMap(affine_transform(rank=rank), params, normalize, kind, choices)
  return UpgradeMap(affine_transform(), {"w": w, "b": b}, normalize, kind, choices)


# The MLP -----------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _mlp_steps(hidden: int, learning_rate: float):
  transform, optimizer = mlp_transform(hidden=hidden), optax.adam(learning_rate)

  def loss(params, zn, zp, weight):
    residual = transform.apply(params, zn) - zp
    return jnp.sum(weight * jnp.sum(residual * residual, axis=1)) / jnp.maximum(jnp.sum(weight), 1.0)

  @functools.partial(jax.jit, donate_argnums=(0, 1))
  def step(params, opt_state, zn, zp, weight):
    value, grad = jax.value_and_grad(loss)(params, zn, zp, weight)
    updates, opt_state = optimizer.update(grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value

  return transform, optimizer, step, jax.jit(loss)


def _padded(zn: np.ndarray, zp: np.ndarray, size: int):
  """A batch padded to ``size`` rows with weight 0, so every step has one shape (one compile)."""
  pad = size - zn.shape[0]
  weight = np.concatenate([np.ones(zn.shape[0], np.float32), np.zeros(pad, np.float32)])
  return (np.pad(zn, ((0, pad), (0, 0))), np.pad(zp, ((0, pad), (0, 0))), weight)


def _read_pairs(z_new, z_prev, rows, normalize) -> tuple[np.ndarray, np.ndarray]:
  zn, zp = _files.read_rows(z_new, rows, np.float32), _files.read_rows(z_prev, rows, np.float32)
  return (unit_rows(zn), unit_rows(zp)) if normalize else (zn, zp)


def train_mlp(
  z_new,
  z_prev,
  train_rows: np.ndarray,
  val_pairs: tuple[np.ndarray, np.ndarray],
  init: tuple,
  *,
  hidden: int,
  key: jax.Array,
  normalize: bool,
  max_epochs: int = 40,
  patience: int = 4,
  batch_size: int = 256,
  learning_rate: float = 1e-3,
) -> tuple[dict, dict]:
  """Trains the residual MLP from the affine map ``init`` = (W, b).

  Trains the residual MLP from the affine map ``init`` = (W, b) on minibatches of ``train_rows`` read from the
  (memory-mapped) pairs, keeping the parameters of the epoch with the lowest validation error; stops after ``patience``
  epochs without improvement. Returns (params in float64, {"hidden", "epochs", "val_mse"}).
  """
  transform, optimizer, step, loss = _mlp_steps(hidden, learning_rate)
  w0, b0 = init
  params = transform.init(key, w0.shape[0], w0.shape[1], jnp.float32)
  params = dict(params, s=jnp.asarray(w0, jnp.float32), b2=jnp.asarray(b0, jnp.float32))
  opt_state = optimizer.init(params)
  val_new, val_prev = (jnp.asarray(a, jnp.float32) for a in val_pairs)
  val_weight = jnp.ones(val_new.shape[0], jnp.float32)
  best = (float(loss(params, val_new, val_prev, val_weight)), jax.tree.map(np.asarray, params), 0)
  rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1)))
  # At least ~32 steps an epoch, so a small training set still takes steps enough between validations.
  size = int(min(batch_size, max(32, len(train_rows) // 32), len(train_rows)))
  for epoch in range(1, max_epochs + 1):
    order = rng.permutation(train_rows)
    for start in range(0, len(order), size):
      rows = np.sort(order[start : start + size])
      zn, zp, weight = _padded(*_read_pairs(z_new, z_prev, rows, normalize), size)
      params, opt_state, _ = step(params, opt_state, zn, zp, weight)
    error = float(loss(params, val_new, val_prev, val_weight))
    if error < best[0]:
      best = (error, jax.tree.map(np.asarray, params), epoch)
    elif epoch - best[2] >= patience:
      break
  return (
    {n: a.astype(np.float64) for n, a in best[1].items()},
    {"hidden": hidden, "epochs": best[2], "val_mse": best[0]},
  )


# The workflow ------------------------------------------------------------------------------------------------------


def _check_pairs(z_new, z_prev):
  if z_new.ndim != 2 or z_prev.ndim != 2 or z_new.shape[0] != z_prev.shape[0]:
    raise ValueError(
      f"fit_upgrade: `z_new` has shape {tuple(z_new.shape)} and `z_prev` has shape "
      f"{tuple(z_prev.shape)}; both must be matrices with the same rows (row i of each is one item)"
    )


def fit_upgrade(
  z_new,
  z_prev,
  *,
  kind: str = "auto",
  split: PairSplit | None = None,
  normalize: bool = False,
  folds: int = 5,
  mlp_hidden: Sequence[int] = (128, 512),
  mlp_epochs: int = 40,
  k: int = 10,
  metric: str = "cosine",
  seed: int = 0,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
  progress: Callable[[str], None] | None = None,
  hubness: str = "auto",
  hubness_k: int = _hubness.DEFAULT_K,
  old_model: str = "",
  new_model: str = "",
) -> UpgradeFit:
  r"""Fits a backward map from new-model embeddings to old-model ones of the same items.

  Fits a backward map from new-model embeddings ``z_new`` [n, D_k] to old-model ones ``z_prev`` [n, D_(k-1)] of the same
  items (:mod:`bcjax.upgrade._fit` for the kinds and how each choice is made).

  Args:
    z_new: the new model's embeddings (an array or a read-only memory map, e.g. :func:`open_embeddings`).
    z_prev: the old model's embeddings of the same rows.
    kind: ``auto``, ``linear``, ``orthogonal``, ``affine`` or ``mlp``.
    split: which rows fit, validate and are held out (default :func:`split_pairs` with ``seed``); test rows are
      never read here.
    normalize: fit on L2-normalised rows and normalise the map's output (models compared by cosine).
    folds: cross-validation folds over the training rows for the closed-form choices.
    mlp_hidden: the MLP widths tried; the one with the lowest validation error is kept.
    mlp_epochs: the MLP's epoch limit (it stops earlier when the validation error stops falling).
    k: the cut-off of ``auto``'s own-vector hit rate.
    metric: how ``auto`` scores retrieval: ``cosine``, ``dot`` or ``l2``.
    seed: seeds the default split, the folds and the MLP.
    chunk_rows: rows read at a time when streaming the pairs.
    progress: called with a line of text at each stage.
    hubness: the hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`): ``auto`` (kept when it helps on the
      validation pairs), ``on`` or ``off``; only for cosine retrieval.
    hubness_k: neighbours averaged in the correction's per-document bias.
    old_model: the old model's name, stamped in the map with its fingerprint (:mod:`bcjax.upgrade._spaces`) so that
      the map is never applied the wrong way round.
    new_model: the new model's name, stamped likewise.

  Returns:
    :class:`UpgradeFit`.

  Raises:
    ValueError: naming the argument, for an unknown kind, metric or hubness mode, pairs of different rows, or a
      split without the training or validation pairs the kind needs.
  """
  fn = "fit_upgrade"
  if kind not in UPGRADE_KINDS:
    raise ValueError(f"{fn}: `kind` must be one of {list(UPGRADE_KINDS)}, got {kind!r}")
  _check_pairs(z_new, z_prev)
  if metric not in _retrieval.METRICS:
    raise ValueError(f"{fn}: `metric` must be one of {list(_retrieval.METRICS)}, got {metric!r}")
  if hubness not in HUBNESS_MODES:
    raise ValueError(f"{fn}: `hubness` must be one of {list(HUBNESS_MODES)}, got {hubness!r}")
  if hubness == "on" and metric != "cosine":
    raise ValueError(f"{fn}: `hubness`='on' corrects cosine scores; `metric` is {metric!r}")
  if hubness_k < 1:
    raise ValueError(f"{fn}: `hubness_k` must be >= 1, got {hubness_k}")
  split = split_pairs(z_new.shape[0], seed=seed) if split is None else split
  if len(split.train) < 2:
    raise ValueError(f"{fn}: the split has {len(split.train)} training pairs; at least 2 are needed")
  if (kind in ("auto", "mlp")) and len(split.val) == 0:
    raise ValueError(f"{fn}: `kind`={kind!r} needs validation pairs (the split has none)")
  say = progress or (lambda _: None)
  kinds = KINDS if kind == "auto" else (kind,)
  d_prev, d_new = z_prev.shape[1], z_new.shape[1]

  folds = max(2, min(int(folds), len(split.train)))
  fold_of = np.random.default_rng(seed).permutation(len(split.train)) % folds
  say(f"streaming {len(split.train)} training pairs into {folds} folds' moments")
  fold_moments = [
    _moments.pair_moments(z_new, z_prev, rows=split.train[fold_of == f], normalize=normalize, chunk_rows=chunk_rows)
    for f in range(folds)
  ]
  picked = np.sort(np.random.default_rng(seed + 2).permutation(len(split.train))[:CV_SAMPLE_ROWS])
  sample = _RetrievalSample(*_read_pairs(z_new, z_prev, split.train[picked], normalize), fold_of[picked])
  spaces = {"new": _spaces.space_stamp(sample.new, new_model), "old": _spaces.space_stamp(sample.old, old_model)}
  train = functools.reduce(_plus, fold_moments)
  val_moments = (
    _moments.pair_moments(z_new, z_prev, rows=split.val, normalize=normalize, chunk_rows=chunk_rows)
    if len(split.val)
    else None
  )

  candidates: list[dict[str, Any]] = []
  maps: dict[str, Any] = {}
  closed_choices: dict[str, dict[str, Any]] = {}
  # The moments the final map is fitted on: the training pairs and, when there are any, the validation pairs.
  train_and_val = train if val_moments is None else _plus(train, val_moments)
  # With few validation pairs their retrieval cannot rank the kinds (a handful of rows, a handful of distractors):
  # auto then ranks the closed-form kinds by their cross-validated retrieval over the training pairs instead.
  few_val = kind == "auto" and len(split.val) < MIN_VALIDATION_ROWS
  for name in [n for n in KINDS if n in kinds or (n == "affine" and "mlp" in kinds)]:
    if name == "mlp":
      continue
    choices, cv_score, cv_error = _choose_closed_form(
      name, fold_moments, train, min(d_prev, d_new), sample, metric, score_orthogonal=few_val
    )
    closed_choices[name] = choices
    w, b = closed_form(name, train, **choices)
    maps[name] = (w, b)
    record = {
      "kind": name,
      "choices": choices,
      "cv_rank_score": None if math.isnan(cv_score) else cv_score,
      "cv_mse": None if math.isnan(cv_error) else cv_error,
    }
    if val_moments is not None:
      record["val_mse"] = moments_mse(w, b, val_moments)
    candidates.append(record)
    say(
      f"{name}: {choices or 'nothing to choose'}"
      + (
        ""
        if math.isnan(cv_score)
        else f"; cross-validated rank score {cv_score:.4f}, mean squared error {cv_error:.4g}"
      )
    )

  mlp_params: dict = {}
  if "mlp" in kinds and not few_val:  # with too few validation pairs to stop it, auto leaves the MLP out
    val_pairs = _read_pairs(z_new, z_prev, split.val, normalize)
    tried = []
    for i, hidden in enumerate(mlp_hidden):
      params, info = train_mlp(
        z_new,
        z_prev,
        split.train,
        val_pairs,
        maps["affine"],
        hidden=int(hidden),
        key=jax.random.fold_in(jax.random.key(seed), i),
        normalize=normalize,
        max_epochs=mlp_epochs,
      )
      tried.append((info["val_mse"], params, info))
      say(f"mlp: hidden {hidden}, best epoch {info['epochs']}, validation mean squared error {info['val_mse']:.4g}")
    _, mlp_params, info = min(tried, key=lambda t: t[0])
    candidates.append(
      {
        "kind": "mlp",
        "choices": {"hidden": info["hidden"], "epochs": info["epochs"], "warm_start": "affine"},
        "val_mse": info["val_mse"],
      }
    )

  def final_map(name: str, data: _moments.PairMoments) -> UpgradeMap:
    if name == "mlp":
      record = next(c for c in candidates if c["kind"] == "mlp")
      return UpgradeMap(
        mlp_transform(hidden=record["choices"]["hidden"]), mlp_params, normalize, "mlp", record["choices"]
      )
    return _as_map(name, *closed_form(name, data, **closed_choices[name]), normalize, closed_choices[name])

  def finish(name: str, reason: str) -> UpgradeFit:
    on_train = final_map(name, train)
    final = on_train if name == "mlp" or val_moments is None else final_map(name, train_and_val)
    proxy = "affine" if name == "mlp" else name  # the MLP's linear branch stands in for it out of fold
    halves = _half_fits(proxy, closed_choices[proxy], fold_moments, sample) if hubness == "auto" else None
    choice = _choose_hubness(halves, hubness, metric, hubness_k, len(split.train) + len(split.val))
    if name == "mlp" and hubness == "auto":
      choice = choice._replace(reason=choice.reason + " (judged on the MLP's affine branch)")
    say(choice.reason)
    if choice.keep:
      rows = np.concatenate([split.train, split.val])
      rows = np.sort(np.random.default_rng(seed + 3).permutation(rows)[:HUBNESS_REFERENCE_ROWS])
      mapped = np.asarray(final(_read_pairs(z_new, z_prev, rows, normalize)[0]))
      final = final._replace(hubness=_hubness.make_hubness(mapped, k=hubness_k))
    # The map's images of new-model rows: what bridge_items writes into an old store, so not a foreign model's.
    bridged = _spaces.space_stamp(np.asarray(final(sample.new)), f"{new_model or 'new'} bridged")
    final = final._replace(
      spaces={**spaces, "bridged": bridged}, scale=_score_scale(final, z_new, z_prev, split, normalize, seed)
    )
    return UpgradeFit(final, candidates, reason + "; " + choice.reason, choice.record)

  if kind != "auto":
    return finish(kind, f"{kind} was asked for")

  if few_val:
    closed = candidates
    best_record = max(closed, key=lambda c: (c["cv_rank_score"], -c["cv_mse"]))
    scores = ", ".join(f"{c['kind']} {c['cv_rank_score']:.4f}" for c in closed)
    reason = (
      f"auto chose {best_record['kind']}: {len(split.val)} validation pairs are too few to rank the kinds "
      f"(fewer than {MIN_VALIDATION_ROWS}), so the closed-form kinds were ranked by their {folds}-fold "
      f"cross-validated rank score over {len(sample.new)} training pairs: {scores}"
    )
    say(reason)
    return finish(best_record["kind"], reason)

  # auto: each kind fitted on the training pairs, scored on the validation pairs' retrieval.
  val_new, val_prev = _read_pairs(z_new, z_prev, split.val, normalize)
  distractor_rows = split.train[np.random.default_rng(seed + 1).permutation(len(split.train))[:10_000]]
  distractors = _read_pairs(z_new, z_prev, np.sort(distractor_rows), normalize)[1]
  ranks = {}
  for record in candidates:
    mapped = np.asarray(final_map(str(record["kind"]), train)(val_new))
    ranks[record["kind"]] = _retrieval.own_vector_ranks(mapped, val_prev, distractors, metric=metric)
    record["val_rank_score"] = float(ranks[record["kind"]].mean())
    record["val_hit_rate"] = float(_retrieval.own_vector_hits(mapped, val_prev, distractors, k=k, metric=metric).mean())
  best = max(KINDS, key=lambda n: ranks[n].mean())
  chosen_name, reason = best, ""
  for simpler in KINDS[: KINDS.index(best)]:
    diff = ranks[best] - ranks[simpler]
    se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else math.inf
    if diff.mean() <= se:
      chosen_name = simpler
      reason = (
        f"; {simpler} is within one paired standard error ({se:.2g}) of {best}'s "
        f"{ranks[best].mean():.4f}, so the simpler kind is kept"
      )
      break
  scores = ", ".join(f"{n} {ranks[n].mean():.4f}" for n in KINDS)
  reason = (
    f"auto chose {chosen_name}: validation rank score (the share of other old vectors each mapped "
    f"validation row ranks below its own) over {len(split.val)} pairs and {len(distractors)} distractors: "
    f"{scores}{reason}"
  )
  say(reason)
  return finish(chosen_name, reason)


def _score_scale(final: UpgradeMap, z_new, z_prev, split: PairSplit, normalize, seed) -> _scale.ScoreScale:
  """The map's :class:`~bcjax.upgrade.ScoreScale`, fitted on up to 2,000 training and validation pairs."""
  rows = np.concatenate([split.train, split.val])
  rows = np.sort(np.random.default_rng(seed + 5).permutation(rows)[: 2 * _scale.MAX_ROWS])
  new, old = _read_pairs(z_new, z_prev, rows, normalize)
  return _scale.fit_score_scale(np.asarray(final(new)), old, new, hubness=final.hubness, seed=seed)


class _HubnessChoice(NamedTuple):
  keep: bool
  reason: str
  record: dict


class _HalfFit(NamedTuple):
  """One half of the training pairs as a map serves it: the other half's mapped rows query their own old rows."""

  queries: np.ndarray  # mapped rows of the held-out half (the map never saw them)
  targets: np.ndarray  # their own old rows
  reference: np.ndarray  # the fitting half's own images: the correction's reference, as the final map's will be


def _half_fits(kind: str, choices: dict, fold_moments, sample) -> list[_HalfFit]:
  """``kind`` with ``choices`` fitted on each half of the folds (even, odd), serving the other half's sample rows."""
  out = []
  for parity in (0, 1):
    fitting = [f for f in range(len(fold_moments)) if f % 2 == parity]
    moments = functools.reduce(_plus, [fold_moments[f] for f in fitting])
    w, b = closed_form(kind, moments, **choices)
    inside = np.isin(sample.fold, fitting)
    out.append(_HalfFit(sample.new[~inside] @ w.T + b, sample.old[~inside], sample.new[inside] @ w.T + b))
  return out


def _choose_hubness(halves: list[_HalfFit] | None, mode, metric, k, reference_rows: int) -> _HubnessChoice:
  """Whether to keep the hubness correction (:mod:`bcjax.upgrade._fit`), with the reason and a candidate record.

  ``halves``: the training pairs served in two halves (:func:`_half_fits`); ``reference_rows``: the pairs the final
  correction's reference would be drawn from.
  """
  record: dict[str, Any] = {"kind": "hubness", "mode": mode, "k": k}
  if mode == "off":
    return _HubnessChoice(False, "no hubness correction (asked)", record)
  if metric != "cosine":
    return _HubnessChoice(False, f"no hubness correction: it corrects cosine scores, the metric is {metric}", record)
  if mode == "on":
    return _HubnessChoice(True, f"hubness correction (CSLS, k={k}) asked for", record)
  if reference_rows < k:
    return _HubnessChoice(
      False, f"no hubness correction: {reference_rows} paired rows are fewer than its k={k} neighbours", record
    )
  assert halves is not None  # auto: fit_upgrade served them
  n = sum(len(h.queries) for h in halves)
  if min(min(len(h.queries), len(h.reference)) for h in halves) < max(k, 2):
    return _HubnessChoice(
      True,
      f"hubness correction (CSLS, k={k}) kept: {n} training pairs are too few to judge it, and it is kept unless "
      f"shown to lower retrieval",
      record,
    )
  plain, corrected = [], []
  for h in halves:
    bias = _hubness.hubness_bias(h.targets, _hubness.make_hubness(h.reference, k=k))
    plain.append(_retrieval.own_vector_ranks(h.queries, h.targets, metric=metric))
    corrected.append(_retrieval.own_vector_ranks(h.queries, h.targets, metric=metric, item_bias=bias))
  plain_all, corrected_all = np.concatenate(plain), np.concatenate(corrected)
  diff = corrected_all - plain_all
  se = float(diff.std(ddof=1) / math.sqrt(len(diff)))
  record.update(
    criterion="half-fits",
    rows=n,
    rank_score_plain=float(plain_all.mean()),
    rank_score_corrected=float(corrected_all.mean()),
  )
  scores = (
    f"rank score of {n} training pairs, each half served by the map fitted on the other, {plain_all.mean():.4f} "
    f"without, {corrected_all.mean():.4f} with it (paired standard error {se:.2g})"
  )
  if not np.any(diff):
    return _HubnessChoice(False, f"hubness correction (CSLS, k={k}) left out: it changes no rank ({scores})", record)
  keep = bool(diff.mean() >= -se)
  reason = (
    f"hubness correction (CSLS, k={k}) {'kept' if keep else 'left out'}: {scores}; kept unless it lowers the score "
    f"by more than one standard error"
  )
  return _HubnessChoice(keep, reason, record)
