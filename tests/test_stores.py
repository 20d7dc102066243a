"""A bridge served from real vector stores (faiss, LanceDB, Qdrant in local mode; the libraries themselves): pair by
id -> fit -> bridged queries against a float64 brute force -> bridged new items found by their own queries; the
hubness correction and the two-stage re-ranking against brute force; two models' vectors in one store refused; the
map's direction checked."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized

from bcjax import upgrade
from tests._tolerance import assert_close

STORES = ("faiss", "lancedb", "qdrant")
MODULES = {"faiss": "faiss", "lancedb": "lancedb", "qdrant": "qdrant_client"}
ID0, NEW_ID0 = 10_000, 50_000  # store ids differ from row numbers, so a mix-up of the two shows


def two_models(seed: int = 0, n: int = 1200, d: int = 16):
  """The same n items embedded by an "old" and a "new" model of equal width: each a different linear view of the
  items plus its own common direction (real embedding models are anisotropic), so their spaces can be told apart."""
  rng = np.random.default_rng(seed)
  items = rng.standard_normal((n, 12))
  old = np.tanh(items @ rng.standard_normal((12, d)) / 2) + 0.8 * rng.standard_normal(d)
  new = items @ rng.standard_normal((12, d)) + 1.2 * rng.standard_normal(d) + 0.05 * rng.standard_normal((n, d))
  return new.astype(np.float32), old.astype(np.float32)


def unit(x):
  x = np.asarray(x, np.float64)
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def make_store(kind: str, where: Path, ids: np.ndarray, vectors: np.ndarray):
  """A store of ``kind`` holding ``vectors`` under ``ids``, built with the library's own API, then opened by bcjax."""
  if kind == "faiss":
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(np.ascontiguousarray(unit(vectors), np.float32), ids)
    faiss.write_index(index, str(where / "old.faiss"))
    return upgrade.FaissStore(where / "old.faiss")
  if kind == "lancedb":
    import lancedb
    import pyarrow as pa

    table = pa.table(
      {
        "doc": pa.array(ids, pa.int64()),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), vectors.shape[1]),
      }
    )
    lancedb.connect(str(where / "db")).create_table("docs", table)
    return upgrade.LanceDBStore(where / "db", "docs", vector_column="emb", id_column="doc")
  from qdrant_client import QdrantClient, models

  client = QdrantClient(path=str(where / "qdrant"))
  client.create_collection(
    "docs", vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.COSINE)
  )
  client.upsert("docs", points=models.Batch(ids=ids.tolist(), vectors=vectors.tolist()))
  return upgrade.QdrantStore(None, "docs", client=client)


@pytest.mark.heavy
class StoreRoundTripTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    self.new, self.old = two_models()
    self.ids = ID0 + np.arange(1000)  # items 0..999 are stored; 1000..1199 arrive later
    self.paired = np.arange(0, 1000, 2)  # half the stored items were re-embedded

  def store(self, kind):
    if importlib.util.find_spec(MODULES[kind]) is None:
      self.skipTest(f"{MODULES[kind]} is not installed (the stores extra)")
    return make_store(kind, Path(self.create_tempdir().full_path), self.ids, self.old[:1000])

  def fit(self, store, **kw):
    old_pairs = store.read(self.ids[self.paired])  # pair by id
    return upgrade.fit_upgrade(
      self.new[self.paired], old_pairs, kind="linear", normalize=True, old_model="A", new_model="B", **kw
    ).map

  @parameterized.parameters(*STORES)
  def test_pair_fit_serve_insert(self, kind):
    store = self.store(kind)
    self.assertEqual((store.dim, store.count()), (16, 1000))
    got = store.read(self.ids[[5, 0, 999]])
    want = self.old[[5, 0, 999]]
    assert_close(unit(got), unit(want), "elementwise", precision="float32", scale=1.0)  # faiss/qdrant keep unit rows
    with self.assertRaises(KeyError):
      store.read(np.array([ID0 + 5000]))
    for n, rows in ((5000, 1000), (300, 300), (0, 0)):  # a sample holds distinct stored rows, at most n
      sample = store.sample(n, seed=1)
      self.assertEqual((len(sample), len(np.unique(sample, axis=0))), (rows, rows), n)
    m = self.fit(store, hubness="off")
    self.assertEqual(upgrade.check_store_space(store, m), upgrade.SpaceCheck(old=1000, new=0, sampled=1000))
    queries = self.new[np.arange(1, 1000, 2)]  # items that were not paired
    result = upgrade.bridged_search(store, m, queries, 10)
    scores = unit(np.asarray(m(queries))) @ unit(self.old[:1000]).T
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    # Each store's own top 10 holds the brute force's, up to float32 near-ties at the edge.
    agree = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(result.ids - ID0, expected)])
    self.assertGreater(agree, 0.99)
    assert_close(result.scores[:, 0], scores.max(axis=1), "reduction", precision="float32", scale=1.0)
    own = np.mean(result.ids[:, 0] == ID0 + np.arange(1, 1000, 2))
    self.assertGreater(own, 0.9)  # the bridge works: most queries find their own item first
    # New items embedded by the new model only: written through the map, then found by their own queries.
    new_ids = NEW_ID0 + np.arange(200)
    written = upgrade.bridge_items(store, m, new_ids, self.new[1000:])
    self.assertEqual(store.count(), 1200)
    assert_close(unit(store.read(new_ids)), unit(written), "elementwise", precision="float32", scale=1.0)
    found = upgrade.bridged_search(store, m, self.new[1000:], 1).ids[:, 0]
    np.testing.assert_array_equal(found, new_ids)
    with self.assertRaisesRegex(ValueError, "already stored"):
      upgrade.bridge_items(store, m, new_ids[:3], self.new[1000:1003])

  @parameterized.parameters(*STORES)
  def test_a_store_mixing_two_models_is_refused(self, kind):
    store = self.store(kind)
    m = self.fit(store)
    with self.assertRaisesRegex(ValueError, "looks like A's embeddings, not B's"):
      upgrade.bridge_items(store, m, NEW_ID0 + np.arange(50), self.old[1000:1050])  # old-model rows as "new"
    upgrade.bridged_search(store, m, self.new[:5], 3)  # one model's vectors: searched, and remembered as checked
    store.add(NEW_ID0 + np.arange(100), self.new[1000:1100])  # raw new-model vectors written without the map
    with self.assertRaisesRegex(upgrade.MixedSpaceError, "look like B's"):  # rows added: checked again
      upgrade.bridged_search(store, m, self.new[:5], 3)
    with self.assertRaisesRegex(ValueError, "looks like A's embeddings"):
      upgrade.bridged_search(store, m, self.old[:5], 3, check_space=False)  # queries the wrong way round


@pytest.mark.heavy
class ScoringTest(absltest.TestCase):
  """The corrected and re-ranked scores against a float64 brute force, on faiss with every row a candidate."""

  def setUp(self):
    super().setUp()
    if importlib.util.find_spec("faiss") is None:
      self.skipTest("faiss is not installed (the stores extra)")
    self.new, self.old = two_models(seed=1)
    self.ids = ID0 + np.arange(1000)
    self.store = make_store("faiss", Path(self.create_tempdir().full_path), self.ids, self.old[:1000])
    paired = np.arange(0, 1000, 2)
    fit = upgrade.fit_upgrade(self.new[paired], self.old[paired], kind="linear", normalize=True, hubness="on")
    self.map = fit.map
    self.queries = self.new[1000:1100]

  def test_hubness_corrected_search_is_the_brute_force(self):
    result = upgrade.bridged_search(self.store, self.map, self.queries, 10, overfetch=100)  # all 1,000 rows
    docs = self.old[:1000]
    scores = unit(np.asarray(self.map(self.queries))) @ unit(docs).T
    scores = scores - upgrade.hubness_bias(docs, self.map.hubness)[None, :]
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    self.assertGreater(np.mean(result.ids - ID0 == expected), 0.99)
    plain = upgrade.bridged_search(self.store, self.map._replace(hubness=None), self.queries, 10)
    self.assertFalse(np.array_equal(plain.ids, result.ids))  # the correction changes rankings

  def test_two_stage_orders_re_embedded_candidates_by_the_new_model(self):
    known = np.arange(0, 1000, 3)
    new_vectors = upgrade.NewVectors(self.ids[known], self.new[known])
    result = upgrade.bridged_search(self.store, self.map, self.queries, 10, new_vectors=new_vectors, overfetch=4)
    has = set(self.ids[known].tolist())
    for q, (ids, scores) in enumerate(zip(result.ids, result.scores)):
      re_embedded = [i for i in ids if i in has]
      cos = [float(unit(self.queries[q]) @ unit(self.new[i - ID0])) for i in re_embedded]
      self.assertEqual(cos, sorted(cos, reverse=True))  # among them, the new model's order
      self.assertTrue(np.all(np.diff(scores) <= 1e-12))
    # Every stored item re-embedded: the two-stage top k is re-embedding's top k among the store's candidates.
    everything = upgrade.NewVectors(self.ids, self.new[:1000])
    full = upgrade.bridged_search(self.store, self.map, self.queries, 5, new_vectors=everything, overfetch=200)
    reembed = np.argsort(-(unit(self.queries) @ unit(self.new[:1000]).T), axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(full.ids - ID0, reembed)


class SampleCounter:
  """A store that counts how often its rows are sampled (the space check's cost), delegating the rest."""

  def __init__(self, store):
    self.store, self.samples = store, 0

  def sample(self, n, seed=0):
    self.samples += 1
    return self.store.sample(n, seed)

  def __getattr__(self, name):
    return getattr(self.store, name)


class SpaceCheckCacheTest(absltest.TestCase):
  def test_a_store_is_checked_once_per_map_until_rows_are_added(self):
    if importlib.util.find_spec("faiss") is None:
      self.skipTest("faiss is not installed (the stores extra)")
    new, old = two_models(seed=4, n=400)
    store = SampleCounter(make_store("faiss", Path(self.create_tempdir().full_path), ID0 + np.arange(300), old[:300]))
    m = upgrade.fit_upgrade(new[:300], old[:300], kind="linear", normalize=True, hubness="off").map
    for _ in range(3):
      upgrade.bridged_search(store, m, new[300:310], 3)
    self.assertEqual(store.samples, 1)
    upgrade.bridged_search(store, m._replace(hubness=None), new[300:310], 3)  # another map object: checked anew
    self.assertEqual(store.samples, 2)
    upgrade.bridge_items(store, m, NEW_ID0 + np.arange(20), new[300:320])
    upgrade.bridged_search(store, m, new[300:310], 3)  # the row count changed: checked again
    self.assertEqual(store.samples, 3)
    upgrade.bridged_search(store, m, new[300:310], 3, check_space=False)
    self.assertEqual(store.samples, 3)


class SpacesTest(absltest.TestCase):
  def test_rows_are_attributed_to_their_model(self):
    new, old = two_models(seed=2)
    stamps = {"old": upgrade.space_stamp(old[:500], "A"), "new": upgrade.space_stamp(new[:500], "B")}
    from bcjax.upgrade import _spaces

    self.assertTrue(np.all(_spaces.attribute_rows(old[500:], stamps) == "old"))
    self.assertTrue(np.all(_spaces.attribute_rows(new[500:], stamps) == "new"))
    with self.assertRaisesRegex(ValueError, "finite matrix"):
      upgrade.space_stamp(np.zeros((1, 3)))

  def test_a_map_file_keeps_its_direction_and_models(self):
    new, old = two_models(seed=3, n=400)
    m = upgrade.fit_upgrade(new, old, kind="linear", old_model="A", new_model="B", hubness="off").map
    path = Path(self.create_tempdir().full_path) / "m.bcmap"
    upgrade.save_map(m, path)
    loaded, _ = upgrade.load_map(path, old_model="A", new_model="B")
    self.assertEqual((loaded.spaces["old"].model, loaded.spaces["new"].model), ("A", "B"))
    for field in ("mean", "components", "variances", "residual"):
      assert_close(getattr(loaded.spaces["new"], field), getattr(m.spaces["new"], field), "elementwise")
    with self.assertRaisesRegex(ValueError, "`old_model` is 'B', not 'A'"):
      upgrade.load_map(path, old_model="B", new_model="A")
    upgrade.check_direction(loaded, new[:20])
    with self.assertRaisesRegex(ValueError, "looks like A's embeddings"):
      upgrade.check_direction(loaded, old[:20])


class OpeningTest(absltest.TestCase):
  def test_opening_a_missing_lancedb_directory_creates_nothing(self):
    if importlib.util.find_spec("lancedb") is None:
      self.skipTest("lancedb is not installed (the stores extra)")
    where = Path(self.create_tempdir().full_path) / "no-such-db"
    with self.assertRaisesRegex(ValueError, "`uri` .*no-such-db' is not a directory"):
      upgrade.LanceDBStore(where, "docs")
    self.assertFalse(where.exists())


class MissingExtraTest(absltest.TestCase):
  def test_a_missing_library_names_the_extra(self):
    from bcjax import _extras

    with self.assertRaisesRegex(ImportError, r"pip install 'bcjax\[stores\]'"):
      _extras.require("no_such_vector_store_library", "stores", "SomeStore")


if __name__ == "__main__":
  absltest.main()
