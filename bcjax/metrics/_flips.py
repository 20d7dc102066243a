r"""Negative flips between two models' predictions (Yan et al., CVPR 2021).

Negative flips between two models' predictions (Yan et al., "Positive-Congruent Training", CVPR 2021): the share of
examples the old model got right and the new one gets wrong,

.. math::
  \mathrm{NFR} = \frac{1}{N} \sum_{i=1}^N \mathbb 1[\hat y^{\rm old}_i = y_i] \, \mathbb 1[\hat y^{\rm new}_i \ne y_i].

In BC-Aligner's setting the "old model" is a consumer model on version-0 embeddings and the "new" one the same
consumer on the embeddings published for a later version: a negative flip is a user-visible regression the upgrade
caused, which an aggregate metric such as ROC-AUC can hide (it may even rise while examples flip).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bcjax import _checks
from bcjax._device import device_array
from bcjax._reduce import row_mean


def negative_flip_rate(
  labels: ArrayLike,
  old_predictions: ArrayLike,
  new_predictions: ArrayLike,
  *,
  where: ArrayLike | None = None,
  axis_name: str | None = None,
) -> jax.Array:
  """The negative-flip rate of ``new_predictions`` against ``old_predictions`` (:mod:`bcjax.metrics._flips`).

  Args:
    labels: true classes, [n] (integers or bools).
    old_predictions: the old model's predicted classes, [n].
    new_predictions: the new model's predicted classes, [n].
    where: optional boolean mask of valid examples, [n]; padded entries may hold anything.
    axis_name: mapped axis over which the examples are sharded; the rate is then global.

  Returns:
    A scalar in [0, 1] (0 with no valid example).

  Raises:
    ValueError: naming the argument, for predictions or a mask whose shape is not the labels'.

  Examples:
    >>> from bcjax.metrics import negative_flip_rate
    >>> float(negative_flip_rate([1, 0, 1, 0], [1, 0, 0, 1], [0, 0, 1, 1]))  # example 0 flips right -> wrong
    0.25
  """
  fn = "negative_flip_rate"
  arrays = {}
  for name, x in (("labels", labels), ("old_predictions", old_predictions), ("new_predictions", new_predictions)):
    x = x if isinstance(x, (np.ndarray, jax.Array)) else np.asarray(x)
    if not (jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_) or x.ndim != 1:
      raise ValueError(
        f"{fn}: `{name}` must be a 1-D array of classes (integers or bools), got dtype {x.dtype} "
        f"and shape {tuple(x.shape)}"
      )
    arrays[name] = x
  n = arrays["labels"].shape[0]
  for name, x in arrays.items():
    if x.shape != (n,):
      raise ValueError(f"{fn}: `{name}` has shape {tuple(x.shape)} but `labels` has shape {(n,)}")
  where = _checks.check_row_mask(fn, where, n)
  y, old, new = arrays["labels"], arrays["old_predictions"], arrays["new_predictions"]
  if axis_name is None and all(_checks.is_concrete(v) for v in (y, old, new, where)):
    # an eager call: counted in NumPy (jnp comparisons would compile a small program per evaluation length)
    flipped_np = (np.asarray(old) == np.asarray(y)) & (np.asarray(new) != np.asarray(y))
    valid = np.ones(n, bool) if where is None else np.asarray(where)
    return device_array(np.float64(np.sum(flipped_np & valid)) / max(int(np.sum(valid)), 1), jnp.result_type(float))
  flipped = ((old == y) & (new != y)).astype(jnp.result_type(float))
  return row_mean(flipped, where, axis_name)
