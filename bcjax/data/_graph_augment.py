"""GraphCL-style graph views (You et al. 2020) with the ICL reference's ratios, on host NumPy graphs.

Per mini-batch one augmentation is drawn uniformly from node dropping (10 %), subgraph (20 %) and attribute masking
(10 %); the anchor view of the reference is the unaugmented graph and the positive view the augmented one. After
every augmentation self-loops are removed and only nodes that touch a remaining edge are kept (re-indexed in their
original order); a view with no edge left falls back to the original graph.

The reference's subgraph view never grows its neighbour set beyond the seed's (a set union is discarded); here the
frontier is expanded with every node added, which is the GraphCL algorithm. ``expand=False`` gives the reference's
behaviour.
"""

from collections.abc import Sequence

import numpy as np

from bcjax.data._graph_batch import Graph

AUGMENTATIONS = ("drop-nodes", "subgraph", "mask-attributes")
"""The graph augmentations of :func:`augment_graphs` (GraphCL's): node dropping, subgraphs and attribute masking."""


def _keep_connected(x: np.ndarray, s: np.ndarray, r: np.ndarray, original: Graph) -> Graph:
  loops = s == r
  s, r = s[~loops], r[~loops]
  if len(s) == 0:
    return original
  used = np.zeros(len(x), bool)
  used[s] = used[r] = True
  new_id = np.cumsum(used) - 1
  return x[used], new_id[s], new_id[r]


def drop_nodes(graph: Graph, rng: np.random.Generator, ratio: float = 0.1) -> Graph:
  """Removes the edges of ⌊ratio·n⌋ random nodes (the nodes then disappear with the post-processing).

  Args:
    graph: one graph, ``(features [n, F], senders [e], receivers [e])``.
    rng: a NumPy random generator.
    ratio: the share of nodes dropped.

  Returns:
    The augmented graph.
  """
  x, s, r = graph
  drop = np.zeros(len(x), bool)
  drop[rng.choice(len(x), int(len(x) * ratio), replace=False)] = True
  keep = ~(drop[s] | drop[r])
  return _keep_connected(x, s[keep], r[keep], graph)


def subgraph(graph: Graph, rng: np.random.Generator, ratio: float = 0.2, *, expand: bool = True) -> Graph:
  """A random connected node set grown from a random seed node.

  One random frontier node at a time, until it has more than ⌊ratio·n⌋ nodes or the frontier is empty; keeps the edges
  inside it.

  Args:
    graph: one graph, ``(features [n, F], senders [e], receivers [e])``.
    rng: a NumPy random generator.
    ratio: the share of nodes the set grows to.
    expand: add each new node's neighbours to the frontier (GraphCL's algorithm; False: the reference's).

  Returns:
    The augmented graph.
  """
  x, s, r = graph
  n = len(x)
  order = np.argsort(s, kind="stable")
  start = np.searchsorted(s[order], np.arange(n + 1))
  neighbours = lambda v: r[order[start[v] : start[v + 1]]]
  seed = int(rng.integers(n))
  keep = np.zeros(n, bool)
  keep[seed] = True
  in_frontier = np.zeros(n, bool)
  frontier = []

  def grow(v):
    for u in neighbours(v).tolist():
      if not keep[u] and not in_frontier[u]:
        in_frontier[u] = True
        frontier.append(u)

  grow(seed)
  size, target = 1, int(n * ratio)
  while size <= target and frontier:
    at = int(rng.integers(len(frontier)))
    frontier[at], frontier[-1] = frontier[-1], frontier[at]  # O(1) removal of a random element
    v = frontier.pop()
    keep[v] = True
    size += 1
    if expand:
      grow(v)
  inside = keep[s] & keep[r]
  return _keep_connected(x, s[inside], r[inside], graph)


def mask_attributes(graph: Graph, rng: np.random.Generator, ratio: float = 0.1) -> Graph:
  """Replaces the whole feature vector of ⌊ratio·n⌋ random nodes with N(0.5, 0.5²) noise.

  Args:
    graph: one graph, ``(features [n, F], senders [e], receivers [e])``.
    rng: a NumPy random generator.
    ratio: the share of nodes masked.

  Returns:
    The augmented graph.
  """
  x, s, r = graph
  x = x.copy()
  rows = rng.choice(len(x), int(len(x) * ratio), replace=False)
  x[rows] = rng.normal(0.5, 0.5, (len(rows), x.shape[1])).astype(x.dtype)
  return _keep_connected(x, s, r, graph)


def augment_graphs(graphs: Sequence[Graph], rng: np.random.Generator, kind: str | None = None) -> list[Graph]:
  """One augmentation (``kind``, else drawn uniformly from :data:`AUGMENTATIONS`) applied to every graph.

  Args:
    graphs: the graphs, each ``(features, senders, receivers)``.
    rng: a NumPy random generator.
    kind: one of :data:`AUGMENTATIONS` (default: drawn uniformly).

  Returns:
    The augmented graphs.

  Raises:
    ValueError: an unknown ``kind``.
  """
  if kind is None:
    kind = AUGMENTATIONS[int(rng.integers(len(AUGMENTATIONS)))]
  view = {"drop-nodes": drop_nodes, "subgraph": subgraph, "mask-attributes": mask_attributes}.get(kind)
  if view is None:
    raise ValueError(f"augment_graphs: `kind` must be one of {AUGMENTATIONS}, got {kind!r}")
  return [view(g, rng) for g in graphs]
