"""Loaders of bcjax.data on fixture files in every MovieLens format and the Wikipedia-links format (including
malformed lines: the error names file and line), the download cache (file:// URLs, offline error), the synthetic
corpus, and the real ML-100K when the development data is present."""

import hashlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from absl.testing import absltest, parameterized

from bcjax.data import (
  GRAPH_DATASETS,
  PAD,
  DataFormatError,
  fetch,
  identify_movielens,
  load_graph_dataset,
  load_movielens,
  load_wikipedia_links,
  movielens_corpus,
  movielens_dir,
  read_tu,
  synthetic_link_corpus,
  title_ngrams,
)
from bcjax.data._download import extract_zip
from bcjax.data._movielens import SHA256 as MOVIELENS_SHA256
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BCJAX_DATA_DIR", ROOT.parent / "shared" / "data"))
GENRE_FLAGS = "|".join(["0"] * 18)


def write(folder: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
  folder.mkdir(parents=True, exist_ok=True)
  (folder / name).write_bytes(text.encode(encoding))
  return folder / name


def ml100k(folder: Path, ratings: str | None = None) -> Path:
  write(folder, "u.data", ratings or "196\t242\t3 \t881250949\n186\t302\t3\t891717742\n196\t302\t5\t881250950\n")
  write(
    folder,
    "u.item",
    f"242|Kolya (1996)|24-Jan-1997||http://x|0|{GENRE_FLAGS}\n"
    f"302|Les Misérables (1995)|01-Jan-1995||http://y|1|{GENRE_FLAGS}\n",
    "latin-1",
  )
  write(folder, "u.user", "196|49|M|writer|55105\n186|39|F|executive|00000\n")
  return folder


class MovieLensTest(parameterized.TestCase):
  def test_100k_fixture(self):
    r = load_movielens(ml100k(Path(self.create_tempdir()) / "ml-100k"))
    np.testing.assert_array_equal(r.user, [1, 0, 1])  # users sorted by id: 186 -> 0, 196 -> 1
    np.testing.assert_array_equal(r.item, [0, 1, 1])
    np.testing.assert_array_equal(r.rating, [3, 3, 5])
    self.assertEqual(r.item_titles[1], "Les Misérables (1995)")  # latin-1 decoded
    np.testing.assert_array_equal(r.item_year, [1996, 1995])
    self.assertEqual(r.item_genres, ((), (0,)))
    self.assertEqual(r.genre_names[0], "unknown")
    np.testing.assert_array_equal(r.user_features["age"], [39, 49])

  def test_1m_and_10m_fixtures(self):
    d = Path(self.create_tempdir())
    write(d / "ml-1m", "ratings.dat", "1::10::4::978300760\n2::20::5::978300761\n")
    write(d / "ml-1m", "movies.dat", "10::Café (1999)::Comedy|Drama\n20::Heat (1995)::Action\n", "latin-1")
    write(d / "ml-1m", "users.dat", "1::F::1::10::48067\n2::M::56::16::70072\n")
    r = load_movielens(d / "ml-1m")
    self.assertEqual(r.genre_names, ("Comedy", "Drama", "Action"))
    self.assertEqual(r.item_genres, ((0, 1), (2,)))
    self.assertEqual(r.item_titles[0], "Café (1999)")
    np.testing.assert_array_equal(r.user_features["age"], [1, 56])
    write(d / "ml-10m", "ratings.dat", "1::10::3.5::978300760\n")
    write(d / "ml-10m", "movies.dat", "10::Heat (1995)::Action\n")
    r = load_movielens(d / "ml-10m")
    assert_close(r.rating, [3.5])
    self.assertEqual(r.user_features, {})

  def test_csv_fixture_with_quoted_titles_and_unrated_movies(self):
    d = Path(self.create_tempdir()) / "ml-latest-small"
    write(d, "ratings.csv", "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n")
    write(
      d, "movies.csv", 'movieId,title,genres\n31,"Dangerous Minds, The (1995)",Drama\n40,Untitled,(no genres listed)\n'
    )
    r = load_movielens(d)
    self.assertEqual(r.num_items, 2)
    self.assertEqual(r.item_titles[0], "Dangerous Minds, The (1995)")
    self.assertEqual(r.item_genres, ((0,), ()))
    np.testing.assert_array_equal(r.item_year, [1995, -1])

  @parameterized.named_parameters(
    ("too_few_fields", "1\t2\t3\n", "u.data, line 1: expected 4 fields"),
    ("non_numeric", "1\t2\t3\t5\n1\tx\t3\t5\n", "u.data, line 2: non-numeric"),
    ("nan_rating", "1\t2\tnan\t5\n", "u.data, line 1: non-numeric"),
  )
  def test_malformed_ratings_name_file_and_line(self, ratings, message):
    d = ml100k(Path(self.create_tempdir()) / "ml", ratings)
    with self.assertRaisesRegex(ValueError, message):
      load_movielens(d)

  def test_malformed_items_and_unknown_movie(self):
    d = ml100k(Path(self.create_tempdir()) / "ml")
    write(d, "u.item", "242|Kolya (1996)|24-Jan-1997||http://x|0\n", "latin-1")
    with self.assertRaisesRegex(ValueError, r"u.item, line 1: expected 24"):
      load_movielens(d)
    d = Path(self.create_tempdir()) / "ml-1m"
    write(d, "ratings.dat", "1::99::4::978300760\n")
    write(d, "movies.dat", "10::Heat (1995)::Action\n")
    with self.assertRaisesRegex(ValueError, "absent from movies.dat.*99"):
      load_movielens(d)

  def test_missing_folder_and_locating(self):
    with self.assertRaisesRegex(FileNotFoundError, "does not exist"):
      load_movielens(Path(self.create_tempdir()) / "nope")
    root = Path(self.create_tempdir())
    ml100k(root / "ml-100k")
    self.assertEqual(movielens_dir("100k", root), root / "ml-100k")
    with self.assertRaisesRegex(FileNotFoundError, "ml-1m.zip"):
      movielens_dir("1m", root)

  def test_variant_comes_from_the_content_not_the_folder_name(self):
    root = Path(self.create_tempdir())
    small = root / "ml-20m"  # a latest-small folder under a misleading name
    write(small, "ratings.csv", "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n")
    write(small, "movies.csv", "movieId,title,genres\n31,Heat (1995),Action\n")
    self.assertEqual(identify_movielens(small)[0], "latest-small")
    with self.assertRaisesRegex(
      DataFormatError,
      r"ml-20m holds MovieLens latest-small \(ratings.csv has 1 ratings"
      r".*not the requested 20m",
    ):
      load_movielens(small, "20m")
    with self.assertRaisesRegex(DataFormatError, r"MovieLens 20m was requested, but .*ml-20m holds latest-small"):
      movielens_dir("20m", small)
    self.assertEqual(load_movielens(small).variant, "latest-small")
    # a README that names the release decides, whatever the row count
    write(small, "README.txt", "Summary\n=======\n\nThis dataset (ml-20m) describes 5-star rating ...\n")
    self.assertEqual(identify_movielens(small), ("20m", "README.txt names it ml-20m"))
    write(small, "README.txt", "This dataset (ml-latest-small) describes ...\n")
    self.assertEqual(movielens_dir("latest-small", root / "ml-20m"), small)
    write(small, "README.txt", "This dataset (ml-latest) describes ...\n")
    with self.assertRaisesRegex(DataFormatError, "ml-latest, a release bcjax does not know"):
      load_movielens(small)
    # 1M and 10M share ratings.dat; only 1M ships users.dat
    d = root / "ml-x"
    write(d, "ratings.dat", "1::10::4::978300760\n")
    self.assertEqual(identify_movielens(d)[0], "10m")
    write(d, "users.dat", "1::F::1::10::48067\n")
    self.assertEqual(identify_movielens(d)[0], "1m")

  def test_every_variant_is_an_evolving_graph_dataset(self):
    d = Path(self.create_tempdir()) / "ml-latest-small"
    rows = "".join(f"{u},{m},{(u + m) % 5 + 1},{1000 + 7 * u + m}\n" for u in range(1, 30) for m in (31, 40, 50))
    write(d, "ratings.csv", "userId,movieId,rating,timestamp\n" + rows)
    write(
      d,
      "movies.csv",
      "movieId,title,genres\n31,Heat (1995),Action\n40,Up (2009),Animation\n50,Alien (1979),Horror|Sci-Fi\n",
    )
    g = load_graph_dataset("movielens-latest-small", d)
    self.assertEqual((g.num_edges, g.num_users, g.num_items), (87, 29, 3))
    self.assertTrue(any("no user attributes" in n for n in g.notes), g.notes)
    self.assertIn("movielens-25m", GRAPH_DATASETS)
    with self.assertRaisesRegex(ValueError, "unknown MovieLens variant"):
      load_graph_dataset("movielens-5k", d)

  def test_a_csv_header_is_read_by_name(self):
    d = Path(self.create_tempdir()) / "ml-latest-small"
    rows = "".join(f"{u},{m},{1000 + u},{(u + m) % 5 + 1}\n" for u in range(1, 30) for m in (31, 40))
    write(d, "ratings.csv", "userId,movieId,timestamp,rating\n" + rows)  # rating and timestamp swapped
    write(d, "movies.csv", "movieId,title,genres\n31,Heat (1995),Action\n40,Up (2009),Animation\n")
    with self.assertRaisesRegex(
      DataFormatError,
      r"ratings.csv: line 1: the header is 'userId,movieId,timestamp,rating'; expected "
      r"'userId,movieId,rating,timestamp'",
    ):
      load_movielens(d)
    write(d, "ratings.csv", "userId,itemId,rating,timestamp\n1,31,2.5,1260759144\n")  # same first word
    with self.assertRaisesRegex(DataFormatError, "the header is 'userId,itemId,rating,timestamp'"):
      load_movielens(d)
    write(d, "ratings.csv", "\ufeffUserID,movieId,rating,timestamp\n1,31,2.5,1260759144\n1,40,4,1260759145\n")
    got = load_movielens(d)  # the names match (any case, a byte-order mark): read in GroupLens' order
    np.testing.assert_array_equal(got.rating, [2.5, 4.0])
    np.testing.assert_array_equal(got.timestamp, [1260759144, 1260759145])

  def test_movielens_corpus_features(self):
    c = movielens_corpus(load_movielens(ml100k(Path(self.create_tempdir()) / "ml")), val_fraction=0.34)
    self.assertEqual(c.right.names, ("movie", "year", "genre"))
    self.assertEqual(len(c.train.left) + len(c.val.left), 3)
    ids = np.concatenate([g[g != PAD] for g in c.left.groups + c.right.groups])
    self.assertLess(ids.max(), c.vocab_size)
    self.assertEqual(c.right.groups[2][0].tolist(), [PAD])  # Kolya has no genre flag set

  @absltest.skipUnless((DATA / "movielens" / "ml-100k" / "u.data").exists(), "development ML-100K not present")
  @pytest.mark.heavy
  def test_real_ml100k_counts(self):
    r = load_movielens(DATA / "movielens" / "ml-100k")
    self.assertEqual((len(r.user), r.num_users, r.num_items), (100_000, 943, 1682))
    np.testing.assert_array_equal(np.bincount(r.rating.astype(int))[1:], [6110, 11370, 27145, 34174, 21201])
    self.assertIn("Misérables", " ".join(r.item_titles))


class WikipediaLinksTest(absltest.TestCase):
  def folder(self, pages: str, links: str) -> Path:
    d = Path(self.create_tempdir())
    write(d, "pages.tsv", pages)
    write(d, "links.tsv", links)
    return d

  def test_fixture(self):
    d = self.folder(
      "10\tAlan_Turing\tMathematicians|Computer scientists\n20\tEnigma machine\t\n30\tBletchley\n",
      "10\t20\n10\t20\n20\t30\n30\t30\n10\t30\n30\t10\n20\t10\n10\t30\n",
    )
    c = load_wikipedia_links(d, val_fraction=0.25)
    self.assertIs(c.left, c.right)
    self.assertEqual(len(c.train.left) + len(c.val.left), 5)  # duplicates and the self-link dropped
    self.assertEqual(c.left.names, ("page", "ngrams", "categories"))
    self.assertEqual(int((c.left.groups[2][0] != PAD).sum()), 2)

  def test_malformed_lines(self):
    with self.assertRaisesRegex(ValueError, r"pages.tsv, line 2: duplicate page id 10"):
      load_wikipedia_links(self.folder("10\tA\n10\tB\n", "10\t10\n"))
    with self.assertRaisesRegex(ValueError, r"links.tsv, line 2: page id 99"):
      load_wikipedia_links(self.folder("10\tA\n20\tB\n", "10\t20\n10\t99\n"))
    with self.assertRaisesRegex(ValueError, r"links.tsv, line 1: expected"):
      load_wikipedia_links(self.folder("10\tA\n20\tB\n", "10 20 30\n"))
    with self.assertRaisesRegex(ValueError, r"pages.tsv, line 1: non-integer"):
      load_wikipedia_links(self.folder("x\tA\n", "10\t20\n"))

  def test_title_ngrams(self):
    self.assertEqual(
      title_ngrams("Alan_Turing (mathematician)"),
      ("alan", "turing", "mathematician", "alan turing", "turing mathematician"),
    )


class SyntheticCorpusTest(absltest.TestCase):
  def test_deterministic_and_power_law(self):
    a = synthetic_link_corpus(2000, 20_000, num_clusters=20, seed=3)
    b = synthetic_link_corpus(2000, 20_000, num_clusters=20, seed=3)
    np.testing.assert_array_equal(a.train.left, b.train.left)
    np.testing.assert_array_equal(a.val.right, b.val.right)
    deg = np.sort(np.bincount(np.concatenate([a.train.right, a.val.right]), minlength=2000))[::-1]
    self.assertGreater(deg[:20].sum(), 10 * 20 * deg.mean())  # the top 1 % get over 10x their uniform share
    links = np.stack([np.concatenate([a.train.left, a.val.left]), np.concatenate([a.train.right, a.val.right])], 1)
    self.assertEqual(len(np.unique(links, axis=0)), len(links))
    self.assertFalse(np.any(links[:, 0] == links[:, 1]))
    self.assertTrue(all(g.max() < a.vocab_size for g in a.left.groups))

  def test_links_follow_clusters(self):
    c = synthetic_link_corpus(2000, 20_000, num_clusters=20, seed=0)
    cluster_cat = c.left.groups[2][:, 0]  # first category = the page's cluster
    same = np.mean(cluster_cat[c.train.left] == cluster_cat[c.train.right])
    self.assertGreater(same, 0.6)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "num_pages"):
      synthetic_link_corpus(0)
    with self.assertRaisesRegex(ValueError, "num_clusters"):
      synthetic_link_corpus(10, 100, num_clusters=20)


class DownloadTest(absltest.TestCase):
  def test_fetch_file_url_caches_and_extracts(self):
    src = Path(self.create_tempdir())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
      z.writestr("ml-100k/u.data", "1\t2\t3\t4\n")
    (src / "ml-100k.zip").write_bytes(buf.getvalue())
    cache = Path(self.create_tempdir())
    path = fetch((src / "ml-100k.zip").as_uri(), cache)
    self.assertEqual(path.read_bytes(), buf.getvalue())
    (src / "ml-100k.zip").unlink()
    self.assertEqual(fetch((src / "ml-100k.zip").as_uri(), cache), path)  # cached: no second download

  def test_fixed_releases_are_checked_against_their_sha256(self):
    src = Path(self.create_tempdir())
    (src / "a.zip").write_bytes(b"release bytes")
    good = hashlib.sha256(b"release bytes").hexdigest()
    cache = Path(self.create_tempdir())
    with self.assertRaisesRegex(DataFormatError, r"SHA-256 .* is not the release's 0000"):
      fetch((src / "a.zip").as_uri(), cache, sha256="0" * 64)
    self.assertEqual(list(cache.iterdir()), [])  # the bad download is not kept
    path = fetch((src / "a.zip").as_uri(), cache, sha256=good)
    self.assertEqual(path.read_bytes(), b"release bytes")
    path.write_bytes(b"damaged")  # a cached copy that no longer matches
    with self.assertRaisesRegex(DataFormatError, "delete it to download it again"):
      fetch((src / "a.zip").as_uri(), cache, sha256=good)
    self.assertEqual(set(MOVIELENS_SHA256), {"100k", "1m", "20m", "25m"})

  def test_a_corrupt_zip_gets_the_same_clear_error_by_path_and_from_the_cache(self):
    folder = Path(self.create_tempdir())
    bad = folder / "PROTEINS.zip"
    bad.write_bytes(b"PK\x03\x04 this is not a zip archive")
    with self.assertRaisesRegex(DataFormatError, r"PROTEINS.zip: not a readable zip archive .*download it again"):
      read_tu(bad)
    with self.assertRaisesRegex(DataFormatError, r"PROTEINS.zip: not a readable zip archive .*download it again"):
      extract_zip(bad, folder / "out")

  def test_offline_error_says_where_to_put_the_file(self):
    cache = Path(self.create_tempdir())
    with self.assertRaisesRegex(ConnectionError, r"cannot download http://127.0.0.1:9/ml-1m.zip.*place it at"):
      fetch("http://127.0.0.1:9/ml-1m.zip", cache, timeout=5)
    self.assertEqual(list(cache.iterdir()), [])  # no partial file left


if __name__ == "__main__":
  absltest.main()
