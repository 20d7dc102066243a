"""Serving an upgrade on two real sentence encoders (tests/_real_models.py: paraphrase-MiniLM-L3-v2 the old model,
all-MiniLM-L6-v2 the new one, 4,000 generated documents and a paraphrase query each), through real stores (faiss,
LanceDB, Qdrant in local mode).

One test per serving point that synthetic models had shown: one compiled map and about one store round trip per
served query; rows written through the map first for other queries no more often than their old copies; raw
new-model rows caught in every store; the hubness correction kept at 200 pairs, where it raises recall, and served
exactly over the whole store; wrong inputs to ``bcjax fit`` and ``bcjax transform`` refused (the CLI's own tests,
run again on these vectors). The two-stage and migration points are test_migrate.py's RealModelTest. Each test
says which number failed before its fix, and shows that failure where the fix can be switched off.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized

from bcjax import upgrade
from tests import _real_models as real_models
from tests import test_cli
from tests.test_stores import ID0, MODULES, NEW_ID0, STORES, csls_brute_force, make_store, unit

STORED, ARRIVING = 3400, 600  # documents in the old store; documents the new model alone embeds later


class CountingStore:
  """A store that records every candidate request (how many rows each query asked for), delegating the rest."""

  def __init__(self, store):
    self.store, self.requests = store, []

  def candidates(self, queries, k):
    self.requests.append((len(queries), k))
    return self.store.candidates(queries, k)

  def __getattr__(self, name):
    return getattr(self.store, name)


@pytest.mark.heavy
class RealModelServingTest(parameterized.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if (why := real_models.missing()) is not None:
      raise absltest.SkipTest(why)
    cls.old, cls.new, cls.queries = real_models.embedded(STORED + ARRIVING)
    cls.paired = np.sort(np.random.default_rng(0).choice(STORED, 600, replace=False))
    cls.map = upgrade.fit_upgrade(cls.new[cls.paired], cls.old[cls.paired], normalize=True, seed=0).map

  def store(self, kind, ids, vectors):
    if importlib.util.find_spec(MODULES[kind]) is None:
      self.skipTest(f"{MODULES[kind]} is not installed (the stores extra)")
    return make_store(kind, Path(self.create_tempdir().full_path), ids, vectors)

  def test_one_query_at_a_time_shares_one_compiled_map_and_about_one_store_search(self):
    """Before: every call rebuilt and compiled the map (70-200 ms a query). Now one program serves every one-row
    query, the store is asked once for most queries (the correction's exact top k rarely needs a wider search), and
    the answer is CSLS's over the whole store."""
    from bcjax.upgrade import _map

    self.assertIsNotNone(self.map.hubness)
    store = CountingStore(self.store("faiss", ID0 + np.arange(STORED), self.old[:STORED]))
    upgrade.bridged_search(store, self.map, self.queries[1:2], 10)  # the serving process's first query
    programs = _map.compiled_map(self.map).func._cache_size()  # (other tests may have served other shapes)
    store.requests.clear()
    asked = np.arange(0, STORED, 85)  # 40 queries, one call each
    served = [upgrade.bridged_search(store, self.map, self.queries[i : i + 1], 10).ids[0] for i in asked]
    self.assertEqual(_map.compiled_map(self.map).func._cache_size(), programs)  # no query compiled anything
    self.assertLessEqual(len(store.requests), 1.25 * len(asked), store.requests)
    self.assertTrue(all(n == 1 and k <= 160 for n, k in store.requests), store.requests)
    expected = csls_brute_force(self.map, self.queries[asked], self.old[:STORED], 10)
    np.testing.assert_array_equal(np.stack(served) - ID0, expected)

  @parameterized.parameters("faiss", "lancedb")
  def test_bridged_rows_take_first_place_no_more_often_than_their_old_copies(self, kind):
    """Before: 600 documents written through the map took first place for 8.7 % of the other documents' queries
    (their old copies: 1.8 %), whose own first place fell 0.881 -> 0.829. The scale, fitted on the pairs' out-of-map
    images, puts them on the old rows' scale; without it (scale None) the failure returns."""
    arriving = NEW_ID0 + np.arange(ARRIVING)
    copies = self.store(kind, np.concatenate([ID0 + np.arange(STORED), arriving]), self.old)
    bridged = self.store(kind, ID0 + np.arange(STORED), self.old[:STORED])
    upgrade.bridge_items(bridged, self.map, arriving, self.new[STORED:])
    others = self.queries[:STORED]  # the stored documents' own queries
    first = {}
    for name, store, served in (
      ("copies", copies, self.map),
      ("bridged", bridged, self.map),
      ("unscaled", bridged, self.map._replace(scale=None)),
    ):
      top = upgrade.bridged_search(store, served, others, 1).ids[:, 0]
      first[name] = (np.mean(top >= NEW_ID0), np.mean(top == ID0 + np.arange(STORED)))
    self.assertGreater(first["unscaled"][0], 3 * first["copies"][0], first)  # the failure this fixes
    rate, n = first["copies"][0], STORED
    self.assertLessEqual(first["bridged"][0], rate + 2 * np.sqrt(rate * (1 - rate) / n) + 1 / n, first)
    self.assertGreaterEqual(first["bridged"][1], first["copies"][1] - 0.005, first)  # the old documents' recall
    # The price: the arriving documents' own queries find their mapped rows less often than their old copies would.
    own = upgrade.bridged_search(bridged, self.map, self.queries[STORED:], 1).ids[:, 0]
    self.assertGreater(np.mean(own == arriving), 0.7)

  @parameterized.parameters(*STORES)
  def test_a_block_of_raw_new_model_rows_is_caught_and_bridged_rows_are_not(self, kind):
    """Before: LanceDB sampled the head of its table and missed 300 raw new-model rows (1.35 %) written before
    2,000 bridged rows. Every store now samples uniformly; bridged rows alone are no false alarm."""
    store = self.store(kind, ID0 + np.arange(3000), self.old[:3000])
    upgrade.bridge_items(store, self.map, NEW_ID0 + np.arange(500), self.new[3000:3500])
    check = upgrade.check_store_space(store, self.map, sample_rows=1000)
    self.assertLess(check.new, 3, check)  # old rows and rows written through the map: one space
    store.add(NEW_ID0 + 1000 + np.arange(48), self.new[3500:3548])  # raw new-model rows: 48 of 3,548 (1.35 %)
    upgrade.bridge_items(store, self.map, NEW_ID0 + 2000 + np.arange(400), self.new[3548:3948])  # bridged after them
    with self.assertRaisesRegex(upgrade.MixedSpaceError, "sampled uniformly"):
      upgrade.check_store_space(store, self.map, sample_rows=1000)
    with self.assertRaises(upgrade.MixedSpaceError):
      upgrade.bridged_search(store, self.map, self.queries[:3], 3)

  def test_the_correction_is_kept_at_200_pairs_and_raises_first_place_recall(self):
    """Before: auto left CSLS out at 200 pairs (it changed no rank of the pairs, so they could not tell). It is now
    kept unless the pairs show it lowering retrieval, and over the 3,800 other documents it raises R@1."""
    paired = np.arange(0, 4000, 20)
    fit = upgrade.fit_upgrade(self.new[paired], self.old[paired], normalize=True, seed=0)
    self.assertIn("hubness correction (CSLS, k=10) kept", fit.reason)
    self.assertIsNotNone(fit.map.hubness)
    rest = np.setdiff1d(np.arange(4000), paired)
    mapped = unit(np.asarray(fit.map(self.queries[rest])))  # float64 NumPy brute force over every other document
    cosines = mapped @ unit(self.old[rest]).T
    corrected = cosines - upgrade.hubness_bias(self.old[rest], fit.map.hubness)[None, :]
    at_one = [np.mean(np.argmax(s, axis=1) == np.arange(len(rest))) for s in (cosines, corrected)]
    self.assertGreater(at_one[1], at_one[0] + 0.003, at_one)  # 12 queries of 3,800

  @parameterized.parameters(*STORES)
  def test_the_served_correction_is_the_correction_over_the_whole_store(self, kind):
    """Before: the served search re-scored the store's first 40 candidates (up to 0.014 R@10 short of CSLS over the
    index). It now widens the search until no unreturned row could enter the top k."""
    store = self.store(kind, ID0 + np.arange(STORED), self.old[:STORED])
    asked = np.arange(0, STORED, 17)  # 200 queries
    served = upgrade.bridged_search(store, self.map, self.queries[asked], 10).ids - ID0
    np.testing.assert_array_equal(served, csls_brute_force(self.map, self.queries[asked], self.old[:STORED], 10))


@pytest.mark.heavy
class RealModelWrongInputTest(test_cli.WrongInputTest):
  """The CLI's wrong-input tests (an --index of the new model's vectors, old-model vectors or NaN given to transform,
  the correction applied or left out only when asked) on the real models' vectors of 1,600 documents."""

  def setUp(self):
    absltest.TestCase.setUp(self)
    if (why := real_models.missing()) is not None:
      self.skipTest(why)
    self.tmp = Path(self.create_tempdir().full_path)
    self.old, self.new, _ = real_models.embedded(4000)
    self.old, self.new = self.old[:1600], self.new[:1600]
    for name, arr in (("old", self.old[:600]), ("new", self.new[:600]), ("index", self.old[600:])):
      np.save(self.tmp / f"{name}.npy", arr)
    np.save(self.tmp / "new_index.npy", self.new[600:])
    self.fit = ["fit", "--old", str(self.tmp / "old.npy"), "--new", str(self.tmp / "new.npy"), "--kind", "linear"]


if __name__ == "__main__":
  absltest.main()
