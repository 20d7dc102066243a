"""Serving a bridge over stored embeddings: map a ``.npy`` file of any size to the old model's space in chunks.

The input is memory-mapped and read ``chunk_rows`` rows at a time; the output is written through a memory-mapped
``.npy`` under a temporary name and published atomically, never over an existing file unless asked. Memory stays at
a few chunks whatever the file's size. Each chunk goes through the package's one compiled application path
(``compiled_map``: affine runs composed into one :math:`Wz + b`, placed on the device once) in the
compute precision (float32, or float64 for float64 input), padded to one shape so it compiles once.
"""

import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np

from bcjax import _atomic
from bcjax._buckets import bucket_size
from bcjax.upgrade import _files
from bcjax.upgrade._map import UpgradeMap, compiled_map

OUTPUT_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def _chunk_function(maps: Sequence[UpgradeMap], compute, chunk_rows: int) -> Callable[[np.ndarray], np.ndarray]:
  """The chain on one chunk through the package's one compiled path (:func:`compiled_map`).

  Full chunks share one compiled program; the last, shorter chunk is padded only to the next power of two (one more
  program, not a whole chunk of padding computed for nothing).
  """
  fn = compiled_map(maps, jnp.float64 if compute == np.float64 else jnp.float32)

  def apply(block: np.ndarray) -> np.ndarray:
    rows = block.shape[0]
    size = rows if rows == chunk_rows else min(chunk_rows, bucket_size(rows))
    if rows < size:
      block = np.pad(block, ((0, size - rows), (0, 0)))
    return np.asarray(fn(jnp.asarray(block)))[:rows]

  return apply


def transform_file(
  maps: UpgradeMap | Sequence[UpgradeMap],
  source: str | os.PathLike,
  destination: str | os.PathLike,
  *,
  dtype: str | None = None,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
  overwrite: bool = False,
  progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int, str]:
  """Maps the embeddings in ``source`` through ``maps`` and writes ``destination``.

  Maps the embeddings in ``source`` [n, D_k] through ``maps`` (one map, or a chain in the order it applies) and writes
  ``destination`` [n, D_j].

  Args:
    maps: an :class:`UpgradeMap` or a chain ``[B_k, ..., B_(j+1)]``.
    source: a ``.npy`` file (float16, bfloat16, float32 or float64).
    destination: the ``.npy`` to write; must not exist unless ``overwrite``.
    dtype: the output dtype (``float16``, ``bfloat16``, ``float32``, ``float64``); default the input's.
    chunk_rows: rows per chunk.
    overwrite: replace an existing ``destination``.
    progress: called with (rows done, rows in all) after each chunk.

  Returns:
    (rows, output dimension, output dtype name).

  Raises:
    ValueError: a ``chunk_rows`` below 1 or an unknown ``dtype``.
    FileExistsError: ``destination`` exists and ``overwrite`` is off.
    EmbeddingFileError: a source that is not a finite floating ``.npy`` matrix, or a width unlike the map's.
  """
  maps = [maps] if isinstance(maps, UpgradeMap) else list(maps)
  destination = Path(destination)
  if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
    raise ValueError(f"transform_file: `chunk_rows` must be a positive integer, got {chunk_rows!r}")
  if dtype is not None and dtype not in OUTPUT_DTYPES:
    raise ValueError(f"transform_file: `dtype` must be one of {list(OUTPUT_DTYPES)}, got {dtype!r}")
  if destination.exists() and not overwrite:
    raise FileExistsError(f"transform_file: output {destination} exists; refusing to overwrite it")
  z = _files.open_embeddings(source, name="input")
  for i, m in enumerate(maps):
    expected = z.shape[1] if i == 0 else maps[i - 1].dims[0]
    if m.dims[1] != expected:
      raise ValueError(
        f"transform_file: map {i} takes D={m.dims[1]} but gets D={expected}{' (the input file)' if i == 0 else ''}"
      )
  out_dtype = np.dtype(OUTPUT_DTYPES[dtype]) if dtype is not None else z.dtype
  compute = _files.compute_dtype(z.dtype)
  apply = _chunk_function(maps, compute, min(chunk_rows, z.shape[0])) if maps else (lambda block: block)
  n, d_out = z.shape[0], (maps[-1].dims[0] if maps else z.shape[1])
  # np.lib.format has no name for bfloat16; ml_dtypes' np.save writes it as |V2, and so do we.
  bfloat16 = out_dtype == ml_dtypes.bfloat16
  header = {
    "descr": "|V2" if bfloat16 else np.lib.format.dtype_to_descr(out_dtype),
    "fortran_order": False,
    "shape": (n, d_out),
  }
  tmp = destination.with_name(f".{destination.name}.{os.getpid()}-{secrets.token_hex(4)}{_atomic.TMP_SUFFIX}")
  try:
    # Plain reads and writes, not memory maps: mapped pages of a file count as the process's resident memory until
    # the kernel drops them, so a mapped output would grow with the file instead of staying at a chunk.
    with _files.chunk_reader(z) as read, open(tmp, "xb") as f:
      np.lib.format.write_array_header_2_0(f, header)
      for rows in _files.chunks(n, chunk_rows):
        block = apply(read(rows).astype(compute, copy=False))
        if not np.isfinite(block).all():
          bad = rows.start + int(np.argmax(~np.isfinite(block).all(axis=1)))
          raise ValueError(
            f"transform_file: row {bad} of {source} maps to NaN or inf (does the input hold NaN or "
            f"inf there?); nothing was written"
          )
        np.ascontiguousarray(block.astype(out_dtype, copy=False)).tofile(f)
        if progress is not None:
          progress(rows.stop, n)
      f.flush()
      os.fsync(f.fileno())
    _atomic._publish(tmp, destination, overwrite)
  finally:
    tmp.unlink(missing_ok=True)
  _atomic._fsync_dir(destination.parent)
  return n, d_out, "bfloat16" if bfloat16 else out_dtype.name


def registry_maps(registry, *, to: int, source: int | None = None) -> list[UpgradeMap]:
  """The registry's chain from version ``source`` down to ``to``, as maps.

  The registry's chain from version ``source`` (default: the latest) down to ``to``, as maps in the order they apply.

  Args:
    registry: a :class:`~bcjax.versioning.Registry`.
    to: j, the version to map to.
    source: k, the version to map from (default: the latest).

  Returns:
    The chain ``[B_k, ..., B_(j+1)]`` as :class:`UpgradeMap` objects.
  """
  return [UpgradeMap(t, params, info.normalize, info.kind, {}) for info, t, params in registry.chain(to, source=source)]
