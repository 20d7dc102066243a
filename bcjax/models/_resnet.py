"""Image encoders of the ICL experiments in flax NNX.

ResNet-18 (He et al. 2016, the reference's ImageNet variant) and a small CNN for CPU presets. Both map [B, H, W, 3]
images to embeddings [B, D]; BatchNorm statistics can be restricted to the real rows of a padded batch with ``mask`` [B]
and, with ``axis_name``, gathered over the devices that a batch's rows are split over
(:class:`~bcjax.models.MaskedBatchNorm`).

ResNet-18 (reference spec §6.4): 7×7/2 conv (64, no bias) → BN → ReLU → 3×3/2 max-pool → four stages of two
BasicBlocks (64/128/256/512, stride 2 from stage 2, 1×1 conv + BN shortcut when the shape changes) → global average
pool → linear 512 → ``out_features`` (the reference: 1000, acting as the projection). The reference's AvgPool(7)
equals the global average at 224×224 inputs; the global mean keeps smaller inputs valid. Convolutions are initialised
N(0, 2 / (k² · C_out)) (He, fan-out), BN γ = 1, β = 0, momentum 0.1 in PyTorch's convention (0.9 here), ε = 1e-5.
BN's running variance is flax's biased batch variance where PyTorch stores the unbiased one, n/(n−1) larger with n
= batch × height × width positions; only eval mode uses it, and an eval-mode activation changes by about 1/(2n)
(below 3.2e-4 for batches of 32 at the 7×7 last stage). Documented rather than matched.
"""

import jax
import jax.numpy as jnp
from flax import nnx

from bcjax.models._norm import MaskedBatchNorm

_HE_FAN_OUT = nnx.initializers.variance_scaling(2.0, "fan_out", "normal")
_TORCH_LINEAR = nnx.initializers.variance_scaling(1 / 3, "fan_in", "uniform")


def _bn(features: int, rngs: nnx.Rngs, axis_name: str | None) -> MaskedBatchNorm:
  return MaskedBatchNorm(features, axis_name=axis_name, momentum=0.9, epsilon=1e-5, rngs=rngs)


def _norm(bn: MaskedBatchNorm, x: jax.Array, mask: jax.Array | None) -> jax.Array:
  return bn(x, mask=None if mask is None else mask[:, None, None, None])


def _in_param_dtype(x: jax.Array, conv: nnx.Conv) -> jax.Array:
  """``x`` in the dtype of the parameters.

  Float64 images (under ``jax_enable_x64``) would otherwise promote the activations and write float64 batch statistics
  into float32 BatchNorm state.
  """
  return jnp.asarray(x, conv.kernel.dtype)


def _conv(c_in: int, c_out: int, k: int, stride: int, rngs: nnx.Rngs) -> nnx.Conv:
  return nnx.Conv(
    c_in, c_out, (k, k), strides=(stride, stride), padding=k // 2, use_bias=False, kernel_init=_HE_FAN_OUT, rngs=rngs
  )


class BasicBlock(nnx.Module):
  """conv3×3 → BN → ReLU → conv3×3 → BN, plus the (projected) input, → ReLU."""

  def __init__(self, c_in: int, c_out: int, stride: int, *, axis_name: str | None = None, rngs: nnx.Rngs):
    self.conv1, self.bn1 = _conv(c_in, c_out, 3, stride, rngs), _bn(c_out, rngs, axis_name)
    self.conv2, self.bn2 = _conv(c_out, c_out, 3, 1, rngs), _bn(c_out, rngs, axis_name)
    self.projected = stride != 1 or c_in != c_out
    if self.projected:
      self.shortcut_conv, self.shortcut_bn = _conv(c_in, c_out, 1, stride, rngs), _bn(c_out, rngs, axis_name)

  def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    x = _in_param_dtype(x, self.conv1)
    y = jax.nn.relu(_norm(self.bn1, self.conv1(x), mask))
    y = _norm(self.bn2, self.conv2(y), mask)
    if self.projected:
      x = _norm(self.shortcut_bn, self.shortcut_conv(x), mask)
    return jax.nn.relu(x + y)


class ResNet18(nnx.Module):
  """ResNet-18 encoder: images [B, H, W, C_in] → [B, out_features].

  ``axis_name``: the mesh axis a batch's rows are split over (BatchNorm's statistics are then those of the whole batch).
  """

  def __init__(self, in_channels: int = 3, out_features: int = 1000, *, axis_name: str | None = None, rngs: nnx.Rngs):
    self.stem, self.stem_bn = _conv(in_channels, 64, 7, 2, rngs), _bn(64, rngs, axis_name)
    blocks, c = [], 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
      blocks += [
        BasicBlock(c, width, stride, axis_name=axis_name, rngs=rngs),
        BasicBlock(width, width, 1, axis_name=axis_name, rngs=rngs),
      ]
      c = width
    self.blocks = nnx.List(blocks)
    self.fc = nnx.Linear(512, out_features, kernel_init=_TORCH_LINEAR, rngs=rngs)
    self.out_features = out_features

  def __call__(self, x: jax.Array, key: jax.Array | None = None, *, mask: jax.Array | None = None) -> jax.Array:
    del key  # no stochastic layers; the argument keeps the encoder interface of the graph models
    _check_images(x, self.stem.in_features)
    x = _in_param_dtype(x, self.stem)
    x = jax.nn.relu(_norm(self.stem_bn, self.stem(x), mask))
    x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
    for block in self.blocks:
      x = block(x, mask)
    return self.fc(jnp.mean(x, axis=(1, 2)))


class SmallCNN(nnx.Module):
  """A CPU-sized convolutional encoder.

  A CPU-sized encoder: three conv3×3 → BN → ReLU stages (``width``, 2·width stride 2, 4·width stride 2), global average
  pool, linear → ``out_features``; ``axis_name`` as in :class:`ResNet18`.
  """

  def __init__(
    self, in_channels: int = 3, out_features: int = 64, width: int = 32, *, axis_name: str | None = None, rngs: nnx.Rngs
  ):
    widths = (width, 2 * width, 4 * width)
    self.convs = nnx.List(
      [_conv(c_in, c_out, 3, s, rngs) for c_in, c_out, s in zip((in_channels,) + widths[:-1], widths, (1, 2, 2))]
    )
    self.bns = nnx.List([_bn(c, rngs, axis_name) for c in widths])
    self.fc = nnx.Linear(widths[-1], out_features, kernel_init=_TORCH_LINEAR, rngs=rngs)
    self.out_features = out_features

  def __call__(self, x: jax.Array, key: jax.Array | None = None, *, mask: jax.Array | None = None) -> jax.Array:
    del key
    _check_images(x, self.convs[0].in_features)
    x = _in_param_dtype(x, self.convs[0])
    for conv, bn in zip(self.convs, self.bns):
      x = jax.nn.relu(_norm(bn, conv(x), mask))
    return self.fc(jnp.mean(x, axis=(1, 2)))


def _check_images(x: jax.Array, channels: int) -> None:
  if x.ndim != 4 or x.shape[-1] != channels:
    raise ValueError(f"image encoder: `x` must be [B, H, W, {channels}], got {x.shape}")
