"""Batches of small graphs as padded ``jraph.GraphsTuple`` with static shapes.

A batch of up to B graphs is padded to B + 1 graphs: the real ones, empty ones for a short batch, and one padding
graph that owns every padding node and edge (padding edges are self-loops on the first padding node, so no message
reaches a real node). Node and edge budgets are rounded up to powers of two so that a jitted step compiles for a
handful of shapes only.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from bcjax._device import device_array
from bcjax.data._graph_collection import GraphCollection

Graph = tuple[np.ndarray, np.ndarray, np.ndarray]  # (features [n, F], senders [e], receivers [e]), local ids


def bucket(size: int, minimum: int = 64) -> int:
  """The smallest power of two that is > ``size`` (one slot is always left for padding) and >= ``minimum``.

  Args:
    size: the real count.
    minimum: the smallest bucket.

  Returns:
    The bucket, a power of two.
  """
  out = minimum
  while out <= size:
    out *= 2
  return out


def pad_graphs(
  graphs: Sequence[Graph], num_graphs: int, *, node_budget: int | None = None, edge_budget: int | None = None
) -> jraph.GraphsTuple:
  """Packs ``graphs`` into one ``GraphsTuple`` of ``num_graphs + 1`` graphs (see :mod:`bcjax.data._graph_batch`).

  ``nodes`` [node_budget, F]; ``senders``/``receivers`` global ids [edge_budget]; ``n_node``/``n_edge``
  [num_graphs + 1]. Budgets default to :func:`bucket` of the real totals.

  Args:
    graphs: the graphs, each ``(features, senders, receivers)`` with local indices.
    num_graphs: graph slots (at least ``len(graphs)``).
    node_budget: node slots (default :func:`bucket` of the total).
    edge_budget: edge slots (likewise).

  Returns:
    The padded ``GraphsTuple``.

  Raises:
    ValueError: more graphs than ``num_graphs``, or budgets too small for the real nodes/edges plus one padding slot.
  """
  if not 0 < len(graphs) <= num_graphs:
    raise ValueError(f"pad_graphs: got {len(graphs)} graphs for a batch of `num_graphs`={num_graphs}")
  n_real = sum(len(x) for x, _, _ in graphs)
  e_real = sum(len(s) for _, s, _ in graphs)
  node_budget = bucket(n_real) if node_budget is None else node_budget
  edge_budget = bucket(e_real) if edge_budget is None else edge_budget
  if node_budget <= n_real or edge_budget < e_real:
    raise ValueError(
      f"pad_graphs: budgets (nodes {node_budget}, edges {edge_budget}) must exceed the batch's "
      f"{n_real} nodes (one padding node is needed) and hold its {e_real} edges"
    )
  width = graphs[0][0].shape[1]
  nodes = np.zeros((node_budget, width), np.float32)
  senders = np.full(edge_budget, n_real, np.int32)
  receivers = np.full(edge_budget, n_real, np.int32)
  n_node = np.zeros(num_graphs + 1, np.int32)
  n_edge = np.zeros(num_graphs + 1, np.int32)
  node_at = edge_at = 0
  for g, (x, s, r) in enumerate(graphs):
    n, e = len(x), len(s)
    nodes[node_at : node_at + n] = x
    senders[edge_at : edge_at + e] = np.asarray(s) + node_at
    receivers[edge_at : edge_at + e] = np.asarray(r) + node_at
    n_node[g], n_edge[g] = n, e
    node_at += n
    edge_at += e
  n_node[-1], n_edge[-1] = node_budget - n_real, edge_budget - e_real
  return jraph.GraphsTuple(
    nodes=nodes, edges=None, senders=senders, receivers=receivers, n_node=n_node, n_edge=n_edge, globals=None
  )


def repad_graphs(graphs: jraph.GraphsTuple, node_budget: int, edge_budget: int) -> jraph.GraphsTuple:
  """A batch from :func:`pad_graphs` grown to larger budgets.

  The padding graph takes the new nodes (zeros) and the new edges (self-loops on its first node), so the result equals
  packing the same graphs with these budgets.

  Args:
    graphs: a batch from :func:`pad_graphs`.
    node_budget: the new node slots (at least the old).
    edge_budget: the new edge slots (at least the old).

  Returns:
    The grown ``GraphsTuple``.

  Raises:
    ValueError: budgets smaller than the batch's.
  """
  nodes, senders = np.asarray(graphs.nodes), np.asarray(graphs.senders)
  n_node, n_edge = np.array(graphs.n_node, np.int32), np.array(graphs.n_edge, np.int32)
  extra_nodes, extra_edges = node_budget - nodes.shape[0], edge_budget - senders.shape[0]
  if extra_nodes < 0 or extra_edges < 0:
    raise ValueError(
      f"repad_graphs: budgets (nodes {node_budget}, edges {edge_budget}) are smaller than the "
      f"batch's ({nodes.shape[0]}, {senders.shape[0]})"
    )
  first_padding = int(np.sum(n_node[:-1]))
  fill = np.full(extra_edges, first_padding, np.int32)
  n_node[-1] += extra_nodes
  n_edge[-1] += extra_edges
  return jraph.GraphsTuple(
    nodes=np.concatenate([nodes, np.zeros((extra_nodes,) + nodes.shape[1:], nodes.dtype)]),
    edges=None,
    senders=np.concatenate([senders, fill]),
    receivers=np.concatenate([np.asarray(graphs.receivers), fill]),
    n_node=n_node,
    n_edge=n_edge,
    globals=None,
  )


def batch_graphs(
  collection: GraphCollection,
  index: Sequence[int],
  num_graphs: int | None = None,
  *,
  node_budget: int | None = None,
  edge_budget: int | None = None,
) -> jraph.GraphsTuple:
  """:func:`pad_graphs` of the collection's graphs ``index``; ``num_graphs`` defaults to ``len(index)``.

  Args:
    collection: the :class:`GraphCollection`.
    index: the graphs to pack, by index.
    num_graphs: graph slots (default ``len(index)``).
    node_budget: node slots (default :func:`bucket` of the total).
    edge_budget: edge slots (likewise).

  Returns:
    The padded ``GraphsTuple``.
  """
  index = list(index)
  return pad_graphs(
    [collection.graph(i) for i in index], num_graphs or len(index), node_budget=node_budget, edge_budget=edge_budget
  )


def graph_mask(graphs: jraph.GraphsTuple) -> jax.Array:
  """[num_graphs + 1] True for the real graphs (non-empty and not the padding graph); jittable.

  Args:
    graphs: a batch from :func:`pad_graphs`.

  Returns:
    The mask, [num_graphs + 1].
  """
  n_node = device_array(graphs.n_node)
  return (n_node > 0) & (jnp.arange(n_node.shape[0]) < n_node.shape[0] - 1)


def node_mask(graphs: jraph.GraphsTuple) -> jax.Array:
  """[node_budget] True for the real nodes (those before the padding graph's); jittable.

  Args:
    graphs: a batch from :func:`pad_graphs`.

  Returns:
    The mask, [node_budget].
  """
  n_node = device_array(graphs.n_node)
  return jnp.arange(graphs.nodes.shape[0]) < jnp.sum(n_node[:-1])


def node_graph_ids(graphs: jraph.GraphsTuple) -> jax.Array:
  """[node_budget] the graph each node belongs to (segment ids for pooling); jittable.

  Args:
    graphs: a batch from :func:`pad_graphs`.

  Returns:
    The graph of each node, [node_budget].
  """
  n_node = device_array(graphs.n_node)
  return jnp.repeat(jnp.arange(n_node.shape[0]), n_node, total_repeat_length=graphs.nodes.shape[0])
