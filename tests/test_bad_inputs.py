"""Bad input gets a clear error: each case asserts the exception type and that the message names the offending
argument (and, where useful, the shapes or values)."""

import jax
import numpy as np
from absl.testing import absltest

from bcjax.alignment import (
  alignment_error,
  apply_backward,
  apply_chain,
  compose,
  compositions,
  fit_posthoc,
  least_squares_backward,
  multi_step_loss,
  notrans,
  single_step_loss,
)
from tests._bad_inputs import bad_input_test_case

z5, z4, z3 = np.ones((6, 5)), np.ones((6, 4)), np.ones((6, 3))
w45, w34 = np.ones((4, 5)), np.ones((3, 4))
nan = np.full((6, 4), np.nan)
inf = np.ones((6, 5))
inf[2, 1] = np.inf

CASES = [
  (
    "compose_mismatched_inner_dims",
    lambda: compose([np.ones((2, 3)), np.ones((4, 5))]),
    ValueError,
    ["`weights[0]`", "`weights[1]`", "(2, 3)", "(4, 5)"],
  ),
  ("compose_empty_without_dim", lambda: compose([]), ValueError, ["`weights`", "`dim`"]),
  ("compose_nonpositive_dim", lambda: compose([], dim=0), ValueError, ["`dim`", "0"]),
  ("compose_dim_disagrees_with_chain", lambda: compose([w34], dim=7), ValueError, ["`dim`", "7"]),
  ("compose_rank1_weight", lambda: compose([w34, np.ones(4)]), ValueError, ["`weights[1]`", "rank 2", "(4,)"]),
  ("compose_single_array_not_list", lambda: compose(w34), TypeError, ["`weights`", "(3, 4)"]),
  ("compose_integer_weight", lambda: compose([np.ones((2, 2), int)]), TypeError, ["`weights[0]`", "int"]),
  ("compose_nan_weight", lambda: compose([np.full((2, 2), np.nan)]), ValueError, ["`weights[0]`", "NaN"]),
  ("compositions_mismatch", lambda: compositions([w34, w34]), ValueError, ["`weights[0]`", "`weights[1]`"]),
  ("apply_backward_rank1_z", lambda: apply_backward(np.ones(5), w45), ValueError, ["`z`", "(5,)"]),
  ("apply_backward_dim_mismatch", lambda: apply_backward(z4, w45), ValueError, ["`z`", "`w`", "(6, 4)", "(4, 5)"]),
  ("apply_chain_last_weight_mismatch", lambda: apply_chain(z4, [w34, w45]), ValueError, ["`z`", "`weights[1]`"]),
  ("notrans_too_many_dims", lambda: notrans(z3, 4), ValueError, ["`d_prev`", "4", "(6, 3)"]),
  ("notrans_zero_dims", lambda: notrans(z3, 0), ValueError, ["`d_prev`", "0"]),
  (
    "single_row_count_mismatch",
    lambda: single_step_loss(z5, np.ones((5, 4)), w45),
    ValueError,
    ["`z_new`", "`z_prev`", "(6, 5)", "(5, 4)"],
  ),
  ("single_wrong_weight_shape", lambda: single_step_loss(z5, z4, w45.T), ValueError, ["`w`", "(5, 4)", "(4, 5)"]),
  ("single_nan_target", lambda: single_step_loss(z5, nan, w45), ValueError, ["`z_prev`", "NaN"]),
  ("single_inf_embedding", lambda: single_step_loss(inf, z4, w45), ValueError, ["`z_new`", "1 NaN or inf"]),
  ("single_none_embedding", lambda: single_step_loss(None, z4, w45), TypeError, ["`z_new`", "None"]),
  (
    "single_mask_wrong_shape",
    lambda: single_step_loss(z5, z4, w45, where=np.ones(5, bool)),
    ValueError,
    ["`where`", "(5,)", "(6,)"],
  ),
  ("single_mask_not_boolean", lambda: single_step_loss(z5, z4, w45, where=np.ones(6)), TypeError, ["`where`", "float"]),
  ("single_rank3_embedding", lambda: single_step_loss(np.ones((2, 6, 5)), z4, w45), ValueError, ["`z_new`", "rank 2"]),
  (
    "multi_history_does_not_end_at_prev_dim",
    lambda: multi_step_loss(z5, z4, w45, [np.ones((3, 3))]),
    ValueError,
    ["`history[0]`", "`z_prev`", "(3, 3)"],
  ),
  (
    "multi_history_chain_broken",
    lambda: multi_step_loss(z5, z4, w45, [np.ones((2, 2)), w34]),
    ValueError,
    ["`history[0]`", "`history[1]`"],
  ),
  ("multi_history_not_a_list", lambda: multi_step_loss(z5, z4, w45, w34), TypeError, ["`history`"]),
  ("alignment_error_shape_mismatch", lambda: alignment_error(z4, z3), ValueError, ["`z_approx`", "`z_true`"]),
  ("least_squares_negative_ridge", lambda: least_squares_backward(z5, z4, ridge=-1.0), ValueError, ["`ridge`"]),
  ("least_squares_nan_ridge", lambda: least_squares_backward(z5, z4, ridge=float("nan")), ValueError, ["`ridge`"]),
  (
    "fit_unknown_loss",
    lambda: fit_posthoc(z5, z4, key=jax.random.key(0), loss="triple"),
    ValueError,
    ["`loss`", "triple"],
  ),
  ("fit_zero_steps", lambda: fit_posthoc(z5, z4, key=jax.random.key(0), steps=0), ValueError, ["`steps`"]),
  (
    "fit_empty_chain_data",
    lambda: fit_posthoc(np.ones((0, 5)), np.ones((0, 4)), key=jax.random.key(0)),
    ValueError,
    ["`z_new`", "no rows"],
  ),
  (
    "fit_history_mismatch",
    lambda: fit_posthoc(z5, z4, [np.ones((2, 3))], key=jax.random.key(0)),
    ValueError,
    ["`history[0]`"],
  ),
]


BadInputTest = bad_input_test_case(CASES)


class CaseCountTest(absltest.TestCase):
  def test_there_are_at_least_fifteen_cases(self):
    self.assertGreaterEqual(len(CASES), 15)


if __name__ == "__main__":
  absltest.main()
