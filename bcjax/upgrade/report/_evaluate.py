"""Measuring a map on held-out pairs and the old index, and the verdict (:mod:`bcjax.upgrade.report`)."""

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from bcjax._device import device_array
from bcjax._threads import blas_threads
from bcjax._unit import unit_rows
from bcjax.upgrade import _files, _hubness, _retrieval, _spaces
from bcjax.upgrade._map import UpgradeMap, compiled_map
from bcjax.upgrade.report._consumer import consumer_measures
from bcjax.upgrade.report._measure import interval, sample_rows
from bcjax.upgrade.report._records import (
  MAX_CHANCE_SHARE,
  MapSummary,
  Measure,
  Reason,
  UpgradeReport,
  _reason,
  _verdict,
)


def _without_copies(index_rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
  """Index rows that are not exact copies of a target (a copy would be the right answer under another id)."""
  seen = {row.tobytes() for row in np.asarray(targets, np.float32)}
  return np.array([row.tobytes() not in seen for row in np.asarray(index_rows, np.float32)], bool)


def _relevant_lists(qrels, query_rows: np.ndarray, num_index: int) -> list[np.ndarray]:
  pair_ids, index_ids = (np.asarray(a) for a in qrels)
  if (
    pair_ids.shape != index_ids.shape
    or pair_ids.ndim != 1
    or not (np.issubdtype(pair_ids.dtype, np.integer) and np.issubdtype(index_ids.dtype, np.integer))
  ):
    raise ValueError("evaluate_upgrade: `qrels` must be two equal-length integer vectors (pair row, index row)")
  if index_ids.size and (index_ids.min() < 0 or index_ids.max() >= num_index):
    raise ValueError(
      f"evaluate_upgrade: `qrels` index rows span [{index_ids.min()}, {index_ids.max()}], outside the "
      f"index's [0, {num_index})"
    )
  order = np.argsort(pair_ids, kind="stable")
  pair_ids, index_ids = pair_ids[order], index_ids[order]
  starts, ends = np.searchsorted(pair_ids, query_rows, "left"), np.searchsorted(pair_ids, query_rows, "right")
  return [np.unique(index_ids[s:e]) for s, e in zip(starts, ends)]


def _chain_map(maps) -> tuple[Callable, bool, str, dict, tuple[int, int]]:
  """(apply, normalize, kind, choices, (D_j, D_k)) of one map or of a chain applied in order."""
  maps = [maps] if isinstance(maps, UpgradeMap) else list(maps)
  if not maps:
    raise ValueError("evaluate_upgrade: `upgrade_map` is an empty chain")

  def apply(z):
    return np.asarray(compiled_map(maps, jnp.float32)(device_array(z, np.float32)))

  if len(maps) == 1:
    return apply, maps[0].normalize, maps[0].kind, maps[0].choices, maps[0].dims
  return (
    apply,
    maps[-1].normalize,
    "chain(" + ", ".join(m.kind for m in maps) + ")",
    {f"step{i}": m.choices for i, m in enumerate(maps)},
    (maps[-1].dims[0], maps[0].dims[1]),
  )


def evaluate_upgrade(
  upgrade_map: UpgradeMap | Sequence[UpgradeMap],
  z_new,
  z_prev,
  rows: np.ndarray,
  *,
  index=None,
  new_index=None,
  qrels=None,
  labels=None,
  consumer_rows: np.ndarray | None = None,
  k: int = 10,
  metric: str = "cosine",
  min_recovery: float = 0.95,
  min_hit_rate: float = 0.95,
  max_rows: int = 20_000,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
  seed: int = 0,
  threads: int | None = None,
) -> UpgradeReport:
  """The go/no-go report (:mod:`bcjax.upgrade.report`) of ``upgrade_map`` on the held-out pairs ``rows``.

  Args:
    upgrade_map: the fitted map, or a chain of maps applied in order (e.g. :func:`registry_maps`).
    z_new: the pairs' new-model embeddings (an array or a memory map), [n, D_k].
    z_prev: the same items' old-model embeddings, [n, D_(k-1)].
    rows: held-out pair rows (never used by the fit); at most ``max_rows`` of them are used, drawn at random.
    index: the old index [N, D_(k-1)], optional.
    new_index: the same items embedded by the new model [N, D_k], optional: makes re-embedding the reference.
    qrels: relevance pairs ``(pair rows, index rows)``, optional: the held-out rows act as queries.
    labels: a class per pair row [n], optional: trains and scores the consumer.
    consumer_rows: the rows the consumer is fitted on (the training rows); at most ``max_rows`` are used.
    k: the cut-off of every top-k measure.
    metric: ``cosine``, ``dot`` or ``l2``.
    min_recovery: the bridge threshold of ``recall_recovery`` (a share of the reference's recall), in (0, 1].
    min_hit_rate: the bridge threshold of ``own_vector_hit_rate`` (an absolute rate), in (0, 1].
    max_rows: held-out rows, consumer rows and index rows sampled as own-vector distractors, at most.
    chunk_rows: index rows read at a time: the index is streamed, never held in memory whole.
    seed: seeds the subsamples and the bootstrap.
    threads: NumPy BLAS threads while evaluating; ``None`` (default) takes the cores other processes leave idle
      (:func:`~bcjax.upgrade.fit_upgrade`'s ``threads``).

  Returns:
    An :class:`UpgradeReport`: the ``verdict`` (one of :data:`VERDICTS`), the ``primary`` measure's name and
    ``threshold``, every :class:`Measure` in ``metrics``, the ``reasons`` (:class:`Reason`), the settings and the
    map judged; :func:`report_json` writes it as strict JSON.

  Raises:
    ValueError: naming the argument, for a threshold outside (0, 1], an unknown metric, no held-out rows,
      relevance pairs without an index, labels without consumer rows, or an index whose sampled rows look like the
      new model's (the map's fingerprints, :func:`~bcjax.upgrade._spaces.index_space_error`), or ``threads`` not a
      positive integer.
  """
  fn = "evaluate_upgrade"
  _check_arguments(fn, rows, index, new_index, qrels, metric, min_recovery, min_hit_rate, chunk_rows)
  with blas_threads(threads, name=f"{fn}: `threads`"):
    rows = sample_rows(np.asarray(rows), max_rows, seed)
    apply, normalize, kind, choices, dims = _chain_map(upgrade_map)
    # The last map's hubness correction lives in the chain's output space: it corrects every bridged search below.
    last = upgrade_map if isinstance(upgrade_map, UpgradeMap) else list(upgrade_map)[-1]
    if last.hubness is not None and metric != "cosine":
      raise ValueError(f"{fn}: the map's hubness correction corrects cosine scores; `metric` is {metric!r}")
    zn, zp = _files.read_rows(z_new, rows, np.float32), _files.read_rows(z_prev, rows, np.float32)
    mapped = apply(zn)
    target = unit_rows(zp) if normalize else zp
    metrics, reasons = _alignment(mapped, target, seed), list[Reason]()
    distractors = None if index is None else _distractors(fn, index, zp, last, max_rows, seed)
    settings = _Settings(k, metric, chunk_rows, seed, last.hubness)
    metrics["own_vector_hit_rate"] = _own_vector_hit_rate(
      mapped, target, distractors, settings, gate=qrels is None, min_hit_rate=min_hit_rate, reasons=reasons
    )
    primary, threshold = ("own_vector_hit_rate", min_hit_rate) if qrels is None else ("recall_recovery", min_recovery)
    if index is not None:
      metrics.update(_index_measures(fn, mapped, zn, zp, rows, index, new_index, qrels, settings, reasons))
    if labels is not None:
      metrics.update(
        consumer_measures(labels, z_prev, rows, zp, mapped, consumer_rows, normalize, max_rows, seed, reasons)
      )
    if any(r.code == "pool-too-small" for r in reasons):
      metrics[primary] = metrics[primary]._replace(measurable=False)
    summary = MapSummary(kind, choices, normalize, (int(dims[0]), int(dims[1])), *_hubness_summary(last.hubness))
    verdict = _verdict(metrics[primary], threshold, reasons)
    return UpgradeReport(
      verdict, primary, threshold, metrics, tuple(reasons), k, metric, min_recovery, min_hit_rate, len(rows), summary
    )


class _Settings(NamedTuple):
  """What every retrieval measure of :func:`evaluate_upgrade` shares."""

  k: int
  metric: str
  chunk_rows: int
  seed: int
  hubness: _hubness.Hubness | None

  def bias(self, docs) -> np.ndarray | None:
    """The hubness bias of ``docs`` (streamed), or None without a correction."""
    return None if self.hubness is None else _hubness.hubness_bias(docs, self.hubness, chunk_rows=self.chunk_rows)

  def row_bias(self):
    """The hubness bias as a function of rows (for a search that reads the index once), or None."""
    hubness = self.hubness
    return None if hubness is None else (lambda rows: _hubness.hubness_bias(rows, hubness, chunk_rows=len(rows)))


def _hubness_summary(hubness: _hubness.Hubness | None) -> tuple[int | None, int | None]:
  return (None, None) if hubness is None else (hubness.k, len(hubness.reference))


def _check_arguments(fn, rows, index, new_index, qrels, metric, min_recovery, min_hit_rate, chunk_rows) -> None:
  for name, value in (("min_recovery", min_recovery), ("min_hit_rate", min_hit_rate)):
    if not 0.0 < value <= 1.0:
      raise ValueError(f"{fn}: `{name}` must lie in (0, 1], got {value!r}")
  if chunk_rows < 1:
    raise ValueError(f"{fn}: `chunk_rows` must be >= 1, got {chunk_rows!r}")
  if metric not in _retrieval.METRICS:
    raise ValueError(f"{fn}: `metric` must be one of {list(_retrieval.METRICS)}, got {metric!r}")
  if len(rows) == 0:
    raise ValueError(f"{fn}: `rows` is empty; the report needs held-out pairs")
  if qrels is not None and index is None:
    raise ValueError(f"{fn}: `qrels` name index rows; pass the old `index` with them")
  if new_index is not None and (index is None or new_index.shape[0] != index.shape[0]):
    raise ValueError(
      f"{fn}: `new_index` has {new_index.shape[0]} rows but `index` has "
      f"{'none' if index is None else index.shape[0]}; both must embed the same items"
    )


def _alignment(mapped: np.ndarray, target: np.ndarray, seed: int) -> dict[str, Measure]:
  """How far the mapped rows land from their old rows: L2, relative and cosine, each with its interval."""
  error = np.linalg.norm(mapped - target, axis=1)
  cos = np.sum(unit_rows(mapped) * unit_rows(target), axis=1)
  return {
    "alignment_l2": interval(error, seed=seed, means="mean ||B(z_new) - z_old|| on held-out pairs"),
    "alignment_relative": interval(
      error, np.linalg.norm(target, axis=1), seed=seed, means="mean ||B(z_new) - z_old|| / mean ||z_old||"
    ),
    "alignment_cosine": interval(cos, seed=seed, means="mean cosine of B(z_new) and z_old"),
  }


def _distractors(fn: str, index, zp: np.ndarray, last: UpgradeMap, max_rows: int, seed: int) -> np.ndarray:
  """A sample of the old index as own-vector distractors (no copy of a target); refused if it is the new model's."""
  sample = sample_rows(np.arange(index.shape[0]), max_rows, seed + 1)
  candidates = _files.read_rows(index, sample, np.float32)
  if last.spaces is not None:  # an index of the new model's vectors would score the map against the wrong space
    wrong = _spaces.index_space_error(candidates, last.spaces["old"], last.spaces["new"])
    if wrong is not None:
      raise ValueError(f"{fn}: {wrong}")
  return candidates[_without_copies(candidates, zp)]


def _own_vector_hit_rate(mapped, target, distractors, s: _Settings, *, gate: bool, min_hit_rate: float, reasons):
  """The own-vector hit rate among the held-out old rows and the distractors; a pool too small to judge is a reason."""
  pool_rows = target if distractors is None else np.concatenate([target, distractors])
  hits = _retrieval.own_vector_hits(mapped, target, distractors, k=s.k, metric=s.metric, item_bias=s.bias(pool_rows))
  pool, held_out = len(pool_rows), len(target)
  chance = min(1.0, s.k / pool)
  means = (
    f"share of held-out items whose mapped new embedding ranks their own old embedding in its top {s.k} among "
    f"{pool} old embeddings"
  )
  needed = math.ceil(s.k / (MAX_CHANCE_SHARE * min_hit_rate))
  if gate and pool < needed:
    where = (
      f"{held_out} held-out pairs' own old vectors"
      if distractors is None
      else f"{held_out} held-out pairs' old vectors and {len(distractors)} index rows"
    )
    fix = (
      f"Not measurable without --index (or a sample of the old index of at least {needed - held_out} rows)"
      if distractors is None
      else f"Not measurable with this index: pass one (or a sample of it) of at least {needed - held_out} rows"
    )
    reasons.append(
      _reason(
        "pool-too-small",
        f"the own-vector hit rate is scored among {pool} old embeddings ({where}), where a random map already "
        f"finds its own vector in the top {s.k} with probability {chance:.3g}: a verdict needs chance at most "
        f"{MAX_CHANCE_SHARE:g} x the threshold {min_hit_rate:g}, a pool of at least {needed} rows. " + fix,
      )
    )
  return interval(hits, seed=s.seed, means=means, chance=chance, pool=pool)


def _index_measures(fn, mapped, zn, zp, rows, index, new_index, qrels, s: _Settings, reasons) -> dict[str, Measure]:
  """Neighbour agreement with the old model over the old index, and recall recovery where relevance is given."""
  k = min(s.k, index.shape[0])
  # One read of the index: the mapped queries (corrected) and the old ones (as the old model searched), each row's
  # correction computed from the chunk as it is read.
  mine, theirs = _retrieval.top_k_many(
    [mapped, zp], index, k, metric=s.metric, chunk_rows=s.chunk_rows, item_bias=s.row_bias(), biased=[True, False]
  )
  agreement = _retrieval.overlap(mine, theirs)
  measures = {
    "neighbour_agreement": interval(
      agreement,
      seed=s.seed,
      means=(
        f"share of the old model's top {s.k} in the old index that the mapped new query also ranks in its top "
        f"{s.k} (how much the bridged model behaves like the old one: re-embedding with a different model scores "
        f"below 1 too, so it is reported, not gated on)"
      ),
    )
  }
  if qrels is not None:
    measures.update(_recall_measures(fn, mine, theirs, zn, rows, index, new_index, qrels, s, reasons))
  return measures


def _recall_measures(fn, mine, theirs, zn, rows, index, new_index, qrels, s: _Settings, reasons):
  """Bridged Recall@k against the old index as a share of the reference's (re-embedding's, else the old model's).

  ``mine`` and ``theirs``: the mapped and the old queries' top k in the old index (:func:`_index_measures`).
  """
  relevant = _relevant_lists(qrels, rows, index.shape[0])
  has = np.array([len(r) > 0 for r in relevant])
  if not has.any():
    reasons.append(_reason("no-relevance", "no held-out row has a relevance pair: recall recovery is not measurable"))
    return {
      "recall_recovery": Measure(
        math.nan, math.nan, math.nan, 0, "no held-out query with relevance pairs", measurable=False
      )
    }
  rel = [r for r, h in zip(relevant, has) if h]
  bridged = _retrieval.recall_of(mine[has], rel)
  if new_index is not None:
    reference_name = "re-embedding (new queries against the new model's index)"
    reference = _retrieval.recall_per_query(zn[has], new_index, rel, k=s.k, metric=s.metric, chunk_rows=s.chunk_rows)
  else:
    reference_name = "the old model (old queries against the old index)"
    reference = _retrieval.recall_of(theirs[has], rel)
  chance = float(np.mean([min(1.0, s.k / index.shape[0]) for _ in rel]))
  ref = interval(reference, seed=s.seed, means=f"Recall@{s.k} of {reference_name}", chance=chance)
  at_chance = not ref.low > chance
  if at_chance:
    reasons.append(
      _reason(
        "reference-at-chance",
        f"the reference's Recall@{s.k} ({ref.value:.3f}, 95 % interval down to {ref.low:.3f}) is not above "
        f"chance ({chance:.3f}): recall recovery is not measurable on these relevance pairs",
      )
    )
  return {
    "recall_bridged": interval(bridged, seed=s.seed, means=f"Recall@{s.k} of the mapped new queries"),
    "recall_reference": ref,
    "recall_recovery": interval(
      bridged,
      reference,
      seed=s.seed,
      means=f"Recall@{s.k} of the mapped new queries against the old index as a share of {reference_name}'s",
      measurable=not at_chance,
    ),
  }
