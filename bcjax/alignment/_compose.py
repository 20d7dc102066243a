r"""Backward transformations and their compositions (BC-Aligner, section 3.2.1).

Convention: the paper writes column vectors, :math:`\tilde z_{k-1} = W_k z_k` with
:math:`W_k \in \mathbb{R}^{D_{k-1} \times D_k}`. bcjax keeps the paper's weight shapes but stores embeddings as rows,
``z_k`` of shape [n, d_k], so applying :math:`B_k` is ``z_k @ W_k.T``.

References:
  Hu, Bansal, Cao, Rao, Subbian, Leskovec, "Learning Backward Compatible Embeddings", KDD 2022.
  https://arxiv.org/abs/2206.03040
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks


def compose(weights: Sequence[ArrayLike], *, dim: int | None = None) -> jax.Array:
  r"""Composes backward weights into :math:`W^j_k` (eq. 6).

  .. math::
    W^j_k = W_{j+1} W_{j+2} \cdots W_k \in \mathbb{R}^{D_j \times D_k}, \qquad W^k_k = I.

  Args:
    weights: ``[W_{j+1}, ..., W_k]``, each ``W_i`` of shape [d_{i-1}, d_i]. May be empty.
    dim: d_k, needed only for an empty chain, whose composition is the identity [d_k, d_k]. When given with a
      non-empty chain it must equal d_k.

  Returns:
    :math:`W^j_k`, [d_j, d_k].

  Raises:
    ValueError: when inner dimensions of consecutive weights differ (the message names both indices and shapes),
      when the chain is empty and ``dim`` is missing, or when ``dim`` disagrees with the chain.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import compose
    >>> w1, w2 = jnp.ones((2, 3)), jnp.ones((3, 4))
    >>> compose([w1, w2]).shape
    (2, 4)
    >>> compose([], dim=3).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
  """
  chain = _checks.as_weight_chain("compose", "weights", weights)
  if not chain:
    if dim is None:
      raise ValueError("compose: `weights` is empty; pass `dim` (d_k) to get the identity composition")
    return jnp.eye(_checks.check_positive_int("compose", "dim", dim))
  if dim is not None and _checks.check_positive_int("compose", "dim", dim) != chain[-1].shape[1]:
    raise ValueError(
      f"compose: `dim`={dim} but the last weight `weights[{len(chain) - 1}]` has shape "
      f"{tuple(chain[-1].shape)}, i.e. d_k={chain[-1].shape[1]}"
    )
  product = chain[-1]
  for w in reversed(chain[:-1]):
    product = w @ product
  return product


def compositions(weights: Sequence[ArrayLike]) -> list[jax.Array]:
  r"""All compositions :math:`W^j_k` for :math:`j = 0, \dots, k-1` (precomputed in the paper, eq. 6).

  Suffix products share work: :math:`W^{k-1}_k = W_k` and :math:`W^j_k = W_{j+1} W^{j+1}_k`.

  Args:
    weights: ``[W_1, ..., W_k]``, each ``W_i`` of shape [d_{i-1}, d_i].

  Returns:
    A list of length k whose entry j is :math:`W^j_k`, [d_j, d_k]. Empty for an empty chain.

  Raises:
    ValueError: naming the argument, for an empty chain or weights whose widths do not chain.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import compositions
    >>> [w.shape for w in compositions([jnp.ones((2, 3)), jnp.ones((3, 5))])]
    [(2, 5), (3, 5)]
  """
  chain = _checks.as_weight_chain("compositions", "weights", weights)
  out: list[jax.Array] = []
  for w in reversed(chain):
    out.append(w if not out else w @ out[-1])
  return out[::-1]


def apply_backward(z: ArrayLike, w: ArrayLike) -> jax.Array:
  r"""Applies one backward transformation :math:`B_k(z_k) = W_k z_k` to row embeddings.

  Args:
    z: version-k embeddings, [n, d_k].
    w: :math:`W_k`, [d_{k-1}, d_k].

  Returns:
    Version-(k-1) compatible embeddings, [n, d_{k-1}].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for a weight whose width is not the embeddings'.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import apply_backward
    >>> apply_backward(jnp.ones((5, 3)), jnp.ones((2, 3))).shape
    (5, 2)
  """
  z = _checks.as_float_array("apply_backward", "z", z, ndim=2)
  w = _checks.as_float_array("apply_backward", "w", w, ndim=2)
  if z.shape[1] != w.shape[1]:
    raise ValueError(
      f"apply_backward: `z` has shape {tuple(z.shape)} (d_k={z.shape[1]}) but `w` has shape "
      f"{tuple(w.shape)}; W_k must be [d_(k-1), d_k] with d_k={z.shape[1]}"
    )
  return z @ w.T


def apply_chain(z: ArrayLike, weights: Sequence[ArrayLike]) -> jax.Array:
  r"""Maps version-k embeddings to a version-j compatible embedding.

  :math:`\tilde z_j = B_{j+1}\circ\cdots\circ B_k(z_k)` (eq. 2).

  The weights are applied one at a time from :math:`W_k` down to :math:`W_{j+1}`, which costs
  :math:`n \sum_i d_{i-1} d_i` instead of composing first; for a fixed chain applied to many batches, precompute
  ``compose(weights)`` once and use :func:`apply_backward`.

  Args:
    z: version-k embeddings, [n, d_k].
    weights: ``[W_{j+1}, ..., W_k]``; an empty list returns ``z`` unchanged (j = k).

  Returns:
    :math:`\tilde z_j`, [n, d_j].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for an empty chain or weights whose widths do not chain.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import apply_chain
    >>> apply_chain(jnp.ones((4, 5)), [jnp.ones((2, 3)), jnp.ones((3, 5))]).shape
    (4, 2)
  """
  z = _checks.as_float_array("apply_chain", "z", z, ndim=2)
  chain = _checks.as_weight_chain("apply_chain", "weights", weights)
  if chain and z.shape[1] != chain[-1].shape[1]:
    raise ValueError(
      f"apply_chain: `z` has shape {tuple(z.shape)} but the last weight `weights[{len(chain) - 1}]` "
      f"has shape {tuple(chain[-1].shape)}; expected d_k={z.shape[1]} columns"
    )
  for w in reversed(chain):
    z = z @ w.T
  return z


def notrans(z: ArrayLike, d_prev: int) -> jax.Array:
  r"""The NoTrans backward map: the first ``d_prev`` coordinates of :math:`z_k` (section 3.2.1).

  Args:
    z: version-k embeddings, [n, d_k].
    d_prev: :math:`D_{k-1} \le D_k`.

  Returns:
    ``z[:, :d_prev]``, [n, d_prev].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for ``d_prev`` below 1 or above the embeddings' width.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import notrans
    >>> notrans(jnp.arange(6.0).reshape(2, 3), 2).tolist()
    [[0.0, 1.0], [3.0, 4.0]]
  """
  z = _checks.as_float_array("notrans", "z", z, ndim=2)
  d_prev = _checks.check_positive_int("notrans", "d_prev", d_prev)
  if d_prev > z.shape[1]:
    raise ValueError(
      f"notrans: `d_prev`={d_prev} exceeds the embedding dimension of `z` with shape "
      f"{tuple(z.shape)}; NoTrans needs D_(k-1) <= D_k"
    )
  return z[:, :d_prev]
