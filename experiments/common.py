"""Small pieces shared by the experiments: run-directory checks, JSON and markdown outputs, host copies of
pytrees, model splitting and model states in checkpoints, cached optimisers and shuffled batches (one copy of
each)."""

import functools
import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import numpy as np
import optax
from flax import nnx

from bcjax.files import write_atomic


def check_out_dir(out: str | os.PathLike) -> Path:
  """Refuses a directory that already holds results, so no run is overwritten; creates nothing."""
  out = Path(out)
  if out.exists() and (not out.is_dir() or any(out.iterdir())):
    raise FileExistsError(f"output directory {out} is not empty; choose a new --out so earlier results are kept")
  return out


LOAD_ERRORS = (FileNotFoundError, FileExistsError, ValueError, ConnectionError)


def write_json(path: Path, obj) -> None:
  """Writes ``obj`` as indented JSON, atomically and never over an existing file."""
  write_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def write_text(path: Path, text: str) -> None:
  """Writes text atomically, never over an existing file."""
  write_atomic(path, text.encode())


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], floatfmt: str = ".4f") -> str:
  """A GitHub-flavoured markdown table; floats are formatted with ``floatfmt``."""

  def cell(v):
    return format(v, floatfmt) if isinstance(v, float) else str(v)

  for i, row in enumerate(rows):
    if len(row) != len(header):
      raise ValueError(
        f"markdown_table: `rows[{i}]` has {len(row)} cells but the header has {len(header)}: {list(header)}"
      )
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
  return "\n".join(lines) + "\n"


def jsonable(tree):
  """Converts NumPy/JAX scalars and arrays inside nested containers to plain Python values."""
  if isinstance(tree, Mapping):
    return {str(k): jsonable(v) for k, v in tree.items()}
  if isinstance(tree, (list, tuple)):
    return [jsonable(v) for v in tree]
  if hasattr(tree, "tolist"):
    return tree.tolist()
  return tree


def save_figure(fig, path: Path, dpi: int = 110) -> None:
  """Writes a matplotlib figure as PNG, atomically and never over an existing file, and closes it."""
  import matplotlib.pyplot as plt

  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=dpi)
  plt.close(fig)
  write_atomic(path, buf.getvalue())


def to_host(tree):
  """A host (NumPy) copy of a pytree: kept checkpoints survive donated device buffers, and stages pickle it."""
  return jax.tree.map(np.asarray, tree)


def device_copy(tree):
  """A fresh device copy of a pytree (so a donated step cannot invalidate the caller's arrays)."""
  return jax.tree.map(jax.numpy.array, tree)


def state_tree(state: nnx.State) -> dict:
  """A model state as a checkpoint tree (:class:`experiments.harness.Checkpoint`): its pure dict of host arrays,
  with no variable classes or graph definition in it."""
  return to_host(nnx.to_pure_dict(state))


def restore_module_state(like: nnx.State, tree, what: str) -> nnx.State:
  """``like``, an abstract state of the model the run's config builds (e.g. from :func:`flax.nnx.eval_shape`),
  holding the arrays of ``tree``, a :func:`state_tree` as orbax reads it back (dict keys as strings). Every path,
  shape and dtype must match; a stage written for another model is refused naming ``what`` and the difference."""

  def conform(template, stored, path: str):
    if isinstance(template, Mapping):
      names = {str(key): key for key in template}
      found = sorted(stored) if isinstance(stored, Mapping) else type(stored).__name__
      if found != sorted(names):
        raise ValueError(
          f"{what}: the checkpoint holds {found} at {path}; the model built from the config has {sorted(names)}"
        )
      return {key: conform(template[key], stored[name], f"{path}{name}/") for name, key in names.items()}
    array = np.asarray(stored)
    if array.shape != template.shape or array.dtype != template.dtype:
      raise ValueError(
        f"{what}: the checkpoint's {path.rstrip('/')} is {array.dtype}{list(array.shape)}; the model built from "
        f"the config has {template.dtype}{list(template.shape)}"
      )
    return array

  nnx.replace_by_pure_dict(like, conform(nnx.to_pure_dict(like), tree, "/"))
  return like


def split_train_eval(model: nnx.Module):
  """``(train_def, eval_def, params, batch_stats)``: graph definitions of ``model`` in training and evaluation mode
  (BatchNorm, dropout) and its state, for pure jitted functions."""
  model.train()
  train_def, params, stats = nnx.split(model, nnx.Param, nnx.BatchStat)
  model.eval()
  eval_def, _, _ = nnx.split(model, nnx.Param, nnx.BatchStat)
  return train_def, eval_def, params, stats


@functools.cache
def adam(learning_rate: float, weight_decay: float = 0.0) -> optax.GradientTransformation:
  """One Adam per (rate, coupled L2 decay as torch's ``Adam(weight_decay=...)``), so jitted steps that close over
  it stay cached across versions, methods and runs."""
  if weight_decay:
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.adam(learning_rate))
  return optax.adam(learning_rate)


def shuffled_batches(n: int, batch_size: int, rng: np.random.Generator):
  """Index arrays of one epoch: a fresh permutation of ``range(n)`` cut into batches, the last one partial."""
  perm = rng.permutation(n)
  return [perm[start : start + batch_size] for start in range(0, n, batch_size)]


def endless_batches(key: jax.Array, n: int, batch_size: int):
  """Endless shuffled mini-batches of row indices drawn with JAX keys: a fresh permutation per epoch
  (``fold_in(key, epoch)``), the last batch of each epoch partial."""
  epoch = 0
  while True:
    perm = jax.random.permutation(jax.random.fold_in(key, epoch), n)
    for start in range(0, n, batch_size):
      yield perm[start : start + batch_size]
    epoch += 1
