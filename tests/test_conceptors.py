"""Tests of the conceptor algebra: NumPy float64 references, Jaeger's laws as hypothesis properties, singular inputs,
limits, gradients, batching and bad inputs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from hypothesis import given
from hypothesis import strategies as st
from jax.test_util import check_grads

from bcjax.conceptors import (
  aperture_adaptation,
  conceptor,
  conceptor_from_correlation,
  conjunction,
  correlation,
  disjunction,
  negation,
  quota,
)
from tests._bad_inputs import bad_input_test_case
from tests._tolerance import assert_close


def assert_conceptors_close(a, b):
  """Conceptors (and projectors) have eigenvalues in [0, 1], so their entries are at most 1 in magnitude: that is the
  scale their rounding errors are relative to, whatever the size of a particular entry."""
  assert_close(a, b, "linalg", scale=1.0)


def random_conceptor(seed: int, n: int, kinds: str = "mixed") -> np.ndarray:
  """U diag(s) U^T with s in (0.05, 0.95); with kinds="mixed" some eigenvalues are exactly 0 or 1."""
  rng = np.random.default_rng(seed)
  u = np.linalg.qr(rng.normal(size=(n, n)))[0]
  s = rng.uniform(0.05, 0.95, size=n)
  if kinds == "mixed":
    choice = rng.integers(0, 4, size=n)  # 0: exact zero, 1: exact one, else regular
    s = np.where(choice == 0, 0.0, np.where(choice == 1, 1.0, s))
  return (u * s) @ u.T


def psd_le(a: np.ndarray, b: np.ndarray, tol: float = 1e-8) -> bool:
  """Loewner order a <= b."""
  return np.linalg.eigvalsh((b - a + (b - a).T) / 2).min() >= -tol


conceptors = st.builds(random_conceptor, st.integers(0, 2**31 - 1), st.integers(2, 6))
regular_pairs = st.integers(0, 2**31 - 1).flatmap(
  lambda seed: st.integers(2, 6).map(
    lambda n: (random_conceptor(seed, n, "regular"), random_conceptor(seed + 1, n, "regular"))
  )
)
mixed_pairs = st.tuples(st.integers(0, 2**31 - 1), st.integers(2, 6)).map(
  lambda t: (random_conceptor(t[0], t[1]), random_conceptor(t[0] + 7, t[1]))
)


class FromDataTest(parameterized.TestCase):
  @parameterized.product(n_samples=[3, 10, 40], alpha=[0.5, 1.0, 3.0])
  def test_eigenvalues_are_sigma_over_sigma_plus_alpha_minus_two(self, n_samples, alpha):
    x = np.random.default_rng(n_samples).normal(size=(n_samples, 6))
    r = x.T @ x / n_samples
    sigma = np.clip(np.linalg.eigvalsh(r), 0, None)
    c = np.asarray(conceptor(x, alpha))
    assert_conceptors_close(np.linalg.eigvalsh(c), np.sort(sigma / (sigma + alpha**-2)))
    assert_conceptors_close(c, r @ np.linalg.pinv(r + alpha**-2 * np.eye(6)))
    np.testing.assert_array_equal(c, c.T)  # exactly symmetric
    self.assertTrue(np.all(np.linalg.eigvalsh(c) < 1) and np.all(np.linalg.eigvalsh(c) > -1e-12))

  def test_correlation_is_uncentred_and_masks_rows(self):
    x = np.random.default_rng(0).normal(size=(7, 3)) + 5.0
    assert_close(correlation(x), x.T @ x / 7)
    where = np.array([1, 1, 1, 0, 0, 1, 1], bool)
    assert_close(correlation(x, where=where), x[where].T @ x[where] / 5)

  @pytest.mark.heavy
  def test_axis_name_sums_correlations_across_shards(self):
    x = np.random.default_rng(1).normal(size=(8, 4))
    sharded = jax.vmap(lambda xs: conceptor(xs, 1.5, axis_name="data"), axis_name="data")(x.reshape(2, 4, 4))
    assert_conceptors_close(sharded[0], conceptor(x, 1.5))
    assert_conceptors_close(sharded[1], conceptor(x, 1.5))

  @pytest.mark.heavy
  def test_minimises_the_regularised_reconstruction_objective(self):
    x = np.random.default_rng(2).normal(size=(30, 4))
    c = np.asarray(conceptor(x, 1.2))
    objective = lambda m: np.mean(np.sum((x - x @ m.T) ** 2, 1)) + 1.2**-2 * np.sum(m**2)
    grad = jax.grad(lambda m: jnp.mean(jnp.sum((x - x @ m.T) ** 2, 1)) + 1.2**-2 * jnp.sum(m**2))(c)
    assert_close(grad, 0.0, scale=np.abs(x).max() ** 2)  # the terms are O(|x|²)
    self.assertLess(objective(c), objective(c + 1e-3 * np.eye(4)))

  @pytest.mark.heavy
  def test_rank_deficient_data_gives_finite_results_and_gradients(self):
    x = np.random.default_rng(3).normal(size=(2, 6))  # rank 2 in 6 dimensions: four zero eigenvalues
    c = np.asarray(conceptor(x))
    self.assertTrue(np.all(np.isfinite(c)))
    self.assertEqual(int(np.sum(np.linalg.eigvalsh(c) > 1e-10)), 2)
    grad = jax.grad(lambda x: jnp.sum(conceptor(x) ** 2))(x)
    self.assertTrue(np.all(np.isfinite(grad)))
    grad_r = jax.grad(lambda r: jnp.sum(conceptor_from_correlation(r) @ jnp.arange(6.0)))(x.T @ x / 2)
    self.assertTrue(np.all(np.isfinite(grad_r)))


class LawsTest(parameterized.TestCase):
  @given(mixed_pairs)
  @pytest.mark.heavy
  def test_de_morgan_both_ways(self, pair):
    c, b = pair
    assert_conceptors_close(negation(disjunction(c, b)), conjunction(negation(c), negation(b)))
    assert_conceptors_close(negation(conjunction(c, b)), disjunction(negation(c), negation(b)))

  @given(mixed_pairs)
  @pytest.mark.heavy
  def test_commutativity(self, pair):
    c, b = pair
    assert_conceptors_close(conjunction(c, b), conjunction(b, c))
    assert_conceptors_close(disjunction(c, b), disjunction(b, c))

  @given(st.integers(0, 2**31 - 1), st.integers(2, 5))
  @pytest.mark.heavy
  def test_associativity(self, seed, n):
    c, b, d = (random_conceptor(seed + i, n) for i in range(3))
    assert_conceptors_close(conjunction(conjunction(c, b), d), conjunction(c, conjunction(b, d)))
    assert_conceptors_close(disjunction(disjunction(c, b), d), disjunction(c, disjunction(b, d)))

  @given(conceptors)
  def test_double_negation(self, c):
    assert_conceptors_close(negation(negation(c)), c)

  @given(conceptors)
  @pytest.mark.heavy
  def test_self_combination_changes_aperture(self, c):
    assert_conceptors_close(disjunction(c, c), aperture_adaptation(c, math.sqrt(2)))
    assert_conceptors_close(conjunction(c, c), aperture_adaptation(c, 1 / math.sqrt(2)))

  @given(mixed_pairs)
  def test_loewner_order(self, pair):
    c, b = pair
    and_, or_ = np.asarray(conjunction(c, b)), np.asarray(disjunction(c, b))
    self.assertTrue(psd_le(and_, c))
    self.assertTrue(psd_le(c, or_))

  @given(conceptors, st.floats(0.1, 10.0))
  def test_negation_inverts_aperture(self, c, gamma):
    assert_conceptors_close(aperture_adaptation(negation(c), gamma), negation(aperture_adaptation(c, 1 / gamma)))

  @given(regular_pairs, st.floats(0.2, 5.0))
  @pytest.mark.heavy
  def test_aperture_distributes_over_and_and_or(self, pair, gamma):
    c, b = pair
    phi = lambda m: aperture_adaptation(m, gamma)
    assert_conceptors_close(phi(disjunction(c, b)), disjunction(phi(c), phi(b)))
    assert_conceptors_close(phi(conjunction(c, b)), conjunction(phi(c), phi(b)))

  @given(mixed_pairs)
  @pytest.mark.heavy
  def test_results_are_conceptors(self, pair):
    for m in (conjunction(*pair), disjunction(*pair), aperture_adaptation(pair[0], 0.7)):
      m = np.asarray(m)
      assert_conceptors_close(m, m.T)
      eig = np.linalg.eigvalsh(m)
      self.assertGreaterEqual(eig.min(), -1e-8)
      self.assertLessEqual(eig.max(), 1 + 1e-8)


class DataIdentitiesTest(parameterized.TestCase):
  @given(st.integers(0, 2**31 - 1), st.integers(2, 6), st.floats(0.3, 3.0))
  @pytest.mark.heavy
  def test_or_adds_and_and_harmonically_averages_correlations(self, seed, n, alpha):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n + 3, n)), rng.normal(size=(n + 5, n))
    r, q = x.T @ x / (n + 3), y.T @ y / (n + 5)
    c, b = conceptor_from_correlation(r, alpha), conceptor_from_correlation(q, alpha)
    assert_conceptors_close(disjunction(c, b), conceptor_from_correlation(r + q, alpha))
    harmonic = np.linalg.inv(np.linalg.inv(r) + np.linalg.inv(q))
    assert_conceptors_close(conjunction(c, b), conceptor_from_correlation(harmonic, alpha))

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(10)
    x, y = rng.normal(size=(12, 5)), rng.normal(size=(9, 5)) * 2
    self.r, self.q = x.T @ x / 12, y.T @ y / 9

  @parameterized.parameters(0.5, 1.0, 2.0)
  def test_or_of_data_conceptors_adds_correlations(self, alpha):
    c, b = conceptor_from_correlation(self.r, alpha), conceptor_from_correlation(self.q, alpha)
    assert_conceptors_close(disjunction(c, b), conceptor_from_correlation(self.r + self.q, alpha))

  @parameterized.parameters(0.5, 1.0, 2.0)
  def test_and_of_data_conceptors_is_harmonic_mean(self, alpha):
    c, b = conceptor_from_correlation(self.r, alpha), conceptor_from_correlation(self.q, alpha)
    harmonic = np.linalg.inv(np.linalg.inv(self.r) + np.linalg.inv(self.q))
    assert_conceptors_close(conjunction(c, b), conceptor_from_correlation(harmonic, alpha))
    c_np, b_np = np.asarray(c), np.asarray(b)
    invertible = np.linalg.inv(np.linalg.inv(c_np) + np.linalg.inv(b_np) - np.eye(5))
    assert_conceptors_close(conjunction(c, b), invertible)

  @parameterized.parameters(0.5, 2.0, 7.0)
  def test_aperture_adaptation_rescales_alpha(self, gamma):
    assert_conceptors_close(
      aperture_adaptation(conceptor_from_correlation(self.r, 1.3), gamma),
      conceptor_from_correlation(self.r, 1.3 * gamma),
    )
    c = conceptor_from_correlation(self.r, 1.0)
    assert_conceptors_close(
      aperture_adaptation(aperture_adaptation(c, 2.0), gamma), aperture_adaptation(c, 2.0 * gamma)
    )

  def test_negation_is_conceptor_of_inverse_correlation(self):
    assert_conceptors_close(
      negation(conceptor_from_correlation(self.r, 2.0)), conceptor_from_correlation(np.linalg.inv(self.r), 0.5)
    )

  def test_quota_is_mean_eigenvalue(self):
    c = np.asarray(conceptor_from_correlation(self.r))
    assert_close(quota(c), np.linalg.eigvalsh(c).mean())


class SingularTest(parameterized.TestCase):
  def test_special_cases(self):
    c = random_conceptor(0, 5)
    zero, eye = np.zeros((5, 5)), np.eye(5)
    assert_conceptors_close(disjunction(c, zero), c)
    assert_conceptors_close(conjunction(c, eye), c)
    assert_conceptors_close(conjunction(c, zero), zero)

  def test_projectors_give_subspace_lattice(self):
    rng = np.random.default_rng(4)
    basis = np.linalg.qr(rng.normal(size=(6, 6)))[0]
    p_cols, q_cols = basis[:, :4], basis[:, 2:5]  # span{0..3} and span{2..4} share span{2, 3}
    proj = lambda m: m @ m.T
    p, q = proj(p_cols), proj(q_cols)
    assert_conceptors_close(conjunction(p, q), proj(basis[:, 2:4]))
    assert_conceptors_close(disjunction(p, q), proj(basis[:, :5]))
    assert_conceptors_close(disjunction(p, negation(p)), np.eye(6))
    assert_conceptors_close(conjunction(p, negation(p)), np.zeros((6, 6)))
    disjoint = proj(basis[:, 4:6])
    assert_conceptors_close(conjunction(proj(basis[:, :2]), disjoint), np.zeros((6, 6)))

  @parameterized.parameters(1e-6, 1e-7)
  def test_general_and_is_the_limit_of_the_invertible_formula(self, eps):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6))
    r = x.T @ x / 3  # rank 3
    y = rng.normal(size=(20, 6))
    b = conceptor_from_correlation(y.T @ y / 20)
    exact = conjunction(conceptor_from_correlation(r), b)
    limit = conjunction(conceptor_from_correlation(r + eps * np.eye(6)), b)
    assert_close(exact, limit, "statistical", rtol=0, atol=20 * eps)  # O(ε) from the limit

  def test_aperture_limits(self):
    u = np.linalg.qr(np.random.default_rng(6).normal(size=(4, 4)))[0]
    c = (u * np.array([0.0, 0.3, 1.0, 0.9])) @ u.T
    assert_conceptors_close(aperture_adaptation(c, 0.0), (u * np.array([0, 0, 1.0, 0])) @ u.T)
    assert_conceptors_close(aperture_adaptation(c, np.inf), (u * np.array([0, 1.0, 1.0, 1.0])) @ u.T)
    # the limits are approached by large and small gamma
    assert_close(aperture_adaptation(c, 1e5), aperture_adaptation(c, np.inf), "statistical", rtol=0, atol=1e-8)
    assert_close(aperture_adaptation(c, 1e-5), aperture_adaptation(c, 0.0), "statistical", rtol=0, atol=1e-8)


class TransformTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    self.c, self.b = random_conceptor(1, 4, "regular"), random_conceptor(2, 4, "regular")

  @pytest.mark.heavy
  def test_gradients_match_finite_differences(self):
    sym = lambda m: (m + m.T) / 2
    x = np.random.default_rng(7).normal(size=(10, 4))
    check_grads(lambda r, a: conceptor_from_correlation(sym(r), a), (x.T @ x / 10, 1.3), order=1, modes=["fwd", "rev"])
    check_grads(lambda c, b: conjunction(sym(c), sym(b)), (self.c, self.b), order=1, modes=["fwd", "rev"])
    check_grads(lambda c, b: disjunction(sym(c), sym(b)), (self.c, self.b), order=1, modes=["fwd", "rev"])
    check_grads(lambda c, g: aperture_adaptation(sym(c), g), (self.c, 1.7), order=1, modes=["fwd", "rev"])
    check_grads(lambda x: conceptor(x, 0.8), (x,), order=1, modes=["fwd", "rev"])

  def test_jit_equals_no_jit(self):
    for f in (conjunction, disjunction):
      assert_conceptors_close(jax.jit(f)(self.c, self.b), f(self.c, self.b))
    assert_conceptors_close(jax.jit(aperture_adaptation)(self.c, 2.0), aperture_adaptation(self.c, 2.0))
    assert_conceptors_close(jax.jit(aperture_adaptation)(self.c, jnp.inf), aperture_adaptation(self.c, np.inf))

  @pytest.mark.heavy
  def test_batched_inputs_and_vmap_equal_loop(self):
    cs = np.stack([random_conceptor(i, 4) for i in range(3)])
    bs = np.stack([random_conceptor(10 + i, 4) for i in range(3)])
    native = conjunction(cs, bs)
    mapped = jax.vmap(disjunction)(cs, bs)
    gammas = np.array([0.0, 1.5, np.inf])
    phis = aperture_adaptation(cs, gammas)
    for i in range(3):
      assert_conceptors_close(native[i], conjunction(cs[i], bs[i]))
      assert_conceptors_close(mapped[i], disjunction(cs[i], bs[i]))
      assert_conceptors_close(phis[i], aperture_adaptation(cs[i], gammas[i]))
    assert_close(quota(cs), [np.trace(c) / 4 for c in cs])


BAD = [
  ("alpha_zero", lambda: conceptor(np.ones((3, 2)), 0.0), ValueError, ["`alpha`", "0.0"]),
  ("alpha_negative", lambda: conceptor_from_correlation(np.eye(2), -1.0), ValueError, ["`alpha`"]),
  ("alpha_nan", lambda: conceptor(np.ones((3, 2)), float("nan")), ValueError, ["`alpha`", "nan"]),
  ("alpha_inf", lambda: conceptor(np.ones((3, 2)), float("inf")), ValueError, ["`alpha`"]),
  ("non_square", lambda: negation(np.ones((2, 3))), ValueError, ["`c`", "square", "(2, 3)"]),
  (
    "non_symmetric",
    lambda: conjunction(np.eye(2), np.array([[0.5, 0.4], [0.0, 0.5]])),
    ValueError,
    ["`b`", "symmetric"],
  ),
  ("size_mismatch", lambda: disjunction(np.eye(2), np.eye(3)), ValueError, ["`c`", "`b`", "(2, 2)", "(3, 3)"]),
  ("gamma_negative", lambda: aperture_adaptation(np.eye(2) / 2, -0.5), ValueError, ["`gamma`", "[0, inf]"]),
  ("gamma_nan", lambda: aperture_adaptation(np.eye(2) / 2, float("nan")), ValueError, ["`gamma`"]),
  ("nan_matrix", lambda: quota(np.full((2, 2), np.nan)), ValueError, ["`c`", "NaN"]),
  ("no_samples", lambda: conceptor(np.ones((0, 3))), ValueError, ["`x`", "no (unmasked) rows"]),
  ("vector_samples", lambda: correlation(np.ones(3)), ValueError, ["`x`", "[..., n, N]"]),
]


BadInputTest = bad_input_test_case(BAD)


if __name__ == "__main__":
  absltest.main()
