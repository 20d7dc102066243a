"""Presets of the error-amplification experiment.

Run with ``python -m experiments.error_amplification --preset quick --out DIR`` (CPU, well under a minute) or
``--preset paper`` (the reference's version widths 256 ... 512 and depths, minutes on CPU).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Config:
  """All settings of one run; every number that influences results lives here."""
  dims: tuple[int, ...] = (16, 24, 32, 32, 40)  # D_0 ... D_K, one per version
  layers: tuple[int, ...] = (1, 1, 1, 1, 1)  # encoder depth per version (Linear layers before tanh)
  in_dim: int = 32  # input features of a data point
  out_dim: int = 12  # outputs of the intended (regression) task
  n_train: int = 3000
  n_test: int = 1000  # held-out points: the transforms are evaluated inductively
  drift: float = 0.6  # per-version drift of the intended task's target map
  steps: int = 2000  # optimiser steps per version
  batch_size: int = 500
  learning_rate: float = 3e-3
  lam: float = 1.0  # lambda of eq. (3)
  l2: float = 0.01  # L2 penalty on output embeddings (the reference's 0.01 * reg)
  posthoc_steps: int = 2000  # Adam steps of the post-hoc fit of each B_k
  posthoc_learning_rate: float = 1e-2
  methods: tuple[str, ...] = ("non-bc", "post-lin-sloss", "post-lin-mloss", "joint-notrans", "joint-lin-sloss",
                              "bc-aligner")
  log_every: int = 100
  seed: int = 0


PRESETS = {
    "quick": Config(),
    "paper": Config(dims=(256, 320, 384, 448, 512), layers=(2, 2, 3, 3, 3), in_dim=128, out_dim=32, n_train=20000,
                    n_test=5000, steps=4000, batch_size=2048, learning_rate=1e-3, posthoc_steps=4000),
    # A tiny run for the test suite: same code path, seconds.
    "test": Config(dims=(6, 8, 8), layers=(1, 1, 1), in_dim=8, out_dim=4, n_train=256, n_test=64, steps=60,
                   batch_size=64, posthoc_steps=60, log_every=20),
}

METHODS = ("non-bc", "post-lin-sloss", "post-lin-mloss", "joint-notrans", "joint-lin-sloss", "bc-aligner")
