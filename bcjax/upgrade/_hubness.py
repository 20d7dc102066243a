r"""Hubness correction of bridged search (CSLS, Conneau et al. 2018, eq. 6).

A mapped query space has hubs, old vectors that sit close to many mapped queries and crowd every top k. CSLS lowers each
old vector's score by its mean similarity to its k nearest *mapped* new-model rows:

.. math::

   \mathrm{score}(q, x) = \cos(B(q), x) - \beta(x), \qquad
   \beta(x) = \tfrac12 \cdot \frac1k \sum_{r \in \mathcal N_k(x)} \cos(x, r),

with :math:`\mathcal N_k(x)` the k reference rows (mapped new embeddings of the paired items) most similar to x.
CSLS's other term, the query's own mean similarity, is the same for every x and does not change a query's ranking,
so it is left out (and :math:`2\cos - r_T - r_S` halved). :math:`\beta` is a per-document number computed once from
the old vectors and the map's reference rows (:class:`Hubness`, stored with the map), so it is served by any
inner-product store as one extra coordinate: documents :math:`[\hat x, -\beta(x)]`, queries :math:`[\widehat{B(q)},
1]` (:func:`csls_documents`, :func:`csls_queries`), whose inner product is the CSLS score.

Reference: A. Conneau, G. Lample, M. Ranzato, L. Denoyer, H. Jégou, "Word translation without parallel data",
ICLR 2018, §2.3.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcjax._buckets import bucket_size
from bcjax._device import device_array
from bcjax._unit import unit_rows
from bcjax.upgrade import _files

DEFAULT_K = 10
"""Neighbours in :math:`\\beta(x)` (CSLS's own choice of 10)."""


class Hubness(NamedTuple):
  r"""The fitted part of a hubness correction.

  ``reference`` [M, D_(k-1)], unit rows of mapped new-model embeddings (float32), and ``k``, the neighbours averaged in
  :math:`\beta(x)`.
  """

  reference: np.ndarray
  k: int


def make_hubness(mapped_rows, *, k: int = DEFAULT_K) -> Hubness:
  r"""A :class:`Hubness` from mapped new-model embeddings [M, D_(k-1)] of paired items (at least ``k`` rows).

  Args:
    mapped_rows: mapped new-model embeddings of paired items, [M, D_(k-1)].
    k: neighbours averaged in :math:`\beta(x)`.

  Returns:
    The :class:`Hubness`.

  Raises:
    ValueError: naming the argument, for ``k`` < 1, fewer rows than ``k`` or non-finite rows.
  """
  rows = np.asarray(mapped_rows, np.float32)
  if k < 1:
    raise ValueError(f"make_hubness: `k` must be >= 1, got {k}")
  if rows.ndim != 2 or rows.shape[0] < k:
    raise ValueError(f"make_hubness: `mapped_rows` must be a matrix of at least k={k} rows, got shape {rows.shape}")
  if not np.isfinite(rows).all():
    raise ValueError("make_hubness: `mapped_rows` holds NaN or inf")
  return Hubness(unit_rows(rows, np.float32), int(k))


@functools.partial(jax.jit, static_argnames=("k",))
def _bias(docs, reference, *, k):
  scores = docs @ reference.T
  return 0.5 * jnp.mean(jax.lax.top_k(scores, k)[0], axis=1)


def hubness_bias(docs, hubness: Hubness, *, chunk_rows: int = _files.DEFAULT_CHUNK_ROWS) -> np.ndarray:
  r""":math:`\beta(x)` (:mod:`bcjax.upgrade._hubness`) of each row of ``docs`` [N, D_(k-1)], float32 [N].

  ``docs`` is an array or a memory map, read ``chunk_rows`` rows at a time.

  Args:
    docs: old-model vectors, [N, D_(k-1)] (an array or a memory map).
    hubness: the map's fitted :class:`Hubness`.
    chunk_rows: rows read at a time.

  Returns:
    :math:`\beta(x)` per row, [N] float32.

  Raises:
    ValueError: when ``docs``' width is not the reference's.
  """
  if docs.ndim != 2 or docs.shape[1] != hubness.reference.shape[1]:
    raise ValueError(
      f"hubness_bias: `docs` has shape {tuple(docs.shape)}; the reference rows have width {hubness.reference.shape[1]}"
    )
  if chunk_rows < 1:
    raise ValueError(f"hubness_bias: `chunk_rows` must be >= 1, got {chunk_rows}")
  reference = device_array(hubness.reference)
  out = np.empty(docs.shape[0], np.float32)
  size = bucket_size(min(chunk_rows, docs.shape[0]))
  with _files.chunk_reader(docs) as read:
    for rows in _files.chunks(docs.shape[0], chunk_rows):
      block = unit_rows(read(rows), np.float32)
      padded = np.pad(block, ((0, size - block.shape[0]), (0, 0)))
      out[rows] = np.asarray(_bias(padded, reference, k=hubness.k))[: block.shape[0]]
  return out


def csls_documents(docs, bias) -> np.ndarray:
  r"""Documents for an inner-product store that serves CSLS: ``[unit(x), -beta(x)]``, [N, D + 1] float32.

  Args:
    docs: old-model vectors, [N, D].
    bias: their hubness bias :math:`\beta(x)`, [N] (:func:`hubness_bias`).

  Returns:
    The stored rows, [N, D + 1] float32.

  Raises:
    ValueError: a bias of another length.
  """
  docs, bias = np.asarray(docs), np.asarray(bias, np.float32)
  if bias.shape != (docs.shape[0],):
    raise ValueError(f"csls_documents: `bias` must have shape ({docs.shape[0]},), got {bias.shape}")
  return np.concatenate([unit_rows(docs, np.float32), -bias[:, None]], axis=1)


def csls_queries(mapped_queries) -> np.ndarray:
  """Mapped queries for an inner-product store that serves CSLS: ``[unit(B(q)), 1]``, [Q, D + 1] float32.

  Args:
    mapped_queries: mapped new-model queries :math:`B(q)`, [Q, D].

  Returns:
    The query rows, [Q, D + 1] float32.
  """
  q = unit_rows(mapped_queries, np.float32)
  return np.concatenate([q, np.ones((q.shape[0], 1), np.float32)], axis=1)
