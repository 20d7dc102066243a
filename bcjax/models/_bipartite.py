r"""The embedding model M_k of BC-Aligner's recommender experiments.

GraphSAGE over a user–item graph whose items are encoded from their attribute bags and whose users share one learnable
input vector.

Node layout: users first, then items: node ``u`` is user u and node ``U + i`` is item i. Inputs:

.. math::
  x_{U+i} = \sum_{g} \frac{1}{|A_g(i)|} \sum_{a \in A_g(i)} E_g[a], \qquad x_u = e_{\rm user},

with one table :math:`E_g` per attribute group (categories, brand; genres), N(0, 1) initialised, an empty bag
contributing 0, and the shared user vector initialised N(0, 0.1^2). Edges are the train interactions in both
directions (multi-edges kept).

Reference: Hu et al., "Learning Backward Compatible Embeddings", KDD 2022, section 5.1; reference code
snap-stanford/bc-emb ``recsys/models/pinsage.py``.
"""

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from flax import nnx

from bcjax._device import device_array
from bcjax.models._sage import GraphSAGE


class BipartiteInputs(NamedTuple):
  """Everything the model reads for one graph (arrays only, so it can be a jit argument).

  ``graph``: the undirected interaction graph over N = U + I nodes; ``is_user`` [N] bool; ``bags``: per attribute
  group a pair (owner node [P], attribute id [P]); ``node_mask`` [N] bool, False on padding nodes (None: no
  padding), which BatchNorm's statistics leave out (:func:`pad_bipartite_inputs`).
  """

  graph: jraph.GraphsTuple
  is_user: jax.Array
  bags: tuple[tuple[jax.Array, jax.Array], ...]
  node_mask: jax.Array | None = None


def pad_bipartite_inputs(
  inputs: BipartiteInputs, num_nodes: int, num_edges: int, bag_sizes: Sequence[int]
) -> BipartiteInputs:
  """``inputs`` padded to fixed numbers of nodes, edges and bag entries.

  ``inputs`` padded to ``num_nodes`` nodes, ``num_edges`` edges and ``bag_sizes[g]`` entries of bag group g, so that
  graphs of different sizes (the versions of an evolving graph) share one shape and one compiled program.

  Padding nodes come after the real ones (every real node keeps its id), are neither users nor masked in (their
  ``node_mask`` is False, so BatchNorm's statistics and every real node's embedding are those of the unpadded
  graph), and the padded edges and bag entries all belong to the last node, a padding node (jraph's convention), so
  no real node's neighbourhood or attributes change.

  Args:
    inputs: unpadded inputs (``node_mask`` None) of N nodes and E edges.
    num_nodes: at least N + 1 (one padding node receives the padded edges).
    num_edges: at least E.
    bag_sizes: per bag group, at least its entries.

  Returns:
    The padded :class:`BipartiteInputs`, with ``node_mask`` set.

  Raises:
    ValueError: inputs padded already, or budgets smaller than the inputs.
  """
  fn = "pad_bipartite_inputs"
  if inputs.node_mask is not None:
    raise ValueError(f"{fn}: `inputs` are padded already (node_mask is set)")
  n, e = int(inputs.is_user.shape[0]), int(inputs.graph.senders.shape[0])
  if num_nodes < n + 1 or num_edges < e or len(bag_sizes) != len(inputs.bags):
    raise ValueError(
      f"{fn}: `num_nodes` must be at least {n + 1} (got {num_nodes}), `num_edges` at least {e} (got {num_edges}), "
      f"and `bag_sizes` one size per bag group ({len(inputs.bags)}, got {len(bag_sizes)})"
    )
  sink = num_nodes - 1

  def padded(x, size: int, fill: int) -> jax.Array:
    x = np.asarray(x)
    if size < len(x):
      raise ValueError(f"{fn}: a bag group has {len(x)} entries, more than its size {size}")
    return device_array(np.concatenate([x, np.full(size - len(x), fill, x.dtype)]))

  graph = inputs.graph._replace(
    senders=padded(inputs.graph.senders, num_edges, sink),
    receivers=padded(inputs.graph.receivers, num_edges, sink),
    n_node=device_array(np.asarray([num_nodes], np.int32)),
    n_edge=device_array(np.asarray([num_edges], np.int32)),
  )
  bags = tuple(
    (padded(owner, size, sink), padded(value, size, 0)) for (owner, value), size in zip(inputs.bags, bag_sizes)
  )
  is_user = padded(inputs.is_user, num_nodes, False)
  return BipartiteInputs(graph, is_user, bags, device_array(np.arange(num_nodes) < n))


def bipartite_inputs(
  user: np.ndarray, item: np.ndarray, num_users: int, num_items: int, item_bags: Sequence[tuple[np.ndarray, np.ndarray]]
) -> BipartiteInputs:
  """Builds :class:`BipartiteInputs` from interactions and item bags.

  Builds :class:`BipartiteInputs` from interactions ([E] user and item ids) and item bags ((item [P], attribute [P]) per
  group; items >= ``num_items`` are dropped). Edges are stored sorted by receiver.

  Args:
    user: user id per interaction, [E].
    item: item id per interaction, [E].
    num_users: users in the graph.
    num_items: items in the graph.
    item_bags: per attribute group, ``(item [P], attribute [P])``.

  Returns:
    The :class:`BipartiteInputs`.

  Raises:
    ValueError: ids out of range or arrays of mismatched lengths.
  """
  user, item = np.asarray(user, np.int64), np.asarray(item, np.int64)
  if user.shape != item.shape or user.ndim != 1:
    raise ValueError(f"bipartite_inputs: `user` {user.shape} and `item` {item.shape} must be equal-length vectors")
  if user.size and (user.min() < 0 or user.max() >= num_users or item.min() < 0 or item.max() >= num_items):
    raise ValueError(f"bipartite_inputs: interactions index outside {num_users} users x {num_items} items")
  n = num_users + num_items
  senders = np.concatenate([user, num_users + item]).astype(np.int32)
  receivers = np.concatenate([num_users + item, user]).astype(np.int32)
  order = np.argsort(receivers, kind="stable")  # receiver-sorted edges make the segment sums cache-friendly
  senders, receivers = senders[order], receivers[order]
  graph = jraph.GraphsTuple(
    nodes=None,
    edges=None,
    senders=device_array(senders),
    receivers=device_array(receivers),
    globals=None,
    n_node=device_array(np.asarray([n], np.int32)),
    n_edge=device_array(np.asarray([len(senders)], np.int32)),
  )
  bags = []
  for owner, value in item_bags:
    owner, value = np.asarray(owner, np.int64), np.asarray(value, np.int64)
    keep = owner < num_items
    bags.append((device_array(num_users + owner[keep], jnp.int32), device_array(value[keep], jnp.int32)))
  is_user = device_array(np.arange(n) < num_users)
  return BipartiteInputs(graph, is_user, tuple(bags))


class BipartiteSAGE(nnx.Module):
  """Attribute-bag item encoder + shared user vector + :class:`GraphSAGE` (``layers`` x ``dim``).

  ``__call__(inputs) -> [N, dim]``: node embeddings (users first). BatchNorm uses batch statistics over all nodes in
  training mode and running statistics after ``model.eval()``.
  """

  def __init__(self, attribute_sizes: Sequence[int], dim: int, layers: int, *, rngs: nnx.Rngs):
    init = jax.nn.initializers.normal(1.0)
    self.tables = nnx.List([nnx.Embed(max(int(n), 1), dim, embedding_init=init, rngs=rngs) for n in attribute_sizes])
    # float32 whatever jax_enable_x64 says, like every other parameter of the model.
    self.user_vector = nnx.Param(0.1 * jax.random.normal(rngs.params(), (1, dim), jnp.float32))
    self.sage = GraphSAGE(dim, layers, rngs=rngs)

  def encode(self, inputs: BipartiteInputs) -> jax.Array:
    """Input features x [N, dim]."""
    if len(inputs.bags) != len(self.tables):
      raise ValueError(
        f"BipartiteSAGE: the model has {len(self.tables)} attribute tables but the inputs carry "
        f"{len(inputs.bags)} bag groups"
      )
    n = inputs.is_user.shape[0]
    x = jnp.zeros((n, self.user_vector.shape[1]), self.user_vector.dtype)
    for table, (owner, value) in zip(self.tables, inputs.bags):
      total = jax.ops.segment_sum(table(value), owner, num_segments=n)
      count = jax.ops.segment_sum(jnp.ones_like(owner, x.dtype), owner, num_segments=n)
      x = x + total / jnp.maximum(count, 1.0)[:, None]
    return jnp.where(inputs.is_user[:, None], self.user_vector[...], x)

  def __call__(self, inputs: BipartiteInputs) -> jax.Array:
    return self.sage(inputs.graph, self.encode(inputs), inputs.node_mask)
