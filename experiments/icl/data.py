"""Graph data of the ICL experiment: datasets with the reference's node features, shuffled loaders, the cycling
"other split" iterators, and padded batches of (anchor, positive) views.

Views (the reference, graph mode): the anchor is the unaugmented graph, the positive one GraphCL view, with one
augmentation type drawn per mini-batch; negatives taken from the other split are unaugmented graphs.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import jax
import jraph
import numpy as np
from flax import nnx

from bcjax.data import (
  GraphCollection,
  augment_graphs,
  bucket,
  from_graphs,
  graph_mask,
  local_degree_profile,
  normalize_rows,
  pad_graphs,
  read_gin,
  read_tu,
  repad_graphs,
  tu_dataset_path,
  with_features,
)
from bcjax.models import GCNEncoder
from experiments.common import shuffled_batches

DATASETS = ("proteins", "proteins-full", "reddit-binary", "synthetic-graphs", "tu:<NAME>")
TU_PREFIX = "tu:"


def synthetic_graphs(num_graphs: int = 300, seed: int = 0) -> GraphCollection:
  """Two classes of random graphs that a contrastive encoder can tell apart without labels: sparse near-trees vs
  denser community graphs (10–40 nodes), with 4-d noisy degree-related features; the embedded offline default."""
  rng = np.random.default_rng(seed)
  graphs, labels = [], rng.integers(0, 2, num_graphs)
  for label in labels:
    n = int(rng.integers(10, 41))
    if label == 0:  # a random tree plus a few chords
      parents = [int(rng.integers(v)) for v in range(1, n)]
      pairs = {(v, p) for v, p in zip(range(1, n), parents)}
      pairs |= {tuple(rng.choice(n, 2, replace=False)) for _ in range(n // 10)}
    else:  # two dense communities joined by one edge
      half = n // 2
      pairs = {(a, b) for a in range(n) for b in range(a + 1, n) if (a < half) == (b < half) and rng.uniform() < 0.35}
      pairs.add((0, n - 1))
    pairs = {(int(a), int(b)) for a, b in pairs if a != b}
    pairs |= {(b, a) for a, b in pairs}
    s, r = (np.array(v, np.int64) for v in zip(*sorted(pairs)))
    deg = np.bincount(s, minlength=n).astype(np.float32)
    x = np.stack([deg, np.sqrt(deg), rng.normal(size=n), np.ones(n)], axis=1).astype(np.float32)
    graphs.append((np.abs(x), s, r))
  return from_graphs(graphs, labels)


def is_graph_dataset(name: str) -> bool:
  return name in DATASETS[:-1] or (name.startswith(TU_PREFIX) and len(name) > len(TU_PREFIX))


def with_node_features(c: GraphCollection, ldp_std: str = "population") -> GraphCollection:
  """Row-normalised node features (the reference's NormalizeFeatures); a dataset without node attributes or labels
  gets local degree profiles instead, as the reference does for REDDIT-BINARY."""
  if c.node_features.shape[1] == 0:
    c = with_features(c, local_degree_profile(c, std=ldp_std))._replace(
      notes=c.notes + ("node features: local degree profiles (the dataset has no node attributes or labels)",)
    )
  return with_features(c, normalize_rows(c.node_features))


def load_graphs(
  name: str, data_dir: str | None = None, *, download: bool = False, seed: int = 0, ldp_std: str = "population"
) -> GraphCollection:
  """The dataset with the reference's features: PROTEINS(_full) attributes ‖ one-hot labels, REDDIT-BINARY local
  degree profiles (from the GIN-format zip or a TU folder), each row-normalised; ``synthetic-graphs`` as is;
  ``tu:NAME`` any TU dataset (a folder or zip in ``data_dir``, ``data_dir`` itself, or the cache), with its
  attributes ‖ one-hot node labels, or degree profiles when it has neither."""
  if name == "synthetic-graphs":
    return synthetic_graphs(seed=seed)
  if name.startswith(TU_PREFIX) and len(name) > len(TU_PREFIX):
    tu = name[len(TU_PREFIX) :]
    return with_node_features(read_tu(tu_dataset_path(tu, data_dir, download=download), tu), ldp_std)
  if name in ("proteins", "proteins-full"):
    tu = "PROTEINS" if name == "proteins" else "PROTEINS_full"
    c = read_tu(tu_dataset_path(tu, data_dir, download=download), tu)
    return with_features(c, normalize_rows(c.node_features))
  if name == "reddit-binary":
    gin = sorted(Path(data_dir).glob("REDDIT-BINARY*gin*.zip")) if data_dir is not None else []
    c = (
      read_gin(gin[0])
      if gin
      else read_tu(tu_dataset_path("REDDIT-BINARY", data_dir, download=download), "REDDIT-BINARY")
    )
    return with_node_features(with_features(c, np.zeros((c.node_features.shape[0], 0), np.float32)), ldp_std)
  raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")


class Views(NamedTuple):
  """A padded batch of anchors and positives (same sample order) and the mask of its real samples."""

  anchor: jraph.GraphsTuple  # or an ImageBatch
  positive: jraph.GraphsTuple
  mask: np.ndarray


class Negatives(NamedTuple):
  inputs: jraph.GraphsTuple  # or an ImageBatch
  mask: np.ndarray


class Cycle:
  """A persistent iterator over ``indices`` in batches of ``size``, reshuffled at every pass; the batch at the end
  of a pass may be short (the reference's cycling loaders)."""

  def __init__(self, indices: np.ndarray, size: int, rng: np.random.Generator):
    self.indices, self.size, self.rng = np.asarray(indices), size, rng
    self._it: Iterator = iter(())

  def next(self) -> np.ndarray:
    if self.size == 0:
      return self.indices[:0]
    batch = next(self._it, None)
    if batch is None:
      self._it = iter(shuffled_batches(len(self.indices), self.size, self.rng))
      batch = next(self._it)
    return self.indices[batch]


def typical_budget(
  c: GraphCollection, batch_size: int, devices: int = 1, quantile: float = 0.99, samples: int = 1000
) -> tuple[int, int]:
  """The node and edge budgets (power-of-two buckets) that hold ``quantile`` of random batches of ``batch_size``
  graphs, from the graph sizes alone (a fixed seed: the training streams are not touched). Batches padded to at
  least these budgets take one shape in the common case, so a run compiles its fused steps for few shapes, at little
  padding cost (most batches fall in this bucket anyway). With ``devices`` = N the batch is N blocks sharing one
  budget, so the budget is that of the largest of N blocks of batch_size / N graphs: a block's sum varies more
  around its mean than the whole batch's, and N of them must fit."""
  rng = np.random.default_rng(0)
  per = max(min(batch_size, c.num_graphs) // devices, 1)
  picks = rng.integers(0, c.num_graphs, (samples, devices, per))
  largest = lambda sizes: int(np.quantile(sizes[picks].sum(axis=2).max(axis=1), quantile))
  return bucket(largest(c.n_node)), bucket(largest(c.n_edge))


def graph_views(
  c: GraphCollection,
  index: np.ndarray,
  batch_size: int,
  rng: np.random.Generator,
  extra: np.ndarray | None = None,
  extra_graphs: int = 0,
  min_budget: tuple[int, int] = (0, 0),
  devices: int = 1,
) -> tuple[Views, Negatives | None]:
  """Anchor/positive views of graphs ``index`` and, with ``extra``, unaugmented negatives ``extra`` padded to
  ``extra_graphs`` graphs (at least one slot, all masked when ``extra`` is empty). All padded to one common node and
  edge budget, at least ``min_budget`` (per device block: :func:`typical_budget` with ``devices``), so a step's
  jitted function sees few distinct shapes.

  With ``devices`` = N > 1 the batch is cut into N blocks of consecutive samples (batch_size / N anchor slots and
  ceil(slots / N) negative slots each), every block padded on its own to one common budget and the blocks stacked
  on a new leading axis, which a mesh splits over its devices. A block without real graphs holds an empty one
  (no nodes: masked, and outside every BatchNorm statistic), so the blocks together are the one-device batch."""
  graphs = [c.graph(i) for i in index]
  positives = augment_graphs(graphs, rng)
  others = None if extra is None else ([c.graph(i) for i in extra] or [c.graph(0)])
  per, slots = batch_size // devices, max(extra_graphs, 1)
  per_other = -(-slots // devices)
  empty = (np.zeros((0, c.node_features.shape[1]), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64))

  def blocks(items, size):
    return [items[d * size : (d + 1) * size] or [empty] for d in range(devices)]

  sets = [blocks(graphs, per), blocks(positives, per)] + ([blocks(others, per_other)] if others is not None else [])
  node_budget = max(bucket(max(sum(len(x) for x, _, _ in b) for g in sets for b in g)), min_budget[0])
  edge_budget = max(bucket(max(sum(len(s) for _, s, _ in b) for g in sets for b in g)), min_budget[1])

  def padded(block_list, size):
    out = [pad_graphs(b, size, node_budget=node_budget, edge_budget=edge_budget) for b in block_list]
    return out[0] if devices == 1 else stack_batches(out)

  anchor, positive = padded(sets[0], per), padded(sets[1], per)
  out = Views(anchor, positive, _graph_masks(anchor))
  if others is None:
    return out, None
  g = padded(sets[2], per_other)
  mask = _graph_masks(g) if len(extra) else np.zeros(np.shape(g.n_node), bool)
  return out, Negatives(g, mask)


def _graph_masks(g: jraph.GraphsTuple) -> np.ndarray:
  """:func:`bcjax.data.graph_mask` of a batch, or of every block of a stacked one."""
  if np.ndim(g.n_node) == 1:
    return np.asarray(graph_mask(g))
  return np.stack([np.asarray(graph_mask(jax.tree.map(lambda x, d=d: x[d], g))) for d in range(len(g.n_node))])


def _is_graphs(x) -> bool:
  return isinstance(x, jraph.GraphsTuple)


def _repad(g: jraph.GraphsTuple, nodes: int, edges: int) -> jraph.GraphsTuple:
  if np.ndim(g.n_node) == 1:
    return repad_graphs(g, nodes, edges)
  return stack_batches([repad_graphs(jax.tree.map(lambda x, d=d: x[d], g), nodes, edges) for d in range(len(g.n_node))])


def common_budget(batches) -> list:
  """``batches`` (pytrees of padded graph batches, or of image batches; graph batches may be stacked device blocks)
  with every GraphsTuple grown to the largest node and edge budgets among them, so that they share one shape (a
  fused step takes them together)."""
  graphs = [g for b in batches for g in jax.tree.leaves(b, is_leaf=_is_graphs) if _is_graphs(g)]
  if not graphs:
    return list(batches)
  nodes = max(g.nodes.shape[-2] for g in graphs)
  edges = max(g.senders.shape[-1] for g in graphs)
  grow = lambda x: _repad(x, nodes, edges) if _is_graphs(x) else x
  return [jax.tree.map(grow, b, is_leaf=_is_graphs) for b in batches]


def stack_batches(batches):
  """Batches of one shape stacked on a new leading axis (for a step that scans or unrolls over them)."""
  return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *batches)


class GraphData:
  """A graph dataset as the ICL methods see it: training views, raw batches for evaluation and a fresh GCN."""

  kind = "graphs"

  def __init__(self, collection: GraphCollection):
    self.collection = collection
    self.labels = np.asarray(collection.labels)
    self.num = collection.num_graphs
    self.notes = collection.notes
    self._budgets = {}  # (batch size, devices) → typical_budget

  def views(
    self, index, batch_size: int, rng: np.random.Generator, extra=None, extra_n: int = 0, timer=None, devices: int = 1
  ):
    del timer  # graph views are built on the host; nothing compiles
    if (batch_size, devices) not in self._budgets:
      self._budgets[batch_size, devices] = typical_budget(self.collection, batch_size, devices)
    return graph_views(
      self.collection, index, batch_size, rng, extra, extra_n, self._budgets[batch_size, devices], devices
    )

  def raw_batches(self, index: np.ndarray, size: int = 128) -> Iterator[tuple[jraph.GraphsTuple, int]]:
    """Unaugmented graphs ``index`` in padded batches of ``size`` (node budgets bucketed, so few shapes compile)."""
    for start in range(0, len(index), size):
      chunk = [self.collection.graph(i) for i in index[start : start + size]]
      yield pad_graphs(chunk, size), len(chunk)

  def new_model(self, cfg, key, axis_name: str | None = None):
    """A fresh GCN; ``axis_name``: the mesh axis its batches are split over (global BatchNorm statistics)."""
    return GCNEncoder(
      self.collection.node_features.shape[1],
      cfg.hidden,
      cfg.layers,
      cfg.dropout,
      self_loops=cfg.gcn_self_loops,
      axis_name=axis_name,
      rngs=nnx.Rngs(params=key),
    )
