r"""Per-segment standard deviations in the conventions the papers' code bases use.

For the values :math:`x_1..x_c` of one segment, with mean :math:`m` and :math:`S = \sum_i (x_i - m)^2`:

* ``"population"``: :math:`\sqrt{S / c}`;
* ``"unbiased"``: :math:`\sqrt{S / \max(c - 1, 1)}`;
* ``"torch_scatter"``: :math:`\sqrt{S / (\max(c - 1, 1) + 10^{-6})}`, ``torch_scatter.scatter_std(unbiased=True)``
  as pinned by the reference code (PyTorch Geometric 1.6.3's ``LocalDegreeProfile``; bc-emb's item rating std). The
  :math:`10^{-6}` makes a standard deviation of exactly 1 come out just below 1.

An empty segment gives 0 in every convention.
"""

from typing import Literal

import numpy as np

STD_CONVENTIONS = ("population", "unbiased", "torch_scatter")
Convention = Literal["population", "unbiased", "torch_scatter"]


def segment_std(values: np.ndarray, segments: np.ndarray, num_segments: int, convention: Convention) -> np.ndarray:
  """Standard deviation of ``values`` [n] per segment id, [num_segments] float64.

  Standard deviation of ``values`` [n] per segment id in ``segments`` [n], [num_segments] float64 (two passes: the mean
  first, then the squared deviations, so no cancellation).
  """
  if convention not in STD_CONVENTIONS:
    raise ValueError(f"segment_std: `convention` must be one of {STD_CONVENTIONS}, got {convention!r}")
  values = np.asarray(values, np.float64)
  count = np.bincount(segments, minlength=num_segments).astype(np.float64)
  mean = np.bincount(segments, values, minlength=num_segments) / np.maximum(count, 1)
  sq = np.bincount(segments, (values - mean[segments]) ** 2, minlength=num_segments)
  if convention == "population":
    return np.sqrt(sq / np.maximum(count, 1))
  divisor = np.maximum(count - 1, 1)
  return np.sqrt(sq / (divisor + 1e-6 if convention == "torch_scatter" else divisor))
