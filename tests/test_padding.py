"""Padded rows are inert: for every public function that takes ``where=``, padded rows holding 1e30, inf or NaN give
the same finite result eagerly and under ``jax.jit``, equal to the result on the valid rows alone, and (where the
function is differentiable) a finite gradient that is zero on the padded rows."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized

import bcjax
from bcjax import gramian as gram
from bcjax._reduce import row_mean
from tests._tolerance import assert_close

POISONS = {"huge": 1e30, "inf": np.inf, "nan": np.nan}
N_VALID, N_PAD = 5, 3


def _rows(seed, d, dtype):
  return np.random.default_rng(seed).normal(size=(N_VALID, d)).astype(dtype)


def _pad(x, poison):
  """x [5, ...] followed by 3 rows filled with the poison."""
  return np.concatenate([x, np.full((N_PAD,) + x.shape[1:], poison, x.dtype)])


MASK = np.arange(N_VALID + N_PAD) < N_VALID


def _cases(dtype):
  """name -> (function of the padded arrays, padded arrays, valid-only call or None, differentiable)."""
  z4, z3, z3b = _rows(0, 4, dtype), _rows(1, 3, dtype), _rows(2, 3, dtype)
  w = np.random.default_rng(3).normal(size=(3, 4)).astype(dtype)
  hist = [np.random.default_rng(4).normal(size=(2, 3)).astype(dtype)]
  q = _rows(5, 2, dtype)
  k4 = np.random.default_rng(6).normal(size=(4, 4)).astype(dtype)
  scores = np.random.default_rng(7).normal(size=N_VALID).astype(dtype)
  labels = np.array([1, 0, 1, 1, 0])
  cand = np.random.default_rng(8).normal(size=(6, 3)).astype(dtype)
  m, mv = MASK, None  # padded call's mask; the valid-only call needs none
  so = gram.sogram(0.5)
  bg = gram.batch_gramian()
  state = so.init(np.zeros((1, 3), dtype))
  cases = {
    "row_mean": (lambda a: row_mean(a[:, 0], m), [z3], lambda a: row_mean(a[:, 0], mv), True),
    "single_step_loss": (
      lambda a, b: bcjax.single_step_loss(a, b, w, where=m),
      [z4, z3],
      lambda a, b: bcjax.single_step_loss(a, b, w),
      True,
    ),
    "multi_step_loss": (
      lambda a, b: bcjax.multi_step_loss(a, b, w, hist, where=m),
      [z4, z3],
      lambda a, b: bcjax.multi_step_loss(a, b, w, hist),
      True,
    ),
    "alignment_error": (
      lambda a, b: bcjax.alignment_error(a, b, where=m),
      [z3, z3b],
      lambda a, b: bcjax.alignment_error(a, b),
      True,
    ),
    "info_nce": (lambda a, b: bcjax.info_nce(a, b, where=m), [z3, z3b], lambda a, b: bcjax.info_nce(a, b), True),
    "info_nce_negatives": (
      lambda a, b, n: bcjax.info_nce(a, b, negatives=n, negatives_where=m, where=m),
      [z3, z3b, cand[:5]],
      lambda a, b, n: bcjax.info_nce(a, b, negatives=n),
      True,
    ),
    "log_change_ratio": (
      lambda a, b, n: bcjax.log_change_ratio(a, b, n, new_negatives_where=m, where=m)[:N_VALID],
      [z3, z3b, cand[:5]],
      lambda a, b, n: bcjax.log_change_ratio(a, b, n),
      True,
    ),
    "nce_ii": (
      lambda a, b, n: bcjax.nce_ii(a, b, n, 0.3, new_negatives_where=m, where=m),
      [z3, z3b, cand[:5]],
      lambda a, b, n: bcjax.nce_ii(a, b, n, 0.3),
      True,
    ),
    "mixed_info_nce": (
      lambda a, b, n: bcjax.mixed_info_nce(a, b, n, 2, old_negatives_where=m, where=m),
      [z3, z3b, cand[:5]],
      None,
      True,
    ),
    "recall_at_k": (
      lambda s: bcjax.recall_at_k(s[None, :, 0], MASK[None] & (np.arange(8) % 2 == 0)[None], 2, where=m[None]),
      [scores[:, None]],
      lambda s: bcjax.recall_at_k(s[None, :, 0], (np.arange(5) % 2 == 0)[None], 2),
      False,
    ),
    "average_precision_at_k": (
      lambda s: bcjax.average_precision_at_k(
        s[None, :, 0], MASK[None] & (np.arange(8) % 2 == 0)[None], 3, where=m[None]
      ),
      [scores[:, None]],
      lambda s: bcjax.average_precision_at_k(s[None, :, 0], (np.arange(5) % 2 == 0)[None], 3),
      False,
    ),
    "roc_auc": (
      lambda s: bcjax.roc_auc(s[:, 0], np.concatenate([labels, [1, 0, 1]]), where=m),
      [scores[:, None]],
      lambda s: bcjax.roc_auc(s[:, 0], labels),
      False,
    ),
    "roc_auc_interval": (
      lambda s: jnp.stack(bcjax.roc_auc_interval(s[:, 0], np.concatenate([labels, [1, 0, 1]]), where=m)),
      [scores[:, None]],
      lambda s: jnp.stack(bcjax.roc_auc_interval(s[:, 0], labels)),
      False,
    ),
    # classes from the poisoned scores' signs (NaN > 0 is False): the padded entries' flips must not count
    "negative_flip_rate": (
      lambda s: bcjax.negative_flip_rate(np.concatenate([labels, [1, 0, 1]]), s[:, 0] > 0, s[:, 0] > 0.5, where=m),
      [scores[:, None]],
      lambda s: bcjax.negative_flip_rate(labels, s[:, 0] > 0, s[:, 0] > 0.5),
      False,
    ),
    "correlation": (lambda a: bcjax.correlation(a, where=m), [z3], lambda a: bcjax.correlation(a), True),
    "conceptor": (lambda a: bcjax.conceptor(a, 1.5, where=m), [z3], lambda a: bcjax.conceptor(a, 1.5), True),
    "gramian": (lambda a: gram.gramian(a, where=m), [z3], lambda a: gram.gramian(a), True),
    "cross_gramian": (
      lambda a, b: gram.cross_gramian(a, b, where=m),
      [z3, q],
      lambda a, b: gram.cross_gramian(a, b),
      True,
    ),
    "penalty_surrogate": (
      lambda a, b: gram.penalty_surrogate(a, b, k4[:3, :3], k4[1:, 1:], where=m),
      [z3, z3b],
      lambda a, b: gram.penalty_surrogate(a, b, k4[:3, :3], k4[1:, 1:]),
      True,
    ),
    "penalty_surrogate_prior": (
      lambda a, b, c: gram.penalty_surrogate(
        a, b, k4[:3, :3], k4[1:, 1:], q=c, r=c, hu_hat=k4[:3, :2], hv_hat=k4[1:, 2:], where=m
      ),
      [z3, z3b, q],
      lambda a, b, c: gram.penalty_surrogate(
        a, b, k4[:3, :3], k4[1:, 1:], q=c, r=c, hu_hat=k4[:3, :2], hv_hat=k4[1:, 2:]
      ),
      True,
    ),
    "sogram.update": (
      lambda a: so.update(state, a, where=m)[0].gramian,
      [z3],
      lambda a: so.update(state, a)[0].gramian,
      True,
    ),
    "batch_gramian.update": (
      lambda a: bg.update(bg.init(a), a, where=m)[0].gramian,
      [z3],
      lambda a: bg.update(bg.init(a), a)[0].gramian,
      True,
    ),
    "sampled_softmax_loss": (
      lambda a: gram.sampled_softmax_loss(a, cand, np.array([0, 1, 2, 3, 4, -1, 99, 7]), where=m),
      [z3],
      lambda a: gram.sampled_softmax_loss(a, cand, np.array([0, 1, 2, 3, 4])),
      True,
    ),
  }
  return cases


COVERED = {name.split("_negatives")[0].split("_prior")[0] for name in _cases(np.float64)}


class PoisonedPaddingTest(parameterized.TestCase):
  # 1e30 overflows when squared in float32 only; inf and NaN poison either precision.
  @parameterized.product(
    case=sorted(_cases(np.float64)), poison_dtype=(("huge", "float32"), ("inf", "float64"), ("nan", "float32"))
  )
  @pytest.mark.heavy
  def test_eager_equals_jit_equals_valid_rows(self, case, poison_dtype):
    poison, dtype = poison_dtype
    dtype = np.dtype(dtype)
    fn, arrays, valid_only, differentiable = _cases(dtype)[case]
    padded = [_pad(a, POISONS[poison]) for a in arrays]
    eager = np.asarray(fn(*padded))
    jitted = np.asarray(jax.jit(fn)(*padded))
    self.assertTrue(np.all(np.isfinite(eager)), f"eager gave {eager}")
    assert_close(jitted, eager, scale=max(1.0, float(np.max(np.abs(eager)))), err_msg="jit vs eager")
    if valid_only is not None:
      assert_close(
        eager,
        np.asarray(valid_only(*arrays)),
        scale=max(1.0, float(np.max(np.abs(eager)))),
        err_msg="padded vs valid rows only",
      )
    if differentiable:
      grads = jax.grad(lambda *xs: jnp.sum(fn(*xs)), argnums=tuple(range(len(padded))))(*padded)
      for g in grads:
        g = np.asarray(g)
        self.assertTrue(np.all(np.isfinite(g)), f"gradient {g}")
        np.testing.assert_array_equal(g[N_VALID:], 0.0)

  def test_every_public_function_with_a_row_mask_is_covered(self):
    namespaces = [bcjax, bcjax.gramian, bcjax.metrics, bcjax.contrastive, bcjax.alignment, bcjax.conceptors]
    with_where = set()
    for ns in namespaces:
      for name in getattr(ns, "__all__", ()):
        obj = getattr(ns, name, None)
        if callable(obj) and not inspect.isclass(obj):
          try:
            params = inspect.signature(obj).parameters
          except (TypeError, ValueError):
            continue
          if "where" in params:
            with_where.add(name)
    with_where |= {"sogram.update", "batch_gramian.update"}
    self.assertEqual(sorted(with_where - COVERED), [])

  @pytest.mark.heavy
  def test_an_all_padding_batch_leaves_the_sogram_estimate_unchanged(self):
    est = gram.sogram(0.3)
    x = np.random.default_rng(0).normal(size=(4, 3))
    _, state = est.update(est.init(x), x)
    for poison in POISONS.values():
      estimate, after = est.update(state, np.full((4, 3), poison), where=np.zeros(4, bool))
      np.testing.assert_array_equal(estimate.gramian, state.gramian)
      np.testing.assert_array_equal(after.gramian, state.gramian)
      self.assertEqual(int(after.count), int(state.count))
      jitted, _ = jax.jit(est.update)(state, np.full((4, 3), poison), where=np.zeros(4, bool))
      np.testing.assert_array_equal(jitted.gramian, state.gramian)

  def test_nan_in_a_valid_row_is_still_an_error(self):
    z = np.ones((3, 2))
    z[1, 0] = np.nan
    with self.assertRaisesRegex(ValueError, r"`z_new` contains 1 NaN or inf value\(s\) in rows where `where` is True"):
      bcjax.single_step_loss(z, np.ones((3, 2)), np.eye(2), where=np.array([True, True, False]))


if __name__ == "__main__":
  absltest.main()
