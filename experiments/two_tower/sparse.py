r"""Optimisers that update only the input-table rows a step uses.

The two-tower input table has a row per feature (at a million pages, a million rows), and a step reads a few
thousand of them. Autodiff's gradient of the table is dense (a scatter-add into a zero [V, d] array) and a dense
optimiser then reads and writes every row: at n = 1M that is ~0.13 s of a step whose model work takes a few ms.

:class:`RowSparse` applies an optax transformation to the rows a step uses only: :func:`descent` gathers them
(``jnp.unique`` with a static size), differentiates the loss with respect to that small table (the step's bags
re-indexed into it), runs the transformation on those rows and their slices of its state, and writes both back;
every other parameter (the towers) takes the dense transformation as before. What that means depends on the
transformation:

* **Adagrad and SGD: exactly the dense update.** A row whose gradient is zero keeps its parameters and its Adagrad
  accumulator (:math:`a \leftarrow a + 0`, :math:`\theta \leftarrow \theta - \eta \cdot 0 / \sqrt{a + \epsilon}`),
  so skipping it changes nothing.
* **Adam: lazy Adam** (TensorFlow Addons' ``LazyAdam``), a different optimiser. Dense Adam decays both moments of
  every row every step and keeps moving a row with momentum after its gradient stops; lazy Adam updates a row's
  moments and parameters only in the steps that use it (the bias correction counts every step). It is the usual
  optimiser of large embedding tables; on a row every step uses, it equals Adam.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from experiments.train_step import Descent, optax_descent

TABLE = "inputs"  # the TwoTower attribute holding the shared input table


class RowSparse(NamedTuple):
  """``table`` applied to the input-table rows a step uses, ``towers`` to every other parameter, densely (see the
  module docstring). Pass it where a train step takes an optimiser."""

  table: optax.GradientTransformation
  towers: optax.GradientTransformation

  def init(self, params: nnx.State) -> "RowSparseState":
    table, rest = split_table(params)
    return RowSparseState(self.towers.init(rest), self.table.init(table))


class RowSparseState(NamedTuple):
  towers: optax.OptState  # the dense transformation's state of every parameter but the table
  table: optax.OptState  # the table transformation's state: [V, d] leaves (one row per table row) and scalars


def split_table(params: nnx.State) -> tuple[nnx.State, nnx.State]:
  """(the input table, every other parameter)."""
  return nnx.split_state(params, lambda path, _: path[0] == TABLE, ...)


def step_rows(groups, vocab_size: int) -> tuple[jax.Array, object]:
  """The distinct table rows the bags of ``groups`` (a pytree of id arrays, negative = padding) use, ascending and
  padded with ``vocab_size`` to the number of ids (a static size), and ``groups`` re-indexed into those rows."""
  ids = jnp.concatenate([g.reshape(-1) for g in jax.tree.leaves(groups)])
  rows = jnp.unique(jnp.where(ids >= 0, ids, vocab_size), size=ids.shape[0], fill_value=vocab_size)
  local = jax.tree.map(lambda g: jnp.where(g >= 0, jnp.searchsorted(rows, g), -1).astype(g.dtype), groups)
  return rows, local


def update_rows(transform: optax.GradientTransformation, table, state, rows: jax.Array, grads):
  """``transform`` on the distinct ``rows`` [R] of ``table`` (a pytree with one [V, d] leaf) given their gradients
  ``grads`` (the same pytree, [R, d]); rows >= V are padding and nothing is written for them. Every state leaf
  shaped like the table is read and written at those rows; other leaves (step counts) are taken as updated.
  Returns (table, state)."""
  shape = jax.tree.leaves(table)[0].shape

  def rowwise(x):
    return x.shape == shape

  def at_rows(x):
    return x.at[rows].get(mode="fill", fill_value=0) if rowwise(x) else x

  def write(full, part):
    return full.at[rows].set(part, mode="drop", unique_indices=True) if rowwise(full) else part

  params = jax.tree.map(at_rows, table)
  updates, part = transform.update(grads, jax.tree.map(at_rows, state), params)
  table = jax.tree.map(lambda p, u: p.at[rows].add(u.astype(p.dtype), mode="drop", unique_indices=True), table, updates)
  return table, jax.tree.map(write, state, part)


def descent(optimizer) -> Descent:
  """The :class:`~experiments.train_step.Descent` of ``optimizer``: a :class:`RowSparse` one replaces the input
  table by the rows the step's bags (``inputs.groups``: a pytree of id arrays into the table, replicated) use,
  differentiates with the bags re-indexed into them and updates those rows only (see the module docstring); any
  other optimiser is an optax transformation applied densely (:func:`~experiments.train_step.optax_descent`). The
  loss must read the table only through ``inputs.groups``."""
  if not isinstance(optimizer, RowSparse):
    return optax_descent(optimizer)

  def descend(grad_fn, state, inputs, place):
    table, rest = split_table(state.params)
    rows, local_groups = step_rows(inputs.groups, jax.tree.leaves(table)[0].shape[0])
    local = jax.tree.map(lambda t: t.at[rows].get(mode="fill", fill_value=0), table)
    inputs = place(inputs._replace(groups=local_groups))
    grads, (extra, metrics) = grad_fn(nnx.merge_state(local, rest), state.extra, inputs)
    table_grads, rest_grads = split_table(grads)
    updates, towers = optimizer.towers.update(rest_grads, state.opt_state.towers, rest)
    table, table_state = update_rows(optimizer.table, table, state.opt_state.table, rows, table_grads)
    params = nnx.merge_state(table, optax.apply_updates(rest, updates))
    return params, RowSparseState(towers, table_state), extra, metrics

  return descend
