"""Per-version inputs of the embedding models and the reference's BPR sampler.

Node layout (as in :mod:`bcjax.models`): user u is node u, item i is node U + i, with U and I the users and items
up to :math:`t_{k+1}`.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from bcjax._device import device_array
from bcjax.data import Bags, EvolvingGraph, VersionSplit, split_versions
from bcjax.models import BipartiteInputs, bipartite_inputs, pad_bipartite_inputs


class VersionData(NamedTuple):
  split: VersionSplit
  inputs: BipartiteInputs

  @property
  def num_nodes(self) -> int:
    return self.split.num_users + self.split.num_items


def with_item_ids(graph: EvolvingGraph) -> EvolvingGraph:
  """The graph, with one item attribute group holding each item's own id when it has no item attributes at all
  (e.g. Amazon reviews without a metadata file): GraphSAGE over identical item inputs would give every item the
  same embedding, so each item gets a learned embedding of its own instead (transductive: an item's vector is
  trained once it has train edges)."""
  if graph.item_attributes:
    return graph
  ids = np.arange(graph.num_items, dtype=np.int32)
  bags = Bags(ids, ids, tuple(str(i) for i in range(graph.num_items)))
  note = f"no item attributes: each of the {graph.num_items} items gets a learned id embedding (group 'item-id')"
  return graph._replace(item_attributes={"item-id": bags}, notes=graph.notes + (note,))


def version_data(graph: EvolvingGraph) -> list[VersionData]:
  """The five versions' splits and model inputs (item attribute groups in the graph's order).

  Every version's inputs are padded to one shape, the largest version's nodes plus a padding node, its edges and
  its bag entries (:func:`bcjax.pad_bipartite_inputs`): a version's model then reuses the compiled steps of every
  earlier version with its architecture, and a real node's embedding is what the unpadded graph gives it. Padding
  nodes follow the real ones, so node ids (users first, then items) keep their meaning; callers read the first
  ``num_nodes`` rows of an embedding matrix."""
  bags = [(b.owner, b.value) for b in graph.item_attributes.values()]
  raw = [
    (split, bipartite_inputs(split.train_user, split.train_item, split.num_users, split.num_items, bags))
    for split in split_versions(graph)
  ]
  num_nodes = 1 + max(int(inputs.is_user.shape[0]) for _, inputs in raw)
  num_edges = max(int(inputs.graph.senders.shape[0]) for _, inputs in raw)
  bag_sizes = [max(int(inputs.bags[g][0].shape[0]) for _, inputs in raw) for g in range(len(bags))]
  return [VersionData(split, pad_bipartite_inputs(inputs, num_nodes, num_edges, bag_sizes)) for split, inputs in raw]


def check_versions(versions: list[VersionData]) -> None:
  """What would otherwise fail mid-run, checked before the first step: every version has train and val edges, and
  every user leaves at least one item to draw as a BPR negative."""
  for k, v in enumerate(versions):
    s = v.split
    if len(s.train_user) == 0 or len(s.val_user) == 0:
      raise ValueError(
        f"version {k} has {len(s.train_user)} train and {len(s.val_user)} val edges; both must be "
        f"non-empty (too few interactions for five versions?)"
      )
    distinct = np.bincount(
      np.unique(s.train_user.astype(np.int64) * s.num_items + s.train_item) // s.num_items, minlength=s.num_users
    )
    full = np.flatnonzero(distinct >= s.num_items)
    if full.size:
      raise ValueError(
        f"version {k}: user(s) {full[:5].tolist()} interacted with all {s.num_items} items in "
        f"training, so BPR can draw no negative item for them"
      )


def check_cutoffs(versions: list[VersionData], ks: tuple[int, ...], intended_k: int, given: bool = True) -> None:
  """Every Recall@K cut-off against the items each version ranks (all items up to :math:`t_{k+1}`), before the
  first step: a cut-off above them would otherwise stop the run at its first evaluation, and again on resume.
  ``given``: whether the user passed ``ks`` (--ks); the error about the default cut-offs says what to pass instead
  of naming a flag that was never given."""
  items = [v.split.num_items for v in versions]
  fewest = min(items)
  too_large = sorted(k for k in {*ks, intended_k} if k > fewest)
  if not too_large:
    return
  where = f"version {items.index(fewest)} ranks {fewest} items (items by version: {items})"
  if intended_k in too_large:
    raise ValueError(
      f"this dataset is too small for the intended metric Recall@{intended_k}: {where}; use a dataset with at "
      f"least {intended_k} items at every version"
    )
  fits = ",".join(str(k) for k in sorted(set(ks)) if k <= fewest) or str(intended_k)
  if not given:
    default = ",".join(str(k) for k in ks)
    raise ValueError(
      f"this dataset is too small for the default Recall@K cut-offs ({default}): {too_large} exceed the ranked "
      f"items: {where}; pass --ks {fits} to log only the cut-offs it has"
    )
  raise ValueError(f"--ks: cut-off(s) {too_large} exceed the ranked items: {where}; e.g. --ks {fits}")


def attribute_sizes(graph: EvolvingGraph) -> tuple[int, ...]:
  return tuple(len(b.vocab) for b in graph.item_attributes.values())


class Batch(NamedTuple):
  """One BPR mini-batch of node ids, padded to the batch size; ``mask`` marks real rows."""

  user: jnp.ndarray
  pos: jnp.ndarray
  neg: jnp.ndarray
  mask: jnp.ndarray


class BPRSampler:
  """The reference's per-epoch samples (``RecDatasetNegsamling``): |train edges| (user, positive) pairs drawn
  with replacement, each train edge with probability proportional to 1/deg(user) (a uniform user, then one of its
  edges uniformly); one negative per pair, uniform over all items up to :math:`t_{k+1}`, redrawn while it is a
  train item of the user; then shuffled batches with a final partial batch."""

  def __init__(self, split: VersionSplit, batch_size: int):
    self.split, self.batch_size = split, batch_size
    order = np.argsort(split.train_user, kind="stable")
    self.items_by_user = split.train_item[order].astype(np.int64)
    deg = np.bincount(split.train_user, minlength=split.num_users)
    self.start = np.concatenate([[0], np.cumsum(deg)[:-1]])
    self.deg = deg
    self.users = np.flatnonzero(deg > 0)
    self.known = np.unique(split.train_user.astype(np.int64) * split.num_items + split.train_item)

  def is_train(self, user: np.ndarray, item: np.ndarray) -> np.ndarray:
    key = user.astype(np.int64) * self.split.num_items + item
    pos = np.minimum(np.searchsorted(self.known, key), len(self.known) - 1)
    return self.known[pos] == key

  def epoch(self, rng: np.random.Generator) -> list[Batch]:
    n = len(self.split.train_user)
    user = self.users[rng.integers(0, len(self.users), n)]
    pos = self.items_by_user[self.start[user] + (rng.random(n) * self.deg[user]).astype(np.int64)]
    neg = rng.integers(0, self.split.num_items, n)
    redraw = self.is_train(user, neg)
    for _ in range(10_000):
      if not redraw.any():
        break
      neg[redraw] = rng.integers(0, self.split.num_items, int(redraw.sum()))
      redraw[redraw] = self.is_train(user[redraw], neg[redraw])
    else:
      full = np.unique(user[redraw])
      raise ValueError(
        f"BPRSampler: user(s) {full[:5].tolist()} interacted with (nearly) all {self.split.num_items} "
        f"items in training, so no negative item can be drawn"
      )
    perm = rng.permutation(n)
    u_off = self.split.num_users
    batches = []
    for start in range(0, n, self.batch_size):
      rows = perm[start : start + self.batch_size]
      pad = self.batch_size - len(rows)
      mask = np.concatenate([np.ones(len(rows), bool), np.zeros(pad, bool)])
      rows = np.concatenate([rows, np.zeros(pad, np.int64)])
      batches.append(
        Batch(
          device_array(user[rows], jnp.int32),
          device_array(u_off + pos[rows], jnp.int32),
          device_array(u_off + neg[rows], jnp.int32),
          device_array(mask),
        )
      )
    return batches
