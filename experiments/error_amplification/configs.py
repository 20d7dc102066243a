"""Presets of the error-amplification experiment.

Run with ``python -m experiments.error_amplification --preset quick --out DIR`` (CPU, well under a minute) or
``--preset paper`` (the reference's version widths 256 ... 512 and depths, minutes on CPU).
"""

import dataclasses

from experiments import bc_methods
from experiments.bc_methods import JOINT, POSTHOC
from experiments.harness import option

METHODS = ("non-bc", *POSTHOC, *JOINT)


@dataclasses.dataclass(frozen=True)
class Config:
  """All settings of one run; every number that influences results lives here."""

  dims: tuple[int, ...] = (16, 24, 32, 32, 40)  # D_0 ... D_K, one per version
  layers: tuple[int, ...] = (1, 1, 1, 1, 1)  # encoder depth per version (Linear layers before tanh)
  in_dim: int = 32  # input features of a data point
  out_dim: int = 12  # outputs of the intended (regression) task
  n_train: int = 3000
  n_test: int = 1000  # held-out points: the transforms are evaluated inductively
  drift: float = option(0.6, help="per-version drift ρ of the intended task's target map", low=0.0, high=1.0)
  steps: int = option(2000, help="optimiser steps per version (each post-hoc fit of B_k gets as many)", low=1)
  batch_size: int = option(500, help="rows per step", low=1)
  learning_rate: float = option(3e-3, help="Adam learning rate of M_k", low=0.0, low_open=True)
  lam: float = option(1.0, help="alignment weight λ of eq. (3)", flag="--lambda", low=0.0)
  l2: float = 0.01  # L2 penalty on output embeddings (the reference's 0.01 * reg)
  posthoc_learning_rate: float = 1e-2
  methods: tuple[str, ...] = option(METHODS, help="methods to run", choices=METHODS)
  transform: str = bc_methods.transform_option()
  transform_rank: int = bc_methods.transform_rank_option()
  transform_hidden: int = bc_methods.transform_hidden_option()
  transform_sweep: tuple[str, ...] = bc_methods.transform_sweep_option()
  log_every: int = 100
  seed: int = option(0, help="PRNG seed (same seed, same numbers)", low=0)


PRESETS = {
  "quick": Config(),
  "paper": Config(
    dims=(256, 320, 384, 448, 512),
    layers=(2, 2, 3, 3, 3),
    in_dim=128,
    out_dim=32,
    n_train=20000,
    n_test=5000,
    steps=4000,
    batch_size=2048,
    learning_rate=1e-3,
  ),
  # A tiny run for the test suite: same code path, seconds.
  "test": Config(
    dims=(6, 8, 8), layers=(1, 1, 1), in_dim=8, out_dim=4, n_train=256, n_test=64, steps=60, batch_size=64, log_every=20
  ),
}
