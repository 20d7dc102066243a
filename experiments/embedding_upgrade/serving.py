"""Serving a bridge from a real vector store (LanceDB, embedded), per paired share of the index: Recall@k of the
held-out queries' paraphrase partners with no map, bridged (plain cosine), bridged with the hubness correction,
two-stage (bridged candidates re-ranked with the new model's vectors of the re-embedded items: the paired ones) and
full re-embedding, each with its bootstrap interval over queries and the paired difference from plain bridging.

The paired items are the re-embedded ones: a practitioner re-embeds a share of the corpus, fits the map on it, and
has those items' new vectors for the two-stage re-ranking."""

import tempfile
from pathlib import Path

import numpy as np

from bcjax import upgrade
from bcjax._unit import unit_rows

MODES = ("no map", "bridged", "bridged + hubness", "two-stage", "re-embedding")
_REPLICATES = 2000


def _interval(hits: np.ndarray, seed: int) -> dict:
  idx = np.random.default_rng(seed).integers(0, len(hits), size=(_REPLICATES, len(hits)))
  low, high = np.percentile(hits[idx].mean(axis=1), [2.5, 97.5])
  return {"value": float(hits.mean()), "low": float(low), "high": float(high)}


def _lancedb_store(where: Path, ids: np.ndarray, vectors: np.ndarray) -> upgrade.LanceDBStore:
  import lancedb
  import pyarrow as pa

  values = pa.array(np.asarray(vectors, np.float32).ravel(), pa.float32())
  table = pa.table(
    {"id": pa.array(ids, pa.int64()), "vector": pa.FixedSizeListArray.from_arrays(values, vectors.shape[1])}
  )
  lancedb.connect(str(where)).create_table("docs", table)
  return upgrade.LanceDBStore(where, "docs")


def serving_rows(old: str, new: str, z_old, z_new, corpus, split_of, cfg, log) -> dict:
  """Recall@k of every serving mode (module docstring) for each paired share ``cfg.fractions``; ``split_of(fraction)``
  gives the paired split (rows of ``corpus.sentences``) the upgrade experiment fits on."""
  queries, partners = corpus.qrels
  index_rows = corpus.index_rows
  ids = np.arange(len(index_rows), dtype=np.int64)  # store id = index position, as the relevance pairs name them
  q_new = np.asarray(z_new[queries], np.float32)
  k = cfg.k

  def recall(found: np.ndarray) -> np.ndarray:
    return (found == partners[:, None]).any(axis=1).astype(np.float64)

  base = {
    "no map": recall(
      upgrade.top_k(q_new, z_old[index_rows], k) if z_old.shape[1] == z_new.shape[1] else np.full((len(queries), k), -1)
    ),
    "re-embedding": recall(upgrade.top_k(q_new, z_new[index_rows], k)),
  }
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    store = _lancedb_store(Path(tmp) / "db", ids, unit_rows(np.asarray(z_old[index_rows], np.float32)))
    position = {int(r): i for i, r in enumerate(index_rows)}
    for fraction in cfg.fractions:
      split = split_of(fraction)
      if split is None:
        continue
      fit = upgrade.fit_upgrade(
        z_new,
        z_old,
        kind="auto",
        split=split,
        normalize=True,
        k=k,
        seed=cfg.seed,
        hubness="on",
        old_model=old,
        new_model=new,
      )
      paired = np.sort(np.concatenate([split.train, split.val]))
      known = upgrade.NewVectors(np.array([position[int(r)] for r in paired], np.int64), z_new[paired])
      hits = dict(base)
      hits["bridged"] = recall(upgrade.bridged_search(store, fit.map._replace(hubness=None), q_new, k).ids)
      hits["bridged + hubness"] = recall(upgrade.bridged_search(store, fit.map, q_new, k).ids)
      hits["two-stage"] = recall(upgrade.bridged_search(store, fit.map, q_new, k, new_vectors=known).ids)
      row = {
        "fraction": fraction,
        "pairs": len(paired),
        "kind": fit.map.kind,
        "recall": {mode: _interval(hits[mode], cfg.seed) for mode in MODES},
        "gain_over_bridged": {
          mode: _interval(hits[mode] - hits["bridged"], cfg.seed) for mode in ("bridged + hubness", "two-stage")
        },
      }
      log(stage=f"serving/{old}>{new}", fraction=fraction, **{m: row["recall"][m]["value"] for m in MODES})
      rows.append(row)
  return {"old": old, "new": new, "k": k, "queries": len(queries), "store": "lancedb", "rows": rows}


def serving_table(serving: dict) -> str:
  """The serving rows as markdown: Recall@k [95 %] per mode and paired share."""
  k = serving["k"]
  lines = [
    f"### Serving from LanceDB: {serving['old']} (old store) <- {serving['new']} (new model), Recall@{k} of "
    f"{serving['queries']} held-out queries' paraphrase partners",
    "",
    "| pairs | kind | " + " | ".join(MODES) + " | hubness gain | two-stage gain |",
    "|---|---|" + "---|" * (len(MODES) + 2),
  ]
  fmt = lambda m: f"{m['value']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"
  for row in serving["rows"]:
    cells = [fmt(row["recall"][mode]) for mode in MODES]
    gains = [fmt(row["gain_over_bridged"][mode]) for mode in ("bridged + hubness", "two-stage")]
    lines.append(f"| {row['pairs']} ({100 * row['fraction']:g}%) | {row['kind']} | " + " | ".join(cells + gains) + " |")
  return "\n".join(lines) + "\n"
