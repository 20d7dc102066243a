"""MoCo-v2-style image augmentations in JAX (He et al. 2020; Chen et al. 2020).

As used by the ICL reference for its image datasets: RandomResizedCrop(size, scale (0.2, 1)) → with p 0.8
ColorJitter(0.4, 0.4, 0.4, 0.1) in a random order → RandomGrayscale(0.2) → with p 0.5 Gaussian blur σ ~ U(0.1, 2) →
horizontal flip (0.5) → per-channel normalisation. Images are float [H, W, 3] in [0, 1]; every function is pure, takes
an explicit PRNG key and is vmapped over a batch by :func:`augment_images`.

The colour conversions and the hue rotation are dm_pix's (:func:`dm_pix.rgb_to_hsv`, :func:`dm_pix.hsv_to_rgb`,
:func:`dm_pix.adjust_hue`), whose documented semantics are torchvision's. Brightness, contrast and saturation stay
here: dm_pix follows TensorFlow's (an additive brightness delta, a per-channel mean for contrast, saturation scaled in
HSV), torchvision's blend with a black, mean-grey or greyscale image differs from them by up to 0.35.

Deviation from torchvision: when the sampled crop does not fit, torchvision re-samples up to ten times and then
falls back to a centre crop; here the crop's sides are clipped to the image, which keeps the function branch-free.
"""

import math
from typing import NamedTuple, cast

import dm_pix as pix
import jax
import jax.numpy as jnp

IMAGENET_MEAN = (0.485, 0.456, 0.406)
"""The per-channel RGB mean of ImageNet, which image models normalise their inputs with."""
IMAGENET_STD = (0.229, 0.224, 0.225)
"""The per-channel RGB standard deviation of ImageNet, the companion of :data:`IMAGENET_MEAN`."""
_LUMA = (0.299, 0.587, 0.114)  # ITU-R 601


class AugmentConfig(NamedTuple):
  """The MoCo-v2 augmentation's settings.

  Output ``size``, crop ``scale`` and ``ratio``, the colour jitter's probability and strengths, grayscale, blur and
  flip probabilities, and the normalisation's mean and std.
  """

  size: int  # output side (the reference: 224)
  scale: tuple[float, float] = (0.2, 1.0)
  ratio: tuple[float, float] = (3 / 4, 4 / 3)
  jitter_p: float = 0.8
  brightness: float = 0.4
  contrast: float = 0.4
  saturation: float = 0.4
  hue: float = 0.1
  grayscale_p: float = 0.2
  blur_p: float = 0.5
  blur_sigma: tuple[float, float] = (0.1, 2.0)
  flip_p: float = 0.5
  mean: tuple[float, float, float] = IMAGENET_MEAN
  std: tuple[float, float, float] = IMAGENET_STD


def random_resized_crop(
  key: jax.Array, image: jax.Array, size: int, scale=(0.2, 1.0), ratio=(3 / 4, 4 / 3)
) -> jax.Array:
  """A random resized crop, resampled bilinearly to [size, size, C].

  A crop of area fraction U(scale) and aspect ratio log-U(ratio) at a uniform position, resampled bilinearly (pixel
  centres aligned) to [size, size, C].

  Args:
    key: a PRNG key.
    image: an image, [H, W, C].
    size: the output's side.
    scale: the range of the crop's area fraction.
    ratio: the range of the crop's aspect ratio.

  Returns:
    The crop, [size, size, C].
  """
  h_in, w_in = image.shape[:2]
  k_area, k_ratio, k_y, k_x = jax.random.split(key, 4)
  area = h_in * w_in * jax.random.uniform(k_area, minval=scale[0], maxval=scale[1])
  r = jnp.exp(jax.random.uniform(k_ratio, minval=math.log(ratio[0]), maxval=math.log(ratio[1])))
  w = jnp.minimum(jnp.sqrt(area * r), w_in)
  h = jnp.minimum(jnp.sqrt(area / r), h_in)
  y0 = jax.random.uniform(k_y) * (h_in - h)
  x0 = jax.random.uniform(k_x) * (w_in - w)
  return resample(image, y0, x0, h, w, size)


def resample(image: jax.Array, y0, x0, h, w, size: int) -> jax.Array:
  """Bilinear resampling of the window [y0, y0 + h) × [x0, x0 + w) (pixel units) to [size, size, C].

  Args:
    image: an image, [H, W, C].
    y0: the window's top, in pixels.
    x0: the window's left, in pixels.
    h: the window's height, in pixels.
    w: the window's width, in pixels.
    size: the output's side.

  Returns:
    The window, [size, size, C].
  """
  steps = (jnp.arange(size) + 0.5) / size
  ys = y0 + steps * h - 0.5
  xs = x0 + steps * w - 0.5
  yy, xx = jnp.meshgrid(ys, xs, indexing="ij")
  channel = lambda c: jax.scipy.ndimage.map_coordinates(c, [yy, xx], order=1, mode="nearest")
  return jax.vmap(channel, in_axes=-1, out_axes=-1)(image)


def _luma(image: jax.Array) -> jax.Array:
  return image @ jnp.asarray(_LUMA, image.dtype)


def grayscale(image: jax.Array) -> jax.Array:
  """ITU-R 601 luma replicated to three channels (torchvision's rgb_to_grayscale).

  Args:
    image: an image, [H, W, 3] in [0, 1].

  Returns:
    The grey image, [H, W, 3].
  """
  return jnp.broadcast_to((_luma(image))[..., None], image.shape)


def rgb_to_hsv(image: jax.Array) -> jax.Array:
  """RGB in [0, 1] → HSV with hue in [0, 1) (the colorsys convention; hue 0 for greys): :func:`dm_pix.rgb_to_hsv`.

  Args:
    image: an image, [H, W, 3] in [0, 1].

  Returns:
    The HSV image, [H, W, 3].
  """
  return pix.rgb_to_hsv(image)


def hsv_to_rgb(hsv: jax.Array) -> jax.Array:
  """Inverse of :func:`rgb_to_hsv`: :func:`dm_pix.hsv_to_rgb`.

  Args:
    hsv: an HSV image, [..., 3].

  Returns:
    The RGB image, [..., 3].
  """
  return pix.hsv_to_rgb(hsv)


def adjust_brightness(image, factor):
  return jnp.clip(image * factor, 0.0, 1.0)


def adjust_contrast(image, factor):
  mean = jnp.mean(_luma(image))
  return jnp.clip(factor * image + (1 - factor) * mean, 0.0, 1.0)


def adjust_saturation(image, factor):
  return jnp.clip(factor * image + (1 - factor) * grayscale(image), 0.0, 1.0)


def adjust_hue(image, shift):
  # dm_pix rotates the hue in HSV as torchvision's adjust_hue does (shift in [-0.5, 0.5], in turns).
  return pix.adjust_hue(image, shift)


def color_jitter(key: jax.Array, image: jax.Array, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1) -> jax.Array:
  """Torchvision's ColorJitter: factors U(max(0, 1 − b), 1 + b) (hue shift U(−hue, hue)) applied in a random order.

  Args:
    key: a PRNG key.
    image: an image, [H, W, 3] in [0, 1].
    brightness: b of the brightness factor.
    contrast: b of the contrast factor.
    saturation: b of the saturation factor.
    hue: the largest hue shift.

  Returns:
    The jittered image, [H, W, 3].
  """
  k_order, k_b, k_c, k_s, k_h = jax.random.split(key, 5)
  factor = lambda k, x: jax.random.uniform(k, minval=max(0.0, 1 - x), maxval=1 + x)
  values = jnp.stack(
    [
      factor(k_b, brightness),
      factor(k_c, contrast),
      factor(k_s, saturation),
      jax.random.uniform(k_h, minval=-hue, maxval=hue),
    ]
  ).astype(image.dtype)
  ops = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)
  order = jax.random.permutation(k_order, 4)

  def body(i, img):
    op = order[i]
    return jax.lax.switch(op, ops, img, values[op])

  return jax.lax.fori_loop(0, 4, body, image)


def gaussian_blur(image: jax.Array, sigma, radius: int) -> jax.Array:
  """Separable Gaussian blur with standard deviation ``sigma`` (pixels), kernel half-width ``radius``, edge padding.

  Args:
    image: an image, [H, W, 3] in [0, 1].
    sigma: the standard deviation, in pixels.
    radius: the kernel's half-width.

  Returns:
    The blurred image, [H, W, 3].
  """
  offsets = jnp.arange(-radius, radius + 1, dtype=image.dtype)  # the kernel in the image's precision
  kernel = jnp.exp(-0.5 * (offsets / jnp.asarray(sigma, image.dtype)) ** 2)
  kernel = kernel / jnp.sum(kernel)
  padded = jnp.pad(image, ((radius, radius), (radius, radius), (0, 0)), mode="edge")
  h, w = image.shape[:2]
  rows = cast(jax.Array, sum(kernel[k] * padded[k : k + h] for k in range(2 * radius + 1)))
  return cast(jax.Array, sum(kernel[k] * rows[:, k : k + w] for k in range(2 * radius + 1)))


def augment_image(key: jax.Array, image: jax.Array, cfg: AugmentConfig) -> jax.Array:
  """One MoCo-v2 view of ``image`` [H, W, 3] in [0, 1]: [cfg.size, cfg.size, 3], normalised.

  Args:
    key: a PRNG key.
    image: an image, [H, W, 3] in [0, 1].
    cfg: the :class:`AugmentConfig`.

  Returns:
    The view, [cfg.size, cfg.size, 3], normalised.
  """
  keys = jax.random.split(key, 7)
  x = random_resized_crop(keys[0], image, cfg.size, cfg.scale, cfg.ratio).astype(image.dtype)
  jittered = color_jitter(keys[1], x, cfg.brightness, cfg.contrast, cfg.saturation, cfg.hue)
  x = jnp.where(jax.random.uniform(keys[2]) < cfg.jitter_p, jittered, x)
  x = jnp.where(jax.random.uniform(keys[3]) < cfg.grayscale_p, grayscale(x), x)
  sigma = jax.random.uniform(keys[4], minval=cfg.blur_sigma[0], maxval=cfg.blur_sigma[1])
  radius = min(math.ceil(3 * cfg.blur_sigma[1]), cfg.size - 1)
  x = jnp.where(jax.random.uniform(keys[5]) < cfg.blur_p, gaussian_blur(x, sigma, radius), x)
  x = jnp.where(jax.random.uniform(keys[6]) < cfg.flip_p, x[:, ::-1], x)
  return normalize_image(x, cfg).astype(image.dtype)


def normalize_image(image: jax.Array, cfg: AugmentConfig) -> jax.Array:
  return (image - jnp.asarray(cfg.mean)) / jnp.asarray(cfg.std)


def _check_batch(fn: str, images: jax.Array) -> None:
  if images.ndim != 4 or images.shape[-1] != 3:
    raise ValueError(f"{fn}: `images` must be [B, H, W, 3] in [0, 1], got {images.shape}")


def augment_images(key: jax.Array, images: jax.Array, cfg: AugmentConfig) -> jax.Array:
  """Independent views of a batch [B, H, W, 3] → [B, size, size, 3].

  Args:
    key: a PRNG key.
    images: a batch, [B, H, W, 3] in [0, 1].
    cfg: the :class:`AugmentConfig`.

  Returns:
    The views, [B, size, size, 3].

  Raises:
    ValueError: images that are not [B, H, W, 3].
  """
  _check_batch("augment_images", images)
  return jax.vmap(augment_image, in_axes=(0, 0, None))(jax.random.split(key, images.shape[0]), images, cfg)


def resize_images(images: jax.Array, cfg: AugmentConfig) -> jax.Array:
  """The deterministic evaluation view: the whole image resized to [size, size] and normalised.

  Args:
    images: a batch, [B, H, W, 3] in [0, 1].
    cfg: the :class:`AugmentConfig`.

  Returns:
    The views, [B, size, size, 3].

  Raises:
    ValueError: images that are not [B, H, W, 3].
  """
  _check_batch("resize_images", images)
  h, w = images.shape[1:3]
  whole = jax.vmap(lambda im: resample(im, 0.0, 0.0, h, w, cfg.size))(images)
  return normalize_image(whole, cfg).astype(images.dtype)
