r"""Serving a bridge from a real vector store (:func:`bcjax.upgrade.bridged_search`) beside the store's own search.

For each store (faiss ``IndexIDMap2`` over a flat inner-product index, LanceDB embedded on disk, Qdrant in local mode)
holding ``rows`` unit old-model vectors of width ``dim``, with a linear map fitted on ``pairs`` paired rows (its
hubness correction on, as ``bcjax fit`` serves it):

* ``first_call_s``: the first ``bridged_search`` of a serving process on one query: the map's compile, the store's
  space check (a uniform sample attributed to the two models) and the search, timed apart from the rest;
* ``one_query``: the median wall time of one query (``one_query_repeats`` of them, each a different query), through
  ``bridged_search`` (map, candidates, exact re-scoring with the correction) and through the store's own search of
  the mapped query (``raw``: the library's own call, k results, nothing re-scored), in milliseconds, and their ratio;
* ``batch``: queries per second over one batch of ``batch`` queries, both ways (the median of ``batch_repeats``);
* ``migration`` (with LanceDB): half the rows re-embedded into a new-model table by
  :func:`bcjax.upgrade.start_migration`, then the served search over both tables on one scale
  (``Migration.search``) timed the same ways, beside LanceDB's own search of each table (``raw_ms``: the old table
  for the mapped query plus the new table for the query itself).

The vectors come from ``--old``/``--new`` .npy files of real embeddings of the same items (row i of each: the first
``pairs`` rows fit the map, the next ``rows`` are stored, new-model rows after them are the queries), or, without
them, from two synthetic models (a noisy linear view of shared items each, with its own common direction, so the
fingerprints tell them apart). Every timing is host wall time around a call that returns NumPy arrays (the map's
output is waited for inside ``bridged_search``).

  python -m benchmarks.upgrade_serving --out runs/upgrade-serving.json [--old OLD.npy --new NEW.npy] [--quick]
"""

import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bcjax import upgrade
from benchmarks._embeddings import check_paired, paired_embeddings
from benchmarks.timing import benchmark_main
from experiments.harness import option

STORES = ("faiss", "lancedb", "qdrant")


@dataclasses.dataclass(frozen=True)
class Config:
  old: str = option("", help=".npy [n, D] of real old-model embeddings (default: synthetic)")
  new: str = option("", help=".npy [n, D] of the same items' new-model embeddings")
  rows: int = option(20_000, help="old-model vectors in each store", low=100)
  dim: int = option(384, help="the models' width", low=4)
  pairs: int = option(2000, help="paired rows the map is fitted on", low=50)
  k: int = option(10, help="results per query", low=1)
  one_query_repeats: int = option(200, help="timed one-query searches (median reported)", low=1)
  batch: int = option(1000, help="queries in the timed batch", low=1)
  batch_repeats: int = option(3, help="timed batches (median reported)", low=1)
  stores: tuple[str, ...] = option(STORES, help="stores to time", choices=STORES)


PRESETS = {
  "full": Config(),
  "quick": Config(rows=2000, dim=64, pairs=400, one_query_repeats=30, batch=200, batch_repeats=2),
}


def _models(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  items = rng.standard_normal((n, max(8, d // 2)))
  old = items @ rng.standard_normal((items.shape[1], d)) + 2.0 * rng.standard_normal(d)
  old += 0.3 * rng.standard_normal((n, d))
  new = items @ rng.standard_normal((items.shape[1], d)) + 3.0 * rng.standard_normal(d)
  new += 0.1 * rng.standard_normal((n, d))
  unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
  return unit(new).astype(np.float32), unit(old).astype(np.float32)


def _store(kind: str, where: Path, ids: np.ndarray, vectors: np.ndarray):
  """A store of ``kind`` holding ``vectors`` under ``ids`` and its raw search ``raw(queries [Q, D], k)``."""
  if kind == "faiss":
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, ids)
    store = upgrade.FaissStore(where / "old.faiss", index)
    return store, lambda q, k: index.search(q, k)
  if kind == "lancedb":
    import lancedb
    import pyarrow as pa

    values = pa.array(vectors.ravel(), pa.float32())
    table = pa.table({"id": pa.array(ids), "vector": pa.FixedSizeListArray.from_arrays(values, vectors.shape[1])})
    lancedb.connect(str(where / "db")).create_table("docs", table)
    store = upgrade.LanceDBStore(where / "db", "docs")
    return (
      store,
      lambda q, k: store.table.search(list(q)).metric("cosine").select(["id", "_distance"]).limit(k).to_arrow(),
    )
  from qdrant_client import QdrantClient, models

  client = QdrantClient(path=str(where / "qdrant"))
  client.create_collection("docs", vectors_config=models.VectorParams(size=vectors.shape[1], distance="Cosine"))
  for start in range(0, len(ids), 1000):
    chunk = slice(start, start + 1000)
    client.upsert("docs", points=models.Batch(ids=ids[chunk].tolist(), vectors=vectors[chunk].tolist()))
  store = upgrade.QdrantStore(None, "docs", client=client)

  def raw(q, k):
    requests = [models.QueryRequest(query=row.tolist(), limit=k) for row in q]
    return client.query_batch_points("docs", requests=requests)

  return store, raw


def _median_ms(fn, calls) -> float:
  times = []
  for args in calls:
    start = time.perf_counter()
    fn(*args)
    times.append(time.perf_counter() - start)
  return 1e3 * statistics.median(times)


def time_store(kind: str, cfg: Config, m: upgrade.UpgradeMap, old: np.ndarray, queries: np.ndarray) -> dict:
  """One store's row (module docstring)."""
  with tempfile.TemporaryDirectory() as scratch:
    store, raw = _store(kind, Path(scratch), np.arange(len(old), dtype=np.int64), old)
    mapped = np.asarray(m(queries), np.float32)
    start = time.perf_counter()
    upgrade.bridged_search(store, m, queries[:1], cfg.k)
    first = time.perf_counter() - start
    raw(mapped[:1], cfg.k)
    ones = [(queries[i : i + 1],) for i in range(1, 1 + cfg.one_query_repeats)]
    one = {
      "bridged_ms": _median_ms(lambda q: upgrade.bridged_search(store, m, q, cfg.k), ones),
      "raw_ms": _median_ms(
        lambda q: raw(q, cfg.k), [(mapped[i : i + 1],) for i in range(1, 1 + cfg.one_query_repeats)]
      ),
    }
    one["ratio"] = one["bridged_ms"] / one["raw_ms"]
    batch = queries[: cfg.batch]
    upgrade.bridged_search(store, m, batch, cfg.k)  # the batch's shape compiled once, apart
    bridged_s = _median_ms(lambda q: upgrade.bridged_search(store, m, q, cfg.k), [(batch,)] * cfg.batch_repeats) / 1e3
    raw_s = _median_ms(lambda q: raw(q, cfg.k), [(mapped[: cfg.batch],)] * cfg.batch_repeats) / 1e3
    row = {
      "rows": len(old),
      "first_call_s": first,
      "one_query": one,
      "batch": {
        "queries": len(batch),
        "bridged_queries_per_s": len(batch) / bridged_s,
        "raw_queries_per_s": len(batch) / raw_s,
        "ratio": bridged_s / raw_s,
      },
    }
  print(
    f"{kind}: first call {first:.2f} s; one query {one['bridged_ms']:.2f} ms bridged vs {one['raw_ms']:.2f} ms raw; "
    f"batch of {len(batch)}: {row['batch']['bridged_queries_per_s']:.0f} vs {row['batch']['raw_queries_per_s']:.0f} "
    f"queries/s",
    file=sys.stderr,
  )
  return row


def time_migration(cfg: Config, m: upgrade.UpgradeMap, old: np.ndarray, new: np.ndarray, queries: np.ndarray) -> dict:
  """The migration's row (module docstring): half of LanceDB's rows re-embedded, served over both tables."""
  with tempfile.TemporaryDirectory() as scratch:
    ids = np.arange(len(old), dtype=np.int64)
    store, raw_old = _store("lancedb", Path(scratch), ids, old)
    new_store = upgrade.LanceDBStore.create(Path(scratch) / "db", "docs_new", new.shape[1])
    migration = upgrade.start_migration(Path(scratch) / "migration", store, new_store, m)
    migration.add(ids[::2], new[::2])
    table = new_store.table

    def raw(q_new, q_mapped, k):
      raw_old(q_mapped, k)
      return table.search(list(q_new)).metric("cosine").select(["id", "_distance"]).limit(k).to_arrow()

    mapped = np.asarray(m(queries), np.float32)
    start = time.perf_counter()
    migration.search(queries[:1], cfg.k)
    first = time.perf_counter() - start
    picks = range(1, 1 + cfg.one_query_repeats)
    one = {
      "served_ms": _median_ms(lambda q: migration.search(q, cfg.k), [(queries[i : i + 1],) for i in picks]),
      "raw_ms": _median_ms(lambda q, x: raw(q, x, cfg.k), [(queries[i : i + 1], mapped[i : i + 1]) for i in picks]),
    }
    one["ratio"] = one["served_ms"] / one["raw_ms"]
    batch = queries[: cfg.batch]
    migration.search(batch, cfg.k)
    served_s = _median_ms(lambda q: migration.search(q, cfg.k), [(batch,)] * cfg.batch_repeats) / 1e3
    raw_s = _median_ms(lambda q, x: raw(q, x, cfg.k), [(batch, mapped[: cfg.batch])] * cfg.batch_repeats) / 1e3
  print(
    f"migration (lancedb, half re-embedded): first call {first:.2f} s; one query {one['served_ms']:.2f} ms served "
    f"vs {one['raw_ms']:.2f} ms raw",
    file=sys.stderr,
  )
  return {
    "rows": len(old),
    "re_embedded": len(ids[::2]),
    "first_call_s": first,
    "one_query": one,
    "batch": {
      "queries": len(batch),
      "served_queries_per_s": len(batch) / served_s,
      "raw_queries_per_s": len(batch) / raw_s,
      "ratio": served_s / raw_s,
    },
  }


def _items(cfg: Config) -> int:
  """Items a run reads: the pairs, the stored rows and the queries."""
  return cfg.pairs + cfg.rows + max(cfg.batch, cfg.one_query_repeats + 1)


def run(cfg: Config) -> dict:
  need = _items(cfg)
  real = paired_embeddings(cfg.old, cfg.new)
  new, old = (real[1][:need], real[0][:need]) if real is not None else _models(need, cfg.dim)
  paired = np.arange(cfg.pairs)
  fit = upgrade.fit_upgrade(new[paired], old[paired], kind="linear", normalize=True, hubness="on")
  stored = slice(cfg.pairs, cfg.pairs + cfg.rows)
  queries = new[cfg.pairs + cfg.rows :]
  source = f"{cfg.old} / {cfg.new}" if cfg.old else "synthetic"
  out: dict = {"source": source, "stores": {k: time_store(k, cfg, fit.map, old[stored], queries) for k in cfg.stores}}
  if "lancedb" in cfg.stores:
    out["migration"] = time_migration(cfg, fit.map, old[stored], new[stored], queries)
  return out


def main(argv=None) -> int:
  check = lambda cfg: check_paired(cfg.old, cfg.new, _items(cfg))
  return benchmark_main("upgrade_serving", __doc__, Config, PRESETS, run, argv, check_config=check)


if __name__ == "__main__":
  sys.exit(main())
