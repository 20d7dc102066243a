r"""The on-disk format of one registry version: a checksummed header plus an optional array payload.

Layout (bytes)::

  b"bcjax-version F\n"            F = 1 or 2
  <64 hex digits: SHA-256 of everything after this line> b"\n"
  <UTF-8 JSON header, one line> b"\n"
  <payload>

Format 1 (a linear B_k, and every registry written before the transform family): the payload is the ``.npy``
serialisation of W_k, empty for version 0. Format 2 (any other kind of B_k): the payload is an ``.npz`` archive
(no pickles) of the kind's named parameter arrays; the header names the kind and its hyper-parameters. Linear
versions are still written in format 1, so registries of linear maps stay readable by older bcjax.

The checksum covers the header and the payload, so any flipped or truncated byte is detected on load.
"""

import hashlib
import io
import json
import zipfile
from typing import Any

import numpy as np

MAGIC = b"bcjax-version 1\n"
MAGIC_ARRAYS = b"bcjax-version 2\n"


class CorruptVersionError(Exception):
  """A version file is truncated, altered or not a bcjax version file."""


def encode(header: dict, w: np.ndarray | dict[str, np.ndarray] | None) -> bytes:
  """Serialises a version's header and its parameters.

  Serialises a version's header and its weight (format 1), named parameter arrays (format 2) or nothing (the base
  version).
  """
  payload, magic = b"", MAGIC
  if isinstance(w, dict):
    buf = io.BytesIO()
    arrays: dict[str, Any] = {name: np.ascontiguousarray(a) for name, a in sorted(w.items())}
    np.savez(buf, **arrays)
    payload, magic = buf.getvalue(), MAGIC_ARRAYS
  elif w is not None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(w), allow_pickle=False)
    payload = buf.getvalue()
  body = json.dumps(header, sort_keys=True).encode() + b"\n" + payload
  return magic + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode(data: bytes, source: str) -> tuple[dict, np.ndarray | dict[str, np.ndarray] | None, str]:
  """Parses and verifies a version file.

  Returns (header, the weight array (format 1), the named parameter arrays (format 2) or None (the base version),
  sha256).
  """
  if not data.startswith((MAGIC, MAGIC_ARRAYS)):
    raise CorruptVersionError(f"{source}: not a bcjax version file (bad magic bytes)")
  arrays = data.startswith(MAGIC_ARRAYS)
  rest = data[len(MAGIC) :]
  digest, sep, body = rest.partition(b"\n")
  if not sep or len(digest) != 64:
    raise CorruptVersionError(f"{source}: truncated or damaged checksum line")
  actual = hashlib.sha256(body).hexdigest()
  if actual != digest.decode("ascii", "replace"):
    raise CorruptVersionError(
      f"{source}: checksum mismatch (stored {digest.decode('ascii', 'replace')[:16]}..., "
      f"computed {actual[:16]}...); the file is corrupt"
    )
  header_line, _, payload = body.partition(b"\n")
  try:
    header = json.loads(header_line)
  except ValueError as e:
    raise CorruptVersionError(f"{source}: unreadable header ({e})") from e
  w = None
  if payload:
    try:
      if arrays:
        with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
          w = {name: archive[name] for name in archive.files}
      else:
        w = np.load(io.BytesIO(payload), allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, KeyError) as e:
      raise CorruptVersionError(f"{source}: unreadable weight payload ({e})") from e
  elif arrays:
    raise CorruptVersionError(f"{source}: a format-2 version without its parameter arrays")
  return header, w, actual
