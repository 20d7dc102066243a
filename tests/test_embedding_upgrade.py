"""The embedding-upgrade experiment on a small STS-layout fixture and a passage file, with the hashed bag-of-words
models (the real transformers belong to an optional extra the suite never needs): outputs, the corpus protocol,
joint training's multi-step term, and flags refused before anything is written."""

import json
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest

from experiments.embedding_upgrade import corpus as corpus_lib
from experiments.embedding_upgrade import encoders, joint
from experiments.embedding_upgrade.__main__ import main
from tests._tolerance import assert_close

GENRE_FILES = (("STS12", "surprise.OnWN"), ("STS13", "OnWN"), ("STS14", "OnWN"), ("STS14", "tweet-news"))


def write_sts_fixture(root: Path, pairs_per_file: int = 40, seed: int = 0) -> None:
  """An STS tree in the public layout: paraphrases (one or two words replaced, score 4.5) and unrelated pairs
  (score 1.0), from a 300-word vocabulary."""
  rng = np.random.default_rng(seed)
  vocab = [f"w{i}" for i in range(300)]

  def pair():
    s1 = list(rng.choice(vocab, 7, replace=False))
    if rng.random() < 0.6:
      s2 = list(s1)
      for j in rng.choice(7, 2, replace=False):
        s2[j] = str(rng.choice(vocab))
      return " ".join(s1), " ".join(s2), 4.5
    return " ".join(s1), " ".join(rng.choice(vocab, 7, replace=False)), 1.0

  (root / "STSBenchmark").mkdir(parents=True)
  for split in ("train", "dev", "test"):
    lines = []
    for i in range(pairs_per_file):
      s1, s2, score = pair()
      genre = ("main-news", "main-captions", "main-forum")[i % 3]
      lines.append(f"{genre}\td\t2012\t{i}\t{score}\t{s1}\t{s2}\n")
    (root / "STSBenchmark" / f"sts-{split}.csv").write_text("".join(lines))
  for folder, name in GENRE_FILES:
    (root / folder).mkdir(exist_ok=True)
    rows = [pair() for _ in range(pairs_per_file)]
    (root / folder / f"STS.input.{name}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in rows))
    (root / folder / f"STS.gs.{name}.txt").write_text("".join(f"{s}\n" for _, _, s in rows))


class CorpusTest(absltest.TestCase):
  def test_queries_partners_and_training_pairs_are_disjoint(self):
    root = Path(self.create_tempdir().full_path)
    write_sts_fixture(root)
    c = corpus_lib.from_sts(root, max_sentences=250, max_queries=20, seed=0)
    self.assertLen(c.query_rows, 20)
    self.assertEmpty(np.intersect1d(c.query_rows, c.index_rows))
    q_rows, positions = c.qrels
    np.testing.assert_array_equal(q_rows, c.query_rows)
    partners = c.index_rows[positions]
    for q, p in zip(q_rows, partners):  # the partner is the query's paraphrase: 5 of its 7 words at least
      self.assertGreaterEqual(len(set(c.sentences[q].split()) & set(c.sentences[p].split())), 5)
    touched = set(q_rows.tolist()) | set(partners.tolist())
    self.assertFalse(touched & set(c.train_pairs.ravel().tolist()))
    self.assertEqual(len(c.labels), len(c.sentences))
    self.assertEqual(set(c.labels.tolist()), set(range(5)))


class JointTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_the_multi_step_term_is_minimised_with_lambda(self):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 12)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    pairs = np.stack([np.arange(0, 400, 2), np.arange(1, 400, 2)], 1)
    z_prev = x[:, :8].copy()
    history = {"w": rng.standard_normal((5, 8)), "b": np.zeros(5)}
    logs = []
    c, w = joint.train_head(
      x,
      pairs,
      np.arange(200),
      z_prev,
      history,
      head_dim=16,
      lam=1.0,
      steps=150,
      seed=0,
      batch_size=64,
      log=lambda **r: logs.append(r),
    )
    self.assertEqual(c.shape, (400, 16))
    assert_close(np.linalg.norm(c, axis=1), np.ones(400, np.float32), "reduction")  # C normalises in float32
    self.assertEqual(w["w"].shape, (8, 16))
    self.assertLess(logs[-1]["multi_step"], 0.5 * logs[0]["multi_step"])

    # eq. (10) on all the paired rows, in float64: far lower with the term than without it (λ = 0 leaves the map
    # where it started and does not pull C towards it)
    def multi_step(c, w):
      residual = c[:200].astype(np.float64) @ w["w"].T + w["b"] - z_prev[:200]
      return np.mean(np.sum((residual @ history["w"].T) ** 2, 1) + np.sum(residual**2, 1)) / 2

    c0, w0 = joint.train_head(
      x, pairs, np.arange(200), z_prev, history, head_dim=16, lam=0.0, steps=150, seed=0, batch_size=64
    )
    self.assertLess(multi_step(c, w), 0.5 * multi_step(c0, w0))


class BagOfWordsTest(absltest.TestCase):
  def test_hashed_bag_of_words_is_deterministic_and_sees_overlap(self):
    z = encoders.embed("bow-64", ["a b c d", "a b c e", "x y z w", "a b c d"])
    np.testing.assert_array_equal(z[0], z[3])
    self.assertGreater(z[0] @ z[1], z[0] @ z[2] + 0.3)
    self.assertEqual(encoders.embed("bow-96", ["a"]).shape, (1, 96))


@pytest.mark.heavy
class ExperimentTest(absltest.TestCase):
  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    import tempfile

    cls.root = Path(tempfile.mkdtemp())
    write_sts_fixture(cls.root / "sts")
    cls.out = cls.root / "run"
    cls.code = main(["--sts-dir", str(cls.root / "sts"), "--preset", "test", "--out", str(cls.out), "--no-progress"])

  def test_writes_every_kind_the_chain_and_joint_training(self):
    self.assertEqual(self.code, 0)
    results = json.loads((self.out / "results.json").read_text())
    (pair,) = results["pairs"]
    self.assertEqual((pair["old"], pair["new"]), ("bow-64", "bow-96"))
    kinds = [r["kind"] for r in pair["rows"]]
    self.assertEqual(kinds, ["linear", "auto"])
    for row in pair["rows"]:
      rec = row["recall_recovery"]
      self.assertLessEqual(rec["low"], rec["value"])
      self.assertIn(row["verdict"], ("bridge", "re-index", "undecided", "not measurable"))
      self.assertGreater(row["transform_rows_per_s"], 0)
      self.assertGreater(row["query_latency_us"], 0)
      self.assertIn("hnsw", row["faiss"]) if "faiss" in row else None
    cj = results["chain_and_joint"]
    self.assertEqual(cj["chain"]["registry_versions"], 3)
    self.assertEqual([v["lambda"] for v in cj["variants"]], [0.0, 1.0])
    self.assertIn("joint_chain_to_v0", cj["variants"][1])
    self.assertTrue((self.out / "registry" / "version-000002.bcv").is_file())
    self.assertIn("Chain bow-64 -> bow-96", (self.out / "table.md").read_text())

  def test_a_passage_file_gives_label_free_measures(self):
    lines = self.root / "passages.txt"
    rng = np.random.default_rng(1)
    lines.write_text("".join(" ".join(rng.choice([f"w{i}" for i in range(100)], 6)) + "\n" for _ in range(200)))
    out = self.root / "run-lines"
    self.assertEqual(main(["--corpus", str(lines), "--preset", "test", "--out", str(out), "--no-progress"]), 0)
    results = json.loads((out / "results.json").read_text())
    row = results["pairs"][0]["rows"][0]
    self.assertEqual(row["primary"], "own_vector_hit_rate")
    self.assertIn("neighbour_agreement", row)
    self.assertNotIn("chain_and_joint", results)

  def test_flags_are_refused_before_anything_is_written(self):
    for argv in (
      ["--preset", "test"],
      ["--sts-dir", str(self.root / "sts"), "--corpus", "x", "--preset", "test"],
      ["--sts-dir", str(self.root / "nowhere"), "--preset", "test"],
      ["--sts-dir", str(self.root / "sts"), "--pairs", "bow-64>bow-64", "--preset", "test"],
    ):
      out = self.root / "never"
      with self.assertRaises(SystemExit) as ctx:
        main(argv + ["--out", str(out)])
      self.assertEqual(ctx.exception.code, 2, argv)
      self.assertFalse(out.exists())


if __name__ == "__main__":
  absltest.main()
