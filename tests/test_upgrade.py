"""The embedding-upgrade workflow (bcjax.upgrade): closed forms against float64 NumPy references, streaming equal to
in-memory, kinds recovering the maps they can represent, auto's choice, every report measure against a brute-force
reference, streaming serving with bounded memory, and the map file's round trip through a registry."""

import contextlib
import dataclasses
import json
import tracemalloc
from pathlib import Path
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from sklearn.linear_model import LogisticRegression

from bcjax import upgrade
from bcjax.alignment import affine_transform, orthogonal_transform
from bcjax.upgrade import _files, _map, _retrieval
from bcjax.upgrade import fit as _fit
from bcjax.upgrade.report import _consumer, _records
from bcjax.versioning import Registry
from bcjax.versioning._format import decode, encode
from tests._tolerance import assert_close


def rotation(rng, d_prev, d_new):
  q, _ = np.linalg.qr(rng.standard_normal((max(d_prev, d_new), max(d_prev, d_new))))
  return q[:d_prev, :d_new]


def anisotropic_pairs(rng, n=1500, d_new=12, d_prev=8, *, noise=0.0):
  """New embeddings in a shifted, anisotropic cone; old = rotation of the centred new plus another shift."""
  z_new = rng.standard_normal((n, d_new)) * np.linspace(0.3, 3.0, d_new) + 2.0
  q = rotation(rng, d_prev, d_new)
  z_prev = (z_new - 2.0) @ q.T - 1.0 + noise * rng.standard_normal((n, d_prev))
  return z_new, z_prev, q


class ClosedFormTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.z_new = rng.standard_normal((400, 9)) * np.linspace(0.5, 2.0, 9) + 1.0
    self.z_prev = self.z_new @ rng.standard_normal((9, 6)) + 0.3 * rng.standard_normal((400, 6)) - 2.0

  def test_moments_stream_equals_in_memory_numpy(self):
    m = upgrade.pair_moments(self.z_new, self.z_prev, chunk_rows=7)
    assert_close(m.gram, self.z_new.T @ self.z_new)
    assert_close(m.cross, self.z_prev.T @ self.z_new)
    assert_close(m.energy, np.sum(self.z_prev**2))
    assert_close(m.sum_new, self.z_new.sum(0))
    g, c, e = m.centred()
    zn, zp = self.z_new - self.z_new.mean(0), self.z_prev - self.z_prev.mean(0)
    assert_close(g, zn.T @ zn)
    assert_close(c, zp.T @ zn)
    assert_close(e, np.sum(zp**2))

  @parameterized.parameters("linear", "orthogonal", "affine")
  def test_streaming_fit_equals_in_memory_fit_in_float64(self, kind):
    """Pairs streamed from a memory-mapped file in chunks of 13 rows give the in-memory fit's map."""
    tmp = Path(self.create_tempdir().full_path)
    np.save(tmp / "new.npy", self.z_new)
    np.save(tmp / "old.npy", self.z_prev)
    streamed = upgrade.pair_moments(
      upgrade.open_embeddings(tmp / "new.npy"), upgrade.open_embeddings(tmp / "old.npy"), chunk_rows=13
    )
    whole = upgrade.pair_moments(self.z_new, self.z_prev, chunk_rows=10**6)
    for choices in ({}, {"alpha": 0.1}, {"alpha": 0.1, "rank": 3}) if kind == "affine" else ({}, {"alpha": 0.3}):
      if kind == "orthogonal" and choices:
        continue
      w_s, b_s = upgrade.closed_form(kind, streamed, **choices)
      w_m, b_m = upgrade.closed_form(kind, whole, **choices)
      assert_close(w_s, w_m, "linalg")
      assert_close(b_s, b_m, "linalg")

  def test_linear_is_centred_least_squares_and_ridge(self):
    m = upgrade.pair_moments(self.z_new, self.z_prev)
    w, b = upgrade.closed_form("linear", m)
    design = np.hstack([self.z_new, np.ones((400, 1))])
    reference = np.linalg.lstsq(design, self.z_prev, rcond=None)[0]
    assert_close(w, reference[:-1].T, "linalg")
    assert_close(b, reference[-1], "linalg")
    # the library's affine kind on the same rows
    params = affine_transform().fit(self.z_new, self.z_prev)
    assert_close(w, params["w"], "linalg")
    # ridge: W = Cc (Gc + gamma I)^-1 with gamma = alpha tr(Gc) / d
    zn, zp = self.z_new - self.z_new.mean(0), self.z_prev - self.z_prev.mean(0)
    gamma = 0.3 * np.trace(zn.T @ zn) / 9
    ridge = np.linalg.solve(zn.T @ zn + gamma * np.eye(9), zn.T @ zp).T
    assert_close(upgrade.closed_form("linear", m, alpha=0.3)[0], ridge, "linalg")

  def test_least_squares_with_fewer_pairs_than_dimensions_is_minimum_norm(self):
    """n < d: the Gram matrix is singular; the map is lstsq's minimum-norm solution on the centred rows, not one that
    inverts the rounding noise of its null eigenvalues."""
    rng = np.random.default_rng(0)
    for n, d in ((30, 40), (10, 40), (39, 40)):
      zn, zp = rng.standard_normal((n, d)), rng.standard_normal((n, 8))
      w, b = upgrade.closed_form("linear", upgrade.pair_moments(zn, zp))
      reference = np.linalg.lstsq(zn - zn.mean(0), zp - zp.mean(0), rcond=None)[0].T
      assert_close(w, reference, "linalg", scale=np.linalg.norm(reference))
      assert_close(b, zp.mean(0) - reference @ zn.mean(0), "linalg", scale=np.linalg.norm(reference))
      fresh = rng.standard_normal((50, d))
      assert_close(fresh @ w.T, fresh @ reference.T, "linalg", scale=np.abs(fresh) @ np.abs(reference).T)

  @pytest.mark.heavy
  def test_affine_shrinks_towards_the_scaled_isometry(self):
    m = upgrade.pair_moments(self.z_new, self.z_prev)
    zn, zp = self.z_new - self.z_new.mean(0), self.z_prev - self.z_prev.mean(0)
    u, _, vt = np.linalg.svd(zp.T @ zn, full_matrices=False)
    q = u @ vt  # the polar factor of the centred cross-covariance
    s = np.sum(q * (zp.T @ zn)) / np.sum((q @ zn.T @ zn) * q)
    gamma = 1.0 * np.trace(zn.T @ zn) / 9
    expected = np.linalg.solve(zn.T @ zn + gamma * np.eye(9), zn.T @ zp + gamma * (s * q).T).T
    w, b = upgrade.closed_form("affine", m, alpha=1.0)
    assert_close(w, expected, "linalg")
    assert_close(b, zp.mean(0) + self.z_prev.mean(0) - w @ self.z_new.mean(0), "linalg", scale=10.0)
    # huge shrinkage lands on the scaled isometry itself
    assert_close(upgrade.closed_form("affine", m, alpha=1e9)[0], s * q, "statistical", rtol=1e-6, atol=1e-6)
    # reduced rank: the library's reduced-rank regression at alpha = 0
    params = affine_transform(rank=3).fit(self.z_new, self.z_prev)
    assert_close(upgrade.closed_form("affine", m, rank=3)[0], params["u"] @ params["v"].T, "linalg")

  def test_orthogonal_with_bias_is_centred_procrustes(self):
    """The library's centred fit (run to a 1e-12 relative change) and the workflow's (stopped at 1e-9): the same
    loss to 1e-7 and maps within 1e-3; both semi-orthogonal."""
    m = upgrade.pair_moments(self.z_new, self.z_prev)
    w, b = upgrade.closed_form("orthogonal", m)
    params = orthogonal_transform(bias=True).fit(self.z_new, self.z_prev)
    assert_close(
      _fit.moments_mse(w, b, m),
      _fit.moments_mse(np.asarray(params["a"]), np.asarray(params["b"]), m),
      "statistical",
      rtol=1e-7,
      atol=0,
    )
    assert_close(w, params["a"], "statistical", rtol=0, atol=1e-3)
    assert_close(w @ w.T, np.eye(6), "linalg", scale=1.0)  # unit-norm rows
    # square case: the SVD solution, exact
    w_sq, b_sq = upgrade.closed_form("orthogonal", upgrade.pair_moments(self.z_prev, self.z_prev[:, ::-1]))
    assert_close(w_sq, np.eye(6)[::-1], "linalg", scale=1.0)
    assert_close(b_sq, np.zeros(6), "linalg", scale=10.0)

  def test_moments_mse_is_the_mean_squared_error(self):
    m = upgrade.pair_moments(self.z_new, self.z_prev)
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((6, 9)), rng.standard_normal(6)
    direct = np.mean(np.sum((self.z_new @ w.T + b - self.z_prev) ** 2, axis=1))
    assert_close(_fit.moments_mse(w, b, m), direct)


class KindsTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_rotation_plus_shift_in_an_anisotropic_cone(self):
    """A rotation with shifts is recovered exactly by the centred orthogonal kind and by affine; an uncentred
    rotation cannot move the cone and misses it by far."""
    rng = np.random.default_rng(0)
    z_new, z_prev, _ = anisotropic_pairs(rng)
    split = upgrade.split_pairs(len(z_new), seed=0)
    for kind in ("orthogonal", "affine", "linear"):
      fit = upgrade.fit_upgrade(z_new, z_prev, kind=kind, split=split)
      mapped = np.asarray(fit.map(z_new[split.test]))
      assert_close(mapped, z_prev[split.test], "statistical", rtol=0, atol=1e-6, err_msg=kind)
    uncentred = orthogonal_transform().fit(z_new[split.train], z_prev[split.train])
    error = np.abs(np.asarray(orthogonal_transform().apply(uncentred, z_new[split.test])) - z_prev[split.test])
    self.assertGreater(error.mean(), 0.2)

  @pytest.mark.heavy
  def test_affine_recovers_an_anisotropic_scale_the_isometry_cannot(self):
    rng = np.random.default_rng(1)
    z_new = rng.standard_normal((1200, 8)) + 1.0
    a = rotation(rng, 8, 8) * np.linspace(0.2, 4.0, 8)
    z_prev = z_new @ a.T + 3.0
    split = upgrade.split_pairs(1200)
    affine = upgrade.fit_upgrade(z_new, z_prev, kind="affine", split=split)
    assert_close(np.asarray(affine.map(z_new[split.test])), z_prev[split.test], "statistical", rtol=0, atol=1e-5)
    ortho = upgrade.fit_upgrade(z_new, z_prev, kind="orthogonal", split=split)
    self.assertGreater(np.abs(np.asarray(ortho.map(z_new[split.test])) - z_prev[split.test]).mean(), 0.3)

  @pytest.mark.heavy
  def test_few_pairs_choose_a_ridge_and_beat_least_squares(self):
    """Fewer training pairs than dimensions: cross-validation picks shrinkage, which generalises far better than
    the minimum-norm least-squares map."""
    rng = np.random.default_rng(2)
    z_new = rng.standard_normal((3000, 40)) * np.geomspace(3.0, 0.3, 40) + 2.0  # a spectrum that decays
    z_prev = (z_new - 2.0) @ rotation(rng, 40, 40).T - 1.0 + 0.1 * rng.standard_normal((3000, 40))
    order = rng.permutation(3000)
    split = upgrade.PairSplit(np.sort(order[:30]), np.sort(order[30:40]), np.sort(order[40:]))
    test_m = upgrade.pair_moments(z_new, z_prev, rows=split.test)

    def test_error(kind):
      fit = upgrade.fit_upgrade(z_new, z_prev, kind=kind, split=split)
      return fit.map.choices, _fit.moments_mse(*upgrade.affine_form(fit.map.transform, fit.map.params), test_m)

    (affine_choices, affine), (_, ridge), (_, isometry) = (
      test_error("affine"),
      test_error("linear"),
      test_error("orthogonal"),
    )
    self.assertGreater(affine_choices["alpha"], 0.0)
    self.assertNotIn("rank", affine_choices)
    least_squares = upgrade.closed_form("linear", upgrade.pair_moments(z_new, z_prev, rows=order[:40]))
    # The true minimum-norm map (40 pairs, 40 dimensions) errs about five times as much as the shrunk one here.
    self.assertLess(affine, 0.25 * _fit.moments_mse(*least_squares, test_m))
    self.assertLess(affine, 0.7 * min(ridge, isometry))

  def test_spaces_that_already_agree_shrink_towards_the_identity(self):
    """Two models whose spaces nearly coincide (a small perturbation of one another), fitted on few pairs: the
    cross-validation picks the identity target, and beats the isometry target on held-out rows."""
    rng = np.random.default_rng(21)
    z_new = rng.standard_normal((2000, 30)) * np.geomspace(2.0, 0.2, 30)
    z_prev = z_new @ (np.eye(30) + 0.05 * rng.standard_normal((30, 30))).T + 0.1 * rng.standard_normal((2000, 30))
    order = rng.permutation(2000)
    split = upgrade.PairSplit(np.sort(order[:25]), np.sort(order[25:30]), np.sort(order[30:]))
    fit = upgrade.fit_upgrade(z_new, z_prev, kind="affine", split=split)
    self.assertEqual(fit.map.choices["target"], "identity")
    test_m = upgrade.pair_moments(z_new, z_prev, rows=split.test)
    m = upgrade.pair_moments(z_new, z_prev, rows=order[:30])
    chosen = _fit.moments_mse(*upgrade.affine_form(fit.map.transform, fit.map.params), test_m)
    isometry = _fit.moments_mse(*upgrade.closed_form("affine", m, alpha=fit.map.choices["alpha"]), test_m)
    self.assertLess(chosen, isometry)
    with self.assertRaisesRegex(ValueError, "identity target needs equal widths"):
      upgrade.closed_form("affine", upgrade.pair_moments(z_new, z_prev[:, :5]), alpha=1.0, target="identity")

  def test_auto_with_few_validation_pairs_ranks_by_cross_validation(self):
    rng = np.random.default_rng(22)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=600, noise=0.3)
    split = upgrade.PairSplit(np.arange(0, 100), np.arange(100, 110), np.arange(110, 600))
    fit = upgrade.fit_upgrade(z_new, z_prev, kind="auto", split=split)
    self.assertIn("too few to rank the kinds", fit.reason)
    closed = [c for c in fit.candidates if c.kind != "mlp"]
    self.assertEqual(fit.map.kind, max(closed, key=lambda c: c.cv_rank_score).kind)

  @pytest.mark.heavy
  def test_a_non_linear_map_is_won_by_the_mlp_and_auto_picks_it(self):
    rng = np.random.default_rng(3)
    z_new = rng.standard_normal((2500, 6))
    z_prev = z_new[:, :4] + 1.5 * np.abs(z_new[:, 2:6])
    fit = upgrade.fit_upgrade(z_new, z_prev, kind="auto", mlp_hidden=(64,), mlp_epochs=40, seed=0)
    self.assertEqual(fit.map.kind, "mlp", fit.reason)
    self.assertIn("auto chose mlp", fit.reason)
    by_kind = {c.kind: c for c in fit.candidates}
    self.assertIsInstance(by_kind["mlp"], upgrade.fit.Candidate)
    self.assertGreater(by_kind["mlp"].val_hit_rate, by_kind["affine"].val_hit_rate)
    self.assertLess(by_kind["mlp"].val_mse, 0.6 * by_kind["affine"].val_mse)

  @pytest.mark.heavy
  def test_auto_prefers_the_simpler_kind_on_a_tie(self):
    rng = np.random.default_rng(4)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=800)
    fit = upgrade.fit_upgrade(z_new, z_prev, kind="auto", mlp_hidden=(8,), mlp_epochs=2)
    self.assertEqual(fit.map.kind, "orthogonal", fit.reason)

  def test_normalized_fit_maps_unit_rows_to_unit_rows(self):
    rng = np.random.default_rng(5)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=600, noise=0.1)
    fit = upgrade.fit_upgrade(z_new, z_prev, kind="linear", normalize=True)
    out = np.asarray(fit.map(z_new[:50]))
    assert_close(np.linalg.norm(out, axis=1), np.ones(50), "elementwise")

  @pytest.mark.heavy
  def test_apply_map_jit_matches_eager_and_keeps_precision(self):
    rng = np.random.default_rng(6)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=300)
    m = upgrade.fit_upgrade(z_new, z_prev, kind="affine").map
    eager = m.transform.apply({k: np.asarray(v) for k, v in m.params.items()}, z_new)
    assert_close(upgrade.apply_map(m, z_new), eager)
    self.assertEqual(upgrade.apply_map(m, z_new.astype(np.float16)).dtype, np.float32)
    with self.assertRaisesRegex(ValueError, r"shape \(300, 5\) but the map takes D_k=12"):
      upgrade.apply_map(m, z_new[:, :5])

  @pytest.mark.heavy
  def test_query_function_matches_the_maps_for_every_kind_and_chains(self):
    rng = np.random.default_rng(13)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=400, noise=0.2)
    fits = {
      kind: upgrade.fit_upgrade(
        z_new, z_prev, kind=kind, normalize=kind == "orthogonal", mlp_hidden=(8,), mlp_epochs=2
      ).map
      for kind in ("orthogonal", "linear", "affine", "mlp")
    }
    for kind, m in fits.items():
      assert_close(upgrade.query_function(m, dtype=np.float64)(z_new[:7]), m(z_new[:7]), err_msg=kind)
    back = upgrade.fit_upgrade(z_prev, z_new[:, :5], kind="linear").map  # 8 -> 5
    chain = [fits["orthogonal"], back]
    assert_close(upgrade.query_function(chain, dtype=np.float64)(z_new[:7]), back(fits["orthogonal"](z_new[:7])))

  @pytest.mark.heavy
  def test_the_fit_never_reads_the_held_out_rows(self):
    """Held-out rows full of NaN change nothing: the choices and the map come from training and validation rows."""
    rng = np.random.default_rng(14)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=500, noise=0.2)
    split = upgrade.split_pairs(500, seed=3)
    clean = upgrade.fit_upgrade(z_new, z_prev, kind="auto", split=split, mlp_hidden=(8,), mlp_epochs=2)
    poisoned_new, poisoned_prev = z_new.copy(), z_prev.copy()
    poisoned_new[split.test], poisoned_prev[split.test] = np.nan, np.nan
    poisoned = upgrade.fit_upgrade(poisoned_new, poisoned_prev, kind="auto", split=split, mlp_hidden=(8,), mlp_epochs=2)
    self.assertEqual(poisoned.map.kind, clean.map.kind)
    for name, a in clean.map.params.items():
      np.testing.assert_array_equal(poisoned.map.params[name], a)

  def test_half_precision_files_fit_like_their_float32_values(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(15)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=400, noise=0.1)
    split = upgrade.split_pairs(400)
    for dtype in (np.float16, ml_dtypes.bfloat16):
      np.save(tmp / "new.npy", z_new.astype(dtype))
      np.save(tmp / "old.npy", z_prev.astype(dtype))
      mapped = upgrade.open_embeddings(tmp / "new.npy"), upgrade.open_embeddings(tmp / "old.npy")
      from_file = upgrade.fit_upgrade(*mapped, kind="linear", split=split).map
      in_memory = upgrade.fit_upgrade(
        z_new.astype(dtype).astype(np.float64), z_prev.astype(dtype).astype(np.float64), kind="linear", split=split
      ).map
      assert_close(from_file.params["w"], in_memory.params["w"], "linalg")

  def test_closed_form_refuses_choices_outside_their_range(self):
    m = upgrade.pair_moments(*anisotropic_pairs(np.random.default_rng(1), n=60)[:2])
    for kind in ("linear", "affine", "orthogonal"):
      for alpha in (-1.0, -1e-9, float("nan"), float("inf"), True):
        with self.assertRaisesRegex(ValueError, "`alpha` must be a finite number >= 0", msg=f"{kind} {alpha}"):
          upgrade.closed_form(kind, m, alpha=alpha)
      for rank in (0, -2, 1.5, True):
        with self.assertRaisesRegex(ValueError, "`rank` must be None .* or an integer >= 1", msg=f"{kind} {rank}"):
          upgrade.closed_form(kind, m, rank=rank)
    self.assertEqual(upgrade.closed_form("affine", m, alpha=np.float64(0.1), rank=np.int64(2))[0].shape, (8, 12))

  def test_split_and_kind_errors(self):
    with self.assertRaisesRegex(ValueError, "`test_fraction` must lie in"):
      upgrade.split_pairs(10, test_fraction=1.0)
    with self.assertRaisesRegex(ValueError, "leaves no training pairs"):
      upgrade.split_pairs(10, test_fraction=0.5, val_fraction=0.5)
    with self.assertRaisesRegex(ValueError, "`kind` must be one of"):
      upgrade.fit_upgrade(np.ones((10, 2)), np.ones((10, 2)), kind="cubic")
    with self.assertRaisesRegex(ValueError, "same rows"):
      upgrade.fit_upgrade(np.ones((10, 2)), np.ones((9, 2)))


class ReportTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(7)
    self.z_new, self.z_prev, _ = anisotropic_pairs(rng, n=1000, noise=0.4)
    self.split = upgrade.split_pairs(1000, seed=1)
    # Plain cosine scores, as the brute-force references below compute them (auto may keep a hubness correction).
    self.map = upgrade.fit_upgrade(self.z_new, self.z_prev, kind="linear", split=self.split, hubness="off").map
    self.index = rng.standard_normal((300, 8)) * 2.0 - 1.0

  def brute_top(self, q, x, k):
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    return np.argsort(-(qn @ xn.T), axis=1, kind="stable")[:, :k]

  @pytest.mark.heavy
  def test_measures_against_brute_force(self):
    rows = self.split.test
    qrel_pairs = (rows[::2], np.arange(len(rows[::2])) % 300)
    labels = (self.z_prev[:, 0] > np.median(self.z_prev[:, 0])).astype(np.int64)
    report = upgrade.evaluate_upgrade(
      self.map,
      self.z_new,
      self.z_prev,
      rows,
      index=self.index,
      qrels=qrel_pairs,
      labels=labels,
      consumer_rows=self.split.train,
      k=5,
      seed=3,
    )
    mapped = self.map.transform.apply(self.map.params, self.z_new[rows])
    mapped = np.asarray(mapped)
    target = self.z_prev[rows]
    m = report.metrics
    # The report's means are float64 numbers of float32 distances: float32 rounding, whatever the result's dtype.
    assert_close(
      m["alignment_l2"].value, np.linalg.norm(mapped - target, axis=1).mean(), "network", precision="float32"
    )
    cos = np.sum(mapped * target, 1) / np.linalg.norm(mapped, axis=1) / np.linalg.norm(target, axis=1)
    assert_close(m["alignment_cosine"].value, cos.mean(), "network", precision="float32")
    # own-vector hits among the targets plus the index
    items = np.concatenate([target, self.index])
    hits = (self.brute_top(mapped, items, 5) == np.arange(len(rows))[:, None]).any(1)
    assert_close(m["own_vector_hit_rate"].value, hits.mean(), "elementwise")
    # neighbour agreement with the old model's top 5
    mine, theirs = self.brute_top(mapped, self.index, 5), self.brute_top(target, self.index, 5)
    agreement = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(mine, theirs)])
    assert_close(m["neighbour_agreement"].value, agreement, "elementwise")
    # recall recovery against the old model
    rel = {r: {i} for r, i in zip(*qrel_pairs)}
    queries = [j for j, r in enumerate(rows) if r in rel]
    bridged = np.mean([len(rel[rows[j]] & set(mine[j])) for j in queries])
    reference = np.mean([len(rel[rows[j]] & set(theirs[j])) for j in queries])
    assert_close(m["recall_bridged"].value, bridged, "elementwise")
    assert_close(m["recall_recovery"].value, bridged / reference, "elementwise")
    # the consumer: scikit-learn's logistic regression on the old training embeddings
    clf = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(
      self.z_prev[self.split.train], labels[self.split.train]
    )
    old_right = clf.predict(target) == labels[rows]
    new_right = clf.predict(mapped) == labels[rows]
    assert_close(m["consumer_accuracy_old"].value, old_right.mean(), "statistical", rtol=0, atol=2.5 / len(rows))
    assert_close(
      m["consumer_negative_flips"].value,
      (old_right & ~new_right).mean(),
      "statistical",
      rtol=0,
      atol=2.5 / len(rows),
    )
    for name, metric in m.items():
      if np.isfinite(metric.value):
        self.assertLessEqual(metric.low, metric.value + 1e-12, name)
        self.assertGreaterEqual(metric.high, metric.value - 1e-12, name)
    self.assertEqual(report.primary, "recall_recovery")

  @pytest.mark.heavy
  def test_recall_recovery_against_re_embedding_uses_the_new_index(self):
    rows = self.split.test
    new_index = self.z_new[:300]
    old_index = self.z_prev[:300]
    qrels = (rows, rows % 300)
    report = upgrade.evaluate_upgrade(
      self.map, self.z_new, self.z_prev, rows, index=old_index, new_index=new_index, qrels=qrels, k=10
    )
    found = self.brute_top(self.z_new[rows], new_index, 10)
    reference = np.mean([(r % 300) in f for r, f in zip(rows, found)])
    assert_close(report.metrics["recall_reference"].value, reference, "elementwise")
    self.assertIn("re-embedding", report.metrics["recall_recovery"].means)
    # a new index of other items is refused before the old index is read
    refused = self.assertRaisesRegex(ValueError, "`new_index` has 299 rows but `index` has 300")
    with mock.patch.object(_files, "chunk_reader", side_effect=AssertionError("read")), refused:
      upgrade.evaluate_upgrade(
        self.map, self.z_new, self.z_prev, rows, index=old_index, new_index=new_index[:299], qrels=qrels
      )

  def test_verdicts_follow_the_interval_and_the_reason_codes(self):
    reasons = []

    def measure(value, low, high):
      return upgrade.report.Measure(value, low, high, 100, "a test measure")

    self.assertEqual(_records._verdict(measure(0.97, 0.96, 0.98), 0.95, reasons), "bridge")
    self.assertEqual(_records._verdict(measure(0.9, 0.88, 0.94), 0.95, reasons), "re-index")
    self.assertEqual(_records._verdict(measure(0.95, 0.93, 0.97), 0.95, reasons), "undecided")
    self.assertEqual(_records._verdict(measure(0.95, 0.95, 0.97), 0.95, reasons), "bridge")
    good = measure(0.99, 0.98, 1.0)
    for code in _records.REASON_CODES:
      verdict = _records._verdict(good, 0.95, [_records._reason(code, "any wording")])
      self.assertEqual(verdict, "bridge" if code == "consumer-at-majority" else "not measurable", code)
    self.assertEqual(_records._verdict(good._replace(low=float("nan")), 0.95, []), "not measurable")
    with self.assertRaisesRegex(ValueError, "unknown reason code"):
      _records._reason("pool-small", "a typo in a code")

  def test_a_small_pool_is_refused_a_verdict_and_its_size_is_stated(self):
    """Without an index the own vectors of 200 held-out pairs are the whole pool: k / pool = 0.05 is not far below
    the threshold, so there is no verdict however well the map does; 1,100 index rows as distractors make one (a
    lower threshold needs a larger pool: chance must stay at 1 % of it)."""
    rows = self.split.test[:200]
    report = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, min_hit_rate=0.95)
    hit = report.metrics["own_vector_hit_rate"]
    self.assertEqual((hit.pool, hit.chance), (200, 10 / 200))
    self.assertFalse(hit.measurable)
    self.assertEqual(report.verdict, "not measurable")
    self.assertIn("at least 1053 rows", report.reasons[0].text)
    self.assertIn("at least 853 rows", report.reasons[0].text)
    index = np.random.default_rng(3).standard_normal((1100, 8)) * 2.0 - 1.0
    report = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, index=index, min_hit_rate=0.95)
    self.assertEqual(report.reasons, ())
    self.assertNotEqual(report.verdict, "not measurable")
    with self.assertRaisesRegex(ValueError, "`min_hit_rate` must lie in"):
      upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, min_hit_rate=0.0)

  def test_the_report_is_typed_and_its_json_strict(self):
    rows = self.split.test
    report = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, index=self.index, k=5)
    self.assertIsInstance(report.primary_measure, upgrade.report.Measure)
    with self.assertRaises(dataclasses.FrozenInstanceError):
      report.verdict = "bridge"  # a report cannot be edited into another verdict
    body = json.loads(upgrade.report.report_json(report, fit_reason="why"))
    self.assertEqual(body["verdict"], report.verdict)
    self.assertEqual(body["fit_reason"], "why")
    self.assertEqual(body["metrics"][report.primary]["value"], report.primary_measure.value)
    self.assertEqual(body["map"]["dims"], list(self.map.dims))
    with self.assertRaisesRegex(ValueError, r"`context` keys \['verdict'\]"):
      upgrade.report.report_json(report, verdict="bridge")

  def test_the_index_is_streamed_in_chunks(self):
    """Chunks of 7 index rows give the whole index's measures."""
    rows = self.split.test
    whole = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, index=self.index, k=5)
    chunked = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, index=self.index, k=5, chunk_rows=7)
    self.assertEqual(whole.metrics, chunked.metrics)

  def test_the_index_is_read_once_per_evaluation(self):
    """Neighbour agreement, bridged recall and the old model's reference, with a hubness correction: one pass."""
    path = Path(self.create_tempdir().full_path) / "index.npy"
    np.save(path, self.index.astype(np.float32))
    index = upgrade.open_embeddings(path)
    hub = upgrade.fit_upgrade(self.z_new, self.z_prev, kind="linear", split=self.split, hubness="on").map
    rows = self.split.test
    qrels = (rows, rows % index.shape[0])
    real, read = _files.chunk_reader, []

    @contextlib.contextmanager
    def counting(arr):
      with real(arr) as reader:
        yield lambda chunk: (read.append(chunk.stop - chunk.start) if arr is index else None, reader(chunk))[1]

    with mock.patch.object(_files, "chunk_reader", counting):
      once = upgrade.evaluate_upgrade(hub, self.z_new, self.z_prev, rows, index=index, qrels=qrels, k=5, chunk_rows=64)
    self.assertEqual(sum(read), index.shape[0])  # every row once (the distractor sample is read by row, apart)
    self.assertEqual(read, [64, 64, 64, 64, 44])
    # the same measures as searching the in-memory index
    whole = upgrade.evaluate_upgrade(hub, self.z_new, self.z_prev, rows, index=self.index, qrels=qrels, k=5)
    for name in ("neighbour_agreement", "recall_bridged", "recall_reference", "recall_recovery"):
      assert_close(once.metrics[name].value, whole.metrics[name].value, precision="float32")

  @pytest.mark.heavy
  def test_a_reference_at_chance_is_not_measurable(self):
    rows = self.split.test
    rng = np.random.default_rng(0)
    qrels = (rows, rng.integers(0, 300, size=len(rows)))  # random relevance: the old model is at chance
    report = upgrade.evaluate_upgrade(self.map, self.z_new, self.z_prev, rows, index=self.index, qrels=qrels, k=1)
    self.assertEqual(report.verdict, "not measurable")
    self.assertEqual([r.code for r in report.reasons], ["reference-at-chance"])

  @pytest.mark.heavy
  def test_a_consumer_at_the_majority_share_is_flagged(self):
    labels = np.zeros(1000, np.int64)
    labels[:3] = 1
    report = upgrade.evaluate_upgrade(
      self.map, self.z_new, self.z_prev, self.split.test, labels=labels, consumer_rows=self.split.train
    )
    self.assertFalse(report.metrics["consumer_negative_flips"].measurable)
    self.assertIn("consumer-at-majority", [r.code for r in report.reasons])

  @pytest.mark.heavy
  def test_logistic_regression_matches_scikit_learn(self):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((300, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.standard_normal(300) > 0).astype(int) + (x[:, 2] > 1)
    params = _consumer.fit_logistic_regression(x, y, c=0.5)
    clf = LogisticRegression(C=0.5, tol=1e-12, max_iter=10_000).fit(x, y)
    assert_close(params["w"], clf.coef_, "statistical", rtol=1e-4, atol=1e-4)
    assert_close(params["b"], clf.intercept_, "statistical", rtol=1e-4, atol=1e-4)


def hub_pairs(seed: int, n: int = 3000, d: int = 48, extra: int = 0):
  """Pairs whose old side is a squashed rotation of the new plus anisotropic noise (a linear map's images crowd
  together, so some old vectors sit near many of them); ``extra`` more old vectors of unpaired items come back as
  an index."""
  rng = np.random.default_rng(seed)
  base = rng.standard_normal((n + extra, d))
  q, _ = np.linalg.qr(rng.standard_normal((d, d)))
  old = np.tanh(base @ q.T) + rng.standard_normal((n + extra, d)) * np.geomspace(2.0, 0.2, d)
  return base[:n], old[:n], old[n:]


class HubnessTest(absltest.TestCase):
  """CSLS: the per-document bias against a float64 brute force, the inner-product serving identity, biased search,
  auto's choice on validation, the map file's round trip and the report's use of it."""

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(11)
    self.docs = rng.standard_normal((700, 12)) + 0.5
    self.mapped = rng.standard_normal((90, 12))

  def unit(self, x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)

  def test_bias_is_half_the_mean_of_the_k_nearest_cosines(self):
    hub = upgrade.make_hubness(self.mapped, k=7)
    cos = self.unit(self.docs) @ self.unit(self.mapped).T
    expected = 0.5 * np.sort(cos, axis=1)[:, -7:].mean(axis=1)
    for chunk_rows in (700, 64, 1):
      bias = upgrade.hubness_bias(self.docs, hub, chunk_rows=chunk_rows)
      assert_close(bias, expected, "reduction", scale=1.0)

  def test_inner_product_serving_equals_the_corrected_cosine(self):
    hub = upgrade.make_hubness(self.mapped)
    bias = upgrade.hubness_bias(self.docs, hub)
    queries = np.random.default_rng(2).standard_normal((30, 12))
    served = upgrade.csls_queries(queries) @ upgrade.csls_documents(self.docs, bias).T
    expected = self.unit(queries) @ self.unit(self.docs).T - bias[None, :].astype(np.float64)
    assert_close(served, expected, "reduction", scale=1.0)

  def test_biased_search_against_brute_force(self):
    bias = upgrade.hubness_bias(self.docs, upgrade.make_hubness(self.mapped))
    queries = np.random.default_rng(3).standard_normal((50, 12))
    scores = self.unit(queries) @ self.unit(self.docs).T - bias[None, :]
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    for chunk_rows in (700, 33):
      found = upgrade.top_k(queries, self.docs, 5, item_bias=bias, chunk_rows=chunk_rows)
      np.testing.assert_array_equal(found, expected)
    self.assertFalse(np.array_equal(upgrade.top_k(queries, self.docs, 5), expected))  # the bias changes rankings
    ranks = upgrade.own_vector_ranks(queries, self.docs[:50], self.docs[50:], item_bias=bias)
    own = scores[np.arange(50), np.arange(50)][:, None]
    assert_close(ranks, ((scores < own).sum(1) + 0.5 * ((scores == own).sum(1) - 1)) / 699, "elementwise")

  def test_bad_input_is_refused_naming_the_argument(self):
    with self.assertRaisesRegex(ValueError, "`k` must be >= 1"):
      upgrade.make_hubness(self.mapped, k=0)
    with self.assertRaisesRegex(ValueError, "at least k=100 rows"):
      upgrade.make_hubness(self.mapped, k=100)
    with self.assertRaisesRegex(ValueError, "`docs` has shape"):
      upgrade.hubness_bias(self.docs[:, :5], upgrade.make_hubness(self.mapped))
    with self.assertRaisesRegex(ValueError, "`item_bias` must be finite"):
      upgrade.top_k(self.mapped, self.docs, 3, item_bias=np.zeros(5))
    with self.assertRaisesRegex(ValueError, "`hubness` must be one of"):
      upgrade.fit_upgrade(self.docs, self.docs, hubness="yes")

  @pytest.mark.heavy
  def test_auto_keeps_the_correction_where_it_helps_and_the_map_carries_it(self):
    z_new, z_old, index = hub_pairs(0, extra=2000)
    split = upgrade.split_pairs(len(z_new), seed=0)
    fit = upgrade.fit_upgrade(z_new, z_old, kind="linear", normalize=True, split=split)
    self.assertIn("hubness correction (CSLS, k=10) kept", fit.reason)
    self.assertGreater(fit.hubness["rank_score_corrected"], fit.hubness["rank_score_plain"])
    plain = fit.map._replace(hubness=None)
    self.assertEqual(len(fit.map.hubness.reference), len(split.train) + len(split.val))  # under the 5,000 cap
    # The report applies the map's correction; without it the hit rate differs.
    reports = [
      upgrade.evaluate_upgrade(m, z_new, z_old, split.test, index=index, k=1, min_hit_rate=0.5)
      for m in (plain, fit.map)
    ]
    hits = [r.metrics["own_vector_hit_rate"].value for r in reports]
    self.assertNotEqual(hits[0], hits[1])
    self.assertIsNone(reports[0].map.hubness_k)
    self.assertEqual(reports[1].map[-2:], (10, len(fit.map.hubness.reference)))
    # The report's corrected hit rate against a brute force over the same pool.
    mapped = np.asarray(fit.map(z_new[split.test]))
    pool = np.concatenate([z_old[split.test], index])
    scores = self.unit(mapped) @ self.unit(pool).T - upgrade.hubness_bias(pool, fit.map.hubness)[None, :]
    assert_close(hits[1], np.mean(np.argmax(scores, axis=1) == np.arange(len(split.test))), "elementwise")
    # Round trip through a map file.
    path = Path(self.create_tempdir().full_path) / "m.bcmap"
    upgrade.save_map(fit.map, path)
    loaded, _ = upgrade.load_map(path)
    np.testing.assert_array_equal(loaded.hubness.reference, fit.map.hubness.reference)
    self.assertEqual(loaded.hubness.k, 10)
    off = upgrade.fit_upgrade(z_new, z_old, kind="linear", normalize=True, split=split, hubness="off")
    self.assertIsNone(off.map.hubness)
    self.assertIsNone(upgrade.load_map(upgrade.save_map(off.map, path.with_suffix(".off")))[0].hubness)

  @pytest.mark.heavy
  def test_auto_keeps_the_correction_at_200_pairs_where_it_raises_recall(self):
    """200 pairs leave 20 validation pairs, too few to show the correction's gain; the training pairs, each half
    served by the map fitted on the other, show it, and the served recall on the index rises with it."""
    z_new, z_old, index = hub_pairs(0, n=200, extra=5000)
    split = upgrade.split_pairs(200, seed=0)
    fit = upgrade.fit_upgrade(z_new, z_old, kind="linear", normalize=True, split=split)
    self.assertIn("hubness correction (CSLS, k=10) kept", fit.reason)
    self.assertEqual((fit.hubness["criterion"], fit.hubness["rows"]), ("half-fits", len(split.train)))
    self.assertGreater(fit.hubness["rank_score_corrected"], fit.hubness["rank_score_plain"])
    # Recall@10 of the held-out items' old rows among them and the 5,000-row index, in float64 NumPy.
    mapped = self.unit(np.asarray(fit.map(z_new[split.test]), np.float64))
    pool = np.concatenate([z_old[split.test], index])
    scores = mapped @ self.unit(pool).T
    own = np.arange(len(split.test))[:, None]
    plain = np.mean((np.argsort(-scores, axis=1)[:, :10] == own).any(1))
    bias = upgrade.hubness_bias(pool, fit.map.hubness)[None, :]
    corrected = np.mean((np.argsort(-(scores - bias), axis=1)[:, :10] == own).any(1))
    self.assertGreater(corrected, plain + 0.05)

  @pytest.mark.heavy
  def test_auto_leaves_out_a_correction_that_lowers_retrieval(self):
    """A dense cluster inside a sparse cloud, mapped by a near-exact rotation: the correction lowers the dense rows'
    scores, so sparse neighbours overtake their own rows, and the training pairs show it."""
    rng = np.random.default_rng(0)
    z_new = np.concatenate([0.15 * rng.standard_normal((900, 3)), 0.6 * rng.standard_normal((100, 3))]) + [1, 0, 0]
    z_old = z_new @ rotation(rng, 3, 3).T + 0.02 * rng.standard_normal(z_new.shape)
    fit = upgrade.fit_upgrade(z_new, z_old, kind="orthogonal", normalize=True)
    self.assertIn("left out", fit.reason)
    self.assertLess(fit.hubness["rank_score_corrected"], fit.hubness["rank_score_plain"])
    self.assertIsNone(fit.map.hubness)

  @pytest.mark.heavy
  def test_auto_keeps_a_correction_the_pairs_cannot_judge(self):
    rng = np.random.default_rng(4)
    z_new = rng.standard_normal((1000, 8))
    z_old = z_new @ rotation(rng, 8, 8).T  # an exact rotation: every own vector ranks first either way
    fit = upgrade.fit_upgrade(z_new, z_old, kind="orthogonal", normalize=True)
    self.assertIn("kept: it changes no rank of these pairs", fit.reason)
    self.assertEqual(fit.hubness["rank_score_plain"], fit.hubness["rank_score_corrected"])
    self.assertIsNotNone(fit.map.hubness)


class ScoreScaleTest(absltest.TestCase):
  """The score scale (bcjax.upgrade._scale) against its definition in float64 NumPy, and its map-file round trip."""

  def test_the_scale_is_its_definition(self):
    from bcjax.upgrade import _scale

    rng = np.random.default_rng(40)
    groups = []
    for n in (300, 260):  # two maps' images of rows they never saw (and of rows they did: the reference), pooled
      new = rng.standard_normal((n, 6)) * np.array([3.0, 1, 1, 1, 1, 1]) + 4.0  # cosines bunched by a shift
      old = np.tanh(new @ rng.standard_normal((6, 5))) + 0.3 * rng.standard_normal((n, 5))
      groups.append((new @ rng.standard_normal((6, 5)), old, rng.standard_normal((150, 5))))
    k = 10
    hubness = upgrade.make_hubness(groups[0][2], k=k)  # the served map's correction: only its k is used
    scale = _scale.fit_score_scale(groups, hubness=hubness)
    margins, beaten, pairs = {"old": [], "bridged": []}, 0, []
    for mapped, old, reference in groups:  # every row scored (fewer than MAX_ROWS), in float64 NumPy
      b, x, r = self.unit(mapped), self.unit(old), self.unit(reference)
      bias = lambda v, r=r: 0.5 * np.sort(v @ r.T, axis=1)[:, -k:].mean(axis=1)  # the correction fitted on `reference`
      native, bridged = b @ x.T - bias(x)[None, :], b @ b.T - bias(b)[None, :]
      own, others = np.diag(native), ~np.eye(len(b), dtype=bool)
      margins["old"].append(own - np.where(others, native, -np.inf).max(axis=1))
      margins["bridged"].append(own - np.where(others, bridged, -np.inf).max(axis=1))
      beaten += np.sum((native > own[:, None]) & others)
      pairs.append((own[:, None] - bridged)[others])
    m_old, m_bridged = (np.sort(np.concatenate(margins[key])) for key in ("old", "bridged"))
    n = len(m_old)
    closest = slice(int(np.ceil(0.01 * n)), int(np.ceil(0.05 * n)))  # the 5 % nearest a miss, less the lowest 1 %
    tail = np.mean(m_bridged[closest] - m_old[closest])
    pairs = np.sort(np.concatenate(pairs))
    self.assertGreater(beaten, 0)  # this fixture's own old rows are often beaten: both shifts apply
    pairwise = 0.5 * (pairs[beaten - 1] + pairs[beaten])  # `beaten` pairs' mapped rows outscore the own row
    self.assertGreater(abs(tail - pairwise), 1e-3)  # the two shifts differ here: the test sees which is taken
    want = min(tail, pairwise)
    assert_close(scale.bridged_offset, want, "reduction", precision="float32", scale=1.0)  # the bias is float32
    self.assertLess(scale.bridged_offset, 0.0)
    small = [(g[0][:19], g[1][:19], g[2]) for g in groups]  # 38 rows in all: fewer than MIN_ROWS
    self.assertEqual(_scale.fit_score_scale(small, hubness=None), _scale.IDENTITY)
    with self.assertRaisesRegex(ValueError, "same rows"):
      _scale.fit_score_scale([(groups[0][0], groups[0][1][:10], groups[0][2])], hubness=None)

  def unit(self, v):
    return v / np.linalg.norm(v, axis=1, keepdims=True)

  def test_the_map_carries_its_scale_through_its_file(self):
    z_new, z_old, _ = hub_pairs(1, n=400, d=16)
    m = upgrade.fit_upgrade(z_new, z_old, kind="linear", normalize=True, hubness="on").map
    self.assertIsInstance(m.scale, upgrade.ScoreScale)
    path = Path(self.create_tempdir().full_path) / "m.bcmap"
    upgrade.save_map(m, path)
    self.assertEqual(upgrade.load_map(path)[0].scale, m.scale)
    upgrade.save_map(m._replace(scale=None), path.with_suffix(".none"))
    self.assertIsNone(upgrade.load_map(path.with_suffix(".none"))[0].scale)  # a map file of before: no scale


class WrongSpaceTest(absltest.TestCase):
  def test_an_index_of_the_new_models_vectors_is_refused(self):
    rng = np.random.default_rng(41)
    items = rng.standard_normal((1400, 10))
    old = np.tanh(items @ rng.standard_normal((10, 16))) + 0.8 * rng.standard_normal(16)
    new = items @ rng.standard_normal((10, 16)) + 1.2 * rng.standard_normal(16)
    split = upgrade.split_pairs(400, seed=0)
    m = upgrade.fit_upgrade(new[:400], old[:400], kind="linear", normalize=True, split=split, new_model="B").map
    ok = upgrade.evaluate_upgrade(m, new[:400], old[:400], split.test, index=old[400:], min_hit_rate=0.5)
    self.assertIn(ok.verdict, upgrade.VERDICTS)
    with self.assertRaisesRegex(ValueError, "`index` holds B's embeddings, not"):
      upgrade.evaluate_upgrade(m, new[:400], old[:400], split.test, index=new[400:], min_hit_rate=0.5)


class RankScoreTest(absltest.TestCase):
  def test_rank_score_against_brute_force(self):
    rng = np.random.default_rng(30)
    targets = rng.standard_normal((40, 5))
    mapped = targets + 0.8 * rng.standard_normal((40, 5))
    for metric in ("cosine", "dot", "l2"):
      if metric == "cosine":
        q = mapped / np.linalg.norm(mapped, axis=1, keepdims=True)
        x = targets / np.linalg.norm(targets, axis=1, keepdims=True)
        s = q @ x.T
      elif metric == "dot":
        s = mapped @ targets.T
      else:
        s = -((mapped[:, None, :] - targets[None, :, :]) ** 2).sum(-1)
      expected = np.mean([(np.sum(s[i] < s[i, i])) / 39 for i in range(40)])
      assert_close(
        _retrieval.own_vector_rank_score(mapped, targets, metric=metric), expected, "elementwise", err_msg=metric
      )
    self.assertEqual(_retrieval.own_vector_rank_score(targets, targets, metric="cosine"), 1.0)

  def test_shrinking_towards_the_mean_lowers_the_error_but_not_the_rank(self):
    """Why choices are made by rank: predictions pulled towards the old mean have a smaller squared error on a
    narrow cone and rank their own vectors worse."""
    rng = np.random.default_rng(31)
    old = rng.standard_normal((300, 6)) * 0.3 + 3.0  # a narrow cone
    mean = old.mean(0)
    noisy = old + 0.4 * rng.standard_normal(old.shape)
    shrunk = mean + 0.5 * (noisy - mean)
    self.assertLess(np.mean((shrunk - old) ** 2), np.mean((noisy - old) ** 2))
    self.assertEqual(
      _retrieval.own_vector_rank_score(shrunk, old, metric="dot")
      < _retrieval.own_vector_rank_score(noisy, old, metric="dot"),
      True,
    )


class ServeTest(absltest.TestCase):
  def test_one_compiled_path_gives_every_entry_point_the_same_numbers(self):
    """A map's call, apply_map, the report, transform_file and the stores share one compiled program per map and
    dtype: the same numbers, and the parameters placed on the device once."""
    rng = np.random.default_rng(21)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=400, noise=0.2)
    m = upgrade.fit_upgrade(z_new, z_prev, kind="linear", normalize=True, hubness="off").map
    z = z_new[:64].astype(np.float32)
    self.assertIs(_map.compiled_map(m), _map.compiled_map(m))
    via_call = np.asarray(m(z))
    np.testing.assert_array_equal(np.asarray(upgrade.apply_map(m, z)), via_call)
    np.testing.assert_array_equal(np.asarray(_map.compiled_map(m)(z)), via_call)
    tmp = Path(self.create_tempdir().full_path)
    np.save(tmp / "in.npy", z)
    upgrade.transform_file(m, tmp / "in.npy", tmp / "out.npy", chunk_rows=64)
    np.testing.assert_array_equal(np.load(tmp / "out.npy"), via_call)
    report = upgrade.evaluate_upgrade(m, z, z_prev[:64].astype(np.float32), np.arange(64), min_hit_rate=0.5)
    target = z_prev[:64] / np.linalg.norm(z_prev[:64], axis=1, keepdims=True)
    expected = np.linalg.norm(via_call.astype(np.float64) - target, axis=1).mean()
    assert_close(report.metrics["alignment_l2"].value, expected, "reduction", precision="float32")
    # query_function built apart runs the same program on the same shapes.
    assert_close(np.asarray(upgrade.query_function(m)(z)), via_call, "elementwise", scale=1.0)

  @pytest.mark.heavy
  def test_streaming_transform_bounds_memory_and_matches_numpy(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(9)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=400, d_new=64, d_prev=48)
    m = upgrade.fit_upgrade(z_new, z_prev, kind="affine").map
    chunk = 8192
    big = rng.standard_normal((10 * chunk, 64)).astype(np.float32)
    np.save(tmp / "big.npy", big)
    del big
    tracemalloc.start()
    upgrade.transform_file(m, tmp / "big.npy", tmp / "out.npy", chunk_rows=chunk)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    chunk_bytes = chunk * 64 * 4
    # the file is 10 chunks; the transform holds a few chunk-sized buffers at a time
    self.assertLess(peak, 5 * chunk_bytes, f"peak {peak / 2**20:.1f} MiB for {chunk_bytes / 2**20:.1f} MiB chunks")
    out = np.load(tmp / "out.npy")
    w, b = upgrade.affine_form(m.transform, m.params)
    big = np.load(tmp / "big.npy")
    terms = np.abs(big.astype(np.float64)) @ np.abs(w).T + np.abs(b)  # each output's summands, in magnitude
    assert_close(out, (big.astype(np.float64) @ w.T + b).astype(np.float32), scale=terms)
    self.assertEqual(out.dtype, np.float32)

  def test_dtypes_are_the_users_choice(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(10)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=300)
    m = upgrade.fit_upgrade(z_new, z_prev, kind="linear").map
    np.save(tmp / "half.npy", z_new.astype(np.float16))
    np.save(tmp / "bf.npy", z_new.astype(ml_dtypes.bfloat16))
    np.save(tmp / "f64.npy", z_new)
    self.assertEqual(upgrade.transform_file(m, tmp / "half.npy", tmp / "a.npy")[2], "float16")
    self.assertEqual(upgrade.transform_file(m, tmp / "f64.npy", tmp / "b.npy")[2], "float64")
    self.assertEqual(upgrade.transform_file(m, tmp / "half.npy", tmp / "c.npy", dtype="float32")[2], "float32")
    self.assertEqual(upgrade.transform_file(m, tmp / "bf.npy", tmp / "d.npy", dtype="bfloat16")[2], "bfloat16")
    w, b = upgrade.affine_form(m.transform, m.params)
    assert_close(np.load(tmp / "b.npy"), z_new @ w.T + b)
    bf = upgrade.open_embeddings(tmp / "d.npy")
    self.assertEqual(bf.dtype, ml_dtypes.bfloat16)
    reference = z_new.astype(ml_dtypes.bfloat16).astype(np.float64) @ w.T + b
    assert_close(np.asarray(bf, np.float64), reference, "statistical", rtol=2e-2, atol=2e-2 * np.abs(reference).max())

  @pytest.mark.heavy
  def test_a_chain_of_affine_and_mlp_maps_applies_in_order(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(11)
    z = rng.standard_normal((50, 6))
    np.save(tmp / "z.npy", z)
    reg = Registry.create(tmp / "reg", dim=3)
    a1 = {"w": rng.standard_normal((3, 5)), "b": rng.standard_normal(3)}
    reg.append(a1, transform=affine_transform())
    o2 = orthogonal_transform(bias=True).fit(rng.standard_normal((20, 6)), rng.standard_normal((20, 5)))
    o2 = {k: np.asarray(v) for k, v in o2.items()}
    reg.append(o2, transform=orthogonal_transform(bias=True))
    maps = upgrade.registry_maps(reg, to=0)
    upgrade.transform_file(maps, tmp / "z.npy", tmp / "out.npy", chunk_rows=7)
    expected = (z @ o2["a"].T + o2["b"]) @ a1["w"].T + a1["b"]
    assert_close(np.load(tmp / "out.npy"), expected)
    assert_close(reg.transform(z, to=0), expected)
    with self.assertRaisesRegex(ValueError, "with a bias"):
      reg.compose(0)

  @pytest.mark.heavy
  def test_map_file_round_trip_and_registry_normalisation(self):
    tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(12)
    z_new, z_prev, _ = anisotropic_pairs(rng, n=300, noise=0.1)
    m = upgrade.fit_upgrade(z_new, z_prev, kind="orthogonal", normalize=True).map
    upgrade.save_map(m, tmp / "m.bcmap", notes={"old_model": "a"})
    with self.assertRaises(FileExistsError):
      upgrade.save_map(m, tmp / "m.bcmap")
    loaded, notes = upgrade.load_map(tmp / "m.bcmap")
    self.assertEqual(notes, {"old_model": "a"})
    self.assertTrue(loaded.normalize)
    assert_close(loaded(z_new[:9]), m(z_new[:9]))
    reg = Registry.create(tmp / "reg", dim=8)
    reg.append(loaded.params, transform=loaded.transform, normalize=True)
    self.assertTrue(reg.info(1).normalize)
    assert_close(reg.transform(z_new[:9], to=0), np.asarray(m(z_new[:9])), "reduction")
    data = bytearray((tmp / "m.bcmap").read_bytes())
    data[-5] ^= 1
    (tmp / "bad.bcmap").write_bytes(bytes(data))
    with self.assertRaisesRegex(ValueError, "checksum"):
      upgrade.load_map(tmp / "bad.bcmap")
    # the header carries its own schema: a file without one (written before it) loads, a later one is refused
    header, params, _ = decode((tmp / "m.bcmap").read_bytes(), "m.bcmap")
    self.assertEqual(header["map_schema"], _map.MAP_SCHEMA)
    for schema, name in ((None, "unversioned"), (_map.MAP_SCHEMA + 1, "later")):
      written = {k: v for k, v in header.items() if k != "map_schema"}
      written |= {} if schema is None else {"map_schema": schema}
      if schema is None:  # written when the score scale also held the two-stage slope
        written["score_scale"] = {**header["score_scale"], "new_slope": 1.7}
      (tmp / f"{name}.bcmap").write_bytes(encode(written, params))
    unversioned = upgrade.load_map(tmp / "unversioned.bcmap")[0]
    assert_close(unversioned(z_new[:9]), m(z_new[:9]))
    self.assertEqual(unversioned.scale, m.scale)
    with self.assertRaisesRegex(ValueError, f"schema {_map.MAP_SCHEMA + 1}; this bcjax reads schemas 1 to"):
      upgrade.load_map(tmp / "later.bcmap")


class FilesTest(absltest.TestCase):
  def test_rows_read_from_a_file_equal_the_array_in_any_order(self):
    """read_rows reads a file's rows with plain reads (runs of consecutive rows): the same values as indexing, in the
    order asked, for slices, scattered and repeated rows, and bfloat16 files."""
    tmp = Path(self.create_tempdir().full_path)
    x = np.random.default_rng(0).standard_normal((1000, 7)).astype(np.float32)
    np.save(tmp / "a.npy", x)
    np.save(tmp / "b.npy", x.astype(ml_dtypes.bfloat16))
    from bcjax.upgrade import _files

    for name, expected in (("a", x), ("b", x.astype(ml_dtypes.bfloat16).astype(np.float32))):
      mapped = upgrade.open_embeddings(tmp / f"{name}.npy")
      for rows in (slice(None), slice(10, 20), np.array([5, 3, 3, 999, 0, 1, 2]), np.zeros(0, np.int64)):
        np.testing.assert_array_equal(_files.read_rows(mapped, rows), expected[rows])
    with self.assertRaisesRegex(IndexError, "outside"):
      _files.read_rows(upgrade.open_embeddings(tmp / "a.npy"), np.array([1000]))

  def test_bad_files_are_refused_naming_the_argument(self):
    tmp = Path(self.create_tempdir().full_path)
    np.save(tmp / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp / "text.npy").write_text("hello")
    np.save(tmp / "empty.npy", np.zeros((0, 4), np.float32))
    np.save(tmp / "ints.npy", np.ones((3, 4), np.int32))
    np.save(tmp / "vec.npy", np.ones(4))
    cases = {
      "obj.npy": "pickled",
      "text.npy": "not a .npy file",
      "empty.npy": "is empty",
      "ints.npy": "dtype int32",
      "vec.npy": "must be a matrix",
      "missing.npy": "does not exist",
    }
    for name, fragment in cases.items():
      with self.assertRaisesRegex(upgrade.EmbeddingFileError, f"`--old` .*{fragment}"):
        upgrade.open_embeddings(tmp / name, name="--old")

  def test_first_non_finite_row_is_named(self):
    z = np.ones((100, 3), np.float32)
    z[57, 1] = np.inf
    z[80, 0] = np.nan
    with self.assertRaisesRegex(upgrade.EmbeddingFileError, r"`--new` holds NaN or inf: first in row 57"):
      _files.check_finite_rows(z, name="--new", chunk_rows=16)


if __name__ == "__main__":
  absltest.main()


class ThreadsTest(absltest.TestCase):
  """BLAS threads sized to the cores other processes leave idle (issue 67: a fit 16x slower beside busy ones)."""

  def test_idle_threads_from_the_busy_share(self):
    from bcjax import _threads

    # two samples of /proc/stat: 150 of 200 jiffies busy between them on 2 cores is 1.5 cores taken
    with (
      mock.patch.object(_threads, "_busy_jiffies", side_effect=[(1000, 4000), (1150, 4200)]),
      mock.patch.object(_threads.os, "cpu_count", return_value=2),
      mock.patch.object(_threads.time, "sleep"),
    ):
      self.assertEqual(_threads.busy_cores(), 1.5)
    for busy, want in ((0.0, 2), (0.3, 2), (0.7, 1), (1.5, 1), (1.9, 1), (2.0, 1), (3.0, 1)):
      with (
        mock.patch.object(_threads, "busy_cores", return_value=busy),
        mock.patch.object(_threads.os, "cpu_count", return_value=2),
      ):
        self.assertEqual(_threads.idle_threads(), want, busy)
    with (  # no /proc/stat: the load average
      mock.patch.object(_threads, "_busy_jiffies", return_value=None),
      mock.patch.object(_threads.os, "getloadavg", return_value=(0.7, 0.0, 0.0)),
    ):
      self.assertEqual(_threads.busy_cores(), 0.7)

  def test_blas_threads_limits_inside_and_restores(self):
    from threadpoolctl import threadpool_info

    from bcjax._threads import blas_threads

    def blas():
      return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    before = blas()
    if not before:
      self.skipTest("this NumPy reports no BLAS thread pool")
    with blas_threads(1) as used:
      self.assertEqual(used, 1)
      self.assertEqual(set(blas()), {1})
    self.assertEqual(blas(), before)
    for bad in (0, -1, 1.5, True, "2"):
      with (
        self.assertRaisesRegex(ValueError, "fit_upgrade: `threads` must be a positive integer or None"),
        blas_threads(bad, name="fit_upgrade: `threads`"),
      ):
        pass

  def test_fit_and_report_take_threads_and_refuse_bad_ones_before_any_work(self):
    z_new, z_prev, _ = anisotropic_pairs(np.random.default_rng(0), n=400)
    one = upgrade.fit_upgrade(z_new, z_prev, kind="linear", threads=1)
    default = upgrade.fit_upgrade(z_new, z_prev, kind="linear")
    for name in one.map.params:  # the same fit: the thread count changes the summation order at most
      assert_close(one.map.params[name], default.map.params[name], op="reduction", precision="float64", scale=10.0)
    with (
      mock.patch.object(_fit._workflow, "_prepare", side_effect=AssertionError("read the pairs")),
      self.assertRaisesRegex(ValueError, "fit_upgrade: `threads` must be a positive integer or None, got 0"),
    ):
      upgrade.fit_upgrade(z_new, z_prev, kind="linear", threads=0)
    rows = np.arange(300, 400)
    with self.assertRaisesRegex(ValueError, "evaluate_upgrade: `threads` must be a positive integer or None, got -2"):
      upgrade.evaluate_upgrade(one.map, z_new, z_prev, rows, threads=-2)
    report = upgrade.evaluate_upgrade(one.map, z_new, z_prev, rows, threads=1)
    self.assertIn(report.verdict, upgrade.VERDICTS)
