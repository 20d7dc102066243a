"""The on-disk format of one registry version: a checksummed header plus an optional ``.npy`` payload.

Layout (bytes)::

  b"bcjax-version 1\\n"
  <64 hex digits: SHA-256 of everything after this line> b"\\n"
  <UTF-8 JSON header, one line> b"\\n"
  <payload: the .npy serialisation of W_k, empty for version 0>

The checksum covers the header and the payload, so any flipped or truncated byte is detected on load.
"""

import hashlib
import io
import json

import numpy as np

MAGIC = b"bcjax-version 1\n"


class CorruptVersionError(Exception):
  """A version file is truncated, altered or not a bcjax version file."""


def encode(header: dict, w: np.ndarray | None) -> bytes:
  """Serialises a version's header and weight (None for the base version)."""
  payload = b""
  if w is not None:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(w), allow_pickle=False)
    payload = buf.getvalue()
  body = json.dumps(header, sort_keys=True).encode() + b"\n" + payload
  return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def decode(data: bytes, source: str) -> tuple[dict, np.ndarray | None, str]:
  """Parses and verifies a version file; returns (header, weight or None, sha256)."""
  if not data.startswith(MAGIC):
    raise CorruptVersionError(f"{source}: not a bcjax version file (bad magic bytes)")
  rest = data[len(MAGIC):]
  digest, sep, body = rest.partition(b"\n")
  if not sep or len(digest) != 64:
    raise CorruptVersionError(f"{source}: truncated or damaged checksum line")
  actual = hashlib.sha256(body).hexdigest()
  if actual != digest.decode("ascii", "replace"):
    raise CorruptVersionError(f"{source}: checksum mismatch (stored {digest.decode('ascii', 'replace')[:16]}..., "
                              f"computed {actual[:16]}...); the file is corrupt")
  header_line, _, payload = body.partition(b"\n")
  try:
    header = json.loads(header_line)
  except ValueError as e:
    raise CorruptVersionError(f"{source}: unreadable header ({e})") from e
  w = None
  if payload:
    try:
      w = np.load(io.BytesIO(payload), allow_pickle=False)
    except ValueError as e:
      raise CorruptVersionError(f"{source}: unreadable weight payload ({e})") from e
  return header, w, actual
