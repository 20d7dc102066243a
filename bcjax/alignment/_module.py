r"""Backward transformations as flax NNX modules.

The linear :math:`B_k(z_k) = W_k z_k` (section 3.2.1) and any kind of :mod:`bcjax.alignment` (orthogonal, affine,
residual MLP).
"""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import ArrayLike

from bcjax.alignment._compose import apply_backward
from bcjax.alignment._linear import init_backward
from bcjax.alignment._transforms import BackwardTransform, backward_transform, check_params


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


class BackwardMap(nnx.Module):
  r"""A backward map of any kind as a flax NNX module, for joint training inside a version's model.

  :math:`B_k: \mathbb R^{D_k} \to \mathbb R^{D_{k-1}}` of any kind (:func:`bcjax.backward_transform`) as a flax NNX
  module, for joint training inside a version's model.

  The parameters are ``transform.init``'s dict, one :class:`flax.nnx.Param` per array, so ``module.arrays()`` can be
  passed to ``transform.apply``, to the alignment losses (``transform=``) and to
  :meth:`bcjax.versioning.Registry.append` as they are. With ``mlp_transform(hidden=h)`` it is the residual MLP
  :math:`S z + W_2\,\mathrm{relu}(W_1 z + b_1) + b_2` (its branch starts at zero); with ``orthogonal_transform()``
  every optimiser step on the free parameter keeps :math:`B_k` semi-orthogonal.

  Examples:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from bcjax.alignment import BackwardMap, mlp_transform
    >>> b = BackwardMap(mlp_transform(hidden=8), 3, 5, rngs=nnx.Rngs(0))  # (d_prev, d_new)
    >>> b(jnp.ones((2, 5))).shape
    (2, 3)
    >>> sorted(b.arrays())
    ['b1', 'b2', 's', 'w1', 'w2']
  """

  def __init__(self, transform: BackwardTransform, d_prev: int, d_new: int, *, rngs: nnx.Rngs, dtype=jnp.float32):
    if not isinstance(transform, BackwardTransform):
      raise TypeError(
        f"BackwardMap: `transform` must be a BackwardTransform (bcjax.backward_transform(kind)), got "
        f"{type(transform).__name__}"
      )
    # Static, by name: the kind's functions are closures, so the module keeps its kind and hyper-parameters (strings
    # and integers) and looks the cached transform up. A graphdef then pickles on every flax the floors allow (0.12.1
    # flattens a NamedTuple attribute into its closures, which do not pickle).
    self.kind, self.hparams = transform.kind, transform.hparams
    params = transform.init(rngs.params(), d_prev, d_new, dtype=dtype)
    self.params = nnx.Dict({name: nnx.Param(value) for name, value in params.items()})

  @classmethod
  def from_params(cls, transform: BackwardTransform, params: dict) -> "BackwardMap":
    """The module holding given parameters of ``transform`` (e.g. ``Registry.backward_map(k)``'s), checked."""
    fn = "BackwardMap.from_params"
    try:
      d_prev, d_new = transform.dims(params)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
      got = (
        {k: tuple(getattr(v, "shape", ())) for k, v in params.items()}
        if isinstance(params, dict)
        else type(params).__name__
      )
      raise ValueError(f"{fn}: `params` are not the parameters of a {transform.kind!r} map, got {got}") from None
    check_params(fn, transform, params, d_prev, d_new)
    module = cls(transform, d_prev, d_new, rngs=nnx.Rngs(0))
    for name, value in params.items():
      module.params[name] = nnx.Param(jnp.asarray(value))
    return module

  @property
  def transform(self) -> BackwardTransform:
    """The kind of map, the cached object of :func:`~bcjax.alignment.backward_transform`."""
    return backward_transform(self.kind, **dict(self.hparams))

  def arrays(self) -> dict[str, jax.Array]:
    """The parameters as a dict of arrays, ``transform.apply``'s first argument."""
    return {name: param[...] for name, param in self.params.items()}

  def __call__(self, z: ArrayLike) -> jax.Array:
    return self.transform.apply(self.arrays(), z)
