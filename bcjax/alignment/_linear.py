r"""The linear backward map's initialisation and its closed-form least-squares fit (BC-Aligner, section 3.2.1).

Post-hoc, the single- and multi-step losses share their minimisers (see :mod:`bcjax.alignment._fit`), so
:func:`least_squares_backward` solves both.
"""

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bcjax import _checks


def init_backward(key: jax.Array, d_prev: int, d_new: int, *, dtype=jnp.float32) -> jax.Array:
  r"""Initial :math:`W_k \sim U(\pm 1/\sqrt{D_k})` of shape [d_prev, d_new].

  PyTorch's ``Linear`` default, which the reference code uses for :math:`B_k`.

  Args:
    key: a PRNG key.
    d_prev: D_(k-1), the old version's width.
    d_new: D_k, the new version's width.
    dtype: the weight's dtype.

  Returns:
    W_k, [d_prev, d_new].

  Raises:
    ValueError: a width below 1.

  Examples:
    >>> import jax
    >>> from bcjax.alignment import init_backward
    >>> init_backward(jax.random.key(0), 2, 3).shape
    (2, 3)
  """
  d_prev = _checks.check_positive_int("init_backward", "d_prev", d_prev)
  d_new = _checks.check_positive_int("init_backward", "d_new", d_new)
  bound = 1.0 / jnp.sqrt(d_new)
  return jax.random.uniform(key, (d_prev, d_new), dtype, -bound, bound)


def least_squares_backward(z_new: ArrayLike, z_prev: ArrayLike, *, ridge: float = 0.0) -> jax.Array:
  r"""Closed-form minimiser of the single-step loss, optionally with a ridge penalty.

  .. math::
    W_k = \arg\min_W \frac1n \sum_x \lVert W z_k(x) - z_{k-1}(x) \rVert^2 + \rho \lVert W \rVert_F^2
        = Z_{k-1}^\top Z_k (Z_k^\top Z_k + n\rho I)^{-1}.

  With :math:`\rho = 0` the minimum-norm least-squares solution is returned (valid for rank-deficient
  :math:`Z_k`). It also minimises the multi-step loss (see :mod:`bcjax.alignment._linear`).

  Args:
    z_new: :math:`z_k`, [n, d_k].
    z_prev: :math:`z_{k-1}`, [n, d_{k-1}].
    ridge: :math:`\rho \ge 0`; may be traced (then a negative value gives NaN instead of an error).

  Returns:
    :math:`W_k`, [d_{k-1}, d_k].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: naming the argument, for rows that disagree in number or a negative ``ridge`` (concrete).

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.alignment import least_squares_backward
    >>> z = jnp.eye(3)
    >>> least_squares_backward(z, 2.0 * z[:, :2]).round(3).tolist()
    [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
  """
  fn = "least_squares_backward"
  z_new = _checks.as_float_array(fn, "z_new", z_new, ndim=2)
  z_prev = _checks.as_float_array(fn, "z_prev", z_prev, ndim=2)
  if z_new.shape[0] != z_prev.shape[0]:
    raise ValueError(
      f"{fn}: `z_new` has shape {tuple(z_new.shape)} and `z_prev` has shape {tuple(z_prev.shape)}; "
      "both must hold the same rows"
    )
  if _checks.is_concrete(ridge):
    ridge = _checks.as_float(fn, "ridge", ridge)
    if ridge < 0.0:
      raise ValueError(f"{fn}: `ridge` must be >= 0, got {ridge!r}")
  n, d = z_new.shape
  dtype = jnp.result_type(z_new, z_prev)
  rho = jnp.asarray(ridge, dtype)
  # One spectral formula for every ridge, so a traced ridge (a sweep under jit or vmap) takes the same path:
  # W^T = V diag(f(s)) U^T Z_(k-1), f(s) = s / (s^2 + n rho); at rho = 0 the pseudo-inverse's 1/s, with singular
  # values below lstsq's cut-off dropped (the minimum-norm solution).
  u, s, vt = jnp.linalg.svd(z_new.astype(dtype), full_matrices=False)
  cutoff = jnp.finfo(dtype).eps * max(n, d) * jnp.max(s, initial=0.0)
  denominator = s * s + n * rho
  keep = (s > cutoff) | (rho > 0)
  f = jnp.where(keep, s / jnp.where(keep & (denominator > 0), denominator, 1.0), 0.0)
  w = ((vt.T * f) @ (u.T @ z_prev.astype(dtype))).T
  # A negative traced ridge cannot raise inside jit; it poisons the result instead of returning a wrong map.
  return jnp.where(rho >= 0, w, jnp.nan)
