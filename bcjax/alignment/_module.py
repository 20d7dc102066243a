r"""The linear backward transformation :math:`B_k(z_k) = W_k z_k` as a flax NNX module (section 3.2.1)."""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import ArrayLike

from bcjax.alignment._compose import apply_backward
from bcjax.alignment._linear import init_backward


class BackwardLinear(nnx.Module):
  r"""Learnable :math:`B_k: \mathbb R^{D_k} \to \mathbb R^{D_{k-1}}`, no bias, for joint or post-hoc training.

  Arguments follow the library's order ``(d_prev, d_new)`` = (d_(k-1), d_k), the weight's shape, as
  :func:`init_backward`. ``w`` has the paper's shape [d_prev, d_new] and starts from
  :math:`U(\pm 1/\sqrt{D_k})` (the reference code's PyTorch default), so ``module.w[...]`` can be stored in a
  :class:`bcjax.versioning.Registry` as it is.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from bcjax.alignment import BackwardLinear
    >>> b = BackwardLinear(3, 5, rngs=nnx.Rngs(0))  # (d_prev, d_new), as init_backward and W's shape
    >>> b(jnp.ones((2, 5))).shape
    (2, 3)
  """

  def __init__(self, d_prev: int, d_new: int, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.w = nnx.Param(init_backward(rngs.params(), d_prev, d_new, dtype=dtype))

  def __call__(self, z: ArrayLike) -> jax.Array:
    return apply_backward(z, self.w[...])
