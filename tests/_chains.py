"""Random chains of embeddings and backward weights for the tests (float64 NumPy)."""

import numpy as np


def random_chain(rng: np.random.Generator, dims: list[int], n: int, noise: float = 0.3):
  """Returns (zs, ws): versions z_0..z_K [n, d_k] that are noisy linear images of each other, and the weights
  W_1..W_K [d_(k-1), d_k] of an imperfect chain of backward maps."""
  zs = [rng.normal(size=(n, dims[0]))]
  for d in dims[1:]:
    zs.append(zs[-1] @ rng.normal(size=(zs[-1].shape[1], d)) + noise * rng.normal(size=(n, d)))
  ws = [rng.normal(size=(dims[i - 1], dims[i])) / np.sqrt(dims[i]) for i in range(1, len(dims))]
  return zs, ws


def np_compose(ws: list[np.ndarray], dim: int) -> np.ndarray:
  """W_{j+1} ... W_k by explicit left-to-right products."""
  out = np.eye(ws[0].shape[0]) if ws else np.eye(dim)
  for w in ws:
    out = out @ w
  return out
