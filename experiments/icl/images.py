"""Image data of the ICL experiment: two-class image sets, MoCo-v2 views and padded image batches.

Views (the reference, image mode): anchor and positive are two independent MoCo-v2 views of each image; negatives
from the other split are one view each. Evaluation embeds a deterministic view (the whole image resized and
normalised) instead of the reference's first random crop, so an evaluation does not depend on augmentation noise.

* ``digits-2``: scikit-learn's bundled 8×8 digits, classes 0 and 1 (360 images) — the embedded offline default;
* ``mnist-2``: MNIST digits 0 and 1. The paper used the training split (≈12.7k images); the development copy has the
  test split only (2,115 images), so mnist-2 reads the test split unless ``train-images-idx3-ubyte`` is present or
  ``--download`` fetches it.
Grey images are repeated to three channels, as the reference does for MNIST.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bcjax.data import AugmentConfig, augment_images, load_mnist, mnist_path, resize_images
from bcjax.models import ResNet18, SmallCNN
from experiments.icl.data import Negatives, Views

IMAGE_DATASETS = ("digits-2", "mnist-2")


class ImageBatch(NamedTuple):
  images: jax.Array  # [B, S, S, 3]
  mask: jax.Array  # [B] real rows


class ImageEncoder(nnx.Module):
  """A backbone applied to a padded ImageBatch; BatchNorm statistics over the real rows only."""

  def __init__(self, backbone: nnx.Module):
    self.backbone = backbone

  def __call__(self, batch: ImageBatch, key: jax.Array | None = None) -> jax.Array:
    return self.backbone(batch.images, key, mask=batch.mask)


def load_images(name: str, data_dir: str | None = None, *, download: bool = False) -> tuple[np.ndarray, np.ndarray]:
  """(images [N, H, W, 3] float32 in [0, 1], labels [N]) of a two-class image set."""
  if name == "digits-2":
    from sklearn.datasets import load_digits

    digits = load_digits()
    keep = digits.target < 2
    grey, labels = digits.images[keep] / 16.0, digits.target[keep]
  elif name == "mnist-2":
    split = "train"  # the paper's split; the test split when only that one is at hand and nothing is downloaded
    if not download:
      try:
        mnist_path(data_dir, "train")
      except FileNotFoundError:
        split = "test"
    grey, labels = load_mnist(data_dir, split, digits=(0, 1), download=download)
    grey = grey / 255.0
  else:
    raise ValueError(f"unknown image dataset {name!r}; choose from {IMAGE_DATASETS}")
  images = np.repeat(np.asarray(grey, np.float32)[..., None], 3, axis=-1)
  return images, np.asarray(labels, np.int64)


@functools.cache
def _augment_fn(cfg: AugmentConfig):
  return jax.jit(lambda key, images: augment_images(key, images, cfg))


@functools.cache
def _resize_fn(cfg: AugmentConfig):
  return jax.jit(lambda images: resize_images(images, cfg))


def _pad(x: np.ndarray, rows: int) -> np.ndarray:
  return np.concatenate([x, np.zeros((rows - len(x),) + x.shape[1:], x.dtype)]) if len(x) < rows else x


def _blocks(batch, devices: int):
  """Every array of ``batch`` reshaped [rows, ...] -> [devices, rows / devices, ...] (unchanged for one device)."""
  if devices == 1:
    return batch
  return jax.tree.map(lambda x: np.asarray(x).reshape((devices, -1) + np.shape(x)[1:]), batch)


class ImageData:
  """An image dataset as the ICL methods see it (the interface of GraphData)."""

  kind = "images"

  def __init__(self, images: np.ndarray, labels: np.ndarray, image_size: int | None = None):
    self.images, self.labels, self.num = images, np.asarray(labels), len(images)
    self.notes = ()
    self.augment = AugmentConfig(size=image_size or images.shape[1])

  def _batch(self, index: np.ndarray, rows: int, key: jax.Array | None, timer=None) -> ImageBatch:
    padded = _pad(self.images[index], rows)
    if key is None:
      x = _resize_fn(self.augment)(padded)
    else:  # a timer books the augmentation's compilation as compile time, not training time
      fn = _augment_fn(self.augment)
      x = timer.dispatch(fn, key, padded) if timer is not None else fn(key, padded)
    return ImageBatch(x, jnp.arange(rows) < len(index))

  def views(
    self, index, batch_size: int, rng: np.random.Generator, extra=None, extra_n: int = 0, timer=None, devices: int = 1
  ):
    """Views of images ``index`` (and negatives ``extra`` in ``extra_n`` slots); with ``devices`` = N > 1 every
    array is cut into N blocks of consecutive rows on a new leading axis (the negatives' slots rounded up to a
    multiple of N, the extra slots masked), which a mesh splits over its devices."""
    k_a, k_p, k_o = jax.random.split(jax.random.key(int(rng.integers(2**31))), 3)
    anchor, positive = self._batch(index, batch_size, k_a, timer), self._batch(index, batch_size, k_p, timer)
    out = _blocks(Views(anchor, positive, np.arange(batch_size) < len(index)), devices)
    if extra is None:
      return out, None
    slots = max(extra_n, 1)
    others = self._batch(extra if len(extra) else index[:1], slots, k_o, timer)
    rows = slots + -slots % devices  # padded after the augmentation, which draws per row of its input
    if rows > slots:
      others = ImageBatch(*(_pad(np.asarray(x), rows) for x in others))
    return out, _blocks(Negatives(others, np.arange(rows) < len(extra)), devices)

  def raw_batches(self, index: np.ndarray, size: int = 128):
    for start in range(0, len(index), size):
      chunk = index[start : start + size]
      yield self._batch(chunk, size, None), len(chunk)

  def new_model(self, cfg, key, axis_name: str | None = None):
    """A fresh image encoder; ``axis_name``: the mesh axis its batches are split over (global BatchNorm
    statistics)."""
    rngs = nnx.Rngs(params=key)
    if cfg.image_encoder == "resnet18":
      return ImageEncoder(ResNet18(3, cfg.image_features, axis_name=axis_name, rngs=rngs))
    return ImageEncoder(SmallCNN(3, cfg.image_features, cfg.image_width, axis_name=axis_name, rngs=rngs))
