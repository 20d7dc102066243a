"""Serving a bridge over stored embeddings: map a ``.npy`` file of any size to the old model's space in chunks.

The input is memory-mapped and read ``chunk_rows`` rows at a time; the output is written through a memory-mapped
``.npy`` under a temporary name and published atomically, never over an existing file unless asked. Memory stays at
a few chunks whatever the file's size. Each chunk goes through the package's one compiled application path
(``compiled_map``: affine runs composed into one :math:`Wz + b`, placed on the device once) in the
compute precision (float32, or float64 for float64 input), padded to one shape so it compiles once.
"""

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np

from bcjax import _atomic
from bcjax._buckets import bucket_size
from bcjax._device import device_array
from bcjax.upgrade import _files, _hubness, _scale
from bcjax.upgrade._map import UpgradeMap, check_direction, compiled_map

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
    return np.asarray(fn(device_array(block)))[:rows]

  return apply


CSLS_FORMS = ("queries", "documents")
"""What ``transform_file(csls=...)`` writes for a map with a hubness correction (:mod:`bcjax.upgrade._hubness`)."""


def _csls_rows(block: np.ndarray, upgrade_map: UpgradeMap, form: str) -> np.ndarray:
  """Mapped rows [n, D] as CSLS rows [n, D + 1] for an inner-product store (:func:`transform_file`)."""
  hubness = upgrade_map.hubness
  assert hubness is not None  # transform_file checked it
  if form == "queries":
    return _hubness.csls_queries(block)
  scale = upgrade_map.scale if upgrade_map.scale is not None else _scale.IDENTITY
  # Rows written through the map score cos - beta + c against [unit(B(q)), 1] (bcjax.upgrade._scale).
  return _hubness.csls_documents(block, _hubness.hubness_bias(block, hubness) - scale.bridged_offset)


def _check_input(z: np.ndarray, first: UpgradeMap, source) -> None:
  """Refuses an input file that is not the first map's new model's embeddings (a uniform sample of its rows)."""
  if z.shape[1] != first.dims[1]:
    raise _files.EmbeddingFileError(
      f"`input` {source} has width {z.shape[1]}; the map takes the new model's D_k={first.dims[1]} columns"
    )
  if first.spaces is None:
    return
  rows = np.sort(np.random.default_rng(0).choice(z.shape[0], min(z.shape[0], INPUT_SAMPLE_ROWS), replace=False))
  sample = _files.read_rows(z, rows)
  finite = np.isfinite(sample).all(axis=1)
  try:
    check_direction(first, sample[finite], name="input")
  except ValueError as e:
    raise _files.EmbeddingFileError(f"{e} ({source}, {finite.sum()} rows sampled)") from None


INPUT_SAMPLE_ROWS = 2000  # input rows (uniform) whose fingerprint margin tells which model embedded the file


def transform_file(
  maps: UpgradeMap | Sequence[UpgradeMap],
  source: str | os.PathLike,
  destination: str | os.PathLike,
  *,
  dtype: str | None = None,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
  overwrite: bool = False,
  progress: Callable[[int, int], None] | None = None,
  csls: str | None = None,
) -> tuple[int, int, str]:
  """Maps the embeddings in ``source`` through ``maps`` and writes ``destination``.

  Maps the embeddings in ``source`` [n, D_k] through ``maps`` (one map, or a chain in the order it applies) and writes
  ``destination`` [n, D_j]. Before anything is written, a uniform sample of the input is checked against the first
  map's fingerprints (the new model's, not the old one's); each chunk's input rows are checked to be finite.

  The last map's hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`) cannot live in a plain B(z): it lowers each
  *stored* row's score. With ``csls`` the output carries it for an inner-product store, one column wider:
  ``"queries"`` writes ``[unit(B(z)), 1]`` (:func:`~bcjax.upgrade.csls_queries`), to query a store whose rows are
  ``[unit(x), -beta(x)]`` (:func:`~bcjax.upgrade.csls_documents`); ``"documents"`` writes the mapped rows as such
  stored rows on the old rows' scale, ``[unit(B(z)), c - beta(B(z))]`` (:mod:`bcjax.upgrade._scale`: c the map's
  bridged-row offset). Without ``csls`` the correction is not applied (``bcjax transform`` asks for ``--no-hubness``
  to say so).

  Args:
    maps: an :class:`UpgradeMap` or a chain ``[B_k, ..., B_(j+1)]``.
    source: a ``.npy`` file (float16, bfloat16, float32 or float64).
    destination: the ``.npy`` to write; must not exist unless ``overwrite``.
    dtype: the output dtype (``float16``, ``bfloat16``, ``float32``, ``float64``); default the input's.
    chunk_rows: rows per chunk.
    overwrite: replace an existing ``destination``.
    progress: called with (rows done, rows in all) after each chunk.
    csls: None, ``"queries"`` or ``"documents"`` (above); the last map must carry a hubness correction.

  Returns:
    (rows, output dimension, output dtype name).

  Raises:
    ValueError: a ``chunk_rows`` below 1, an unknown ``dtype`` or ``csls`` form, ``csls`` for a map without a hubness
      correction, or maps whose widths do not chain.
    FileExistsError: ``destination`` exists and ``overwrite`` is off.
    EmbeddingFileError: a source that is not a floating ``.npy`` matrix, holds NaN or inf, has a width unlike the
      map's, or is not the new model's embeddings (nothing is written).
  """
  maps = [maps] if isinstance(maps, UpgradeMap) else list(maps)
  destination = Path(destination)
  _check_transform(maps, destination, dtype, chunk_rows, overwrite, csls)
  z = _files.open_embeddings(source, name="input")
  if maps:
    _check_input(z, maps[0], source)
  out_dtype = np.dtype(OUTPUT_DTYPES[dtype]) if dtype is not None else z.dtype
  compute = _files.compute_dtype(z.dtype)
  apply = _chunk_function(maps, compute, min(chunk_rows, z.shape[0])) if maps else (lambda block: block)
  n, d_out = z.shape[0], (maps[-1].dims[0] if maps else z.shape[1]) + (csls is not None)
  # np.lib.format has no name for bfloat16; ml_dtypes' np.save writes it as |V2, and so do we.
  bfloat16 = out_dtype == ml_dtypes.bfloat16
  descr = "|V2" if bfloat16 else np.lib.format.dtype_to_descr(out_dtype)
  # Plain reads and writes, not memory maps: mapped pages of a file count as the process's resident memory until
  # the kernel drops them, so a mapped output would grow with the file instead of staying at a chunk.
  with _files.chunk_reader(z) as read, _atomic.atomic_writer(destination, overwrite=overwrite) as f:
    np.lib.format.write_array_header_2_0(f, {"descr": descr, "fortran_order": False, "shape": (n, d_out)})
    for rows in _files.chunks(n, chunk_rows):
      block = _mapped_chunk(read(rows).astype(compute, copy=False), rows.start, n, apply, source)
      if csls is not None:
        block = _csls_rows(block, maps[-1], csls)
      np.ascontiguousarray(block.astype(out_dtype, copy=False)).tofile(f)
      if progress is not None:
        progress(rows.stop, n)
  return n, d_out, "bfloat16" if bfloat16 else out_dtype.name


def _check_transform(maps: list[UpgradeMap], destination: Path, dtype, chunk_rows, overwrite: bool, csls) -> None:
  """:func:`transform_file`'s arguments, checked before the input is opened."""
  if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
    raise ValueError(f"transform_file: `chunk_rows` must be a positive integer, got {chunk_rows!r}")
  if dtype is not None and dtype not in OUTPUT_DTYPES:
    raise ValueError(f"transform_file: `dtype` must be one of {list(OUTPUT_DTYPES)}, got {dtype!r}")
  if csls is not None and csls not in CSLS_FORMS:
    raise ValueError(f"transform_file: `csls` must be None or one of {list(CSLS_FORMS)}, got {csls!r}")
  if csls is not None and (not maps or maps[-1].hubness is None):
    raise ValueError("transform_file: `csls` needs a map with a hubness correction; the (last) map has none")
  if destination.exists() and not overwrite:
    raise FileExistsError(f"transform_file: output {destination} exists; refusing to overwrite it")
  for i, m in enumerate(maps[1:], 1):
    if m.dims[1] != maps[i - 1].dims[0]:
      raise ValueError(f"transform_file: map {i} takes D={m.dims[1]} but gets D={maps[i - 1].dims[0]}")


def _mapped_chunk(block: np.ndarray, start: int, n: int, apply, source) -> np.ndarray:
  """One chunk of input rows (from row ``start`` of ``n``) mapped; a non-finite input or output row stops the write."""
  if not np.isfinite(block).all():
    bad = ~np.isfinite(block).all(axis=1)
    raise _files.EmbeddingFileError(
      f"`input` {source} holds NaN or inf: first in row {start + int(np.argmax(bad))} (of {n}); nothing was written"
    )
  block = apply(block)
  if not np.isfinite(block).all():
    bad_row = start + int(np.argmax(~np.isfinite(block).all(axis=1)))
    raise ValueError(f"transform_file: row {bad_row} of {source} maps to NaN or inf; nothing was written")
  return block


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
