"""The train-step skeleton that two_tower, error_amplification and bc_aligner share: a loss's gradient, made
data-parallel over a mesh when one is given, applied by an optax optimiser inside a jitted step that donates its
state. Each experiment keeps only what is its own: the loss, the batch and what its state carries."""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

# ``train_step(state, ...)`` jitted with the state donated: the step's output state reuses the input's buffers.
donating_jit = functools.partial(jax.jit, donate_argnums=(0,))


def data_parallel(grad_fn: Callable, mesh: jax.sharding.Mesh | None, in_specs: tuple) -> Callable:
  """``grad_fn`` (a :func:`jax.grad` or :func:`jax.value_and_grad` of a loss) as it runs on ``mesh``: inside
  :func:`jax.shard_map` with its arguments placed by ``in_specs`` (replicated parameters, the batch's rows split
  over the data axis) and replicated outputs. shard_map's autodiff sums the gradient of a replicated parameter over
  the devices, and the loss's means must be global (``axis_name``), so the result is the one-device gradient.
  Without a mesh, ``grad_fn`` itself."""
  if mesh is None:
    return grad_fn
  return jax.shard_map(grad_fn, mesh=mesh, in_specs=in_specs, out_specs=jax.P())


def apply_optimizer(
  optimizer: optax.GradientTransformation, grads, opt_state, params, scale: jax.Array | float | None = None
):
  """One optax update: ``(params, opt_state)`` after ``grads``. ``scale`` multiplies the update (a traced
  per-epoch learning-rate factor: for Adam and SGD the step is linear in the rate, so this is the optimiser at
  rate × scale without a recompile)."""
  updates, opt_state = optimizer.update(grads, opt_state, params)
  if scale is not None:
    updates = jax.tree.map(lambda u: u * jnp.asarray(scale, u.dtype), updates)
  return optax.apply_updates(params, updates), opt_state
