"""Embedding files on disk: ``.npy`` matrices opened memory-mapped, checked before any work, read in row chunks.

A user's embeddings can be larger than memory, so nothing here loads a whole file: :func:`open_embeddings` reads
the ``.npy`` header, refuses what is not a 2-D floating matrix (a pickle, another format, an empty file) and maps the
data; :func:`check_finite_rows` scans it a chunk at a time for the first row holding NaN or inf. bfloat16 matrices
written by NumPy with ``ml_dtypes`` carry the anonymous 2-byte dtype ``|V2`` in their header; they are read back as
bfloat16.
"""

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np

# Rows per chunk when a file is streamed: 2^16 rows of 1024 float32 columns are 256 MiB.
DEFAULT_CHUNK_ROWS = 1 << 16
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class EmbeddingFileError(ValueError):
  """A file given as embeddings is missing, unreadable or not a finite 2-D floating ``.npy`` matrix."""


def _header(path: Path, name: str) -> tuple[tuple[int, ...], np.dtype]:
  try:
    with open(path, "rb") as f:
      try:
        version = np.lib.format.read_magic(f)
      except ValueError:
        raise EmbeddingFileError(f"`{name}` {path} is not a .npy file (no NumPy magic bytes at its start)") from None
      try:
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
      except (ValueError, SyntaxError) as e:
        raise EmbeddingFileError(f"`{name}` {path} has an unreadable .npy header ({e})") from None
  except FileNotFoundError:
    raise EmbeddingFileError(f"`{name}` {path} does not exist") from None
  except IsADirectoryError:
    raise EmbeddingFileError(f"`{name}` {path} is a directory, not a .npy file") from None
  return shape, dtype


def open_embeddings(path: str | os.PathLike, *, name: str = "embeddings") -> np.ndarray:
  """Opens a ``.npy`` matrix of embeddings [n, d] memory-mapped (read-only), after checking its header.

  Args:
    path: the ``.npy`` file.
    name: the argument's name in error messages (``--old``, ``z_new``...).

  Returns:
    A read-only ``np.memmap`` of shape [n, d] and dtype float16, bfloat16, float32 or float64.

  Raises:
    EmbeddingFileError: naming ``name``, the file and what is wrong with it; nothing is read past the header.
  """
  path = Path(path)
  shape, dtype = _header(path, name)
  if dtype.hasobject:
    raise EmbeddingFileError(
      f"`{name}` {path} holds pickled Python objects (dtype {dtype}); bcjax reads only "
      f"numeric .npy files and never unpickles"
    )
  bfloat16 = dtype == np.dtype("V2")
  if not bfloat16 and dtype.name not in FLOAT_DTYPES:
    raise EmbeddingFileError(f"`{name}` {path} has dtype {dtype}; embeddings must be one of {list(FLOAT_DTYPES)}")
  if len(shape) != 2:
    raise EmbeddingFileError(f"`{name}` {path} has shape {shape}; embeddings must be a matrix [rows, dimensions]")
  if shape[0] == 0 or shape[1] == 0:
    raise EmbeddingFileError(f"`{name}` {path} is empty (shape {shape})")
  try:
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
  except (ValueError, OSError) as e:
    raise EmbeddingFileError(f"`{name}` {path} cannot be read as a .npy matrix ({e})") from None
  return arr.view(ml_dtypes.bfloat16) if bfloat16 else arr


def chunks(n: int, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[slice]:
  """Consecutive row slices of at most ``chunk_rows`` rows covering [0, n)."""
  for start in range(0, n, chunk_rows):
    yield slice(start, min(start + chunk_rows, n))


def compute_dtype(dtype) -> np.dtype:
  """The dtype arithmetic on embeddings of ``dtype`` runs in.

  Float64 stays float64, narrower floats widen to float32 (NumPy has no bfloat16 arithmetic and float16 matrix products
  are slow and lose digits).
  """
  return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _plain_readable(arr) -> bool:
  return isinstance(arr, np.memmap) and arr.filename is not None and arr.flags.c_contiguous


def _pread_rows(arr: np.ndarray, rows: np.ndarray) -> np.ndarray:
  """``arr[rows]`` for integer ``rows`` by plain file reads, one per run of consecutive rows."""
  order = np.argsort(rows, kind="stable")
  wanted = rows[order]
  row_bytes = arr.shape[1] * arr.dtype.itemsize
  out = np.empty((len(rows), arr.shape[1]), arr.dtype)
  starts = np.flatnonzero(np.diff(wanted, prepend=-2) != 1)  # a new run wherever the next row is not consecutive
  ends = np.append(starts[1:], len(wanted))
  assert isinstance(arr, np.memmap) and arr.filename is not None  # _plain_readable checked it
  with open(arr.filename, "rb") as f:
    for s, e in zip(starts, ends):
      first, count = int(wanted[s]), int(wanted[e - 1]) - int(wanted[s]) + 1
      f.seek(arr.offset + first * row_bytes)
      block = np.fromfile(f, dtype=arr.dtype, count=count * arr.shape[1]).reshape(count, arr.shape[1])
      out[order[s:e]] = block[wanted[s:e] - first]
  return out


def read_rows(arr: np.ndarray, rows, dtype=None) -> np.ndarray:
  """``arr[rows]`` as a dense array of ``dtype``.

  ``dtype`` defaults to :func:`compute_dtype`; ``rows`` is a slice or an integer index array. From an embeddings file
  the rows are read with plain file reads, one per run of consecutive rows: indexing a memory map instead leaves the
  pages it touches (and the kernel's read-ahead around them) mapped into the process, which grew to 14 GB reading
  20,000 scattered rows of a 15 GB index.
  """
  target = compute_dtype(arr.dtype) if dtype is None else dtype
  if _plain_readable(arr):
    index = np.arange(arr.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows)
    if index.ndim == 1 and np.issubdtype(index.dtype, np.integer):
      if index.size and (index.min() < 0 or index.max() >= arr.shape[0]):
        raise IndexError(f"read_rows: rows span [{index.min()}, {index.max()}], outside [0, {arr.shape[0]})")
      return _pread_rows(arr, index).astype(target, copy=False)
  return np.asarray(arr[rows]).astype(target)


@contextlib.contextmanager
def chunk_reader(arr: np.ndarray):
  """A function ``read(rows: slice) -> ndarray`` over the rows of an opened embeddings file.

  A function ``read(rows: slice) -> ndarray`` over the rows of an opened embeddings file that reads them with plain file
  reads (no pages of the file stay mapped into the process); for an array that is not a C-ordered memory map it slices
  the array.
  """
  if not isinstance(arr, np.memmap) or arr.filename is None or not arr.flags.c_contiguous:
    yield lambda rows: np.asarray(arr[rows])
    return
  row_bytes = arr.shape[1] * arr.dtype.itemsize
  with open(arr.filename, "rb") as f:

    def read(rows: slice) -> np.ndarray:
      f.seek(arr.offset + rows.start * row_bytes)
      count = rows.stop - rows.start
      data = np.fromfile(f, dtype=arr.dtype, count=count * arr.shape[1])
      return data.reshape(count, arr.shape[1])

    yield read


def check_finite_rows(arr: np.ndarray, *, name: str, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> None:
  """Raises :class:`EmbeddingFileError` naming the first row of ``arr`` that holds NaN or inf.

  Reading ``arr`` one chunk of rows at a time with plain file reads (a scan of a file larger than memory keeps none of
  it mapped).
  """
  with chunk_reader(arr) as read:
    for rows in chunks(arr.shape[0], chunk_rows):
      block = read(rows).astype(compute_dtype(arr.dtype), copy=False)
      bad = ~np.isfinite(block).all(axis=1)
      if bad.any():
        first = rows.start + int(np.argmax(bad))
        raise EmbeddingFileError(
          f"`{name}` holds NaN or inf: first in row {first} (of {arr.shape[0]}), "
          f"{int(bad.sum())} such row(s) in rows {rows.start}-{rows.stop - 1}"
        )
