"""A download cache for public datasets: files are fetched once, atomically, and a missing network is reported with
what to do instead."""

import os
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from bcjax._atomic import TMP_SUFFIX

CACHE_ENV = "BCJAX_DATA"


def default_cache_dir() -> Path:
  """``$BCJAX_DATA`` when set, else ``~/.cache/bcjax``."""
  return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "bcjax")


def fetch(url: str, cache_dir: str | os.PathLike | None = None, *, filename: str | None = None,
          timeout: float = 60.0) -> Path:
  """Returns the cached copy of ``url``, downloading it first when absent.

  The download goes to a temporary file that is renamed into place only when complete, so an interrupted download
  never leaves a truncated file under the final name.

  Raises:
    ConnectionError: the file is not cached and cannot be downloaded (offline, or the server refused); the message
      names the URL and the path where a manually downloaded copy should be placed.
  """
  cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
  path = cache_dir / (filename or url.rstrip("/").rsplit("/", 1)[-1])
  if path.exists():
    return path
  cache_dir.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
  try:
    with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as f:
      shutil.copyfileobj(response, f)
    os.replace(tmp, path)
  except (urllib.error.URLError, OSError) as e:
    raise ConnectionError(f"cannot download {url} ({e}); if this machine is offline, download it elsewhere and "
                          f"place it at {path}, or pass the directory of the extracted files") from e
  finally:
    tmp.unlink(missing_ok=True)
  return path


def extract_zip(archive: Path, into: Path) -> Path:
  """Extracts ``archive`` under ``into`` (once; a marker file records completion) and returns ``into``."""
  marker = into / f".{archive.name}.extracted"
  if marker.exists():
    return into
  into.mkdir(parents=True, exist_ok=True)
  try:
    with zipfile.ZipFile(archive) as z:
      for member in z.namelist():
        target = (into / member).resolve()
        if not target.is_relative_to(into.resolve()):
          raise ValueError(f"{archive}: member {member!r} would extract outside {into}")
      z.extractall(into)
  except zipfile.BadZipFile as e:
    raise ValueError(f"{archive} is not a valid zip archive ({e}); delete it and download again") from e
  marker.touch()
  return into
