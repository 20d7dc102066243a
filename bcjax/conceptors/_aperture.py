r"""Choosing a conceptor's aperture from the correlation matrix alone (Jaeger 2014, section 3.8.4).

:math:`C(R, \alpha) = R (R + \alpha^{-2} I)^{-1}` is not scale-free: :math:`C(c^2 R, \alpha) = C(R, c\alpha)`, so a
fixed :math:`\alpha` means something different for every scale of the data. Both rules here return an aperture
that scales as :math:`\alpha^\star(c^2 R) = \alpha^\star(R) / c`, which makes :math:`C(R, \alpha^\star(R))` invariant
to the scale of R:

* :func:`optimal_aperture`, Jaeger's *norm-gradient* criterion: the aperture at which the conceptor's squared
  Frobenius norm is most sensitive to the (log) aperture, i.e. the :math:`\alpha` maximising
  :math:`\nabla(\alpha) = d\lVert C(R, \alpha)\rVert_F^2 / d\log\alpha`;
* :func:`relative_aperture`, the cheap alternative: the aperture that puts R's mean eigenvalue at a fixed point
  of the spectrum, :math:`\alpha^2 \bar\sigma = \rho`.

With :math:`R = U \operatorname{diag}(\sigma) U^\top` and :math:`x_i = \alpha^2 \sigma_i` the eigenvalues of C are
:math:`x_i / (1 + x_i)`, and

.. math::
  \nabla(\alpha) = \sum_i \frac{4 x_i^2}{(1 + x_i)^3}. \qquad (\text{each term peaks at } x_i = 2)

Every term is increasing in :math:`\log\alpha` below its peak :math:`\tfrac12\log(2/\sigma_i)` and decreasing
above, so the global maximiser lies between the smallest and largest peak; :func:`optimal_aperture` searches that
bracket on a log grid and refines the best grid cell by bisection on the sign of :math:`d\nabla / d\log\alpha`
(fixed iteration counts: jittable).

Reference:
  H. Jaeger, "Controlling Recurrent Neural Networks by Conceptors", arXiv:1403.3369, 2014, section 3.8.4
  ("Optimal aperture").
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax.conceptors._algebra import _as_square


def _as_correlation(fn: str, r) -> jax.Array:
  """A symmetric, finite [..., N, N] array with N >= 1; concrete inputs must be PSD (to round-off) and nonzero."""
  r = _as_square(fn, "r", r)
  if r.shape[-1] == 0 or r.size == 0:
    raise ValueError(
      f"{fn}: `r` is empty (shape {tuple(r.shape)}); an aperture needs an N x N correlation matrix with N >= 1"
    )
  if _checks.is_concrete(r):
    host = np.asarray(r, np.float64)
    s = np.linalg.eigvalsh((host + np.swapaxes(host, -1, -2)) / 2)
    top = s.max(axis=-1)
    slack = 100.0 * r.shape[-1] * float(jnp.finfo(r.dtype).eps) * np.maximum(np.abs(top), 1e-300)
    if np.any(s.min(axis=-1) < -slack):
      raise ValueError(
        f"{fn}: `r` is not positive semidefinite: its smallest eigenvalue is {float(s.min()):.4g} "
        f"(largest {float(top.max()):.4g}, shape {tuple(r.shape)}); pass a correlation matrix such "
        "as bcjax.conceptors.correlation(x)"
      )
    if np.any(top <= 0):
      raise ValueError(f"{fn}: `r` is zero (shape {tuple(r.shape)}); no aperture is defined for data without energy")
  return r


def _as_positive(fn: str, name: str, value) -> jax.Array:
  """A floating array of positive, finite values (checked when concrete)."""
  value = _checks.as_float_array(fn, name, value)
  if _checks.is_concrete(value) and np.any(~(np.asarray(value) > 0)):
    raise ValueError(f"{fn}: `{name}` must be positive and finite, got {np.asarray(value)!r}")
  return value


def _spectrum(r: jax.Array) -> jax.Array:
  return jnp.maximum(jnp.linalg.eigvalsh((r + jnp.swapaxes(r, -1, -2)) / 2), 0.0)


def _norm_gradient_at(log_alpha: jax.Array, log_sigma: jax.Array) -> jax.Array:
  r"""The aperture-norm gradient at log α of the spectrum log σ, in log space.

  ∇ at log α (any shape [...]) of the spectrum log σ [N]: Σ_i 4 x_i² / (1 + x_i)³ in log space, so that neither huge nor
  tiny x_i overflows (σ_i = 0 gives log σ_i = -inf and contributes exactly 0).
  """
  log_x = 2.0 * log_alpha[..., None] + log_sigma
  return jnp.sum(4.0 * jnp.exp(2.0 * log_x - 3.0 * jnp.logaddexp(0.0, log_x)), axis=-1)


def _norm_gradient_slope(log_alpha: jax.Array, log_sigma: jax.Array) -> jax.Array:
  """d∇ / d log α = Σ_i 8 x_i² (2 - x_i) / (1 + x_i)⁴ (each term changes sign at its peak x_i = 2)."""
  log_x = 2.0 * log_alpha[..., None] + log_sigma
  x = jnp.exp(log_x)
  return jnp.sum(8.0 * (2.0 - x) * jnp.exp(2.0 * log_x - 4.0 * jnp.logaddexp(0.0, log_x)), axis=-1)


def aperture_norm_gradient(r: ArrayLike, alpha: ArrayLike) -> jax.Array:
  r"""Jaeger's norm gradient :math:`\nabla(\alpha) = d\lVert C(R,\alpha)\rVert_F^2 / d\log\alpha` (closed form).

  .. math::
    \nabla(\alpha) = \sum_i \frac{4 x_i^2}{(1 + x_i)^3}, \qquad x_i = \alpha^2 \sigma_i(R).

  Scale law: :math:`\nabla_{c^2 R}(\alpha) = \nabla_R(c\alpha)`.

  Args:
    r: symmetric PSD correlation matrix, [..., N, N].
    alpha: apertures :math:`\alpha > 0`, broadcastable against R's batch shape [...].

  Returns:
    :math:`\nabla(\alpha)`, the broadcast batch shape.

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import aperture_norm_gradient
    >>> round(float(aperture_norm_gradient(jnp.eye(1), 2.0 ** 0.5)), 6)  # x = 2: 4 * 4 / 27
    0.592593
  """
  fn = "aperture_norm_gradient"
  r = _as_correlation(fn, r)
  alpha = _as_positive(fn, "alpha", alpha)
  dtype = jnp.promote_types(r.dtype, alpha.dtype)
  log_sigma = jnp.log(_spectrum(r.astype(dtype)))
  log_alpha = jnp.log(alpha.astype(dtype))
  batch = jnp.broadcast_shapes(r.shape[:-2], alpha.shape)
  log_alpha = jnp.broadcast_to(log_alpha, batch)
  log_sigma = jnp.broadcast_to(log_sigma, batch + r.shape[-1:])
  return _norm_gradient_at(log_alpha, log_sigma)


def _optimal_log_aperture(sigma: jax.Array, grid_size: int, refine_steps: int) -> jax.Array:
  """Log α* for one spectrum σ [N] (non-negative, not all zero)."""
  n = sigma.shape[-1]
  top = jnp.max(sigma)
  # Eigenvalues at round-off level of the largest are numerically zero; their peaks would stretch the bracket to
  # apertures no data supports.
  positive = sigma > 10.0 * n * jnp.finfo(sigma.dtype).eps * top
  log_sigma = jnp.where(positive, jnp.log(jnp.where(positive, sigma, 1.0)), -jnp.inf)
  peaks = 0.5 * (jnp.log(2.0) - log_sigma)  # each term's maximiser, +inf for zero eigenvalues
  lo = 0.5 * (jnp.log(2.0) - jnp.log(top))
  hi = jnp.max(jnp.where(positive, peaks, lo))
  grid = lo + (hi - lo) * jnp.linspace(0.0, 1.0, grid_size, dtype=sigma.dtype)
  values = _norm_gradient_at(grid, log_sigma)
  best = jnp.argmax(values)
  a = grid[jnp.maximum(best - 1, 0)]
  b = grid[jnp.minimum(best + 1, grid_size - 1)]

  def bisect(_, bracket):
    # The sign of the slope, not a comparison of values, picks the half: values are flat to sqrt(eps) at the top,
    # the slope's sign is exact to eps, which keeps alpha* scale-equivariant to round-off.
    a, b = bracket
    mid = (a + b) / 2
    rising = _norm_gradient_slope(mid, log_sigma) > 0
    return jnp.where(rising, mid, a), jnp.where(rising, b, mid)

  a, b = jax.lax.fori_loop(0, refine_steps, bisect, (a, b))
  mid = (a + b) / 2
  # A cell holding two peaks could lead the bisection to a dip; then the grid's best point is kept.
  slack = 100.0 * n * jnp.finfo(sigma.dtype).eps * values[best]
  return jnp.where(_norm_gradient_at(mid, log_sigma) >= values[best] - slack, mid, grid[best])


def optimal_aperture(r: ArrayLike, *, grid_size: int = 64, refine_steps: int = 60) -> jax.Array:
  r"""Jaeger's optimal aperture: :math:`\alpha^\star = \arg\max_\alpha d\lVert C(R,\alpha)\rVert_F^2 / d\log\alpha`.

  The maximiser of :func:`aperture_norm_gradient` over :math:`\log\alpha`, searched between the smallest and
  largest per-eigenvalue peak :math:`\tfrac12 \log(2/\sigma_i)` on ``grid_size`` log-spaced points and refined in
  the best cell by ``refine_steps`` bisection steps on the sign of the slope (each halves the cell). Eigenvalues below
  :math:`10 N \varepsilon \sigma_{\max}` count as zero. For :math:`R = sI` the answer is :math:`\sqrt{2/s}`.

  Scale-equivariant: :math:`\alpha^\star(c^2 R) = \alpha^\star(R)/c`, hence :math:`C(c^2R, \alpha^\star(c^2R)) =
  C(R, \alpha^\star(R))`. The result is a selection, not a smooth function of R: it is returned under
  ``stop_gradient``.

  Args:
    r: symmetric PSD correlation matrix, [..., N, N], not zero.
    grid_size: points of the log grid (>= 3).
    refine_steps: bisection iterations (>= 0).

  Returns:
    :math:`\alpha^\star > 0`, [...].

  Raises:
    ValueError: R is not square and symmetric, is empty, holds NaN or inf, is not PSD, or is zero (concrete inputs).

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import optimal_aperture
    >>> round(float(optimal_aperture(4.0 * jnp.eye(3))), 6)  # sqrt(2 / 4)
    0.707107
  """
  fn = "optimal_aperture"
  grid_size = _checks.as_int(fn, "grid_size", grid_size, low=3)
  refine_steps = _checks.as_int(fn, "refine_steps", refine_steps, low=0)
  r = _as_correlation(fn, r)
  sigma = jax.lax.stop_gradient(_spectrum(r))
  search = jnp.vectorize(lambda s: _optimal_log_aperture(s, grid_size, refine_steps), signature="(n)->()")
  return jnp.exp(search(sigma))


def relative_aperture(r: ArrayLike, *, ratio: ArrayLike = 2.0) -> jax.Array:
  r"""The aperture that puts R's mean eigenvalue at :math:`x = \rho`.

  :math:`\alpha = \sqrt{\rho N / \operatorname{tr} R}`.

  The cheap scale-normalised rule (no eigendecomposition): the mean eigenvalue :math:`\bar\sigma` gets conceptor
  eigenvalue :math:`\rho / (1 + \rho)`. The default :math:`\rho = 2` is where each term of Jaeger's norm gradient
  peaks, so for :math:`R = sI` this equals :func:`optimal_aperture`. Scale-equivariant like it.

  Args:
    r: symmetric PSD correlation matrix, [..., N, N], not zero.
    ratio: :math:`\rho > 0`, scalar or broadcastable to [...].

  Returns:
    :math:`\alpha > 0`, [...].

  Examples:
    >>> import jax.numpy as jnp
    >>> from bcjax.conceptors import relative_aperture
    >>> round(float(relative_aperture(jnp.diag(jnp.array([1.0, 3.0])))), 6)  # sqrt(2 * 2 / 4)
    1.0
  """
  fn = "relative_aperture"
  r = _as_correlation(fn, r)
  ratio = _as_positive(fn, "ratio", ratio)
  mean = jnp.trace(r, axis1=-2, axis2=-1) / r.shape[-1]
  return jnp.sqrt(ratio / mean)
