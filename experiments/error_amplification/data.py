"""A seeded synthetic chain of versions: fixed data points whose intended-task targets drift over time."""

from typing import NamedTuple

import jax
import jax.numpy as jnp


class ChainData(NamedTuple):
  x_train: jax.Array  # [n_train, in_dim]
  x_test: jax.Array  # [n_test, in_dim]
  y_train: tuple[jax.Array, ...]  # per version k: [n_train, out_dim]
  y_test: tuple[jax.Array, ...]  # per version k: [n_test, out_dim]


def make_chain(
  key: jax.Array, *, num_versions: int, n_train: int, n_test: int, in_dim: int, out_dim: int, drift: float
) -> ChainData:
  r"""Targets :math:`y_k = \tanh(x U_k)` with :math:`U_k = \sqrt{1-\rho^2}\,U_{k-1} + \rho\,E_k`, entries of
  :math:`U_0, E_k` drawn from :math:`N(0, 1/\text{in\_dim})`: what the intended task needs changes every version,
  as users' interests do, so each new model must move away from its predecessor."""
  kx, ku = jax.random.split(key)
  x = jax.random.normal(kx, (n_train + n_test, in_dim))
  scale = 1.0 / jnp.sqrt(in_dim)
  u = scale * jax.random.normal(jax.random.fold_in(ku, 0), (in_dim, out_dim))
  ys = []
  for k in range(num_versions):
    if k:
      u = jnp.sqrt(1 - drift**2) * u + drift * scale * jax.random.normal(jax.random.fold_in(ku, k), u.shape)
    ys.append(jnp.tanh(x @ u))
  return ChainData(x[:n_train], x[n_train:], tuple(y[:n_train] for y in ys), tuple(y[n_train:] for y in ys))
