r"""BatchNorm whose statistics are those of the whole batch when its rows are split over devices.

flax's ``BatchNorm(axis_name=...)`` averages the devices' masked means (``pmean``), which is the global mean only
when every device holds the same number of real rows. Graph batches split over a mesh do not (a device holds the
nodes of its graphs). Here each device contributes its masked sums and counts and the statistics are

.. math::
  n = \sum_d \sum_i m_{di}, \quad \mu = \frac{1}{n} \sum_d \sum_i m_{di} x_{di}, \quad
  \sigma^2 = \max\Big(\frac{1}{n} \sum_d \sum_i m_{di} x_{di}^2 - \mu^2, 0\Big),

exactly the statistics of the rows gathered on one device (flax's fast variance, biased, as the running average
uses). Without ``axis_name`` the module is flax's ``nnx.BatchNorm`` unchanged (the same variables and numbers).
"""

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax import _reduce


class MaskedBatchNorm(nnx.BatchNorm):
  """``nnx.BatchNorm`` with masked, cross-device training statistics.

  ``nnx.BatchNorm`` over every axis but the features' whose training statistics are psum'd over ``axis_name`` as sums
  and counts of the real (masked) entries; ``__call__(x [N, ..., F], mask=None)`` with ``mask`` [N] (one flag per row)
  or broadcastable to ``x`` as flax takes it (e.g. [N, 1, 1, 1] for images [N, H, W, F]).
  """

  def __init__(self, num_features: int, *, axis_name: str | None = None, **kwargs):
    super().__init__(num_features, **kwargs)
    self.global_axis = axis_name  # not flax's axis_name: its pmean of means is what this class replaces

  def __call__(self, x, use_running_average: bool | None = None, *, mask: jax.Array | None = None):
    running = self.use_running_average if use_running_average is None else use_running_average
    if self.global_axis is None or running:
      return super().__call__(x, use_running_average, mask=mask)
    if mask is None:
      real = jnp.ones(x.shape[:-1], bool)
    else:  # [N] flags rows; otherwise flax's form, broadcastable to x (its feature axis 1)
      mask = jnp.asarray(mask).astype(bool)
      if mask.ndim == 1:
        mask = jnp.reshape(mask, mask.shape + (1,) * (x.ndim - 1))
      real = jnp.broadcast_to(mask, x.shape)[..., 0]
    kept = jnp.where(real[..., None], x, 0.0)  # padded rows may hold anything, NaN included
    axes = tuple(range(x.ndim - 1))
    sums = jnp.stack([jnp.sum(kept, axis=axes), jnp.sum(kept * kept, axis=axes)])  # [2, F]
    count = jnp.sum(real.astype(x.dtype))
    sums, count = _reduce.psum_each((sums, count), self.global_axis)
    count = jnp.maximum(count, 1.0)
    mean = sums[0] / count
    var = jnp.maximum(sums[1] / count - mean * mean, 0.0)
    for stat, value in ((self.mean, mean), (self.var, var)):  # the running averages keep their dtype
      stat[...] = jax.lax.stop_gradient(self.momentum * stat[...] + (1 - self.momentum) * value).astype(stat.dtype)
    y = (x - mean) * jax.lax.rsqrt(var + self.epsilon)
    if self.scale is not None:
      y = y * self.scale[...]
    if self.bias is not None:
      y = y + self.bias[...]
    return y
