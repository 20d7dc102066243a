"""Crash-safe file writes: a file is either absent or complete, and an existing file is never replaced by accident.

The data goes to a temporary file in the destination's directory, is flushed and fsync-ed, and is then published
under its final name. Publishing without ``overwrite`` uses ``os.link``, which fails atomically when the name is
taken, so of two concurrent writers of the same name exactly one succeeds. With ``overwrite`` it uses
``os.replace``. Either way the directory is fsync-ed so the new name survives a power loss. A crash at any point
leaves at most a stray ``.*.tmp`` file, never a partial file under the final name.
"""

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"


def _fsync_dir(directory: Path) -> None:
  fd = os.open(directory, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _publish(tmp: Path, path: Path, overwrite: bool) -> None:
  """Gives the complete temporary file its final name (a separate function so tests can interrupt it)."""
  if overwrite:
    os.replace(tmp, path)
  else:
    os.link(tmp, path)  # raises FileExistsError, atomically, when `path` exists


def write_atomic(path: str | os.PathLike, data: bytes, *, overwrite: bool = False) -> Path:
  """Writes ``data`` to ``path`` atomically.

  Args:
    path: destination file; its directory must exist.
    data: the complete contents.
    overwrite: replace an existing file. When False an existing ``path`` raises FileExistsError and is untouched.

  Returns:
    ``path`` as a Path.

  Raises:
    FileExistsError: ``path`` exists and ``overwrite`` is off.
  """
  with atomic_writer(path, overwrite=overwrite) as f:
    f.write(data)
  return Path(path)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, *, overwrite: bool = False) -> Iterator[BinaryIO]:
  """A binary file to stream into that appears at ``path`` complete, or not at all (:func:`write_atomic`'s rules).

  For outputs too large to hold in memory: the body writes to a temporary file beside ``path``; on a normal exit it
  is fsync-ed and published, on an exception it is removed and ``path`` is untouched.

  Args:
    path: destination file; its directory must exist.
    overwrite: replace an existing file. When False an existing ``path`` raises FileExistsError and is untouched.

  Yields:
    The open temporary file.

  Raises:
    FileExistsError: ``path`` exists and ``overwrite`` is off (before the body runs, and again at publishing).
  """
  path = Path(path)
  if not overwrite and path.exists():
    raise FileExistsError(f"refusing to overwrite existing file {path}")
  tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")
  try:
    with open(tmp, "xb") as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    _publish(tmp, path, overwrite)
  finally:
    tmp.unlink(missing_ok=True)
  _fsync_dir(path.parent)
