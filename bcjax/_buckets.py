"""Shape buckets for eagerly called functions.

XLA compiles once per input shape, so host-side callers whose inputs come in many lengths (one evaluation set per
version, the last chunk of a loop) pad the leading axis to the next power of two and mask the padding, which bounds the
compiles to one per octave of lengths.
"""

import numpy as np

from bcjax._device import device_array


def bucket_size(n: int, minimum: int = 8) -> int:
  """The smallest power of two >= max(n, minimum)."""
  return max(minimum, 1 << max(0, int(n) - 1).bit_length())


def pad_to_bucket(arrays, fill_values, size: int | None = None):
  """Pads the leading axis of each array to ``size`` (default :func:`bucket_size` of its length) with its fill value.

  Returns jax arrays; callers mask the padded rows (every array here shares one leading length).
  """
  n = int(np.shape(arrays[0])[0])
  size = bucket_size(n) if size is None else size
  out = []
  for a, fill in zip(arrays, fill_values):
    a = np.asarray(a)
    pad = np.full((size - n,) + a.shape[1:], fill, a.dtype)
    out.append(device_array(np.concatenate([a, pad])))
  return tuple(out)
