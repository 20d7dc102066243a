"""Reading the public data formats: one error type, and line readers that name the file and line of every problem.

Every loader in ``bcjax.data`` and ``bcjax.sentence`` reads through here, so a truncated gzip stream, a corrupt zip,
bytes that are not in the file's encoding or a line of the wrong shape all end in :class:`DataFormatError` naming the
file (and the line), never in a bare ``UnicodeDecodeError``, ``zlib.error``, ``EOFError`` or ``IndexError``.
"""

import gzip
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

# What a damaged compressed stream raises: gzip.BadGzipFile is an OSError, zlib.error and EOFError are not, and a
# zip whose flag bits were damaged claims encryption (RuntimeError) or an unknown method (NotImplementedError).
_STREAM_ERRORS = (
  OSError,
  EOFError,
  zlib.error,
  zipfile.BadZipFile,
  zipfile.LargeZipFile,
  RuntimeError,
  NotImplementedError,
)


# Numbers as the public formats write them: plain ASCII decimals. Python's int() and float() would also take '1_0',
# full-width or Arabic-Indic digits and 'nan', which a damaged file can produce.
INTEGER = re.compile(r"[-+]?[0-9]+")
DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


class DataFormatError(ValueError):
  """A data file that is not in the format its reader expects.

  The message names the file and, for text formats, the 1-based line number.
  """


def fail(name: str, lineno: int | None, what: str, line: str | None = None):
  """Raises :class:`DataFormatError` with the file, the line and (a prefix of) the offending text."""
  where = f"{name}, line {lineno}" if lineno is not None else name
  shown = f": {line[:120]!r}" if line is not None else ""
  raise DataFormatError(f"{where}: {what}{shown}")


def open_zip(path: Path) -> zipfile.ZipFile:
  """Opens a zip archive, turning a corrupt or truncated one into a clear error."""
  try:
    return zipfile.ZipFile(path)
  except _STREAM_ERRORS as e:
    raise DataFormatError(
      f"{path}: not a readable zip archive ({type(e).__name__}: {e}); if it was downloaded, "
      f"delete it and download it again"
    ) from e


def open_binary(
  path: str | os.PathLike, member: str | None = None, archive: zipfile.ZipFile | None = None
) -> IO[bytes]:
  """A binary stream of ``path`` (plain, or gzip when it ends in ``.gz``), or of ``member`` of a zip archive."""
  path = Path(path)
  if archive is not None or member is not None:
    archive = archive or open_zip(path)
    try:
      return archive.open(str(member))
    except KeyError:
      raise DataFormatError(f"{path}: the archive has no member {member!r}") from None
    except _STREAM_ERRORS as e:
      raise DataFormatError(f"{path}:{member}: cannot read the archive member ({e})") from e
  if not path.is_file():
    raise FileNotFoundError(f"{path} does not exist")
  return cast(IO[bytes], gzip.open(path, "rb")) if path.suffix == ".gz" else open(path, "rb")


def iter_lines(
  path: str | os.PathLike,
  *,
  encoding: str = "utf-8",
  member: str | None = None,
  archive: zipfile.ZipFile | None = None,
  name: str | None = None,
) -> Iterator[tuple[int, str]]:
  r"""(1-based line number, line without its ``\n`` or ``\r\n``) for every line, empty ones included.

  Lines are decoded one at a time, so bytes that are not valid ``encoding`` are reported with their line. A damaged
  gzip or zip stream is reported as soon as it is met.
  """
  name = name or (f"{path}:{member}" if member is not None else str(path))
  stream = open_binary(path, member, archive)
  lineno = 0
  try:
    with stream:
      for lineno, raw in enumerate(stream, start=1):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw.rstrip(b"\n")
        try:
          line = raw.decode(encoding)
        except UnicodeDecodeError as e:
          fail(name, lineno, f"not valid {encoding} (byte 0x{raw[e.start]:02x} at column {e.start + 1})")
        yield lineno, line
  except _STREAM_ERRORS as e:
    if isinstance(e, FileNotFoundError):
      raise
    raise DataFormatError(
      f"{name}: the file is truncated or corrupt after line {lineno} ({type(e).__name__}: {e})"
    ) from e


def read_bytes(path: str | os.PathLike, member: str | None = None, archive: zipfile.ZipFile | None = None) -> bytes:
  """The whole (decompressed) content of a file or archive member, with damage reported as :class:`DataFormatError`."""
  name = f"{path}:{member}" if member is not None else str(path)
  try:
    with open_binary(path, member, archive) as f:
      data = f.read()
  except FileNotFoundError:
    raise
  except _STREAM_ERRORS as e:
    raise DataFormatError(f"{name}: the file is truncated or corrupt ({type(e).__name__}: {e})") from e
  return data


def decode_text(data: bytes, name: str, encodings: tuple[str, ...] = ("utf-8",)) -> str:
  """``data`` decoded with the first of ``encodings`` that fits (e.g. UTF-8, then MovieLens 1M's Latin-1)."""
  for encoding in encodings:
    try:
      return data.decode(encoding)
    except UnicodeDecodeError as e:
      error = e
  line = data[: error.start].count(b"\n") + 1
  fail(name, line, f"not valid {' or '.join(encodings)}")
  raise AssertionError("unreachable: `fail` raises")
