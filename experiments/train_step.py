r"""The one train step every experiment parametrises: a state, a gradient, a descent.

A step is ``train_step(state, batch, rng) -> (state, metrics)``, jitted with the state donated (its output reuses
the input's buffers). :func:`make_train_step` composes it from three parts, and an experiment supplies only what is
its own:

* ``prepare(state, batch, rng) -> inputs`` draws or gathers the step's rows in the global view (replicated), e.g.
  sampled pairs and entity batches, the exact Gramians of the oracle, the keys a step splits;
* ``gradient(params, extra, inputs) -> (grads, (extra, metrics))`` is the loss's gradient (usually
  ``jax.grad(loss_fn, has_aux=True)``; ICL's meta-gradient is another). ``extra`` is the state the loss carries
  forward besides the parameters: Gramian estimators, BatchNorm statistics, learning-rate agents;
* ``descent(grad_fn, state, inputs, place) -> (params, opt_state, extra, metrics)`` calls ``grad_fn`` on the placed
  inputs and applies the update: :func:`optax_descent` for an optax transformation, a row-sparse update
  (:class:`experiments.two_tower.sparse.RowSparse`), SGD at a rate a learned agent picks.

With ``mesh`` the step is data-parallel: ``gradient`` runs inside :func:`jax.shard_map` with the inputs placed by
``input_specs`` (the batch's rows split over :data:`~bcjax.parallel.DATA_AXIS`, the rest replicated) and replicated
outputs; shard_map's autodiff sums the gradient of a replicated parameter over the devices and the losses' means are
global (``axis_name``), so every device holds the one-device gradient and applies the same update.
"""

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import optax

from bcjax.parallel import DATA_AXIS, split_rows

# ``train_step(state, ...)`` jitted with the state donated: the step's output state reuses the input's buffers.
donating_jit = functools.partial(jax.jit, donate_argnums=(0,))


class TrainState(NamedTuple):
  """What a train step carries from one step to the next.

  Attributes:
    params: the trained parameters (a pytree: an ``nnx.State``, a dict of them, a map's arrays).
    opt_state: the descent's state (an optax state; :class:`~experiments.two_tower.sparse.RowSparseState`).
    step: the number of steps taken, int32 [].
    extra: what the loss carries forward besides the parameters, updated by the gradient: the Gramian estimators'
      states, BatchNorm statistics, the learning-rate agents; ``()`` when none.
  """

  params: Any
  opt_state: Any
  step: jax.Array
  extra: Any = ()


@functools.partial(jax.jit, static_argnums=(0,))
def fresh_state(optimizer, params, extra=()) -> TrainState:
  """A new :class:`TrainState` in one compiled program: copies of ``params`` and ``extra`` (the step donates its
  state, so the caller's arrays must not become its buffers), ``optimizer.init(params)`` and step 0. ``optimizer``
  is static (hashable: an optax transformation, a ``RowSparse``). Built leaf by leaf outside ``jit`` it would cost a
  small compiled program per leaf shape."""
  copy = lambda tree: jax.tree.map(jnp.copy, tree)
  return TrainState(copy(params), optimizer.init(params), jnp.zeros((), jnp.int32), copy(extra))


GradFn = Callable[[Any, Any, Any], tuple[Any, tuple[Any, dict]]]


class Descent(Protocol):
  """``descent(grad_fn, state, inputs, place) -> (params, opt_state, extra, metrics)``: one update of ``state``.

  ``grad_fn(params, extra, placed_inputs) -> (grads, (extra, metrics))`` is the (data-parallel) gradient; ``place``
  puts the global inputs where ``grad_fn`` reads them (split over the mesh; the identity without one), after any
  re-indexing the descent does (a row-sparse update re-indexes the bags into the rows it gathers).
  """

  def __call__(
    self, grad_fn: GradFn, state: TrainState, inputs: Any, place: Callable[[Any], Any]
  ) -> tuple[Any, Any, Any, dict]: ...


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


def optax_descent(optimizer: optax.GradientTransformation, scale: Callable[[Any], jax.Array] | None = None) -> Descent:
  """The dense descent: ``optimizer`` applied to every parameter, its update multiplied by ``scale(inputs)`` when
  given (see :func:`apply_optimizer`)."""

  def descend(grad_fn: GradFn, state: TrainState, inputs, place):
    grads, (extra, metrics) = grad_fn(state.params, state.extra, place(inputs))
    factor = None if scale is None else scale(inputs)
    params, opt_state = apply_optimizer(optimizer, grads, state.opt_state, state.params, factor)
    return params, opt_state, extra, metrics

  return descend


def _is_spec(x) -> bool:
  return isinstance(x, jax.sharding.PartitionSpec)


def place_inputs(mesh: jax.sharding.Mesh, input_specs, inputs):
  """``inputs`` placed as ``input_specs`` (a prefix pytree of :class:`jax.P`) says: a subtree whose spec splits an
  axis over :data:`~bcjax.parallel.DATA_AXIS` is split over the mesh (:func:`bcjax.parallel.split_rows`), one whose
  spec is ``jax.P()`` is left as it is (replicated)."""

  def place(spec, subtree):
    if spec == jax.P():
      return subtree
    return split_rows(mesh, subtree, axis=list(spec).index(DATA_AXIS))

  return jax.tree.map(place, input_specs, inputs, is_leaf=_is_spec)


def make_train_step(
  gradient: GradFn,
  descent: Descent,
  *,
  prepare: Callable[[TrainState, Any, jax.Array], Any] | None = None,
  mesh: jax.sharding.Mesh | None = None,
  input_specs: Any = None,
  jit: bool = True,
) -> Callable:
  """The train step ``train_step(state, batch, rng) -> (state, metrics)`` of the given parts.

  Args:
    gradient: ``(params, extra, inputs) -> (grads, (extra, metrics))``; with ``mesh`` it sees one device's block
      of the inputs and its means must be global (``axis_name``).
    descent: the update (:class:`Descent`), e.g. :func:`optax_descent`.
    prepare: ``(state, batch, rng) -> inputs``, run in the global view; None: the inputs are ``batch`` and ``rng``
      is unused (the caller drew the batch).
    mesh: a data mesh (:func:`bcjax.parallel.data_mesh`) to run ``gradient`` on, or None (one device).
    input_specs: with ``mesh``, how the inputs are split: a prefix pytree of :class:`jax.P` (``jax.P(DATA_AXIS)``
      for rows split over the mesh, ``jax.P()`` for replicated leaves).
    jit: jit the step with the state donated; False returns the pure function (to compose, e.g. in a scan).

  Returns:
    ``train_step(state, batch, rng) -> (state, metrics)``; the new state's ``step`` is one more.

  Raises:
    ValueError: a mesh without ``input_specs``.
  """
  if mesh is not None and input_specs is None:
    raise ValueError("make_train_step: a `mesh` needs the `input_specs` that split the inputs over it")
  if mesh is None:
    grad_fn, place = gradient, lambda inputs: inputs
  else:
    grad_fn = jax.shard_map(gradient, mesh=mesh, in_specs=(jax.P(), jax.P(), input_specs), out_specs=jax.P())
    place = functools.partial(place_inputs, mesh, input_specs)

  def train_step(state: TrainState, batch, rng: jax.Array):
    inputs = batch if prepare is None else prepare(state, batch, rng)
    params, opt_state, extra, metrics = descent(grad_fn, state, inputs, place)
    return TrainState(params, opt_state, state.step + 1, extra), metrics

  return donating_jit(train_step) if jit else train_step


def require_divisible(where: str, mesh: jax.sharding.Mesh | None, **sizes: int) -> None:
  """Raises ValueError naming the size and the device count when a batch size does not split evenly over ``mesh``.

  Raises:
    ValueError: a size not divisible by the mesh's device count.
  """
  if mesh is None:
    return
  for name, size in sizes.items():
    if size % mesh.devices.size:
      raise ValueError(
        f"{where}: `{name}`={size} is not divisible by the {mesh.devices.size} devices of the mesh (--devices)"
      )
