"""The closed-form kinds from streamed moments: centred Procrustes, ridge, shrunk affine maps and their error."""

import math
import numbers

import jax
import numpy as np

from bcjax._device import device_array
from bcjax.alignment._transforms import affine_transform, orthogonal_transform, procrustes
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade.fit import _moments


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
        device_array(gram_c), device_array(cross_c), device_array(energy_c), PROCRUSTES_TOLERANCE, PROCRUSTES_ITERATIONS
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
  given choices (:mod:`bcjax.upgrade.fit`); ``target`` is affine's shrinkage target: ``isometry`` (the scaled polar
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


def _as_map(kind: str, w: np.ndarray, b: np.ndarray, normalize: bool, choices: dict) -> UpgradeMap:
  if kind == "orthogonal":
    return UpgradeMap(orthogonal_transform(bias=True), {"a": w, "b": b}, normalize, kind, choices)
  rank = choices.get("rank")
  if rank is not None and rank < min(w.shape):
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    params = {"u": u[:, :rank] * s[:rank], "v": vt[:rank].T, "b": b}
    return UpgradeMap(affine_transform(rank=rank), params, normalize, kind, choices)
  return UpgradeMap(affine_transform(), {"w": w, "b": b}, normalize, kind, choices)
