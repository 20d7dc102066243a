"""The image side of ICL: the MNIST IDX reader on fixture files (gzipped and raw, malformed headers and payloads
naming the file), MoCo-v2 augmentations against float64 NumPy / colorsys / SciPy references and their invariants,
the ResNet-18 and small-CNN encoders (torchvision's parameter count, masked BatchNorm leaving padded rows inert), and
the experiment's image data."""

import colorsys
import gzip
import struct
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest
from flax import nnx
from scipy import ndimage

from bcjax.data import (
  AugmentConfig,
  augment_images,
  color_jitter,
  gaussian_blur,
  grayscale,
  hsv_to_rgb,
  load_mnist,
  mnist_path,
  random_resized_crop,
  read_idx,
  resample,
  resize_images,
  rgb_to_hsv,
)
from bcjax.data._image_augment import adjust_brightness, adjust_contrast, adjust_saturation
from bcjax.models import BasicBlock, ResNet18, SmallCNN
from experiments.icl.images import ImageData, load_images
from tests._tolerance import assert_close, row_scale


def idx_bytes(array: np.ndarray) -> bytes:
  header = bytes([0, 0, 0x08, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
  return header + array.astype(np.uint8).tobytes()


def write_mnist(folder: Path, n: int = 12, gz: bool = True) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)
  labels = np.arange(n) % 3
  folder.mkdir(parents=True, exist_ok=True)
  for name, arr in (("t10k-images-idx3-ubyte", images), ("t10k-labels-idx1-ubyte", labels)):
    data = idx_bytes(arr)
    if gz:
      (folder / f"{name}.gz").write_bytes(gzip.compress(data))
    else:
      (folder / name).write_bytes(data)
  return images, labels


class MnistTest(absltest.TestCase):
  def test_reads_gzipped_and_raw_files_and_filters_digits(self):
    for gz in (True, False):
      folder = Path(self.create_tempdir().full_path) / "mnist"
      images, labels = write_mnist(folder, gz=gz)
      x, y = load_mnist(folder, "test")
      np.testing.assert_array_equal(x, images)
      np.testing.assert_array_equal(y, labels)
      x2, y2 = load_mnist(folder, "test", digits=(0, 1))
      np.testing.assert_array_equal(x2, images[labels < 2])
      self.assertEqual(set(y2.tolist()), {0, 1})

  def test_malformed_files_name_the_file(self):
    tmp = Path(self.create_tempdir().full_path)
    good = idx_bytes(np.zeros((2, 3, 3)))
    cases = {
      "magic": b"\x01\x00" + good[2:],
      "type": good[:2] + b"\x0d" + good[3:],
      "truncated": good[:-1],
      "header": good[:6],
      "gzip": b"\x1f\x8bnot gzip",
    }
    for name, data in cases.items():
      path = tmp / (f"{name}.gz" if name == "gzip" else name)
      path.write_bytes(data)
      with self.assertRaisesRegex(ValueError, str(path)):
        read_idx(path)

  def test_mismatched_counts_and_missing_files(self):
    folder = Path(self.create_tempdir().full_path)
    write_mnist(folder, n=5)
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(4))))
    with self.assertRaisesRegex(ValueError, "do not match"):
      load_mnist(folder)
    with self.assertRaisesRegex(FileNotFoundError, "t10k-images-idx3-ubyte.gz"):
      mnist_path(Path(self.create_tempdir().full_path) / "empty", "test")
    with self.assertRaisesRegex(ValueError, "split"):
      mnist_path(folder, "validation")


class ColourTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.pixels = np.random.default_rng(0).uniform(size=(200, 3))
    self.pixels[:5] = [[0.3, 0.3, 0.3], [0, 0, 0], [1, 1, 1], [1, 0, 0], [0, 1, 1]]  # greys and pure hues

  @pytest.mark.heavy
  def test_hsv_matches_colorsys_and_round_trips(self):
    expected = np.array([colorsys.rgb_to_hsv(*p) for p in self.pixels])
    hsv = np.asarray(rgb_to_hsv(jnp.asarray(self.pixels)))
    assert_close(hsv, expected)
    back = np.array([colorsys.hsv_to_rgb(*p) for p in expected])
    assert_close(np.asarray(hsv_to_rgb(jnp.asarray(expected))), back)

  def test_adjustments_match_numpy(self):
    img = self.pixels.reshape(10, 20, 3)
    gray = img @ np.array([0.299, 0.587, 0.114])
    assert_close(adjust_brightness(jnp.asarray(img), 1.3), np.clip(img * 1.3, 0, 1))
    assert_close(adjust_contrast(jnp.asarray(img), 0.7), np.clip(0.7 * img + 0.3 * gray.mean(), 0, 1))
    assert_close(adjust_saturation(jnp.asarray(img), 0.5), np.clip(0.5 * img + 0.5 * gray[..., None], 0, 1))
    g = np.asarray(grayscale(jnp.asarray(img)))
    assert_close(g, np.repeat(gray[..., None], 3, -1))

  def test_zero_strength_jitter_is_the_identity(self):
    img = jnp.asarray(self.pixels.reshape(10, 20, 3))
    out = color_jitter(jax.random.key(0), img, 0.0, 0.0, 0.0, 0.0)
    assert_close(out, img)


class GeometryTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_full_crop_is_the_image_and_bilinear_halving_averages_blocks(self):
    img = jnp.asarray(np.random.default_rng(1).uniform(size=(6, 6, 3)))
    crop = random_resized_crop(jax.random.key(0), img, 6, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    assert_close(crop, img)
    half = np.asarray(resample(img, 0.0, 0.0, 6.0, 6.0, 3))
    blocks = np.asarray(img).reshape(3, 2, 3, 2, 3).mean(axis=(1, 3))
    assert_close(half, blocks)

  @pytest.mark.heavy
  def test_blur_matches_scipy(self):
    img = np.random.default_rng(2).uniform(size=(12, 12, 3))
    ours = np.asarray(gaussian_blur(jnp.asarray(img), 1.0, 3))
    ref = np.stack([ndimage.gaussian_filter(img[..., c], 1.0, mode="nearest", truncate=3.0) for c in range(3)], -1)
    assert_close(ours, ref)

  @pytest.mark.heavy
  def test_views_are_keyed_normalised_and_jit_invariant(self):
    images = jnp.asarray(np.random.default_rng(3).uniform(size=(4, 10, 10, 3)))
    cfg = AugmentConfig(size=8)
    a = augment_images(jax.random.key(0), images, cfg)
    self.assertEqual(a.shape, (4, 8, 8, 3))
    self.assertTrue(np.all(np.isfinite(a)))
    np.testing.assert_array_equal(a, augment_images(jax.random.key(0), images, cfg))
    self.assertGreater(float(jnp.max(jnp.abs(a - augment_images(jax.random.key(1), images, cfg)))), 0.1)
    jitted = jax.jit(augment_images, static_argnums=2)(jax.random.key(0), images, cfg)
    assert_close(jitted, a)
    grey = augment_images(jax.random.key(0), images, cfg._replace(grayscale_p=1.0))
    raw = np.asarray(grey) * np.asarray(cfg.std) + np.asarray(cfg.mean)
    assert_close(raw[..., 0], raw[..., 1])
    flat = AugmentConfig(size=10, scale=(1, 1), ratio=(1, 1), jitter_p=0, grayscale_p=0, blur_p=0, flip_p=0)
    assert_close(augment_images(jax.random.key(0), images, flat), resize_images(images, flat))
    with self.assertRaisesRegex(ValueError, r"\[B, H, W, 3\]"):
      augment_images(jax.random.key(0), images[..., :1], cfg)


class EncoderTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_resnet18_has_torchvisions_parameter_count(self):
    # Traced, not run: shapes are all this needs, and eager ResNet-18 compiles every op of its forward pass.
    model = nnx.eval_shape(lambda: ResNet18(rngs=nnx.Rngs(0)))
    count = sum(p.size for p in jax.tree.leaves(nnx.state(model, nnx.Param)))
    self.assertEqual(count, 11_689_512)  # torchvision.models.resnet18()
    out = jax.eval_shape(lambda x: ResNet18(rngs=nnx.Rngs(0))(x), jax.ShapeDtypeStruct((2, 32, 32, 3), jnp.float32))
    self.assertEqual(out.shape, (2, 1000))

  @pytest.mark.heavy
  def test_padded_rows_are_inert_under_masked_batch_norm(self):
    x = jax.random.normal(jax.random.key(0), (3, 12, 12, 3))
    junk = 100.0 * jax.random.normal(jax.random.key(1), (2, 12, 12, 3))
    mask = jnp.arange(5) < 3
    for model in (SmallCNN(width=8, rngs=nnx.Rngs(0)), BasicBlock(3, 8, 2, rngs=nnx.Rngs(0))):
      model.train()
      call = jax.jit(lambda m, v, k: m(v, mask=k) if isinstance(m, SmallCNN) else m(v, k))
      alone = call(model, x, None)  # batch statistics of the three real rows
      padded = call(model, jnp.concatenate([x, junk]), mask)[:3]
      # a feature near zero carries the rounding of the channels it was summed from: its pixel's channel norm
      assert_close(padded, alone, "network", scale=row_scale(alone))
    with self.assertRaisesRegex(ValueError, r"\[B, H, W, 3\]"):
      SmallCNN(rngs=nnx.Rngs(0))(jnp.ones((2, 8, 8)))


class ImageDataTest(absltest.TestCase):
  @pytest.mark.heavy
  def test_digits_views_and_raw_batches(self):
    images, labels = load_images("digits-2")
    self.assertEqual(images.shape, (360, 8, 8, 3))
    self.assertEqual(set(labels.tolist()), {0, 1})
    data = ImageData(images, labels)
    rng = np.random.default_rng(0)
    batch, others = data.views(np.arange(5), 8, rng, np.arange(10, 13), 6)
    self.assertEqual(batch.anchor.images.shape, (8, 8, 8, 3))
    np.testing.assert_array_equal(batch.mask, np.arange(8) < 5)
    np.testing.assert_array_equal(others.mask, np.arange(6) < 3)
    _, empty = data.views(np.arange(5), 8, rng, np.arange(0), 0)
    self.assertFalse(empty.mask.any())
    chunks = list(data.raw_batches(np.arange(300), size=128))
    self.assertEqual([n for _, n in chunks], [128, 128, 44])

  def test_mnist_2_reads_the_test_split_when_no_train_split(self):
    folder = Path(self.create_tempdir().full_path)
    raw, labels = write_mnist(folder, n=12)
    images, y = load_images("mnist-2", str(folder))
    assert_close(images[..., 0], raw[labels < 2] / 255.0)
    np.testing.assert_array_equal(images[..., 0], images[..., 2])


if __name__ == "__main__":
  absltest.main()
