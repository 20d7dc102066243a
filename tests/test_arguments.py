"""Arguments whose wrong value would give a silent wrong answer are refused with an error naming them, and NumPy
scalars or 0-d arrays are accepted wherever a Python number is."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest

import bcjax
from bcjax import gramian as gram
from bcjax.data import growth_split
from tests._bad_inputs import bad_input_test_case
from tests._tolerance import assert_close

x3 = np.random.default_rng(0).normal(size=(4, 3))
cand = np.random.default_rng(1).normal(size=(5, 3))
so = gram.sogram(0.5, prior_dim=2)
bg = gram.batch_gramian(sampling="linear", counts=np.arange(1, 6), prior_dim=2)
bg0 = gram.batch_gramian(sampling="linear", counts=np.arange(1, 6))
not_conceptor = np.diag([0.5, 1.5])
negative = np.diag([0.5, -0.2])

CASES = [
  (
    "sampled_softmax_label_too_large",
    lambda: gram.sampled_softmax_loss(x3, cand, np.array([0, 1, 2, 5])),
    ValueError,
    ["`labels`", "[0, 5)", "[0, 5]"],
  ),
  (
    "sampled_softmax_label_negative",
    lambda: gram.sampled_softmax_loss(x3, cand, np.array([0, -1, 2, 3])),
    ValueError,
    ["`labels`", "[-1, 3]"],
  ),
  (
    "sampled_softmax_float_labels",
    lambda: gram.sampled_softmax_loss(x3, cand, np.array([0.0, 1, 2, 3])),
    TypeError,
    ["`labels`", "float"],
  ),
  (
    "batch_gramian_prior_wrong_width",
    lambda: bg.update(bg.init(x3), x3, indices=np.arange(4), prior=np.ones((4, 3))),
    ValueError,
    ["`prior`", "(4, 3)", "(4, 2)"],
  ),
  (
    "batch_gramian_prior_missing",
    lambda: bg.update(bg.init(x3), x3, indices=np.arange(4)),
    ValueError,
    ["`prior`", "prior_dim=2"],
  ),
  (
    "batch_gramian_prior_unexpected",
    lambda: bg0.update(bg0.init(x3), x3, indices=np.arange(4), prior=np.ones((4, 2))),
    ValueError,
    ["`prior`", "prior_dim=0"],
  ),
  (
    "batch_gramian_index_out_of_range",
    lambda: bg0.update(bg0.init(x3), x3, indices=np.array([0, 1, 2, 5])),
    ValueError,
    ["`indices`", "[0, 5)", "[0, 5]"],
  ),
  (
    "batch_gramian_float_indices",
    lambda: bg0.update(bg0.init(x3), x3, indices=np.array([0.0, 1.5, 2, 3])),
    TypeError,
    ["`indices`", "float"],
  ),
  (
    "batch_gramian_negative_weights",
    lambda: bg0.update(bg0.init(x3), x3, indices=np.arange(4), weights=-np.ones(4)),
    ValueError,
    ["`weights`"],
  ),
  (
    "sogram_prior_wrong_width",
    lambda: so.update(so.init(x3), x3, prior=np.ones((4, 1))),
    ValueError,
    ["`prior`", "(4, 1)", "(4, 2)"],
  ),
  ("sogram_alpha_nan", lambda: gram.sogram(float("nan")), ValueError, ["`alpha`"]),
  ("sogram_alpha_bool", lambda: gram.sogram(True), ValueError, ["`alpha`"]),
  ("sogram_alpha_string", lambda: gram.sogram("0.5"), ValueError, ["`alpha`"]),
  ("sagram_float_n", lambda: gram.sagram(10.0), ValueError, ["`n`"]),
  (
    "negation_of_a_non_conceptor",
    lambda: bcjax.negation(not_conceptor),
    ValueError,
    ["`c`", "not a conceptor", "[0.5, 1.5]"],
  ),
  (
    "conjunction_with_negative_eigenvalue",
    lambda: bcjax.conjunction(np.eye(2) / 2, negative),
    ValueError,
    ["`b`", "not a conceptor", "-0.2"],
  ),
  (
    "disjunction_of_a_non_conceptor",
    lambda: bcjax.disjunction(not_conceptor, np.eye(2) / 2),
    ValueError,
    ["`c`", "not a conceptor"],
  ),
  (
    "aperture_of_a_non_conceptor",
    lambda: bcjax.aperture_adaptation(not_conceptor, 2.0),
    ValueError,
    ["`c`", "not a conceptor"],
  ),
  ("quota_of_a_non_conceptor", lambda: bcjax.quota(negative), ValueError, ["`c`", "not a conceptor"]),
  (
    "log_similarity_zero_temperature",
    lambda: bcjax.log_similarity(x3, x3, temperature=0.0),
    ValueError,
    ["`temperature`", "(0, inf)"],
  ),
  (
    "log_similarity_negative_temperature",
    lambda: bcjax.log_similarity(x3, x3, temperature=-0.1),
    ValueError,
    ["`temperature`"],
  ),
  (
    "log_similarity_nan_temperature",
    lambda: bcjax.log_similarity(x3, x3, temperature=float("nan")),
    ValueError,
    ["`temperature`"],
  ),
  (
    "log_similarity_dimension_mismatch",
    lambda: bcjax.log_similarity(x3, np.ones((2, 4))),
    ValueError,
    ["`a`", "`b`", "(4, 3)", "(2, 4)"],
  ),
  ("info_nce_inf_temperature", lambda: bcjax.info_nce(x3, x3, temperature=float("inf")), ValueError, ["`temperature`"]),
  ("growth_split_float_num", lambda: growth_split(10.5, 0.3, np.random.default_rng(0)), ValueError, ["`num`"]),
  ("inner_step_count_alpha_one", lambda: bcjax.inner_step_count(1.0), ValueError, ["`alpha`", "(0, 1)"]),
  (
    "roc_auc_nonbinary_labels",
    lambda: bcjax.roc_auc(np.arange(3.0), np.array([0, 2, 1])),
    ValueError,
    ["`labels`", "binary"],
  ),
]

BadArgumentTest = bad_input_test_case(CASES)


class NumpyScalarTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_numpy_and_zero_d_scalars_work_like_python_numbers(self):
    for alpha in (np.float32(0.5), np.float64(0.5), np.array(0.5), jnp.asarray(0.5), 1):
      est = gram.sogram(alpha)
      _, state = est.update(est.init(x3), x3)
      assert_close(state.gramian, float(alpha) * gram.gramian(x3))
    est = gram.sagram(np.int64(4), prior_dim=np.int32(0))
    self.assertEqual(est.init(x3).cache.shape, (4, 3))
    assert_close(
      bcjax.log_similarity(x3, x3, temperature=np.float32(0.5)), bcjax.log_similarity(x3, x3, temperature=0.5)
    )
    assert_close(bcjax.info_nce(x3, x3, temperature=np.float64(0.2)), bcjax.info_nce(x3, x3, temperature=0.2))
    self.assertEqual(bcjax.inner_step_count(np.float32(0.25)), 3)
    old, new = growth_split(np.int64(10), np.float32(0.3), np.random.default_rng(0))
    self.assertEqual((len(old), len(new)), (7, 3))
    c = bcjax.conceptor(x3, np.float32(2.0))
    assert_close(bcjax.aperture_adaptation(c, np.float64(2.0)), bcjax.conceptor(x3, 4.0), "linalg", scale=1.0)

  def test_temperature_is_not_checked_when_traced(self):
    # Inside jit a traced temperature cannot be inspected; the function still runs.
    out = jax.jit(lambda t: bcjax.log_similarity(x3, x3, temperature=t))(0.5)
    assert_close(out, bcjax.log_similarity(x3, x3, temperature=0.5))


if __name__ == "__main__":
  absltest.main()
