r"""A family of backward transformations beyond the linear map of BC-Aligner.

A family of backward transformations :math:`B_k: \mathbb R^{D_k} \to \mathbb R^{D_{k-1}}` beyond the linear map of
BC-Aligner (the paper names nonlinear maps as future work; practitioners fit orthogonal, low-rank affine and small
residual MLP adapters between embedding versions).

Each kind is a :class:`BackwardTransform`: pure ``init``/``apply`` functions over a dict of arrays (the kind's
parameters) and, where one exists, ``fit``, the closed-form minimiser of the single-step loss (eq. 7) within the
kind on fixed embedding pairs. Row convention as everywhere in :mod:`bcjax.alignment`: ``z`` is [n, D_k].

* ``linear``: :math:`B(z) = W z`, ``{"w": [D_(k-1), D_k]}``; fit: least squares (:func:`least_squares_backward`).
* ``orthogonal``: :math:`B(z) = Q(A) z` with :math:`Q(A)` the semi-orthogonal factor of the free parameter
  :math:`A` (orthonormal rows when :math:`D_{k-1} \le D_k`, orthonormal columns otherwise), so every gradient step
  on :math:`A` keeps :math:`B` an isometry (onto its image); fit: orthogonal Procrustes,
  :math:`Q = U V^\top` from the SVD :math:`Z_{k-1}^\top Z_k = U \Sigma V^\top` (Schönemann 1966).
* ``affine``: :math:`B(z) = W z + b`, full rank or :math:`W = U V^\top` of rank r; fit: least squares on centred
  rows, and for rank r reduced-rank regression (the fitted values' top-r principal subspace; Izenman 1975).
* ``mlp``: :math:`B(z) = S z + W_2\,\mathrm{relu}(W_1 z + b_1) + b_2`, a residual MLP with one hidden layer whose
  MLP branch starts at zero (it starts as a linear map); no closed form, it is fitted by gradient descent
  (:func:`bcjax.alignment.fit_posthoc` with ``transform=``).

References:
  Hu et al., "Learning Backward Compatible Embeddings", KDD 2022 (linear B_k, section 3.2.1).
  Schönemann, "A generalized solution of the orthogonal Procrustes problem", Psychometrika 1966.
  Izenman, "Reduced-rank regression for the multivariate linear model", J. Multivariate Analysis 1975.
"""

import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike, DTypeLike

from bcjax import _checks
from bcjax.alignment._linear import init_backward, least_squares_backward

Params = dict[str, jax.Array]
"""A kind's parameters as ``init`` and ``fit`` return them: a dict of arrays named by the kind."""

ParamsLike = Mapping[str, ArrayLike]
"""Parameters as ``apply`` and ``dims`` accept them: any mapping of array-likes (a registry's NumPy arrays too)."""


class TransformInitFn(Protocol):
  """``init(key, d_prev, d_new, dtype=float32) -> params``: a kind's initial parameters."""

  def __call__(self, key: jax.Array, d_prev: int, d_new: int, dtype: DTypeLike = jnp.float32) -> Params:
    """The initial parameters of a map from D_k = ``d_new`` to D_(k-1) = ``d_prev``.

    Args:
      key: a PRNG key.
      d_prev: D_(k-1), the old version's width.
      d_new: D_k, the new version's width.
      dtype: the parameters' dtype.

    Returns:
      The kind's dict of arrays.
    """
    ...


class TransformApplyFn(Protocol):
  """``apply(params, z) -> B(z)``: the map applied to rows."""

  def __call__(self, params: ParamsLike, z: ArrayLike) -> jax.Array:
    """:math:`B(z)`.

    Args:
      params: the kind's parameters.
      z: new-version embeddings [n, D_k].

    Returns:
      [n, D_(k-1)].
    """
    ...


class TransformFitFn(Protocol):
  """``fit(z_new, z_prev) -> params``: the kind's closed-form single-step minimiser (eq. 7) on fixed pairs."""

  def __call__(self, z_new: ArrayLike, z_prev: ArrayLike) -> Params:
    r"""The parameters minimising :math:`\sum_i \lVert B(z_{k,i}) - z_{k-1,i}\rVert^2` within the kind.

    Args:
      z_new: new-version embeddings [n, D_k].
      z_prev: the same rows' old-version embeddings [n, D_(k-1)].

    Returns:
      The kind's parameters.
    """
    ...


class TransformDimsFn(Protocol):
  """``dims(params) -> (d_prev, d_new)``: the widths a kind's parameters map between."""

  def __call__(self, params: ParamsLike) -> tuple[int, int]:
    """(D_(k-1), D_k) of ``params``.

    Args:
      params: the kind's parameters.

    Returns:
      ``(d_prev, d_new)``.
    """
    ...


class BackwardTransform(NamedTuple):
  """One kind of backward map (hashable: pass it as a static argument to ``jax.jit``).

  Attributes:
    kind: its name, one of :data:`TRANSFORM_KINDS`.
    hparams: its hyper-parameters, e.g. ``(("rank", 8),)``.
    init: the initial parameters (:class:`TransformInitFn`).
    apply: the map on rows [n, D_k] -> [n, D_(k-1)] (:class:`TransformApplyFn`).
    fit: the closed-form single-step minimiser within the kind (:class:`TransformFitFn`), or ``None`` where there
      is none (``mlp``).
    dims: ``(d_prev, d_new)`` of a parameter dict (:class:`TransformDimsFn`).
  """

  kind: str
  hparams: tuple[tuple[str, int], ...]
  init: TransformInitFn
  apply: TransformApplyFn
  fit: TransformFitFn | None
  dims: TransformDimsFn

  def __reduce__(self):
    # Pickled by name (its functions are closures): a model or stage holding a kind unpickles to the cached factory's
    # own object, so jit caches keyed on it stay hits.
    return _rebuild, (self.kind, self.hparams)


def _rebuild(kind: str, hparams: tuple[tuple[str, int], ...]) -> "BackwardTransform":
  return backward_transform(kind, **dict(hparams))


def _rows(fn: str, z: ArrayLike, d: int, name: str = "z") -> jax.Array:
  z = _checks.as_float_array(fn, name, z, ndim=2, finite=False)
  if z.shape[1] != d:
    raise ValueError(f"{fn}: `{name}` has shape {tuple(z.shape)} but the transform maps D_k={d} columns")
  return z


def _check_params(fn: str, params, shapes: dict[str, tuple[int, ...]]) -> None:
  if not isinstance(params, dict) or set(params) != set(shapes):
    got = sorted(params) if isinstance(params, dict) else type(params).__name__
    raise ValueError(f"{fn}: `params` must be a dict with keys {sorted(shapes)}, got {got}")
  for name, shape in shapes.items():
    if tuple(params[name].shape) != shape:
      raise ValueError(f"{fn}: `params['{name}']` has shape {tuple(params[name].shape)}, expected {shape}")


def _dims(fn: str, d_prev, d_new) -> tuple[int, int]:
  return _checks.check_positive_int(fn, "d_prev", d_prev), _checks.check_positive_int(fn, "d_new", d_new)


@functools.cache
def linear_transform() -> BackwardTransform:
  r"""BC-Aligner's linear backward map :math:`B_k(z) = W_k z` (section 3.2.1).

  BC-Aligner's :math:`B_k(z) = W_k z` (section 3.2.1), ``{"w": [D_(k-1), D_k]}``; :func:`apply_backward` on the dict's
  weight, so it gives the same numbers as the array API.
  """

  def init(key, d_prev, d_new, dtype=jnp.float32):
    return {"w": init_backward(key, *_dims("linear.init", d_prev, d_new), dtype=dtype)}

  def apply(params, z):
    w = params["w"]
    return _rows("linear.apply", z, w.shape[1]) @ w.T

  def fit(z_new, z_prev):
    return {"w": least_squares_backward(z_new, z_prev)}

  return BackwardTransform("linear", (), init, apply, fit, lambda p: tuple(p["w"].shape))


def semi_orthogonal(a: ArrayLike) -> jax.Array:
  r"""The semi-orthogonal factor :math:`Q(A)` of A [d_prev, d_new] from its QR decomposition.

  Signs fixed so that R has a non-negative diagonal (which makes the map smooth and :math:`Q(Q) = Q`): orthonormal rows
  (:math:`QQ^\top = I`) when d_prev <= d_new, orthonormal columns otherwise.

  Args:
    a: the free parameter A, [d_prev, d_new].

  Returns:
    Q(A), [d_prev, d_new].

  Raises:
    TypeError: an input that is not a real floating array.
    ValueError: an input that is not a matrix.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> from bcjax.alignment import semi_orthogonal
    >>> q = semi_orthogonal(jax.random.normal(jax.random.key(0), (2, 3)))
    >>> bool(jnp.allclose(q @ q.T, jnp.eye(2), atol=1e-6))
    True
  """
  a = _checks.as_float_array("semi_orthogonal", "a", a, ndim=2, finite=False)
  tall = a if a.shape[0] >= a.shape[1] else a.T
  q, r = jnp.linalg.qr(tall)
  signs = jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0).astype(q.dtype)
  q = q * signs
  return q if a.shape[0] >= a.shape[1] else q.T


def orthogonal_transform(*, bias: bool = False) -> BackwardTransform:
  r"""A (partial) isometry :math:`B_k(z) = Q(A) z`, optionally centred with a bias.

  A (partial) isometry :math:`B_k(z) = Q(A) z` (:func:`semi_orthogonal`), ``{"a": [D_(k-1), D_k]}``; with ``bias`` the
  centred isometry :math:`B_k(z) = Q(A) z + b`, ``{"a", "b": [D_(k-1)]}``, which also moves the spaces' means onto each
  other (two models' embeddings often sit in cones around different mean vectors, which no rotation moves). Starts from
  a Haar-random semi-orthogonal map and b = 0. ``fit`` minimises :math:`\sum_x \lVert Q z_k(x) + b - z_{k-1}(x)
  \rVert^2` over semi-orthogonal Q (and b); with ``bias`` the optimum is :math:`b = \mu_{k-1} - Q \mu_k` and Q solves
  the problem below on centred rows:

  * :math:`D_{k-1} \ge D_k` (orthonormal columns, :math:`\lVert Qz \rVert = \lVert z \rVert`): orthogonal
    Procrustes, :math:`Q^\star = U V^\top` with :math:`Z_{k-1}^\top Z_k = U \Sigma V^\top` (thin SVD), exact.
  * :math:`D_{k-1} < D_k` (orthonormal rows: Q also drops a subspace, so :math:`\lVert Qz \rVert` depends on Q and
    the plain SVD solution is not the minimiser): the projection Procrustes problem, solved by Green and Gower's
    majorisation. Q is completed to a square orthogonal :math:`R = [Q; Q_\perp]`; each iteration solves the square
    Procrustes problem for the target :math:`[Z_{k-1}, Z_k Q_\perp^\top]`, which never increases the loss. It starts
    from the zero-padded target's solution and runs until the loss stops falling (relative change < 1e-12) or
    ``max_iterations``; on :math:`D_k^2` Gram matrices, so each iteration costs :math:`O(D_k^3)` whatever n.

  Args:
    bias: add a bias b, the centred isometry.

  Returns:
    The ``orthogonal`` :class:`BackwardTransform`.
  """
  return _orthogonal(bool(bias))


@functools.cache
def _orthogonal(bias: bool) -> BackwardTransform:
  # One cached object per bias, whether it was asked for as bias=True, bias=1 or not at all.

  def init(key, d_prev, d_new, dtype=jnp.float32):
    d_prev, d_new = _dims("orthogonal.init", d_prev, d_new)
    params = {"a": semi_orthogonal(jax.random.normal(key, (d_prev, d_new), dtype))}
    if bias:
      params["b"] = jnp.zeros(d_prev, dtype)
    return params

  def apply(params, z):
    a = params["a"]
    out = _rows("orthogonal.apply", z, a.shape[1]) @ semi_orthogonal(a).T
    return out + params["b"] if bias else out

  def fit(z_new, z_prev):
    z_new, z_prev = _pair("orthogonal.fit", z_new, z_prev)
    if bias:
      mu_new, mu_prev = jnp.mean(z_new, axis=0), jnp.mean(z_prev, axis=0)
      z_new, z_prev = z_new - mu_new, z_prev - mu_prev
    q = procrustes(z_new.T @ z_new, z_prev.T @ z_new, jnp.sum(z_prev * z_prev))
    return {"a": q, "b": mu_prev - q @ mu_new} if bias else {"a": q}

  return BackwardTransform(
    "orthogonal", (("bias", 1),) if bias else (), init, apply, fit, lambda p: tuple(p["a"].shape)
  )


@jax.jit
def procrustes(
  gram: jax.Array, cross: jax.Array, energy: jax.Array, tolerance: float = 1e-12, max_iterations: int = 500
) -> jax.Array:
  r"""The semi-orthogonal Q [d_prev, d_new] minimising :math:`\lVert Z Q^\top - Y \rVert_F^2` from moments.

  The semi-orthogonal Q [d_prev, d_new] minimising :math:`\lVert Z Q^\top - Y \rVert_F^2` from the sufficient statistics
  ``gram`` = :math:`Z^\top Z` [d_new, d_new], ``cross`` = :math:`Y^\top Z` [d_prev, d_new] and ``energy`` =
  :math:`\lVert Y \rVert_F^2` (see :func:`orthogonal_transform` for the two cases), so a fit can stream its rows into
  the statistics. ``tolerance``, ``max_iterations``: the projection case stops when an iteration lowers the loss by less
  than this share of it, or after this many iterations.
  """
  d_prev, d_new = cross.shape
  if d_prev >= d_new:
    u, _, vt = jnp.linalg.svd(cross, full_matrices=False)
    return u @ vt
  return _projection_procrustes(gram, cross, energy, max_iterations=max_iterations, tolerance=tolerance)


def _projection_procrustes(
  gram: jax.Array, cross: jax.Array, energy: jax.Array, max_iterations: int = 500, tolerance: float = 1e-12
):
  """Green and Gower's majorisation for the projection Procrustes problem.

  Green and Gower's majorisation for min ||Z Q^T - Y||^2 over Q [p, d] with orthonormal rows, from ``gram`` = Z^T Z [d,
  d], ``cross`` = Y^T Z [p, d] and ``energy`` = ||Y||^2 (see :func:`orthogonal_transform`).
  """
  p, d = cross.shape

  def square_procrustes(q_perp):
    target = jnp.concatenate([cross, q_perp @ gram])  # [Y, Z Q_perp^T]^T Z
    u, _, vt = jnp.linalg.svd(target)
    r = u @ vt
    return r[:p], r[p:]

  def loss(q):
    return jnp.trace(q @ gram @ q.T) - 2.0 * jnp.sum(q * cross) + energy

  def body(carry):
    q, q_perp, previous, _, i = carry
    q, q_perp = square_procrustes(q_perp)
    return q, q_perp, loss(q), previous, i + 1

  def cond(carry):
    _, _, current, previous, i = carry
    return (i < max_iterations) & ((i == 0) | (previous - current > tolerance * jnp.abs(previous)))

  q, q_perp = square_procrustes(jnp.zeros((d - p, d), gram.dtype))
  start = (q, q_perp, loss(q), jnp.asarray(jnp.inf, gram.dtype), jnp.zeros((), jnp.int32))
  return jax.lax.while_loop(cond, body, start)[0]


def _pair(fn: str, z_new, z_prev) -> tuple[jax.Array, jax.Array]:
  z_new = _checks.as_float_array(fn, "z_new", z_new, ndim=2)
  z_prev = _checks.as_float_array(fn, "z_prev", z_prev, ndim=2)
  if z_new.shape[0] != z_prev.shape[0] or z_new.shape[0] == 0:
    raise ValueError(
      f"{fn}: `z_new` has shape {tuple(z_new.shape)} and `z_prev` has shape {tuple(z_prev.shape)}; "
      f"both must hold the same rows, at least one"
    )
  dtype = jnp.result_type(z_new, z_prev)
  return z_new.astype(dtype), z_prev.astype(dtype)


@functools.cache
def affine_transform(*, rank: int | None = None) -> BackwardTransform:
  r"""An affine backward map :math:`B_k(z) = W z + b`, full rank or of rank r.

  An affine :math:`B_k(z) = W z + b`: ``{"w": [D_(k-1), D_k], "b": [D_(k-1)]}``, or with ``rank`` r :math:`W = U
  V^\top`: ``{"u": [D_(k-1), r], "v": [D_k, r], "b": [D_(k-1)]}`` (r <= min(D_(k-1), D_k)).

  ``fit``: with centred rows :math:`\bar Z = Z - \mathbf 1 \mu^\top`, :math:`W_{\rm LS}` is the least-squares map
  of :math:`\bar Z_k` onto :math:`\bar Z_{k-1}`; for rank r, :math:`W = P_r W_{\rm LS}` with :math:`P_r` the
  projection onto the top-r right singular vectors of the fitted values :math:`\bar Z_k W_{\rm LS}^\top`
  (reduced-rank regression, the minimiser among rank-r maps); :math:`b = \mu_{k-1} - W \mu_k`.
  """
  if rank is not None:
    rank = _checks.check_positive_int("affine", "rank", rank)

  def shapes(d_prev, d_new):
    if rank is None:
      return {"w": (d_prev, d_new), "b": (d_prev,)}
    if rank > min(d_prev, d_new):
      raise ValueError(f"affine: `rank`={rank} exceeds min(d_prev, d_new) = min({d_prev}, {d_new})")
    return {"u": (d_prev, rank), "v": (d_new, rank), "b": (d_prev,)}

  def init(key, d_prev, d_new, dtype=jnp.float32):
    d_prev, d_new = _dims("affine.init", d_prev, d_new)
    shapes(d_prev, d_new)
    if rank is None:
      return {"w": init_backward(key, d_prev, d_new, dtype=dtype), "b": jnp.zeros(d_prev, dtype)}
    k_u, k_v = jax.random.split(key)
    return {
      "u": init_backward(k_u, d_prev, rank, dtype=dtype),
      "v": init_backward(k_v, d_new, rank, dtype=dtype),
      "b": jnp.zeros(d_prev, dtype),
    }

  def apply(params, z):
    if rank is None:
      return _rows("affine.apply", z, params["w"].shape[1]) @ params["w"].T + params["b"]
    return (_rows("affine.apply", z, params["v"].shape[0]) @ params["v"]) @ params["u"].T + params["b"]

  def fit(z_new, z_prev):
    z_new, z_prev = _pair("affine.fit", z_new, z_prev)
    shapes(z_prev.shape[1], z_new.shape[1])
    mu_new, mu_prev = jnp.mean(z_new, axis=0), jnp.mean(z_prev, axis=0)
    w = least_squares_backward(z_new - mu_new, z_prev - mu_prev)
    if rank is None:
      return {"w": w, "b": mu_prev - w @ mu_new}
    _, _, vt = jnp.linalg.svd((z_new - mu_new) @ w.T, full_matrices=False)
    u = vt[:rank].T  # [d_prev, r], the fitted values' top-r principal directions
    v = w.T @ u  # [d_new, r]: W_r = u u^T W = u v^T
    return {"u": u, "v": v, "b": mu_prev - u @ (v.T @ mu_new)}

  def dims(params):
    return (params["b"].shape[0], params["w"].shape[1] if rank is None else params["v"].shape[0])

  return BackwardTransform("affine", () if rank is None else (("rank", rank),), init, apply, fit, dims)


@functools.cache
def mlp_transform(*, hidden: int = 64) -> BackwardTransform:
  r"""A residual MLP backward map with ``hidden`` units (default 64).

  A residual MLP :math:`B_k(z) = S z + W_2\,\mathrm{relu}(W_1 z + b_1) + b_2` with ``hidden`` units (default 64):
  ``{"s": [D_(k-1), D_k], "w1": [h, D_k], "b1": [h], "w2": [D_(k-1), h], "b2": [D_(k-1)]}``. S starts as the linear
  kind's W and :math:`W_2 = 0`, so training starts from a linear map; no closed-form fit.
  """
  hidden = _checks.check_positive_int("mlp", "hidden", hidden)

  def init(key, d_prev, d_new, dtype=jnp.float32):
    d_prev, d_new = _dims("mlp.init", d_prev, d_new)
    k_s, k_1 = jax.random.split(key)
    return {
      "s": init_backward(k_s, d_prev, d_new, dtype=dtype),
      "w1": init_backward(k_1, hidden, d_new, dtype=dtype),
      "b1": jnp.zeros(hidden, dtype),
      "w2": jnp.zeros((d_prev, hidden), dtype),
      "b2": jnp.zeros(d_prev, dtype),
    }

  def apply(params, z):
    z = _rows("mlp.apply", z, params["s"].shape[1])
    h = jax.nn.relu(z @ params["w1"].T + params["b1"])
    return z @ params["s"].T + h @ params["w2"].T + params["b2"]

  return BackwardTransform("mlp", (("hidden", hidden),), init, apply, None, lambda p: tuple(p["s"].shape))


_FACTORIES: dict[str, Callable[..., BackwardTransform]] = {
  "linear": linear_transform,
  "orthogonal": orthogonal_transform,
  "affine": affine_transform,
  "mlp": mlp_transform,
}
TRANSFORM_KINDS = tuple(_FACTORIES)
"""The kinds of backward map by name, the ``kind`` of :func:`backward_transform`: linear, orthogonal, affine,
mlp."""


def backward_transform(kind: str, **hparams) -> BackwardTransform:
  """The transform of a kind by name with its hyper-parameters.

  E.g. ``transform("affine", rank=8)`` (the inverse of ``(t.kind, dict(t.hparams))``, which is how registries store a
  kind).

  Args:
    kind: one of :data:`TRANSFORM_KINDS`.
    **hparams: the kind's hyper-parameters (``rank`` and ``bias`` for affine and orthogonal, ``hidden`` for mlp).

  Returns:
    The kind's :class:`BackwardTransform`, the cached object of its factory.

  Raises:
    ValueError: an unknown kind or hyper-parameters the kind does not take.

  Examples:
    >>> from bcjax.alignment import backward_transform
    >>> backward_transform("mlp", hidden=16).hparams
    (('hidden', 16),)
  """
  if kind not in _FACTORIES:
    raise ValueError(f"backward_transform: `kind` must be one of {list(TRANSFORM_KINDS)}, got {kind!r}")
  try:
    return _FACTORIES[kind](**hparams)
  except TypeError as e:
    raise ValueError(f"backward_transform: bad hyper-parameters {hparams} for kind {kind!r} ({e})") from None


def check_params(fn: str, t: BackwardTransform, params, d_prev: int, d_new: int) -> None:
  """Raises a ValueError naming ``fn`` when ``params`` are not the parameters of ``t`` for (d_prev, d_new)."""
  expected = jax.eval_shape(lambda: t.init(jax.random.key(0), d_prev, d_new))
  _check_params(fn, params, {k: tuple(v.shape) for k, v in expected.items()})
