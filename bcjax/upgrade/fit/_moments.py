r"""Sufficient statistics of paired embeddings, accumulated one chunk of rows at a time.

Every closed-form backward map (least squares with a ridge, reduced rank, shrinkage, Procrustes, all with centring)
depends on the pairs :math:`(z_k(x), z_{k-1}(x))` only through

.. math::
  n, \quad s_k = \sum_x z_k, \quad s_{k-1} = \sum_x z_{k-1}, \quad G = \sum_x z_k z_k^\top, \quad
  C = \sum_x z_{k-1} z_k^\top, \quad E = \sum_x \lVert z_{k-1} \rVert^2,

so pairs larger than memory are fitted by streaming them through these sums in float64 (a [D_k, D_k] and a
[D_(k-1), D_k] matrix, whatever n is). The centred statistics follow exactly: :math:`\bar G = G - n\mu_k\mu_k^\top`,
:math:`\bar C = C - n\mu_{k-1}\mu_k^\top`, :math:`\bar E = E - n\lVert\mu_{k-1}\rVert^2`.
"""

from typing import NamedTuple

import numpy as np

from bcjax._unit import unit_rows
from bcjax.upgrade import _files


class PairMoments(NamedTuple):
  """Sums over the pairs in float64 (:mod:`bcjax.upgrade.fit._moments`).

  ``count`` n, ``sum_new`` [D_k], ``sum_prev`` [D_(k-1)], ``gram`` G [D_k, D_k], ``cross`` C [D_(k-1), D_k],
  ``energy`` E.
  """

  count: int  # type: ignore[assignment]  # a field named like a tuple method
  sum_new: np.ndarray
  sum_prev: np.ndarray
  gram: np.ndarray
  cross: np.ndarray
  energy: float

  @property
  def mean_new(self) -> np.ndarray:
    return self.sum_new / self.count

  @property
  def mean_prev(self) -> np.ndarray:
    return self.sum_prev / self.count

  def centred(self) -> tuple[np.ndarray, np.ndarray, float]:
    r"""(:math:`\bar G`, :math:`\bar C`, :math:`\bar E`), the statistics of the centred pairs."""
    mu_new, mu_prev = self.mean_new, self.mean_prev
    return (
      self.gram - self.count * np.outer(mu_new, mu_new),
      self.cross - self.count * np.outer(mu_prev, mu_new),
      float(self.energy - self.count * mu_prev @ mu_prev),
    )


def pair_moments(
  z_new: np.ndarray,
  z_prev: np.ndarray,
  *,
  rows: np.ndarray | None = None,
  normalize: bool = False,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
) -> PairMoments:
  """:class:`PairMoments` of the pairs ``(z_new[r], z_prev[r])`` for r in ``rows``.

  ``rows`` defaults to all; at most ``chunk_rows`` rows of each are read at a time (arrays or memory maps), and the
  sums are float64.

  Args:
    z_new: :math:`z_k`, [n, D_k].
    z_prev: :math:`z_{k-1}` of the same rows, [n, D_(k-1)].
    rows: sorted row ids to use, e.g. a fit split.
    normalize: accumulate the L2-normalised rows (a cosine model's space).
    chunk_rows: rows read per chunk.

  Returns:
    The :class:`PairMoments`, float64.
  """
  d_new, d_prev = z_new.shape[1], z_prev.shape[1]
  count, sum_new, sum_prev = 0, np.zeros(d_new), np.zeros(d_prev)
  gram, cross, energy = np.zeros((d_new, d_new)), np.zeros((d_prev, d_new)), 0.0
  ids = np.arange(z_new.shape[0]) if rows is None else np.asarray(rows)
  for part in _files.chunks(len(ids), chunk_rows):
    take = ids[part]
    zn, zp = _files.read_rows(z_new, take, np.float64), _files.read_rows(z_prev, take, np.float64)
    if normalize:
      zn, zp = unit_rows(zn), unit_rows(zp)
    count += len(take)
    sum_new += zn.sum(axis=0)
    sum_prev += zp.sum(axis=0)
    gram += zn.T @ zn
    cross += zp.T @ zn
    energy += float(np.sum(zp * zp))
  return PairMoments(count, sum_new, sum_prev, gram, cross, energy)
