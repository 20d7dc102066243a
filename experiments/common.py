"""Output plumbing shared by the experiments: run directories, JSONL metrics, JSON results, markdown tables."""

import datetime
import io
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bcjax.files import write_atomic


def check_out_dir(out: str | os.PathLike) -> Path:
  """Refuses a directory that already holds results, so no run is overwritten; creates nothing."""
  out = Path(out)
  if out.exists() and (not out.is_dir() or any(out.iterdir())):
    raise FileExistsError(f"output directory {out} is not empty; choose a new --out so earlier results are kept")
  return out


def prepare_out_dir(out: str | os.PathLike) -> Path:
  """Creates ``out`` for a new run; refuses a directory that already holds results, so no run is overwritten."""
  out = check_out_dir(out)
  out.mkdir(parents=True, exist_ok=True)
  return out


LOAD_ERRORS = (FileNotFoundError, FileExistsError, ValueError, ConnectionError)


def open_run(out: str | os.PathLike | None, name: str, load: Callable):
  """Loads and checks the data, then creates the run directory (``out``, default ``runs/<name>-<time>``) and returns
  ``(directory, load())``; when the directory holds results or the data cannot be read it prints the one-line error,
  creates nothing and returns None."""
  try:
    path = check_out_dir(out or f"runs/{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    data = load()
    return prepare_out_dir(path), data
  except LOAD_ERRORS as e:
    print(f"error: {e}", file=sys.stderr)
    return None


def write_json(path: Path, obj) -> None:
  """Writes ``obj`` as indented JSON, atomically and never over an existing file."""
  write_atomic(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def write_text(path: Path, text: str) -> None:
  """Writes text atomically, never over an existing file."""
  write_atomic(path, text.encode())


class MetricWriter:
  """Appends one JSON object per logging step to ``metrics.jsonl`` (line-buffered, flushed per line)."""

  def __init__(self, path: Path):
    self._file = open(path, "x", buffering=1)

  def write(self, **record) -> None:
    record.setdefault("time", datetime.datetime.now(datetime.timezone.utc).isoformat())
    self._file.write(json.dumps(record) + "\n")

  def close(self) -> None:
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], floatfmt: str = ".4f") -> str:
  """A GitHub-flavoured markdown table; floats are formatted with ``floatfmt``."""
  def cell(v):
    return format(v, floatfmt) if isinstance(v, float) else str(v)
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
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  buf = io.BytesIO()
  fig.savefig(buf, format="png", dpi=dpi)
  plt.close(fig)
  write_atomic(path, buf.getvalue())
