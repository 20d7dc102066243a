"""A download cache for public datasets.

Files are fetched once, atomically, and a missing network is reported with what to do instead.
"""

import hashlib
import os
import shutil
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path

from bcjax._atomic import TMP_SUFFIX
from bcjax._textfile import DataFormatError, open_zip

CACHE_ENV = "BCJAX_DATA"


def download_hint(cache) -> str:
  """How to fetch a missing file, for the Python caller and for the experiments' command line alike."""
  return f"download=True in Python or --download on an experiment's command line (cached in {cache})"


def default_cache_dir() -> Path:
  """``$BCJAX_DATA`` when set, else ``~/.cache/bcjax``.

  Returns:
    The folder (not created).
  """
  return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bcjax")


def sha256_of(path: Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    while block := f.read(1 << 20):
      digest.update(block)
  return digest.hexdigest()


def fetch(
  url: str,
  cache_dir: str | os.PathLike | None = None,
  *,
  filename: str | None = None,
  timeout: float = 60.0,
  sha256: str | None = None,
) -> Path:
  """Returns the cached copy of ``url``, downloading it first when absent.

  The download goes to a temporary file that is renamed into place only when complete, so an interrupted download
  never leaves a truncated file under the final name. With ``sha256`` (for files that are fixed releases) the
  download is checked before it is kept, and so is a copy already in the cache (e.g. one placed there by hand).

  Args:
    url: the file's URL.
    cache_dir: the cache (default :func:`default_cache_dir`).
    filename: the cached file's name (default: the URL's last part).
    timeout: seconds to wait for the server.
    sha256: the expected digest of a fixed release.

  Returns:
    The cached file's path.

  Raises:
    ConnectionError: the file is not cached and cannot be downloaded (offline, or the server refused); the message
      names the URL and the path where a manually downloaded copy should be placed.
    DataFormatError: the file's SHA-256 is not the release's; a bad download is not kept.
  """
  cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
  path = cache_dir / (filename or url.rstrip("/").rsplit("/", 1)[-1])
  if path.exists():
    if sha256 is not None and (got := sha256_of(path)) != sha256:
      raise DataFormatError(
        f"{path}: SHA-256 {got} is not that of the release {url} ({sha256}); the file is damaged "
        f"or another version: delete it to download it again"
      )
    return path
  cache_dir.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
  try:
    try:
      with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as f:
        shutil.copyfileobj(response, f)
    except (urllib.error.URLError, OSError) as e:
      raise ConnectionError(
        f"cannot download {url} ({e}); if this machine is offline, download it elsewhere and "
        f"place it at {path}, or pass the directory of the extracted files"
      ) from e
    if sha256 is not None and (got := sha256_of(tmp)) != sha256:
      raise DataFormatError(
        f"downloaded {url}: SHA-256 {got} is not the release's {sha256}; the download was "
        f"discarded (a proxy error page, a truncated transfer or a changed file)"
      )
    os.replace(tmp, path)
  finally:
    tmp.unlink(missing_ok=True)
  return path


def extract_zip(archive: Path, into: Path) -> Path:
  """Extracts ``archive`` under ``into`` (once; a marker file records completion) and returns ``into``."""
  marker = into / f".{archive.name}.extracted"
  if marker.exists():
    return into
  into.mkdir(parents=True, exist_ok=True)
  with open_zip(archive) as z:
    for member in z.namelist():
      target = (into / member).resolve()
      if not target.is_relative_to(into.resolve()):
        raise DataFormatError(f"{archive}: member {member!r} would extract outside {into}")
    try:
      z.extractall(into)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
      raise DataFormatError(
        f"{archive}: cannot extract ({type(e).__name__}: {e}); delete it and download it again"
      ) from e
  marker.touch()
  return into
