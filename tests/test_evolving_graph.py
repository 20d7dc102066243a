"""Evolving bipartite graphs: the schema (stable time sort, first-appearance ids, min-count vocabularies), snapshot
sizes, BC-Aligner's split rules on a hand-built graph with known answers, consumer-task labels against NumPy, the
Amazon 2018 and MovieLens loaders on fixture files (malformed lines name file and line), and the synthetic default."""

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given
from hypothesis import strategies as st

from bcjax.data import (
  TASKS,
  VersionSplit,
  amazon_files,
  evolving_graph,
  item_rating_stats,
  item_rating_threshold,
  load_amazon,
  load_graph_dataset,
  load_movielens,
  movielens_graph,
  num_edges_at,
  sample_users,
  split_version,
  split_versions,
  synthetic_evolving_graph,
  task_examples,
)
from tests._tolerance import assert_close
from tests.test_data import ml100k

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BCJAX_DATA_DIR", ROOT.parent / "shared" / "data"))

# The hand-built graph: 11 edges, so r_i = i / 10 and the snapshot at 0.5 holds edges 0..5.
#   0: a-x  1: b-y  2: a-y  3: c-x  4: b-z  5: c-z     old users a, b, c (ids 0, 1, 2)
#   6: d-w  7: a-w  8: d-x  9: e-v  10: d-y             window: d is new with 3 edges, e new with 1 edge
EDGES = [
  ("a", "x"),
  ("b", "y"),
  ("a", "y"),
  ("c", "x"),
  ("b", "z"),
  ("c", "z"),
  ("d", "w"),
  ("a", "w"),
  ("d", "x"),
  ("e", "v"),
  ("d", "y"),
]
RATINGS = [5, 4, 3, 2, 1, 5, 4, 2, 5, 3, 4]


def tiny_graph(shuffle_seed: int | None = None):
  order = np.arange(len(EDGES))
  if shuffle_seed is not None:  # input order must not matter: times decide
    order = np.random.default_rng(shuffle_seed).permutation(len(EDGES))
  users = [EDGES[i][0] for i in order]
  items = [EDGES[i][1] for i in order]
  return evolving_graph(
    users,
    items,
    [RATINGS[i] for i in order],
    [10 * int(i) for i in order],
    item_attributes={"genre": {"x": ["g1", "g2"], "y": ["g1"], "z": ["g3"]}},
    min_count=2,
  )


class SchemaTest(absltest.TestCase):
  def test_first_appearance_ids_and_time_order(self):
    g = tiny_graph(shuffle_seed=3)
    np.testing.assert_array_equal(g.user, [0, 1, 0, 2, 1, 2, 3, 0, 3, 4, 3])
    np.testing.assert_array_equal(g.item, [0, 1, 1, 0, 2, 2, 3, 3, 0, 4, 1])
    np.testing.assert_array_equal(g.rating, RATINGS)
    self.assertEqual((g.num_users, g.num_items, g.num_edges), (5, 5, 11))
    bags = g.item_attributes["genre"]  # g1 occurs twice, g2 and g3 once: only g1 survives min_count=2
    self.assertEqual(bags.vocab, ("g1",))
    np.testing.assert_array_equal(bags.owner, [0, 1])
    np.testing.assert_array_equal(bags.value, [0, 0])

  def test_ties_keep_input_order(self):
    g = evolving_graph(["u1", "u2", "u3"], ["i1", "i2", "i3"], [1, 2, 3], [5, 1, 1])
    np.testing.assert_array_equal(g.rating, [2, 3, 1])  # the two day-1 edges keep their file order

  def test_vocabulary_by_frequency(self):
    attrs = {"cat": {i: (["common"] * 2 + ["rare"]) if i == 0 else ["common", "mid"] for i in range(6)}}
    g = evolving_graph(list(range(6)), list(range(6)), [1.0] * 6, list(range(6)), item_attributes=attrs, min_count=5)
    self.assertEqual(g.item_attributes["cat"].vocab, ("common", "mid"))  # 7 and 5 occurrences; rare: 1

  def test_bad_inputs(self):
    with self.assertRaisesRegex(ValueError, "`ratings` has shape"):
      evolving_graph([1, 2], [1, 2], [1.0], [1, 2])
    with self.assertRaisesRegex(ValueError, "`times` must be integers"):
      evolving_graph([1, 2], [1, 2], [1.0, 2.0], [0.5, 1.5])
    with self.assertRaisesRegex(ValueError, "non-finite"):
      evolving_graph([1, 2], [1, 2], [1.0, np.nan], [1, 2])
    with self.assertRaisesRegex(ValueError, "sequence of strings"):
      evolving_graph([1, 2], [1, 2], [1.0, 2.0], [1, 2], item_attributes={"brand": {1: "acme"}})

  @given(st.integers(2, 5000), st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9, 1.0]))
  def test_snapshot_is_an_edge_quantile(self, e, t):
    # linspace(0, 1, E)[i] <= t  <=>  i <= t (E - 1), up to rounding at exact multiples
    expected = int(np.floor(t * (e - 1) + 1e-9)) + 1
    self.assertIn(num_edges_at(e, t), (expected - 1, expected))
    self.assertEqual(num_edges_at(e, t), int(np.sum(np.linspace(0, 1, e) <= t)))


class SampleUsersTest(absltest.TestCase):
  def test_whole_users_in_time_order_renumbered_with_their_bags(self):
    graph = synthetic_evolving_graph(num_users=200, num_items=80, num_edges=3000, seed=3)
    self.assertIs(sample_users(graph, 3000), graph)  # it fits
    small = sample_users(graph, 700, seed=5)
    self.assertLessEqual(small.num_edges, 700)
    self.assertGreater(small.num_edges, 600)  # users are added until the next one would not fit
    self.assertTrue(np.all(np.diff(small.time) >= 0))
    # the reference: the users of the seeded order while their degrees fit, all their edges, ids by first appearance
    degree = np.bincount(graph.user, minlength=graph.num_users)
    chosen, total = set(), 0
    for u in np.random.default_rng(5).permutation(graph.num_users):
      if total + degree[u] > 700:
        break
      chosen.add(int(u))
      total += int(degree[u])
    expected = []
    new_user, new_item = {}, {}
    for u, i, r, t in zip(graph.user.tolist(), graph.item.tolist(), graph.rating.tolist(), graph.time.tolist()):
      if u in chosen:
        new_user.setdefault(u, len(new_user))
        new_item.setdefault(i, len(new_item))
        expected.append((new_user[u], new_item[i], r, t))
    item_of = {n: o for o, n in new_item.items()}  # new id -> old id
    got = list(zip(small.user.tolist(), small.item.tolist(), small.rating.tolist(), small.time.tolist()))
    self.assertEqual(got, expected)
    # numbered by first appearance: the first m edges touch users 0..max
    self.assertTrue(all(small.user[: m + 1].max() == len(set(small.user[: m + 1])) - 1 for m in range(50)))
    for group, bags in small.item_attributes.items():  # each kept item has its own attribute names
      whole = graph.item_attributes[group]
      for i in range(small.num_items):
        names = sorted(bags.vocab[v] for v in bags.value[bags.owner == i])
        self.assertEqual(names, sorted(whole.vocab[v] for v in whole.value[whole.owner == item_of[i]]), (group, i))
      self.assertTrue(np.all(np.diff(bags.owner) >= 0))
    self.assertIn(f"sampled {small.num_users} of {graph.num_users} users (seed 5)", small.notes[-1])
    again = sample_users(graph, 700, seed=5)
    np.testing.assert_array_equal(again.user, small.user)
    self.assertNotEqual(sample_users(graph, 700, seed=6).user.tolist(), small.user.tolist())
    with self.assertRaisesRegex(ValueError, "sample_users: `max_edges` must be an integer in"):
      sample_users(graph, 0)


class SplitTest(absltest.TestCase):
  def test_hand_built_split(self):
    s = split_version(tiny_graph(), 0.5, 1.0)
    # train: edges 0-5, plus d's first two window edges (6, 8) and e's only edge (9)
    train = [0, 1, 2, 3, 4, 5, 6, 8, 9]
    val = [7, 10]  # a's window edge (old user) and d's last edge
    g = tiny_graph()
    np.testing.assert_array_equal(s.train_user, g.user[train])
    np.testing.assert_array_equal(s.train_item, g.item[train])
    np.testing.assert_array_equal(s.val_user, g.user[val])
    np.testing.assert_array_equal(s.val_item, g.item[val])
    np.testing.assert_array_equal(s.val_rating, g.rating[val])
    self.assertEqual((s.num_users, s.num_items, s.num_old_users), (5, 5, 3))

  def test_window_nodes_and_partition(self):
    g = synthetic_evolving_graph(300, 150, 4000, seed=1)
    for k, s in enumerate(split_versions(g)):
      self.assertEqual(len(s.train_user) + len(s.val_user), num_edges_at(g.num_edges, 0.6 + 0.1 * k))
      new_val = s.val_user[s.val_user >= s.num_old_users]
      self.assertEqual(len(new_val), len(np.unique(new_val)))  # at most one val edge per new user
      self.assertTrue(np.all(s.train_item < s.num_items) and np.all(s.val_item < s.num_items))

  def test_bad_times(self):
    with self.assertRaisesRegex(ValueError, "t_train"):
      split_version(tiny_graph(), 0.7, 0.6)


class TaskLabelTest(absltest.TestCase):
  def test_labels_against_numpy(self):
    s = split_version(tiny_graph(), 0.5, 1.0)
    edge = task_examples("binary-edge-rating", s, fit=True)
    np.testing.assert_array_equal(edge.label, s.train_rating >= 4)
    self.assertIsNone(task_examples("user-activity", s).item)
    act = task_examples("user-activity", s).label
    pos = task_examples("user-positive-activity", s).label
    # val edges: a-w rated 2, d-y rated 4 -> a active but not positive, d active and positive; e's only edge is
    # in train, so e counts as inactive (the reference's quirk)
    np.testing.assert_array_equal(act, [1, 0, 0, 1, 0])
    np.testing.assert_array_equal(pos, [0, 0, 0, 1, 0])

  def test_item_statistics(self):
    rng = np.random.default_rng(0)
    item = rng.integers(0, 6, 80)
    rating = rng.integers(1, 6, 80).astype(np.float64)
    keep, mean, std = item_rating_stats(item, rating, 8, min_edges=10)
    expected = [i for i in range(8) if np.sum(item == i) >= 10]
    np.testing.assert_array_equal(keep, expected)
    assert_close(mean, [rating[item == i].mean() for i in expected])
    assert_close(std, [rating[item == i].std(ddof=1) for i in expected])

  def test_reference_std_flips_an_item_at_exactly_one(self):
    # torch_scatter.scatter_std(unbiased=True), transcribed: sqrt(sum((x - mean)^2) / (max(c - 1, 1) + 1e-6))
    def scatter_std(x):
      return np.sqrt(np.sum((x - x.mean()) ** 2) / (max(len(x) - 1, 1) + 1e-6))

    exact_one = np.array([1.0] * 15 + [5.0])  # S / (N - 1) = 15 / 15: std exactly 1
    rng = np.random.default_rng(1)
    other = rng.integers(1, 6, 12).astype(np.float64)
    item = np.concatenate([np.zeros(16, int), np.ones(12, int)])
    rating = np.concatenate([exact_one, other])
    _, _, unbiased = item_rating_stats(item, rating, 2)
    _, _, reference = item_rating_stats(item, rating, 2, std="torch_scatter")
    self.assertEqual(unbiased[0], 1.0)
    assert_close(reference, [scatter_std(exact_one), scatter_std(other)])
    self.assertLess(reference[0], 1.0)
    split = VersionSplit(item * 0, item, rating.astype(np.float32), item * 0, item, rating.astype(np.float32), 1, 2, 1)
    self.assertEqual(task_examples("binary-item-rating-std", split, fit=True).label[0], 1)
    self.assertEqual(task_examples("binary-item-rating-std", split, fit=True, std="torch_scatter").label[0], 0)

  def test_item_tasks_and_threshold(self):
    g = synthetic_evolving_graph(300, 150, 4000, seed=1)
    splits = split_versions(g)
    tau = item_rating_threshold(splits[0])
    fit = task_examples("binary-item-rating-avg", splits[0], fit=True, tau=tau)
    assert_close(fit.label.mean(), 0.5, "statistical", rtol=0, atol=0.1)  # tau is the median of these means
    std = task_examples("binary-item-rating-std", splits[1])
    keep, _, s = item_rating_stats(
      np.concatenate([splits[1].train_item, splits[1].val_item]),
      np.concatenate([splits[1].train_rating, splits[1].val_rating]),
      splits[1].num_items,
    )
    np.testing.assert_array_equal(std.item, keep)
    np.testing.assert_array_equal(std.label, s >= 1.0)
    with self.assertRaisesRegex(ValueError, "`tau`"):
      task_examples("binary-item-rating-avg", splits[0])
    with self.assertRaisesRegex(ValueError, "unknown `task`"):
      task_examples("item-popularity", splits[0])


def write_gz(path: Path, lines: list[str]) -> Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


def review(user, asin, rating, when):
  return json.dumps(
    {"overall": rating, "verified": True, "reviewTime": when, "reviewerID": user, "asin": asin, "unixReviewTime": 0}
  )


class AmazonTest(parameterized.TestCase):
  def fixture(self, reviews: list[str] | None = None, meta: list[str] | None = None) -> Path:
    d = Path(self.create_tempdir())
    write_gz(
      d / "Toys_5.json.gz",
      reviews
      or [
        review("U1", "A", 5.0, "01 2, 2015"),
        review("U2", "B", 3.0, "12 30, 2014"),
        review("U1", "B", 4.0, "01 2, 2015"),
        review("U3", "Z", 1.0, "03 1, 2013"),  # Z has no metadata
        review("U2", "A", 2.0, "1 10, 2015"),
        review("U2", "A", 2.0, "1 10, 2015"),
      ],
    )  # a duplicate review
    brands = ["Acme"] * 5 + ["Solo"]
    meta = meta or [
      json.dumps({"asin": a, "brand": b, "category": ["Toys", "Dolls</span>", "Toys"], "title": ""})
      for a, b in zip("ABCDEF", brands)
    ] + [json.dumps({"asin": "B", "brand": "Acme", "category": ["Toys", "Cars"]})]
    write_gz(d / "meta_Toys.json.gz", meta)
    return d

  def test_fixture(self):
    g = load_amazon("Toys", self.fixture(), min_count=2)
    # sorted by day: 20141230 U2-B, 20150102 U1-A, 20150102 U1-B, 20150110 U2-A (x2); Z is dropped
    np.testing.assert_array_equal(g.user, [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(g.item, [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(g.time, [20141230, 20150102, 20150102, 20150110, 20150110])
    np.testing.assert_array_equal(g.rating, [3, 5, 4, 2, 2])
    self.assertEqual(g.item_attributes["category"].vocab, ("Toys",))  # "Dolls</span>" removed, "Cars" too rare
    self.assertEqual(g.item_attributes["brand"].vocab, ("Acme",))  # A and B (its later line wins): Acme twice
    self.assertEqual(g.name, "amazon-Toys")
    self.assertIn("1 reviews of 1 products without metadata dropped (the reference's rule)", g.notes)
    self.assertIn(
      "meta_Toys.json.gz: 6 category entries containing '</span>' dropped (the reference's filter)", g.notes
    )

  def test_brand_min_count_over_graph_items(self):
    reviews = [review(f"U{i}", a, 5.0, f"01 {i + 1}, 2015") for i, a in enumerate("ABCDEF")]
    g = load_amazon("Toys", self.fixture(reviews=reviews))
    brand = g.item_attributes["brand"]
    self.assertEqual(brand.vocab, ("Acme",))  # 5 items carry Acme (B's later metadata line wins: Acme)
    np.testing.assert_array_equal(brand.owner, [0, 1, 2, 3, 4])

  @parameterized.parameters(
    ("{not json", "line 2: neither a JSON object"),
    (
      json.dumps({"asin": "A", "overall": 5.0, "reviewTime": "01 2, 2015"}),
      r"line 2: review lacks the field\(s\) "
      r"\['reviewerID'\]",
    ),
    (review("U1", "A", "five", "01 2, 2015"), "line 2: 'overall' must be a rating"),
    (review("U1", "A", 5.0, "yesterday"), "line 2: 'reviewTime' 'yesterday' is not 'MM DD, YYYY'"),
    (review("U1", "A", 5.0, "13 40, 2015"), "line 2: month must be in 1..12"),
  )
  def test_malformed_reviews_name_file_and_line(self, bad, message):
    d = self.fixture(reviews=[review("U1", "A", 5.0, "01 2, 2015"), bad])
    with self.assertRaisesRegex(ValueError, r"Toys_5\.json\.gz, " + message):
      load_amazon("Toys", d)

  def test_malformed_metadata(self):
    d = self.fixture(meta=[json.dumps({"asin": "A", "category": []}), json.dumps({"brand": "x"})])
    with self.assertRaisesRegex(ValueError, r"meta_Toys\.json\.gz, line 2: product lacks the field 'asin'"):
      load_amazon("Toys", d)

  def test_python_literal_metadata_is_read(self):
    d = self.fixture(meta=[str({"asin": a, "brand": "Acme", "category": ["Toys"]}) for a in "AB"])
    g = load_amazon("Toys", d, min_count=1)
    self.assertEqual(g.item_attributes["brand"].vocab, ("Acme",))

  def test_missing_files_and_2014_names(self):
    d = Path(self.create_tempdir())
    os.environ["BCJAX_DATA"] = str(d / "cache")
    try:
      with self.assertRaisesRegex(
        FileNotFoundError,
        r"no reviews file \(Toys_5.json.gz or reviews_Toys_5.json.gz\) "
        r"in .*download=True",
      ):
        amazon_files("Toys", d)
      write_gz(d / "reviews_Toys_5.json.gz", [review("U1", "A", 5.0, "01 2, 2015")])
      self.assertEqual(amazon_files("reviews_Toys_5", d), (d / "reviews_Toys_5.json.gz", None))  # 2014 names too
    finally:
      del os.environ["BCJAX_DATA"]
    with self.assertRaisesRegex(ValueError, "unknown dataset"):
      load_graph_dataset("netflix")


class MovieLensGraphTest(absltest.TestCase):
  def test_fixture(self):
    g = movielens_graph(load_movielens(ml100k(Path(self.create_tempdir()) / "ml-100k")), min_count=1)
    # by time: 196-242 (881250949), 196-302 (881250950), 186-302 (891717742)
    np.testing.assert_array_equal(g.user, [0, 0, 1])
    np.testing.assert_array_equal(g.item, [0, 1, 1])
    self.assertEqual(g.item_attributes["genre"].vocab, ("unknown",))  # only movie 302 has a genre flag
    np.testing.assert_array_equal(g.item_attributes["genre"].owner, [1])
    self.assertEqual(sorted(g.user_attributes), ["age", "gender", "occupation"])

  def test_real_ml100k(self):
    path = DATA / "movielens" / "ml-100k"
    if not (path / "u.data").exists():
      self.skipTest(f"development data not found at {path}")
    g = load_graph_dataset("movielens-100k", path)
    self.assertEqual((g.num_users, g.num_items, g.num_edges), (943, 1682, 100_000))
    self.assertTrue(np.all(np.diff(g.time) >= 0))
    splits = split_versions(g)
    self.assertEqual(len(splits), 5)
    self.assertEqual(splits[-1].num_users, 943)


class SyntheticGraphTest(absltest.TestCase):
  def test_deterministic_and_evolving(self):
    a = synthetic_evolving_graph(400, 200, 6000, seed=5)
    b = synthetic_evolving_graph(400, 200, 6000, seed=5)
    np.testing.assert_array_equal(a.user, b.user)
    np.testing.assert_array_equal(a.rating, b.rating)
    self.assertFalse(np.array_equal(a.item, synthetic_evolving_graph(400, 200, 6000, seed=6).item))
    splits = split_versions(a)
    self.assertTrue(all(s.num_users > s.num_old_users for s in splits))  # new users arrive in every window
    self.assertGreater(splits[-1].num_items, splits[0].num_items)  # and new items
    self.assertTrue(set(np.unique(a.rating)) <= {1, 2, 3, 4, 5})
    for task in TASKS:  # every consumer task has both classes
      labels = task_examples(task, splits[0], tau=item_rating_threshold(splits[0])).label
      self.assertTrue(0 < labels.mean() < 1, task)

  @pytest.mark.heavy
  def test_evolution_knobs_shift_what_later_windows_buy(self):
    # How far a version's val window is from its train edges: the total-variation distance of the item
    # distributions. Interest drift and the popularity life cycle must each raise it (averaged over the versions
    # and two seeds); with neither, what users buy stays close to what they bought.
    def shift(**kwargs):
      distances = []
      for seed in (0, 1):
        for s in split_versions(synthetic_evolving_graph(1000, 400, 16_000, seed=seed, **kwargs)):
          train = np.bincount(s.train_item, minlength=s.num_items) / len(s.train_item)
          val = np.bincount(s.val_item, minlength=s.num_items) / len(s.val_item)
          distances.append(0.5 * np.abs(train - val).sum())
      return float(np.mean(distances))

    still = shift(drift=0.0, popularity_decay=0.0)
    self.assertGreater(shift(drift=3.0, popularity_decay=0.0), still + 0.03)
    self.assertGreater(shift(drift=0.0, popularity_decay=1.0), still + 0.08)

  @pytest.mark.heavy
  def test_young_brands_reach_the_last_window(self):
    # With the life cycle on, new items favour newly launched brands: a share of the last version's val edges
    # goes to items whose brand no version-0 training item has (attribute rows M_0 never trained). Whether a young
    # brand passes the min-count of 5 varies by seed, hence the mean over six.
    def unseen_brand_share(**kwargs):
      shares = []
      for seed in range(6):
        g = synthetic_evolving_graph(1000, 400, 16_000, seed=seed, **kwargs)
        bags = g.item_attributes["brand"]
        brand = np.full(g.num_items, -1)
        brand[bags.owner] = bags.value
        splits = split_versions(g)
        known = np.isin(brand, brand[splits[0].train_item])
        last_val = splits[-1].val_item
        shares.append(np.mean(~known[last_val] & (brand[last_val] >= 0)))
      return float(np.mean(shares))

    self.assertGreater(unseen_brand_share(popularity_decay=1.0), unseen_brand_share(popularity_decay=0.0) + 0.02)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "`num_items` must be a positive integer"):
      synthetic_evolving_graph(num_items=0)
    for name, value in (("drift", -1.0), ("popularity_decay", float("nan")), ("affinity_scale", float("inf"))):
      with self.assertRaisesRegex(ValueError, rf"`{name}` must (be a number in|lie in) \[0, inf\], got {value}"):
        synthetic_evolving_graph(**{name: value})
    with self.assertRaisesRegex(ValueError, r"`item_lifetime` must lie in \(0, inf\], got 0.0"):
      synthetic_evolving_graph(item_lifetime=0.0)
    with self.assertRaisesRegex(ValueError, "too small"):
      synthetic_evolving_graph(1000, 1000, 50)


if __name__ == "__main__":
  absltest.main()
