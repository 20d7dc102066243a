"""Fuzzed loaders: every text or binary reader, fed a valid fixture with one mutation (truncated at any byte, a byte
flipped, bytes inserted, re-encoded as UTF-16, emptied, or cut to its header), ends in the library's own
DataFormatError naming the file (and, for line errors, the line), or in a parse whose counts match an independent
count of the mutated file. Never an IndexError, KeyError, UnicodeDecodeError, zlib.error, or a silent success with
wrong counts."""

import gzip
import json
import re
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from absl.testing import absltest
from hypothesis import given
from hypothesis import strategies as st

from bcjax.data import (
  DataFormatError,
  load_movielens,
  load_wikipedia_links,
  read_amazon_metadata,
  read_amazon_reviews,
  read_gin,
  read_idx,
  read_tu,
)
from bcjax.sentence import load_sts_pairs, load_stsb, load_word_frequencies, load_word_vectors

FLAGS19 = "|".join(["0"] * 18 + ["1"])
ML100K = {
  "u.data": "196\t242\t3 \t881250949\n186\t302\t3\t891717742\n196\t302\t5\t881250950\n22\t242\t1\t878887116\n",
  "u.item": f"242|Kolya (1996)|24-Jan-1997||http://x|{FLAGS19}\n302|Les Misérables (1995)|01-Jan-1995||http://y|"
  f"{FLAGS19}\n",
  "u.user": "196|49|M|writer|55105\n186|39|F|executive|00000\n22|25|M|writer|40206\n",
}
ML1M = {
  "ratings.dat": "1::10::4::978300760\n2::20::5::978300761\n1::20::3::978300762\n",
  "movies.dat": "10::Café (1999)::Comedy|Drama\n20::Heat (1995)::Action\n",
  "users.dat": "1::F::1::10::48067\n2::M::56::16::70072\n",
}
MLCSV = {
  "ratings.csv": "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n2,40,4.0,1260759145\n1,40,5.0,1260759146\n",
  "movies.csv": 'movieId,title,genres\n31,"Dangerous Minds, The (1995)",Drama\n40,Up (2009),Animation|Comedy\n',
}
TU = {
  "_A.txt": "1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n6, 7\n7, 6\n",
  "_graph_indicator.txt": "1\n1\n1\n2\n2\n3\n3\n",
  "_graph_labels.txt": "2\n1\n2\n",
  "_node_labels.txt": "0\n1\n0\n2\n2\n0\n1\n",
  "_node_attributes.txt": "".join(f"{i}.5, {-i}.0\n" for i in range(7)),
}
GIN = "2\n3 0\n0 2 1 2\n1 1 0\n0 1 0\n2 1\n0 1 1\n0 1 0\n"
REVIEWS_2018 = [
  json.dumps(
    {
      "overall": 5.0,
      "verified": True,
      "reviewTime": f"0{m} 2, 2016",
      "reviewerID": f"U{m}",
      "asin": f"B{m % 2}",
      "style": {"Size:": " M"},
      "reviewText": "ok",
    }
  )
  for m in range(1, 5)
]
REVIEWS_2014 = [
  json.dumps(
    {
      "reviewerID": f"U{m}",
      "asin": f"B{m % 2}",
      "helpful": [0, 0],
      "overall": 4.0,
      "unixReviewTime": 1393545600 + m,
      "reviewTime": "02 28, 2014",
    }
  )
  for m in range(4)
]
META_2018 = [
  json.dumps({"asin": f"B{i}", "category": ["Toys", "Dolls"], "brand": "Acme", "title": "t"}) for i in range(3)
]
META_2014 = [
  repr({"asin": f"B{i}", "categories": [["Toys", "Dolls"]], "brand": "Acme", "price": 1.5}) for i in range(3)
]
STS_INPUT = "A man plays.\tA man is playing.\nA dog runs.\tThe cat sleeps.\nx\ty\n"
STS_GOLD = "4.400\n0.5\n\n"
STSB = (
  "main-news\tMSRvid\t2012test\t0001\t5.000\tA plane is taking off.\tAn air plane is taking off.\n"
  "main-captions\tMSRvid\t2012test\t0004\t2.500\tA man plays.\tA man talks.\tsrc1\tsrc2\n"
)
GLOVE = "the 0.1 0.2 0.3\ncat 1 2 3\n. . . 4 5 6\nnew york -1e-3 2.5 7\n"
FREQ = "the 167485604\nof 76905046\nzebra 200\n"
PAGES = "10\tAlan Turing\tPeople|Mathematicians\n20\tEnigma\tMachines\n30\tBletchley\t\n"
LINKS = "10\t20\n20\t30\n30\t10\n10\t30\n"

_TEXT_INSERTS = [
  b"\xff",
  b"\xc3\x28",
  b"\x00",
  b"\n",
  b"\t",
  b",",
  b"::",
  b"|",
  b"nan",
  b"-",
  b" ",
  b"'",
  b'"',
  b"{",
  b"]",
  b"1e999",
  b"\r\n",
]


@st.composite
def mutated(draw, data: bytes, header: bytes | None = None):
  """``data`` with one mutation (or a fixed degenerate file)."""
  kind = draw(st.sampled_from(["truncate", "flip", "insert", "utf16", "empty", "header"]))
  if kind == "truncate":
    return data[: draw(st.integers(0, len(data)))]
  if kind == "flip":
    i = draw(st.integers(0, len(data) - 1))
    return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]
  if kind == "insert":
    i = draw(st.integers(0, len(data)))
    return data[:i] + draw(st.sampled_from(_TEXT_INSERTS)) + data[i:]
  if kind == "utf16":
    return data.decode("utf-8", "replace").encode("utf-16")
  if kind == "empty":
    return b""
  return header if header is not None else data.split(b"\n", 1)[0] + b"\n"


def lines_of(data: bytes, encoding: str = "utf-8") -> list[str]:
  """Non-blank lines of the mutated file, counted independently of the loaders."""
  return [line for line in data.decode(encoding).replace("\r\n", "\n").split("\n") if line.strip()]


class FuzzCase(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self._tmp = tempfile.TemporaryDirectory()
    self.addCleanup(self._tmp.cleanup)

  def folder(self, files: dict[str, bytes | str], sub: str = "d") -> Path:
    d = Path(tempfile.mkdtemp(dir=self._tmp.name)) / sub
    d.mkdir(parents=True)
    for name, content in files.items():
      (d / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return d

  def outcome(self, call, names, invariants):
    """Either the library's error naming one of ``names``, or a result that passes ``invariants``."""
    try:
      result = call()
    except DataFormatError as e:
      self.assertTrue(any(n in str(e) for n in names), f"the error names none of {names}: {e}")
      line = re.search(r", line (\d+)", str(e))
      if line:
        self.assertGreater(int(line.group(1)), 0)
      return None
    invariants(result)
    return result


def _movielens_test(files: dict[str, str], target: str, encoding: str, count_header: bool = False):
  @given(st.data())
  def test(self, data):
    original = files[target].encode(encoding)
    header = original.split(b"\n", 1)[0] + b"\n"
    raw = data.draw(mutated(original, header))
    d = self.folder(
      {**{k: v.encode("latin-1" if k in ("u.item", "movies.dat") else "utf-8") for k, v in files.items()}, target: raw}
    )

    def invariants(r):
      enc = "latin-1" if target in ("u.item", "u.user", "users.dat") else "utf-8"
      try:
        lines = lines_of(raw, enc)
      except UnicodeDecodeError:  # movies.dat falls back to Latin-1, as ml-1m's is
        lines = lines_of(raw, "latin-1")
      body = [x for x in lines if not (count_header and x.lower().startswith(("userid", "movieid")))]
      if target in ("u.data", "ratings.dat", "ratings.csv"):
        self.assertEqual(len(r.user), len(body))
      elif target in ("u.item", "movies.dat", "movies.csv"):
        self.assertEqual(r.num_items, len(body))
      else:
        self.assertEqual(len(r.user_features["age"]), r.num_users)
      self.assertTrue(np.all(np.isfinite(r.rating)))
      self.assertTrue(np.all((r.item >= 0) & (r.item < r.num_items)))

    # a mutated id can make the error point at the file it no longer matches (e.g. "users.dat: no row for user 3")
    self.outcome(lambda: load_movielens(d), list(files), invariants)

  return test


class MovieLensFuzzTest(FuzzCase):
  test_u_data = _movielens_test(ML100K, "u.data", "utf-8")
  test_u_item = _movielens_test(ML100K, "u.item", "latin-1")
  test_u_user = _movielens_test(ML100K, "u.user", "utf-8")
  test_ratings_dat = _movielens_test(ML1M, "ratings.dat", "utf-8")
  test_movies_dat = _movielens_test(ML1M, "movies.dat", "latin-1")
  test_users_dat = _movielens_test(ML1M, "users.dat", "utf-8")
  test_ratings_csv = _movielens_test(MLCSV, "ratings.csv", "utf-8", count_header=True)
  test_movies_csv = _movielens_test(MLCSV, "movies.csv", "utf-8", count_header=True)


def _amazon_test(lines: list[str], reader, compressed_level: bool):
  @given(st.data())
  def test(self, data):
    plain = ("\n".join(lines) + "\n").encode()
    raw = (
      data.draw(mutated(gzip.compress(plain, mtime=0)))
      if compressed_level
      else gzip.compress(data.draw(mutated(plain)), mtime=0)
    )
    path = self.folder({"f.json.gz": raw}) / "f.json.gz"

    def invariants(result):
      content = gzip.decompress(raw)
      if reader is read_amazon_reviews:
        self.assertEqual(len(result.users), len(lines_of(content)))
        self.assertIn(result.release, ("2014", "2018", "2014/2018"))
      else:
        self.assertLessEqual(len(result.attributes["brand"]), len(lines_of(content)))
        self.assertGreater(len(result.attributes["brand"]), 0)

    self.outcome(lambda: reader(path), ["f.json.gz"], invariants)

  return test


class AmazonFuzzTest(FuzzCase):
  test_reviews_2018 = _amazon_test(REVIEWS_2018, read_amazon_reviews, False)
  test_reviews_2014 = _amazon_test(REVIEWS_2014, read_amazon_reviews, False)
  test_reviews_gzip_stream = _amazon_test(REVIEWS_2018, read_amazon_reviews, True)
  test_meta_2018 = _amazon_test(META_2018, read_amazon_metadata, False)
  test_meta_2014 = _amazon_test(META_2014, read_amazon_metadata, False)
  test_meta_gzip_stream = _amazon_test(META_2014, read_amazon_metadata, True)


class GraphFuzzTest(FuzzCase):
  @given(st.sampled_from(sorted(TU)), st.data())
  def test_tu_folder(self, suffix, data):
    raw = data.draw(mutated(TU[suffix].encode()))
    d = self.folder({f"FZ{k}": (raw if k == suffix else v.encode()) for k, v in TU.items()}, "FZ")

    def invariants(c):
      indicator = lines_of((d / "FZ_graph_indicator.txt").read_bytes())
      self.assertEqual(int(c.n_node.sum()), len(indicator))
      self.assertEqual(c.num_graphs, len(lines_of((d / "FZ_graph_labels.txt").read_bytes())))
      self.assertEqual(c.node_features.shape[0], len(indicator))
      self.assertLessEqual(int(c.n_edge.sum()), len(lines_of((d / "FZ_A.txt").read_bytes())))
      for g in range(c.num_graphs):
        _, s, r = c.graph(g)
        self.assertTrue(np.all((s >= 0) & (s < c.n_node[g]) & (r >= 0) & (r < c.n_node[g])))

    self.outcome(lambda: read_tu(d, "FZ"), [f"FZ{suffix}", "FZ_"], invariants)

  @given(st.data())
  def test_tu_zip(self, data):
    src = self.folder({f"FZ{k}": v for k, v in TU.items()}, "src")
    archive = Path(self._tmp.name) / "FZ.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
      for f in sorted(src.iterdir()):
        z.write(f, f"FZ//{f.name}")
    raw = data.draw(mutated(archive.read_bytes()))
    path = self.folder({"FZ.zip": raw}) / "FZ.zip"
    self.outcome(lambda: read_tu(path, "FZ"), ["FZ.zip"], lambda c: self.assertEqual(int(c.n_node.sum()), 7))

  @given(st.data())
  def test_gin(self, data):
    raw = data.draw(mutated(GIN.encode()))
    path = self.folder({"g.txt": raw}) / "g.txt"

    def invariants(c):
      self.assertEqual(c.num_graphs, int(lines_of(raw)[0]))
      self.assertEqual(len(c.labels), c.num_graphs)
      self.assertEqual(c.node_features.shape[0], int(c.n_node.sum()))

    self.outcome(lambda: read_gin(path), ["g.txt"], invariants)


class SentenceFuzzTest(FuzzCase):
  @given(st.booleans(), st.data())
  def test_sts_pairs(self, mutate_gold, data):
    raw = data.draw(mutated((STS_GOLD if mutate_gold else STS_INPUT).encode()))
    d = self.folder({"in.txt": STS_INPUT, "gs.txt": STS_GOLD, ("gs.txt" if mutate_gold else "in.txt"): raw})

    def invariants(p):
      golds = (d / "gs.txt").read_bytes().decode().replace("\r\n", "\n").split("\n")
      while golds and not golds[-1].strip():
        golds.pop()
      self.assertEqual(len(p.scores), sum(1 for g in golds if g.strip()))
      self.assertTrue(np.all((p.scores >= 0) & (p.scores <= 5)))

    self.outcome(lambda: load_sts_pairs(d / "in.txt", d / "gs.txt"), ["in.txt", "gs.txt"], invariants)

  @given(st.data())
  def test_stsb(self, data):
    raw = data.draw(mutated(STSB.encode()))
    path = self.folder({"sts.csv": raw}) / "sts.csv"
    self.outcome(
      lambda: load_stsb(path), ["sts.csv"], lambda out: self.assertEqual(len(out[0].scores), len(lines_of(raw)))
    )

  @given(st.booleans(), st.data())
  def test_glove_text(self, compressed, data):
    raw = data.draw(mutated(GLOVE.encode()))
    name = "v.txt.gz" if compressed else "v.txt"
    path = self.folder({name: gzip.compress(raw, mtime=0) if compressed else raw}) / name

    def invariants(v):
      self.assertLessEqual(len(v.words), len(lines_of(raw)))
      self.assertEqual(v.vectors.shape[0], len(v.words))
      self.assertTrue(np.all(np.isfinite(v.vectors)))

    self.outcome(lambda: load_word_vectors(path), [name], invariants)

  @given(st.data())
  def test_sif_frequencies(self, data):
    raw = data.draw(mutated(FREQ.encode()))
    path = self.folder({"freq.txt": raw}) / "freq.txt"

    def invariants(counts):
      self.assertLessEqual(len(counts), len(lines_of(raw)))
      self.assertTrue(all(isinstance(c, int) and c >= 0 for c in counts.values()))

    self.outcome(lambda: load_word_frequencies(path), ["freq.txt"], invariants)


class BinaryFuzzTest(FuzzCase):
  @given(st.booleans(), st.data())
  def test_idx(self, compressed, data):
    header = bytes([0, 0, 8, 3]) + np.array([2, 3, 4], ">u4").tobytes()
    plain = header + np.arange(24, dtype=np.uint8).tobytes()
    raw = data.draw(mutated(gzip.compress(plain, mtime=0) if compressed else plain, header[:8]))
    name = "x-idx3-ubyte.gz" if compressed else "x-idx3-ubyte"
    path = self.folder({name: raw}) / name

    def invariants(a):
      content = gzip.decompress(raw) if compressed else raw
      dims = np.frombuffer(content[4 : 4 + 4 * content[3]], ">u4")
      self.assertEqual(a.shape, tuple(int(v) for v in dims))

    self.outcome(lambda: read_idx(path), [name], invariants)


class WikipediaFuzzTest(FuzzCase):
  @given(st.booleans(), st.data())
  def test_pages_and_links(self, mutate_links, data):
    raw = data.draw(mutated((LINKS if mutate_links else PAGES).encode()))
    d = self.folder({"pages.tsv": PAGES, "links.tsv": LINKS, ("links.tsv" if mutate_links else "pages.tsv"): raw})

    def invariants(c):
      self.assertEqual(len(c.left.groups[0]), len(lines_of((d / "pages.tsv").read_bytes())))

    self.outcome(lambda: load_wikipedia_links(d), ["pages.tsv", "links.tsv"], invariants)


if __name__ == "__main__":
  absltest.main()
