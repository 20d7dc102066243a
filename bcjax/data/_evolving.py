r"""Evolving bipartite user–item graphs, their snapshots, and the per-version train/val split of BC-Aligner.

One schema serves every dataset: time-ordered edges (user, item, rating, time) with users and items numbered by
first appearance, plus attribute bags per item (brand, categories, genres) and optionally per user. Snapshots are
edge-count quantiles: edge i of E has time ratio :math:`r_i = i / (E-1)` and the snapshot at t keeps the edges with
:math:`r_i \le t`. Version k trains on snapshot :math:`t_k` (plus the early window edges of new users) and validates
on the window :math:`(t_k, t_{k+1}]`.

Reference: Hu et al., "Learning Backward Compatible Embeddings", KDD 2022, section 5.1 and the reference code
snap-stanford/bc-emb (``recsys/dataset.py``, ``recsys/utils.py``), whose split rules are followed here.
"""

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from bcjax import _checks

SNAPSHOT_TIMES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""The snapshot times t_0 .. t_5 of an evolving graph, as shares of its time span: version k = 0..4 trains on the
edges up to t_k and validates on (t_k, t_(k+1)]."""


class Bags(NamedTuple):
  """Attribute bags of one group: ``(owner [P], value [P])`` pairs sorted by owner; ``vocab[value]`` is the name."""

  owner: np.ndarray  # int32
  value: np.ndarray  # int32
  vocab: tuple[str, ...]


class EvolvingGraph(NamedTuple):
  """Time-ordered user–item interactions.

  ``user``, ``item``, ``rating``, ``time`` are aligned [E] arrays sorted by time (stably: ties keep input order);
  users and items are numbered by first appearance, so the first m edges touch exactly ``user[:m].max() + 1`` users.
  ``item_attributes`` / ``user_attributes`` map a group name ("category", "brand", "genre", ...) to its
  :class:`Bags`; vocabularies are global (built over all items, future ones included).
  """

  user: np.ndarray  # [E] int32
  item: np.ndarray  # [E] int32
  rating: np.ndarray  # [E] float32
  time: np.ndarray  # [E] int64
  item_attributes: dict[str, Bags]
  user_attributes: dict[str, Bags]
  name: str
  notes: tuple[str, ...] = ()  # what the loader dropped or could not find, to be shown before a run starts

  @property
  def num_edges(self) -> int:
    return len(self.user)

  @property
  def num_users(self) -> int:
    return int(self.user.max()) + 1 if len(self.user) else 0

  @property
  def num_items(self) -> int:
    return int(self.item.max()) + 1 if len(self.item) else 0


def _first_appearance(keys: np.ndarray) -> np.ndarray:
  """Dense ids numbered by first occurrence in ``keys``."""
  _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
  rank = np.empty(len(first), np.int64)
  rank[np.argsort(first, kind="stable")] = np.arange(len(first))
  return rank[inverse.reshape(-1)].astype(np.int32)


def _bags(
  fn: str, group: str, values: Mapping[Hashable, Sequence[str]], owner_keys: Sequence[Hashable], min_count: int
) -> tuple[Bags, str]:
  """Bags of the owners (in id order) and a note of what was kept.

  Values occurring fewer than ``min_count`` times are dropped and the kept vocabulary is ordered by frequency (ties by
  first occurrence).
  """
  per_owner = []
  for key in owner_keys:
    bag = values.get(key, ())
    if isinstance(bag, str):
      raise ValueError(
        f"{fn}: attribute group {group!r} must map each key to a sequence of strings, got the string "
        f"{bag!r} for key {key!r} (wrap a single value in a list)"
      )
    per_owner.append([str(v) for v in bag])
  counts = Counter(v for bag in per_owner for v in bag)
  vocab = tuple(v for v, c in counts.most_common() if c >= min_count)
  index = {v: i for i, v in enumerate(vocab)}
  owner, value = [], []
  for i, bag in enumerate(per_owner):
    for v in bag:
      if v in index:
        owner.append(i)
        value.append(index[v])
  empty = sum(1 for bag in per_owner if not any(v in index for v in bag))
  note = (
    f"{group}: {len(vocab)} of {len(counts)} values kept (those on >= {min_count} owners); "
    f"{empty} of {len(per_owner)} owners have an empty bag"
  )
  return Bags(np.asarray(owner, np.int32), np.asarray(value, np.int32), vocab), note


def evolving_graph(
  users: Sequence[Hashable] | np.ndarray,
  items: Sequence[Hashable] | np.ndarray,
  ratings: Sequence[float] | np.ndarray,
  times: Sequence[int] | np.ndarray,
  *,
  item_attributes: Mapping[str, Mapping] | None = None,
  user_attributes: Mapping[str, Mapping] | None = None,
  min_count: int = 5,
  name: str = "graph",
  notes: Sequence[str] = (),
) -> EvolvingGraph:
  """Builds the schema from raw interactions.

  Edges are sorted stably by time, then users and items are re-numbered by first appearance (the reference's
  ``process.py``; its unstable sort is replaced by a stable one so ties keep file order). Duplicate (user, item)
  interactions are kept as multi-edges.

  Args:
    users: the user's raw key per interaction, [E].
    items: the item's raw key per interaction, [E].
    ratings: the rating per interaction, [E].
    times: the time per interaction, [E] integers (any resolution: days, seconds).
    item_attributes: group -> {raw item key: sequence of attribute strings}; a missing key is an empty bag.
    user_attributes: the same for users (optional; the reference model ignores them).
    min_count: a value is kept when it occurs at least this often over all bags of its group (the reference: 5).
    name: dataset name.
    notes: the loader's notes; one per attribute group (what ``min_count`` kept) is appended.

  Returns:
    The :class:`EvolvingGraph`.

  Raises:
    ValueError: naming the argument, for arrays unlike ``users`` in length, fewer than 2 interactions, non-integer times
      or non-finite ratings.
  """
  fn = "evolving_graph"
  user_keys_seq, item_keys_seq = np.asarray(users), np.asarray(items)
  rating_values, time_values = np.asarray(ratings, np.float32), np.asarray(times)
  n = len(user_keys_seq)
  for arg, arr in (("items", item_keys_seq), ("ratings", rating_values), ("times", time_values)):
    if arr.shape != (n,):
      raise ValueError(f"{fn}: `{arg}` has shape {arr.shape}; it must match `users`, shape ({n},)")
  if n < 2:
    raise ValueError(f"{fn}: need at least 2 interactions, got {n}")
  if not np.issubdtype(time_values.dtype, np.integer):
    raise ValueError(f"{fn}: `times` must be integers (e.g. days or unix seconds), got dtype {time_values.dtype}")
  if not np.all(np.isfinite(rating_values)):
    raise ValueError(f"{fn}: `ratings` holds {int(np.sum(~np.isfinite(rating_values)))} non-finite value(s)")
  min_count = _checks.check_positive_int(fn, "min_count", min_count)
  order = np.argsort(time_values, kind="stable")
  user_keys_seq, item_keys_seq, rating_values, time_values = (
    user_keys_seq[order],
    item_keys_seq[order],
    rating_values[order],
    time_values[order].astype(np.int64),
  )
  user, item = _first_appearance(user_keys_seq), _first_appearance(item_keys_seq)

  def keys_in_id_order(ids, keys):
    out = np.empty(int(ids.max()) + 1, dtype=object)
    out[ids] = list(keys)  # every id's key (equal keys share an id, so any occurrence will do)
    return out

  item_keys, user_keys = keys_in_id_order(item, item_keys_seq), keys_in_id_order(user, user_keys_seq)
  notes = list(notes)
  groups: dict[str, dict] = {}
  for side, attributes, keys in (("item", item_attributes, item_keys), ("user", user_attributes, user_keys)):
    groups[side] = {}
    for g, v in (attributes or {}).items():
      groups[side][g], note = _bags(fn, g, v, keys, min_count)
      notes.append(f"{side} {note}")
  return EvolvingGraph(user, item, rating_values, time_values, groups["item"], groups["user"], name, tuple(notes))


def num_edges_at(num_edges: int, t: float) -> int:
  """Edges in the snapshot at time ratio t: those with ``linspace(0, 1, E)[i] <= t`` (computed exactly so).

  Args:
    num_edges: E, the graph's edges.
    t: the time ratio in [0, 1].

  Returns:
    The number of edges.

  Raises:
    ValueError: ``t`` outside [0, 1].
  """
  if not 0.0 <= t <= 1.0:
    raise ValueError(f"num_edges_at: `t` must lie in [0, 1], got {t}")
  return int(np.count_nonzero(np.linspace(0.0, 1.0, num_edges) <= t))


class VersionSplit(NamedTuple):
  """Train/val edges of one version (``split_version``).

  Node sets are all users/items up to :math:`t_{k+1}`: ``num_users``, ``num_items``; ``num_old_users`` users were seen
  by :math:`t_k`.
  """

  train_user: np.ndarray
  train_item: np.ndarray
  train_rating: np.ndarray
  val_user: np.ndarray
  val_item: np.ndarray
  val_rating: np.ndarray
  num_users: int
  num_items: int
  num_old_users: int


def split_version(graph: EvolvingGraph, t_train: float, t_val: float) -> VersionSplit:
  r"""The reference's split of version k with :math:`t_k` = ``t_train`` and :math:`t_{k+1}` = ``t_val``.

  * train = every edge with :math:`r \le t_k`, plus the window edges of *new* users (id >= users seen by
    :math:`t_k`) except the last window edge of a new user who has more than one;
  * val = every window edge of an old user, plus the last window edge of each new user with more than one;
  * the node sets are all users and items up to :math:`t_{k+1}` (items first seen in val are isolated in training).

  Args:
    graph: the :class:`EvolvingGraph`.
    t_train: t_k, version k's training time ratio.
    t_val: t_(k+1), the end of its validation window.

  Returns:
    The :class:`VersionSplit`.

  Raises:
    ValueError: times that are not 0 <= ``t_train`` < ``t_val`` <= 1.
  """
  if not 0.0 <= t_train < t_val <= 1.0:
    raise ValueError(f"split_version: need 0 <= `t_train` < `t_val` <= 1, got {t_train}, {t_val}")
  e_train, e_val = num_edges_at(graph.num_edges, t_train), num_edges_at(graph.num_edges, t_val)
  if e_train == 0 or e_val == e_train:
    raise ValueError(
      f"split_version: the graph's {graph.num_edges} edges leave an empty snapshot or window at t = {t_train}, {t_val}"
    )
  old_users = int(graph.user[:e_train].max()) + 1
  window = np.arange(e_train, e_val)
  w_user = graph.user[window]
  new = w_user >= old_users
  # The last window edge of each new user: scanning the window backwards, the first occurrence of each user.
  rev_users = w_user[::-1]
  _, first_rev = np.unique(rev_users, return_index=True)
  last = np.zeros(len(window), bool)
  last[len(window) - 1 - first_rev] = True
  count = np.bincount(w_user, minlength=int(graph.user[:e_val].max()) + 1)[w_user]
  to_val = ~new | (last & (count > 1))
  train = np.concatenate([np.arange(e_train), window[~to_val]])
  val = window[to_val]
  return VersionSplit(
    graph.user[train],
    graph.item[train],
    graph.rating[train],
    graph.user[val],
    graph.item[val],
    graph.rating[val],
    int(graph.user[:e_val].max()) + 1,
    int(graph.item[:e_val].max()) + 1,
    old_users,
  )


def split_versions(graph: EvolvingGraph, times: Sequence[float] = SNAPSHOT_TIMES) -> list[VersionSplit]:
  """``split_version(graph, times[k], times[k+1])`` for every version k.

  Args:
    graph: the :class:`EvolvingGraph`.
    times: the snapshot times (default :data:`SNAPSHOT_TIMES`).

  Returns:
    One :class:`VersionSplit` per version.
  """
  return [split_version(graph, a, b) for a, b in zip(times[:-1], times[1:])]


def bags_upto(bags: Bags, num_owners: int) -> Bags:
  """The bags of the first ``num_owners`` owners (the nodes present in a snapshot).

  Args:
    bags: the bags of every owner.
    num_owners: how many owners (from the first).

  Returns:
    The first owners' :class:`Bags`.
  """
  keep = bags.owner < num_owners
  return Bags(bags.owner[keep], bags.value[keep], bags.vocab)


def sample_users(graph: EvolvingGraph, max_edges: int, *, seed: int = 0) -> EvolvingGraph:
  """A subgraph of at most ``max_edges`` edges that keeps the graph's whole time span.

  Users are taken in a seeded random order, each with every one of its edges, while the running total fits (always at
  least one user). The kept edges keep their time order; users and items are renumbered by first appearance, and each
  attribute group keeps the bags of the kept owners (vocabularies unchanged). The graph itself when it already fits;
  otherwise a note says what was kept.

  Args:
    graph: the :class:`EvolvingGraph`.
    max_edges: the edge budget.
    seed: seeds the user order.

  Returns:
    The subgraph, an :class:`EvolvingGraph`.

  Raises:
    ValueError: ``max_edges`` is not a positive integer.
  """
  max_edges = _checks.as_int("sample_users", "max_edges", max_edges, low=1)
  if graph.num_edges <= max_edges:
    return graph
  per_user = np.bincount(graph.user, minlength=graph.num_users)
  order = np.random.default_rng(seed).permutation(graph.num_users)
  taken = max(int(np.sum(np.cumsum(per_user[order]) <= max_edges)), 1)
  kept_users = np.zeros(graph.num_users, bool)
  kept_users[order[:taken]] = True
  edges = kept_users[graph.user]
  old_user, old_item = graph.user[edges], graph.item[edges]
  user, item = _first_appearance(old_user), _first_appearance(old_item)

  def renumbered(bags: Bags, old_ids: np.ndarray, new_ids: np.ndarray, count: int) -> Bags:
    new_of = np.full(count, -1, np.int64)
    new_of[old_ids] = new_ids
    owner = new_of[bags.owner]
    keep = owner >= 0
    order = np.argsort(owner[keep], kind="stable")
    return Bags(owner[keep][order].astype(np.int32), bags.value[keep][order], bags.vocab)

  note = (
    f"sampled {taken:,} of {graph.num_users:,} users (seed {seed}) with all their edges to fit {max_edges:,} edges: "
    f"{len(user):,} of {graph.num_edges:,} edges, {int(item.max()) + 1:,} of {graph.num_items:,} items"
  )
  return graph._replace(
    user=user,
    item=item,
    rating=graph.rating[edges],
    time=graph.time[edges],
    item_attributes={g: renumbered(b, old_item, item, graph.num_items) for g, b in graph.item_attributes.items()},
    user_attributes={g: renumbered(b, old_user, user, graph.num_users) for g, b in graph.user_attributes.items()},
    notes=graph.notes + (note,),
  )
