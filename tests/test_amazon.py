"""The Amazon loader on fixtures of both public releases: the release is told from the content (not the names),
2014's category paths are kept, reviews without metadata run without item attributes (announced), unusable
metadata is refused with the keys it has, and the BC-Aligner test preset finishes on a category whose edge-rating
evaluation windows hold one class, listing that task as left out."""

import contextlib
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized

from bcjax.data import TASKS, DataFormatError, amazon_files, load_amazon, read_amazon_metadata, read_amazon_reviews
from experiments.bc_aligner import __main__ as cli
from experiments.bc_aligner.experiment import EXPERIMENT
from tests._amazon_fixture import category_graph, expected_days, write_category


def gz(path: Path, lines) -> Path:
  path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
  return path


class ReleaseTest(parameterized.TestCase):
  @parameterized.parameters("2014", "2018")
  def test_release_is_read_from_the_content(self, release):
    reviews, meta = write_category(Path(self.create_tempdir()), "Toys", release)
    r = read_amazon_reviews(reviews)
    m = read_amazon_metadata(meta)
    self.assertEqual((r.release, m.release), (release, release))
    g, rating, cats, brand = category_graph()
    self.assertEqual(len(r.users), g.num_edges)
    np.testing.assert_array_equal(r.ratings, rating)
    np.testing.assert_array_equal(r.days, expected_days(g.time))
    # both releases give every product its categories (2014's paths flattened) and its brand
    for i in range(0, g.num_items, 17):
      self.assertEqual(set(m.attributes["category"][f"B{i:05d}"]), {"Musical Instruments", *cats[i]})
      self.assertEqual(m.attributes["brand"][f"B{i:05d}"], [brand.get(i, "")])

  def test_2014_files_under_2018_names_keep_their_categories(self):
    folder = Path(self.create_tempdir())
    write_category(folder, "Toys", "2014", reviews_name="Toys_5.json.gz")  # the 2018 naming
    reviews, meta = amazon_files("Toys", folder)
    self.assertEqual(reviews.name, "Toys_5.json.gz")
    graph = load_amazon("Toys", folder)
    self.assertGreater(len(graph.item_attributes["category"].vocab), 5)
    self.assertTrue(any("release 2014 by content" in n for n in graph.notes), graph.notes)

  def test_both_releases_give_the_same_graph(self):
    graphs = []
    for release in ("2014", "2018"):
      folder = Path(self.create_tempdir())
      write_category(folder, "Toys", release)
      graphs.append(load_amazon("Toys", folder))
    a, b = graphs
    for field in ("user", "item", "rating", "time"):
      np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    self.assertEqual(a.item_attributes["brand"].vocab, b.item_attributes["brand"].vocab)
    # 2018's '</span>' entries are dropped, and that is said
    self.assertTrue(any("</span>" in n for n in b.notes), b.notes)

  def test_reviews_without_metadata_run_without_item_attributes(self):
    reviews, _ = write_category(Path(self.create_tempdir()), "Toys", "2018", meta=False)
    graph = load_amazon(reviews=reviews)
    self.assertEqual(graph.item_attributes, {})
    self.assertTrue(any("no metadata file" in n for n in graph.notes), graph.notes)
    self.assertEqual(graph.name, "amazon-Toys")
    found_reviews, found_meta = amazon_files("Toys", reviews.parent)
    self.assertEqual((found_reviews, found_meta), (reviews, None))

  def test_metadata_without_known_fields_lists_the_keys_it_found(self):
    folder = Path(self.create_tempdir())
    meta = gz(folder / "meta_Toys.json.gz", [json.dumps({"asin": "B1", "title": "t", "price": "$1"})])
    with self.assertRaisesRegex(
      DataFormatError,
      r"meta_Toys.json.gz: no product has any of the fields .*category"
      r".*the keys found are: asin, title, price",
    ):
      read_amazon_metadata(meta)

  def test_malformed_and_mixed_files_name_the_file_and_line(self):
    folder = Path(self.create_tempdir())
    good = json.dumps({"reviewerID": "A", "asin": "B", "overall": 5.0, "reviewTime": "01 2, 2014"})
    cases = [
      ([good, "{not json"], r"bad.json.gz, line 2: neither a JSON object"),
      ([good, json.dumps({"asin": "B", "overall": 5.0})], r"line 2: review lacks the field\(s\) \['reviewerID'\]"),
      (
        [json.dumps({"reviewerID": "A", "asin": "B", "overall": 9, "reviewTime": "01 2, 2014"})],
        r"line 1: 'overall' must be a rating in \[0, 5\]",
      ),
      (
        [json.dumps({"reviewerID": "A", "asin": "B", "overall": 1, "reviewTime": "13 45, 2014"})],
        r"line 1: .*month must be in 1..12",
      ),
      (
        [
          good,
          json.dumps(
            {
              "reviewerID": "A",
              "asin": "B",
              "overall": 5,
              "helpful": [0, 0],
              "verified": True,
              "reviewTime": "01 2, 2014",
            }
          ),
        ],
        "lines of both releases",
      ),
      (["[1, 2]"], "line 1: expected an object"),
      ([good, "{'reviewerID': 'A', 'asin': 'B', b'overall': 5}"], "line 2: every field name must be a string"),
    ]
    for lines, message in cases:
      with self.assertRaisesRegex(DataFormatError, message):
        read_amazon_reviews(gz(folder / "bad.json.gz", lines))
    mixed = [json.dumps({"asin": "B1", "category": ["a"]}), repr({"asin": "B2", "categories": [["a", "b"]]})]
    with self.assertRaisesRegex(DataFormatError, "lines of both releases"):
      read_amazon_metadata(gz(folder / "meta.json.gz", mixed))
    with self.assertRaisesRegex(DataFormatError, r"line 1: 'categories' must be a list of category paths"):
      read_amazon_metadata(gz(folder / "meta.json.gz", [repr({"asin": "B1", "categories": "Toys"})]))
    with self.assertRaisesRegex(DataFormatError, r"line 1: 'category' must be a list of strings"):
      read_amazon_metadata(gz(folder / "meta.json.gz", [json.dumps({"asin": "B1", "category": [["x"]]})]))

  def test_missing_reviews_say_where_they_were_looked_for(self):
    with self.assertRaisesRegex(FileNotFoundError, r"no reviews file \(Toys_5.json.gz or reviews_Toys_5.json.gz\)"):
      amazon_files("Toys", self.create_tempdir().full_path)


@pytest.mark.heavy
class CommandLineTest(parameterized.TestCase):
  def test_test_preset_finishes_and_leaves_out_the_single_class_task(self):
    # One full run (2018 reviews given by path, no metadata: item ids); the 2014 release with metadata from a
    # folder goes through the same load step below, without the training.
    folder = Path(self.create_tempdir())
    reviews, _ = write_category(folder, "Toys", "2018", meta=False)
    out = Path(self.create_tempdir()) / "run"
    # the baselines only (Fix-M0, Non-BC): the data path is what this test is about; the methods run in test_bc_aligner
    args = [
      "--dataset",
      "amazon-Toys",
      "--preset",
      "test",
      "--methods",
      "non-bc",
      "--epochs",
      "2",
      "--out",
      str(out),
      "--no-progress",
      "--reviews",
      str(reviews),
    ]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      self.assertEqual(cli.main(args), 0)
    results = json.loads((out / "results.json").read_text())
    left = results["consumers_left_out"]
    self.assertIn("binary-edge-rating", left)
    self.assertRegex(left["binary-edge-rating"], r"(early-stop|evaluation) set \(version \d\) has one class only")
    self.assertNotIn("binary-edge-rating", results["consumers"])
    self.assertEqual(set(results["consumers"]) | set(left), set(TASKS))
    # Two epochs of tiny models on a small category: the version-0 consumers of all tasks but one are at chance
    # (their AUC interval over the evaluation examples holds 0.5), too few for an unintended side, so none is
    # measured and no best method is named.
    at_chance = results["consumers_at_chance"]
    measured = set(results["consumers"]) - set(at_chance)
    self.assertLess(len(measured), 2)
    for task in measured:
      self.assertGreater(results["consumers"][task]["reference_auc_ci95"][0], 0.5)
    for task, reason in at_chance.items():
      low, high = results["consumers"][task]["reference_auc_ci95"]
      self.assertLessEqual(low, 0.5)
      self.assertIn(f"[{low:.3f}, {high:.3f}] over its evaluation examples: not clearly above chance", reason)
      self.assertIn(f"consumer task {task} left out of the unintended side", printed.getvalue())
    self.assertIn(f"{len(measured)} consumer task(s) left", results["unintended_not_measurable"])
    self.assertNotIn("Best backward-compatible trade-off", printed.getvalue())
    # the recommender is at chance too (Keep-All's Recall@50 against a random ranking of the same candidates), so
    # the intended side is not measurable either, and that is what the run says first
    recall = np.mean(results["methods"]["non-bc"]["intended_recall50_by_version"])
    chance = results["intended_chance"]
    self.assertIsNotNone(results["intended_not_measurable"])
    self.assertIn("is at chance", results["intended_not_measurable"])
    self.assertIn("Intended side not measurable on this data", printed.getvalue())
    self.assertIsNotNone(chance)
    self.assertTrue(np.isfinite(recall))
    for r in results["methods"].values():
      self.assertEqual(set(r["unintended_auc_by_task"]), set(results["consumers"]))  # kept, for inspection
      self.assertIsNone(r["combined_degradation_pct"])
      self.assertIsNone(r["intended_degradation_pct"])
    notes = " ".join(results["data_notes"])
    self.assertIn("release 2018 by content", notes)
    self.assertIn("no metadata file", notes)
    self.assertIn("item-id", notes)
    self.assertIn("left out", (out / "table.md").read_text())

  def test_data_dir_with_metadata_loads_as_the_run_would(self):
    folder = Path(self.create_tempdir())
    write_category(folder, "Toys", "2014", meta=True)
    _, args, cfg = EXPERIMENT.parse(["--dataset", "amazon-Toys", "--preset", "test", "--data-dir", str(folder)])
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      graph, versions, _, left_out = EXPERIMENT.load(args, cfg)
    self.assertLen(versions, 5)
    self.assertIn("release 2014 by content", " ".join(graph.notes))
    self.assertNotIn("no metadata file", " ".join(graph.notes))
    self.assertIn("binary-edge-rating", left_out)
    self.assertIn("consumer task binary-edge-rating left out", printed.getvalue())
    # --max-edges keeps whole users under the budget, says so before the run, and the versions are built on them
    flags = ["--dataset", "amazon-Toys", "--preset", "test", "--data-dir", str(folder), "--max-edges", "600"]
    _, args, cfg = EXPERIMENT.parse([*flags, "--ks", "10,20,50"])  # 82 items at version 0: no Recall@100
    with contextlib.redirect_stdout(io.StringIO()) as printed:
      capped, versions, _, _ = EXPERIMENT.load(args, cfg)
    self.assertLessEqual(capped.num_edges, 600)
    self.assertLess(capped.num_users, graph.num_users)
    # the fixture holds 4,000 edges, which the test preset's own cap keeps whole
    self.assertNotIn("sampled", " ".join(graph.notes))
    self.assertRegex(printed.getvalue(), rf"data: sampled \d+ of {graph.num_users} users \(seed 42\)")
    self.assertEqual(versions[-1].split.num_users, capped.num_users)

  def test_flags_are_checked_before_anything_is_written(self):
    out = Path(self.create_tempdir()) / "run"
    for args in (
      ["--dataset", "amazon-Toys", "--reviews", "/nonexistent/r.json.gz"],
      ["--dataset", "synthetic", "--meta", "m.json.gz"],
      ["--dataset", "movielens-5k"],
      ["--dataset", "amazon-"],
    ):
      with self.assertRaises(SystemExit, msg=args):
        cli.main(args + ["--out", str(out)])
      self.assertFalse(out.exists(), args)
    # data that cannot be read or is not what was asked for: exit 2, and no run directory is created
    folder = Path(self.create_tempdir())
    (folder / "u.data").write_text("1\t2\t3\t4\n")
    (folder / "u.item").write_text("2|x (1990)|||" + "|0" * 19 + "\n")
    self.assertEqual(cli.main(["--dataset", "movielens-20m", "--data-dir", str(folder), "--out", str(out)]), 2)
    self.assertFalse(out.exists())
    reviews, _ = write_category(folder, "Toys", "2018", meta=False)
    reviews.write_bytes(reviews.read_bytes()[:-40])  # a truncated gzip stream
    self.assertEqual(cli.main(["--dataset", "amazon-Toys", "--reviews", str(reviews), "--out", str(out)]), 2)
    self.assertFalse(out.exists())


if __name__ == "__main__":
  absltest.main()
