"""Graph-classification data for ICL: the TU and GIN readers on fixture files (folder, zip with ``//`` member
names, malformed lines naming file and line), selection, local degree profiles and row normalisation against
loop-based references, the growth split, padded batching, GraphCL views, and the GCN encoder against a dense float64
NumPy forward pass."""

import os
import zipfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from flax import nnx

from bcjax.data import (
  AUGMENTATIONS,
  augment_graphs,
  batch_graphs,
  drop_nodes,
  from_graphs,
  graph_mask,
  growth_split,
  local_degree_profile,
  mask_attributes,
  node_mask,
  normalize_rows,
  pad_graphs,
  read_gin,
  read_tu,
  repad_graphs,
  select_graphs,
  subgraph,
  tu_dataset_path,
)
from bcjax.models import GCNEncoder, gcn_propagate
from tests._tolerance import assert_close, close

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("BCJAX_DATA_DIR", ROOT.parent / "shared" / "data"))

# Three graphs: a triangle (nodes 1-3), a path 4-5, and a star 6-(7, 8, 9); node 10 belongs to graph 3, isolated.
TU_FILES = {
  "_A.txt": "1, 2\n2, 1\n2, 3\n3, 2\n1, 3\n3, 1\n4, 5\n5, 4\n6, 7\n7, 6\n6, 8\n8, 6\n6, 9\n9, 6\n",
  "_graph_indicator.txt": "1\n1\n1\n2\n2\n3\n3\n3\n3\n3\n",
  "_graph_labels.txt": "2\n1\n2\n",
  "_node_labels.txt": "0\n1\n0\n2\n2\n0\n1\n1\n1\n0\n",
  "_node_attributes.txt": "".join(f"{i}.5, {-i}.0\n" for i in range(10)),
}


def write_tu(folder: Path, name: str = "TOY", override: dict | None = None) -> Path:
  folder.mkdir(parents=True, exist_ok=True)
  for suffix, text in {**TU_FILES, **(override or {})}.items():
    (folder / f"{name}{suffix}").write_text(text)
  return folder


GIN_TEXT = "2\n3 0\n0 2 1 2\n1 1 0\n0 1 0\n2 2\n0 1 1\n0 1 0\n"


class TUReaderTest(parameterized.TestCase):
  def test_folder_against_known_answers(self):
    c = read_tu(write_tu(Path(self.create_tempdir().full_path) / "TOY"))
    np.testing.assert_array_equal(c.n_node, [3, 2, 5])
    np.testing.assert_array_equal(c.n_edge, [6, 2, 6])
    np.testing.assert_array_equal(c.labels, [1, 0, 1])
    self.assertEqual(c.node_features.shape, (10, 2 + 3))  # attributes ‖ one-hot of labels {0, 1, 2}
    assert_close(c.node_features[3], [3.5, -3.0, 0, 0, 1])
    x, s, r = c.graph(2)
    np.testing.assert_array_equal(s, [0, 0, 0, 1, 2, 3])  # coalesced: sorted by (sender, receiver) as in PyG
    np.testing.assert_array_equal(r, [1, 2, 3, 0, 0, 0])
    self.assertEqual(len(x), 5)
    raw = read_tu(write_tu(Path(self.create_tempdir().full_path) / "TOY"), keep_duplicates=True, keep_self_loops=True)
    np.testing.assert_array_equal(raw.graph(2)[1], [0, 1, 0, 2, 0, 3])  # the file's order
    self.assertEqual(c.notes, ())
    self.assertEqual(
      read_tu(write_tu(Path(self.create_tempdir().full_path) / "TOY"), use_node_attributes=False).node_features.shape,
      (10, 3),
    )

  def test_duplicate_edges_and_self_loops_are_coalesced_as_pyg_does(self):
    # IMDB-BINARY lists every undirected edge twice per direction; here the triangle's edges come twice and node 2
    # has a self-loop. By hand: 6 distinct directed edges in graph 1 (no loop), degrees 2, 2, 2.
    doubled = TU_FILES["_A.txt"].split("\n")[:6]
    a_txt = "\n".join(doubled + doubled + ["2, 2"]) + "\n" + "\n".join(TU_FILES["_A.txt"].split("\n")[6:])
    folder = write_tu(Path(self.create_tempdir().full_path) / "DUP", "DUP", {"_A.txt": a_txt})
    c = read_tu(folder)
    np.testing.assert_array_equal(c.n_edge, [6, 2, 6])
    np.testing.assert_array_equal(np.bincount(c.graph(0)[1], minlength=3), [2, 2, 2])
    self.assertEqual(
      c.notes,
      (
        "DUP: 1 self-loop(s) removed (as PyTorch Geometric does)",
        "DUP: 6 repeated directed edge(s) coalesced (as PyTorch Geometric does)",
      ),
    )
    assert_close(local_degree_profile(c)[:3, 0], [2.0, 2.0, 2.0])  # not the doubled 4, 5, 4
    raw = read_tu(folder, keep_duplicates=True, keep_self_loops=True)
    np.testing.assert_array_equal(raw.n_edge, [13, 2, 6])
    np.testing.assert_array_equal(np.bincount(raw.graph(0)[1], minlength=3), [4, 5, 4])
    self.assertEqual(read_tu(folder, keep_self_loops=True).n_edge.tolist(), [7, 2, 6])

  def test_zip_with_double_slash_members(self):
    folder = write_tu(Path(self.create_tempdir().full_path) / "src")
    archive = Path(self.create_tempdir().full_path) / "TOY.zip"
    with zipfile.ZipFile(archive, "w") as z:
      for f in folder.iterdir():
        z.write(f, f"TOY//{f.name}")
    c, ref = read_tu(archive), read_tu(folder, "TOY")
    for a, b in zip(c, ref):
      np.testing.assert_array_equal(a, b)
    self.assertEqual(tu_dataset_path("TOY", archive.parent), archive)

  @parameterized.named_parameters(
    ("bad_number", "_A.txt", "1, 2\n2, x\n", "_A.txt, line 2"),
    ("out_of_range", "_A.txt", "1, 2\n2, 11\n", "_A.txt, line 2"),
    ("cross_graph", "_A.txt", "1, 2\n3, 4\n", "_A.txt, line 2"),
    ("attribute_width", "_node_attributes.txt", "1, 2\n" * 4 + "1\n" + "1, 2\n" * 5, "_node_attributes.txt, line 5"),
    ("non_finite", "_node_attributes.txt", "1, 2\n" * 2 + "nan, 1\n" + "1, 2\n" * 7, "line 3"),
    ("unsorted_indicator", "_graph_indicator.txt", "1\n2\n1\n2\n2\n3\n3\n3\n3\n3\n", "sorted"),
    ("row_count", "_node_labels.txt", "0\n1\n", "2 rows"),
  )
  def test_malformed_files_name_file_and_line(self, suffix, text, expected):
    folder = write_tu(Path(self.create_tempdir().full_path) / "TOY", override={suffix: text})
    with self.assertRaisesRegex(ValueError, expected):
      read_tu(folder)

  def test_an_edge_file_cut_at_a_line_boundary_is_noted(self):
    # the MUTAG run: _A.txt cut after its first graph's edges, a valid file on its own, left graphs 2 and 3
    # without edges and no word said
    tmp = Path(self.create_tempdir().full_path)
    lines = TU_FILES["_A.txt"].splitlines()
    c = read_tu(write_tu(tmp / "CUT", override={"_A.txt": "\n".join(lines[:6]) + "\n"}), "TOY")
    np.testing.assert_array_equal(c.n_edge, [6, 0, 0])
    self.assertEqual(
      c.notes,
      (
        f"TOY: 2 of 3 graphs have no edges in TOY_A.txt, among them graphs 2..3, every graph after the one of its "
        f"last line ({tmp / 'CUT' / 'TOY_A.txt'}, line 6), where only 0 % of the earlier graphs have none: the file "
        f"looks cut short; check it against the dataset's own copy",
      ),
    )
    # a graph without edges among graphs with them (here the path 4-5) is noted, without the suspicion
    c = read_tu(write_tu(tmp / "MID", override={"_A.txt": "\n".join(lines[:6] + lines[8:]) + "\n"}), "TOY")
    self.assertEqual(c.notes, ("TOY: 1 of 3 graphs have no edges in TOY_A.txt (graph 2)",))

  @parameterized.named_parameters(
    # the MUTAG graph-labels file cut in half: blamed on the labels file, where it ends, not on the indicator
    (
      "labels_cut",
      "_graph_labels.txt",
      "2\n",
      "TOY_graph_labels.txt, line 1: the file ends after 1 graph labels, but TOY_graph_indicator.txt names 3 graphs "
      "(graph 2 from its line 4): a graph-labels file cut short?",
    ),
    # an indicator cut within graph 3: the node labels, the attributes and the edges all name nodes beyond it
    (
      "indicator_cut",
      "_graph_indicator.txt",
      "1\n1\n1\n2\n2\n3\n",
      "TOY_graph_indicator.txt, line 6: the file ends after 6 nodes in 3 graphs, but TOY_node_attributes.txt has 10 "
      "rows; TOY_node_labels.txt has 10 rows; TOY_A.txt names node 9: a graph indicator cut short?",
    ),
    (
      "node_labels_cut",
      "_node_labels.txt",
      "0\n1\n0\n2\n",
      "TOY_node_labels.txt, line 4: the file ends after 4 rows, but TOY_graph_indicator.txt lists 10 nodes",
    ),
    (
      "extra_label",
      "_graph_labels.txt",
      "2\n1\n2\n1\n",
      "TOY_graph_labels.txt, line 4: a line for graph 4, but TOY_graph_indicator.txt lists only 3 graphs",
    ),
    (
      "skipped_graph",
      "_graph_indicator.txt",
      "1\n1\n1\n3\n3\n3\n3\n3\n3\n3\n",
      "TOY_graph_indicator.txt, line 4: graph id 3 after 1: graph(s) [2] have no nodes",
    ),
  )
  def test_files_that_disagree_blame_the_one_at_fault_with_its_line(self, suffix, text, expected):
    folder = write_tu(Path(self.create_tempdir().full_path) / "TOY", override={suffix: text})
    with self.assertRaises(ValueError) as error:
      read_tu(folder)
    self.assertIn(f"{folder}/{expected}", str(error.exception))

  def test_missing_dataset_says_where(self):
    with self.assertRaisesRegex(FileNotFoundError, "download"):
      tu_dataset_path("NOPE", self.create_tempdir().full_path)

  @pytest.mark.heavy
  def test_real_proteins_statistics(self):
    path = DATA / "tu" / "PROTEINS_full.zip"
    if not path.exists():
      self.skipTest("development copy of PROTEINS_full not present")
    c = read_tu(path)
    self.assertEqual((c.num_graphs, c.node_features.shape, int(c.n_edge.sum())), (1113, (43471, 32), 162088))
    np.testing.assert_array_equal(np.bincount(c.labels), [663, 450])


class GINReaderTest(parameterized.TestCase):
  def test_known_answers_and_zip(self):
    path = Path(self.create_tempdir().full_path) / "toy.txt"
    path.write_text(GIN_TEXT)
    c = read_gin(path)
    np.testing.assert_array_equal(c.n_node, [3, 2])
    np.testing.assert_array_equal(c.labels, [0, 1])
    np.testing.assert_array_equal(c.senders, [0, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(c.receivers, [1, 2, 0, 0, 1, 0])
    np.testing.assert_array_equal(c.node_features, [[1, 0], [0, 1], [1, 0], [1, 0], [1, 0]])  # tags 0/1 one-hot
    archive = path.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w") as z:
      z.write(path, "TOY/TOY.txt")
      z.writestr("TOY/10fold_idx/test_idx-1.txt", "0\n")
    np.testing.assert_array_equal(read_gin(archive).senders, c.senders)

  @parameterized.named_parameters(
    ("neighbour_out_of_range", "2\n3 0\n0 2 1 5\n1 1 0\n0 1 0\n2 2\n0 1 1\n0 1 0\n", "line 3"),
    ("bad_header", "2\n3\n0 2 1 2\n", "line 2"),
    ("short_neighbour_list", "2\n3 0\n0 3 1 2\n1 1 0\n0 1 0\n2 2\n0 1 1\n0 1 0\n", "line 3"),
    ("truncated", "2\n3 0\n0 2 1 2\n1 1 0\n0 1 0\n", "ends early"),
    ("non_numeric", "2\n3 0\n0 2 1 b\n", "line 3"),
    ("trailing", GIN_TEXT + "7 7\n", "line 9"),
  )
  def test_malformed(self, text, expected):
    path = Path(self.create_tempdir().full_path) / "bad.txt"
    path.write_text(text)
    with self.assertRaisesRegex(ValueError, expected):
      read_gin(path)


def random_collection(seed: int, num_graphs: int = 6, width: int = 3):
  rng = np.random.default_rng(seed)
  graphs = []
  for _ in range(num_graphs):
    n = int(rng.integers(3, 12))
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, (2 * n, 2)) if a != b}
    pairs |= {(b, a) for a, b in pairs}
    s, r = (np.array(v, np.int64) for v in zip(*sorted(pairs))) if pairs else (np.zeros(0, np.int64),) * 2
    graphs.append((rng.normal(size=(n, width)).astype(np.float32), s, r))
  return from_graphs(graphs, rng.integers(0, 2, num_graphs))


class FeatureAndSplitTest(absltest.TestCase):
  def test_local_degree_profile_against_loops(self):
    c = random_collection(0)
    ldp = local_degree_profile(c)
    offsets = c.node_offsets
    for g in range(c.num_graphs):
      _, s, r = c.graph(g)
      n = c.n_node[g]
      deg = np.bincount(s, minlength=n)
      for v in range(n):
        nbrs = deg[r[s == v]].astype(float)
        want = [deg[v], *(([nbrs.min(), nbrs.max(), nbrs.mean(), nbrs.std()]) if len(nbrs) else [0, 0, 0, 0])]
        assert_close(ldp[offsets[g] + v], want, scale=max(deg.max(), 1))

  def test_local_degree_profile_reference_std(self):
    # PyG 1.6.3's LocalDegreeProfile with torch_scatter's scatter_std, transcribed loop by loop
    c = random_collection(1)
    ldp = local_degree_profile(c, std="torch_scatter")
    offsets = c.node_offsets
    for g in range(c.num_graphs):
      _, s, r = c.graph(g)
      deg = np.bincount(s, minlength=c.n_node[g]).astype(float)
      for v in range(c.n_node[g]):
        x = deg[r[s == v]]
        want = np.sqrt(np.sum((x - x.mean()) ** 2) / (max(len(x) - 1, 1) + 1e-6)) if len(x) else 0.0
        assert_close(ldp[offsets[g] + v, 4], want, scale=max(deg.max(), 1))
    population = local_degree_profile(c)
    np.testing.assert_array_equal(ldp[:, :4], population[:, :4])
    self.assertFalse(close(ldp[:, 4], population[:, 4], scale=1.0))
    with self.assertRaisesRegex(ValueError, "`convention` must be one of"):
      local_degree_profile(c, std="sample")

  def test_normalize_rows(self):
    x = np.array([[1.0, 3.0], [0.2, 0.3], [0.0, 0.0]])
    assert_close(normalize_rows(x), [[0.25, 0.75], [0.2, 0.3], [0.0, 0.0]])

  def test_select_graphs_round_trip(self):
    c = random_collection(1)
    part = select_graphs(c, [4, 1])
    for got, g in zip(range(2), (4, 1)):
      for a, b in zip(part.graph(got), c.graph(g)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(part.labels, c.labels[[4, 1]])
    with self.assertRaisesRegex(ValueError, "index"):
      select_graphs(c, [9])

  def test_growth_split(self):
    old, new = growth_split(1113, 0.3, np.random.default_rng(0))
    self.assertEqual((len(old), len(new)), (779, 334))  # the reference's table
    self.assertEqual(len(np.intersect1d(old, new)), 0)
    self.assertEqual(len(growth_split(1113, 0.5, np.random.default_rng(0))[0]), 556)  # round half to even
    for bad in (0.0, 1.0, -0.1, float("nan")):
      with self.assertRaisesRegex(ValueError, "alpha"):
        growth_split(10, bad, np.random.default_rng(0))


class BatchAndViewTest(absltest.TestCase):
  def test_padding_layout(self):
    c = random_collection(2)
    b = batch_graphs(c, [0, 3], num_graphs=4)
    n_real = c.n_node[0] + c.n_node[3]
    self.assertEqual(b.n_node.shape, (5,))
    self.assertEqual(int(b.n_node.sum()), b.nodes.shape[0])
    self.assertEqual(int(b.n_edge.sum()), b.senders.shape[0])
    np.testing.assert_array_equal(graph_mask(b), [True, True, False, False, False])
    self.assertEqual(int(node_mask(b).sum()), n_real)
    pad = slice(int(c.n_edge[0] + c.n_edge[3]), None)
    self.assertTrue(np.all(b.senders[pad] == n_real) and np.all(b.receivers[pad] == n_real))
    with self.assertRaisesRegex(ValueError, "budgets"):
      pad_graphs([c.graph(0)], 1, node_budget=int(c.n_node[0]))

  def test_repadding_equals_padding_to_the_larger_budgets(self):
    c = random_collection(2)
    small = batch_graphs(c, [0, 3], num_graphs=4)
    nodes, edges = small.nodes.shape[0] * 2, small.senders.shape[0] * 4
    grown = repad_graphs(small, nodes, edges)
    direct = batch_graphs(c, [0, 3], num_graphs=4, node_budget=nodes, edge_budget=edges)
    for a, b in zip(grown, direct):
      if a is not None:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with self.assertRaisesRegex(ValueError, "smaller"):
      repad_graphs(small, nodes // 4, edges)

  def test_views_keep_valid_graphs(self):
    c = random_collection(3, num_graphs=20)
    rng = np.random.default_rng(0)
    for kind in AUGMENTATIONS:
      originals = [c.graph(g) for g in range(c.num_graphs)]
      for (x, s, r), original in zip(augment_graphs(originals, rng, kind), originals):
        if x is original[0]:
          continue  # nothing left: the reference falls back to the original graph
        self.assertTrue(len(s) > 0 and np.all(s != r))
        self.assertTrue(np.all(np.isin(np.arange(len(x)), np.concatenate([s, r]))))  # no isolated node
    with self.assertRaisesRegex(ValueError, "kind"):
      augment_graphs([c.graph(0)], rng, "rotate")

  def test_view_rules(self):
    # a path of 20 nodes: the expanded subgraph is a connected run of > 4 nodes
    n = 20
    s = np.concatenate([np.arange(n - 1), np.arange(1, n)])
    r = np.concatenate([np.arange(1, n), np.arange(n - 1)])
    x = np.arange(n, dtype=np.float32)[:, None]
    rng = np.random.default_rng(1)
    sx, _, _ = subgraph((x, s, r), rng)
    kept = np.sort(sx[:, 0])
    self.assertGreater(len(kept), 4)
    np.testing.assert_array_equal(np.diff(kept), 1)
    dx, ds, _ = drop_nodes((x, s, r), rng)
    self.assertGreaterEqual(len(dx), n - 2 * 2)  # 2 dropped nodes remove at most their own edges
    self.assertLess(len(ds), len(s))
    mx, _, _ = mask_attributes((x, s, r), rng)
    self.assertEqual(int(np.sum(mx[:, 0] != x[:, 0])), 2)


def dense_gcn_reference(x, s, r, weights, biases, mask):
  """Float64 forward pass with a dense normalised adjacency, masked batch statistics, LeakyReLU, per-layer sums."""
  n = len(x)
  a = np.zeros((n, n))
  np.add.at(a, (r, s), 1.0)
  a += np.eye(n)
  d = a.sum(axis=1)
  prop = a / np.sqrt(d[:, None] * d[None, :])
  h, pooled = x.astype(np.float64), []
  for w, b in zip(weights, biases):
    h = prop @ (h @ w) + b
    mu = h[mask].mean(axis=0)
    var = h[mask].var(axis=0)
    h = (h - mu) / np.sqrt(var + 1e-5)
    h = np.where(h > 0, h, 0.01 * h) * mask[:, None]
    pooled.append(h)
  return pooled


class GCNEncoderTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_forward_against_dense_numpy(self):
    c = random_collection(4, num_graphs=5, width=4)
    batch = batch_graphs(c, range(5), num_graphs=6)
    model = GCNEncoder(4, hidden=8, layers=2, rngs=nnx.Rngs(0))
    model.train()
    z = model(batch)  # no key: no dropout
    weights = [np.asarray(conv.linear.kernel[...], np.float64) for conv in model.convs]
    biases = [np.asarray(conv.bias[...], np.float64) for conv in model.convs]
    mask = np.asarray(node_mask(batch))
    layers = dense_gcn_reference(
      np.asarray(batch.nodes), np.asarray(batch.senders), np.asarray(batch.receivers), weights, biases, mask
    )
    seg = np.repeat(np.arange(7), batch.n_node)
    want = np.concatenate([np.stack([h[seg == g].sum(axis=0) for g in range(7)]) for h in layers], axis=1)
    # A readout is a sum of node rows of either sign: its rounding scales with the summed magnitudes.
    terms = np.concatenate([np.stack([np.abs(h[seg == g]).sum(axis=0) for g in range(7)]) for h in layers], axis=1)
    assert_close(np.asarray(z), want, scale=terms)
    self.assertTrue(np.all(np.asarray(z)[5:] == 0.0))  # the empty graph and the padding graph

  @pytest.mark.heavy
  def test_conv_biases_take_their_exact_zero_gradient_under_train_mode_batch_norm(self):
    c = random_collection(6, num_graphs=4, width=3)
    batch = batch_graphs(c, range(4), num_graphs=5)
    model = GCNEncoder(3, hidden=4, layers=2, rngs=nnx.Rngs(2))
    weights = jnp.asarray(np.random.default_rng(0).normal(size=(6, 8)))  # 5 graphs and the padding graph

    def conv_grads():
      graphdef, params, rest = nnx.split(model, nnx.Param, ...)
      loss = lambda p: jnp.sum(weights * nnx.merge(graphdef, p, rest, copy=True)(batch))
      return nnx.to_pure_dict(jax.grad(loss)(params))["convs"].values()

    model.train()
    for conv in conv_grads():  # BatchNorm subtracts the batch mean: the bias drops out exactly
      self.assertFalse(np.any(np.asarray(conv["bias"])))
      self.assertTrue(np.any(np.asarray(conv["linear"]["kernel"])))
    model.eval()  # running statistics: the bias shifts the output and gets its gradient
    self.assertTrue(all(np.any(np.asarray(conv["bias"])) for conv in conv_grads()))

  @pytest.mark.heavy
  def test_padding_does_not_change_real_graphs(self):
    c = random_collection(5, num_graphs=3)
    model = GCNEncoder(3, hidden=4, rngs=nnx.Rngs(1))
    model.eval()
    small = model(batch_graphs(c, range(3)))
    big = model(batch_graphs(c, range(3), num_graphs=8, node_budget=512, edge_budget=1024))
    assert_close(np.asarray(small)[:3], np.asarray(big)[:3])

  def test_propagation_is_symmetric_normalisation(self):
    s, r = jnp.array([0, 1]), jnp.array([1, 0])
    graph = batch_graphs(from_graphs([(np.eye(2, dtype=np.float32), np.array([0, 1]), np.array([1, 0]))], [0]), [0])
    out = gcn_propagate(graph._replace(nodes=None), jnp.asarray(graph.nodes))
    assert_close(np.asarray(out)[:2], [[0.5, 0.5], [0.5, 0.5]])
    del s, r

  def test_self_loops_as_pyg_gcn_norm(self):
    # PyG's gcn_norm, transcribed: add_remaining_self_loops drops the data's loops and adds one of weight 1 per
    # node; deg = column sums; out = D^-1/2 (A + I) D^-1/2 h
    senders, receivers = np.array([0, 1, 1, 2, 2, 2]), np.array([1, 0, 2, 1, 2, 2])  # node 2 has two loops
    h = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    graph = batch_graphs(from_graphs([(h, senders, receivers)], [0]), [0])
    a = np.zeros((3, 3))
    keep = senders != receivers
    np.add.at(a, (receivers[keep], senders[keep]), 1.0)
    a += np.eye(3)
    d = a.sum(1)
    want = (a / np.sqrt(np.outer(d, d))) @ h
    got = gcn_propagate(graph._replace(nodes=None), jnp.asarray(graph.nodes), self_loops="remaining")
    assert_close(np.asarray(got)[:3], want)
    # "always" keeps the data's loops as edges and adds one more: node 2 sees three
    a_always = np.zeros((3, 3))
    np.add.at(a_always, (receivers, senders), 1.0)
    a_always += np.eye(3)
    d = a_always.sum(1)
    always = gcn_propagate(graph._replace(nodes=None), jnp.asarray(graph.nodes))
    assert_close(np.asarray(always)[:3], (a_always / np.sqrt(np.outer(d, d))) @ h)
    # without self-loops in the data the two agree
    loop_free = batch_graphs(from_graphs([(h, senders[keep], receivers[keep])], [0]), [0])
    assert_close(
      gcn_propagate(loop_free._replace(nodes=None), jnp.asarray(loop_free.nodes), self_loops="remaining"),
      gcn_propagate(loop_free._replace(nodes=None), jnp.asarray(loop_free.nodes)),
    )
    with self.assertRaisesRegex(ValueError, "`self_loops` must be one of"):
      GCNEncoder(2, self_loops="none", rngs=nnx.Rngs(0))

  @pytest.mark.heavy
  def test_dropout_needs_a_key_and_jit_matches(self):
    c = random_collection(6, num_graphs=4)
    batch = batch_graphs(c, range(4))
    model = GCNEncoder(3, rngs=nnx.Rngs(2))
    model.train()
    graphdef, state = nnx.split(model)

    def run(state, key):
      return nnx.merge(graphdef, state, copy=True)(batch, key)

    eager, jitted = run(state, jax.random.key(0)), jax.jit(run)(state, jax.random.key(0))
    # BatchNorm mixes every node into every output, so each entry's rounding scales with the largest activations.
    assert_close(np.asarray(eager), np.asarray(jitted), "network", scale=np.abs(np.asarray(eager)).max())
    self.assertFalse(close(np.asarray(run(state, jax.random.key(0))), np.asarray(run(state, None))))


if __name__ == "__main__":
  absltest.main()
