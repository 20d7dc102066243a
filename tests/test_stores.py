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
    self.assertEqual(upgrade.check_store_space(store, m), upgrade.stores.SpaceCheck(old=1000, new=0, sampled=1000))
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
    # On the old rows' scale (bcjax.upgrade._scale) a bridged row is found first by its own item's query about as
    # often as an old row is (`own` above), not always: its mapped self-match is no longer worth more than theirs.
    self.assertGreater(np.mean(found == new_ids), min(own, 0.9) - 0.05)
    self.assertTrue(store.bridged_rows(new_ids).all())
    self.assertFalse(store.bridged_rows(self.ids).any())
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


def noisy_models(seed: int, d_items: int = 24, d: int = 32, noise: float = 2.0):
  """An old model (a squashed linear view of the items) and a noisy new one of equal width: each call of the new model
  embeds with fresh noise, as a query's text differs from its document's."""
  rng = np.random.default_rng(seed)
  w_old, w_new = rng.standard_normal((d_items, d)), rng.standard_normal((d_items, d))
  old = lambda x: (np.tanh(x @ w_old / 3) + 0.6).astype(np.float32)
  new = lambda x: (x @ w_new + 2.0 + noise * rng.standard_normal((len(x), d))).astype(np.float32)
  return rng, old, new


def csls_brute_force(m, queries, docs, k):
  """Each query's top k over every row by the map's corrected score, in float64 NumPy (the bias from
  upgrade.hubness_bias, checked against NumPy in test_upgrade.py)."""
  scores = unit(np.asarray(m(queries))) @ unit(docs).T - upgrade.hubness_bias(docs, m.hubness)[None, :]
  return np.argsort(-scores, axis=1, kind="stable")[:, :k]


@pytest.mark.heavy
class OneScaleTest(parameterized.TestCase):
  """Rows written through the map and re-embedded rows are scored on the old rows' scale (bcjax.upgrade._scale)."""

  def store(self, kind, ids, vectors):
    if importlib.util.find_spec(MODULES[kind]) is None:
      self.skipTest(f"{MODULES[kind]} is not installed (the stores extra)")
    return make_store(kind, Path(self.create_tempdir().full_path), ids, vectors)

  @parameterized.parameters("faiss", "lancedb")  # Qdrant records bridged rows too (StoreRoundTripTest), slowly
  def test_bridged_rows_take_first_place_no_more_often_than_their_old_copies(self, kind):
    rng, old_model, new_model = noisy_models(0)
    items = rng.standard_normal((3400, 24))
    paired = np.sort(rng.choice(3000, 600, replace=False))
    m = upgrade.fit_upgrade(new_model(items[paired]), old_model(items[paired]), kind="linear", normalize=True).map
    self.assertIsNotNone(m.hubness)
    others = np.arange(0, 3000, 5)  # queries of old documents, each embedded afresh by the new model
    queries = new_model(items[others])
    new_ids = NEW_ID0 + np.arange(400)
    # The same 400 documents stored two ways: their old copies, or their new-model vectors written through the map.
    copies = self.store(kind, np.concatenate([ID0 + np.arange(3000), new_ids]), old_model(items))
    bridged = self.store(kind, ID0 + np.arange(3000), old_model(items[:3000]))
    upgrade.bridge_items(bridged, m, new_ids, new_model(items[3000:]))
    self.assertTrue(bridged.bridged_rows(new_ids).all())
    first = {}
    for name, store, served in (
      ("copies", copies, m),
      ("bridged", bridged, m),
      ("unscaled", bridged, m._replace(scale=None)),
    ):
      top = upgrade.bridged_search(store, served, queries, 1).ids[:, 0]
      first[name] = (np.mean(top >= NEW_ID0), np.mean(top == ID0 + others))
    # Without the scale the bridged rows crowd out the old ones (the failure this fixes) ...
    self.assertGreater(first["unscaled"][0], 2 * first["copies"][0] + 0.02, first)
    # ... with it they are first for other queries no more often than their old copies, up to binomial noise.
    rate, n = first["copies"][0], len(others)
    self.assertLessEqual(first["bridged"][0], rate + 2 * np.sqrt(rate * (1 - rate) / n) + 1 / n, first)
    self.assertGreaterEqual(first["bridged"][1], first["copies"][1] - 0.02, first)  # the old documents' own recall
    # Their own queries still find them (less often than their exact old copies: the map's image is noisier).
    own = upgrade.bridged_search(bridged, m, new_model(items[3000:]), 1).ids[:, 0]
    self.assertGreater(np.mean(own == new_ids), 0.6)

  def test_two_stage_never_lowers_recall_for_documents_with_new_vectors(self):
    """A new model whose cosines bunch together (a strong common direction, as some text-embedding models have): the
    re-embedded candidates, reordered by the new model within the scores they hold, rank their documents no lower
    than the bridge does, and a document without a new vector keeps exactly its bridged rank (a median shift of the
    new cosines fell below the bridge here unless widened, and below it on real models: test_migrate's
    RealModelTest)."""
    if importlib.util.find_spec("faiss") is None:
      self.skipTest("faiss is not installed (the stores extra)")
    rng = np.random.default_rng(0)
    a_old, a_new = rng.standard_normal((12, 16)), rng.standard_normal((12, 16))
    shift_old, shift_new = 0.8 * rng.standard_normal(16), 10.0 * rng.standard_normal(16)
    old_model = lambda u: np.tanh(u @ a_old / 2) + shift_old + 0.05 * rng.standard_normal((len(u), 16))
    new_model = lambda u: u @ a_new + shift_new + 0.05 * rng.standard_normal((len(u), 16))
    items = rng.standard_normal((2000, 12))
    paraphrases = items + 0.3 * rng.standard_normal(items.shape)  # each query: a paraphrase of its document
    z_old, z_new, queries = old_model(items), new_model(items), new_model(paraphrases)
    re_embedded = np.arange(0, 2000, 2)
    paired = re_embedded[:600]
    m = upgrade.fit_upgrade(z_new[paired], z_old[paired], kind="linear", normalize=True, hubness="on").map
    store = self.store("faiss", ID0 + np.arange(2000), z_old.astype(np.float32))
    known = upgrade.NewVectors(ID0 + re_embedded, z_new[re_embedded])
    rows = re_embedded[600:]  # documents with new vectors, not paired
    recall = {}
    for name, vectors in (("bridged", None), ("two-stage", known)):
      top = upgrade.bridged_search(store, m, queries[rows], 1, new_vectors=vectors).ids[:, 0]
      recall[name] = np.mean(top == ID0 + rows)
    self.assertGreaterEqual(recall["two-stage"], recall["bridged"], recall)
    others = np.arange(1, 2000, 2)  # documents without new vectors: their queries find them exactly as bridged
    hits = [
      upgrade.bridged_search(store, m, queries[others], 5, new_vectors=v).ids == (ID0 + others)[:, None]
      for v in (None, known)
    ]
    np.testing.assert_array_equal(hits[1], hits[0])


@pytest.mark.heavy
class ExactCorrectionTest(parameterized.TestCase):
  @parameterized.parameters(*STORES)
  def test_the_served_correction_is_the_correction_over_the_whole_store(self, kind):
    """The store is asked for more candidates until no unreturned row could enter the top k: the served top k is
    CSLS's over every stored row, where the first 4 k candidates alone miss some."""
    if importlib.util.find_spec(MODULES[kind]) is None:
      self.skipTest(f"{MODULES[kind]} is not installed (the stores extra)")
    rng = np.random.default_rng(5)  # 100 pairs of noisy 48-d models: a strong correction (its bias spans 0.26)
    base = rng.standard_normal((3100, 48))
    q, _ = np.linalg.qr(rng.standard_normal((48, 48)))
    old = (np.tanh(base @ q.T) + rng.standard_normal((3100, 48)) * np.geomspace(4.0, 0.2, 48)).astype(np.float32)
    new = base.astype(np.float32)
    m = upgrade.fit_upgrade(new[:100], old[:100], kind="linear", normalize=True, hubness="on").map
    store = make_store(kind, Path(self.create_tempdir().full_path), ID0 + np.arange(100, 3100), old[100:])
    queries, k = new[100:200], 10
    expected = csls_brute_force(m, queries, old[100:], k)
    served = upgrade.bridged_search(store, m, queries, k).ids - ID0 - 100
    np.testing.assert_array_equal(served, expected)
    # The first 4 k candidates of the store, re-scored, differ from it: the fixture needs the wider search.
    ids, vectors = store.candidates(unit(np.asarray(m(queries))).astype(np.float32), 4 * k)
    scores = np.einsum("qd,qkd->qk", unit(np.asarray(m(queries))), unit(vectors))
    scores -= upgrade.hubness_bias(vectors.reshape(-1, 48), m.hubness).reshape(ids.shape)
    narrow = np.take_along_axis(ids, np.argsort(-scores, axis=1, kind="stable")[:, :k], axis=1) - ID0 - 100
    self.assertFalse(np.array_equal(narrow, expected))


class ServingCacheTest(absltest.TestCase):
  """One compiled map per map object, reused by every search; a changed or reloaded map is never served stale; each
  candidate's bias is computed once per store and map."""

  def setUp(self):
    super().setUp()
    if importlib.util.find_spec("faiss") is None:
      self.skipTest("faiss is not installed (the stores extra)")
    self.new, self.old = two_models(seed=6, n=700)
    self.store = make_store("faiss", Path(self.create_tempdir().full_path), ID0 + np.arange(500), self.old[:500])
    self.map = upgrade.fit_upgrade(self.new[:400], self.old[:400], kind="linear", normalize=True, hubness="on").map

  def test_every_search_reuses_one_compiled_map(self):
    from bcjax.upgrade import _map

    for i in range(5):  # one query at a time, as a serving process gets them
      upgrade.bridged_search(self.store, self.map, self.new[500 + i : 501 + i], 3)
    upgrade.bridge_items(self.store, self.map, NEW_ID0 + np.arange(1), self.new[600:601])
    compiled = _map.compiled_map(self.map)
    self.assertEqual(compiled.func._cache_size(), 1)  # one program, for the one-row shape, shared by all six calls
    upgrade.bridged_search(self.store, self.map, self.new[500:503], 3)  # three rows: padded to four, one more
    self.assertIs(_map.compiled_map(self.map), compiled)
    self.assertEqual(compiled.func._cache_size(), 2)

  def test_a_changed_or_reloaded_map_is_served_its_own_numbers(self):
    queries = self.new[500:520]
    first = upgrade.bridged_search(self.store, self.map, queries, 5)
    w, b = upgrade.affine_form(self.map.transform, self.map.params)
    turned = self.map._replace(params={"w": w[::-1].copy(), "b": b[::-1].copy()})  # another map, the same shapes
    result = upgrade.bridged_search(self.store, turned, queries, 5, check_space=False)
    expected = csls_brute_force(turned, queries, self.old[:500], 5)
    self.assertGreater(np.mean(result.ids - ID0 == expected), 0.99)
    self.assertFalse(np.array_equal(result.ids, first.ids))
    path = Path(self.create_tempdir().full_path) / "m.bcmap"
    upgrade.save_map(self.map, path)
    reloaded, _ = upgrade.load_map(path)
    again = upgrade.bridged_search(self.store, reloaded, queries, 5)
    np.testing.assert_array_equal(again.ids, first.ids)
    assert_close(again.scores, first.scores, "reduction", precision="float32", scale=1.0)

  def test_each_candidates_bias_is_computed_once_and_is_the_bias(self):
    from bcjax.upgrade.stores import _bridged

    upgrade.bridged_search(self.store, self.map, self.new[500:600], 10)
    cache = _bridged._served(self.store, self.map).bias
    seen = len(cache)
    self.assertGreater(seen, 10)
    upgrade.bridged_search(self.store, self.map, self.new[500:600], 10)
    self.assertLen(cache, seen)  # the same queries: no candidate computed again
    ids = np.array(sorted(cache))
    want = upgrade.hubness_bias(self.old[ids - ID0], self.map.hubness)
    got = np.array([cache[i][1] for i in ids])
    assert_close(got, want, "reduction", precision="float32", scale=1.0)


@pytest.mark.heavy
class UniformSampleTest(parameterized.TestCase):
  """Every store draws its space-check sample the same way, uniformly: a small share of raw new-model rows written
  in one block (then bridged rows after them) is caught wherever it sits."""

  def store(self, kind, ids, vectors):
    if importlib.util.find_spec(MODULES[kind]) is None:
      self.skipTest(f"{MODULES[kind]} is not installed (the stores extra)")
    return make_store(kind, Path(self.create_tempdir().full_path), ids, vectors)

  @parameterized.parameters(*STORES)
  def test_a_sample_is_uniform_distinct_and_fixed_by_its_seed(self, kind):
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1500, 8)).astype(np.float32)
    store = self.store(kind, ID0 + np.arange(1500), vectors)
    positions = []
    for seed in range(10):
      sample = store.sample(150, seed)
      found = np.argmax(unit(sample) @ unit(vectors).T, axis=1)  # each sampled row's position in the store
      self.assertLen(np.unique(found), 150)
      positions.append(found)
    np.testing.assert_array_equal(store.sample(150, 3), store.sample(150, 3))
    self.assertFalse(np.array_equal(positions[0], positions[1]))
    # The 1,500 rows in ten blocks of 150: each block's share of the 1,500 draws is a tenth, up to binomial noise.
    counts = np.bincount(np.concatenate(positions) // 150, minlength=10)
    self.assertLess(np.abs(counts - 150).max(), 4 * np.sqrt(1500 * 0.1 * 0.9), counts)

  @parameterized.parameters(*STORES)
  def test_a_block_of_raw_new_model_rows_is_caught(self, kind):
    new, old = two_models(seed=8, n=2500, d=16)
    store = self.store(kind, ID0 + np.arange(1600), old[:1600])
    m = upgrade.fit_upgrade(new[:1000], old[:1000], kind="linear", normalize=True, hubness="off").map
    store.add(NEW_ID0 + np.arange(25), new[1600:1625])  # raw new-model rows: 25 of 2,025 (1.2 %), one block
    upgrade.bridge_items(store, m, NEW_ID0 + 100 + np.arange(400), new[2000:2400])  # then bridged rows after them
    with self.assertRaisesRegex(upgrade.MixedSpaceError, "sampled uniformly"):
      upgrade.check_store_space(store, m, sample_rows=1000)  # half the store: where the rows sit matters
    with self.assertRaises(upgrade.MixedSpaceError):
      upgrade.bridged_search(store, m, new[:3], 3)


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
