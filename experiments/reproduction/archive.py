"""The run files behind the reproduction page, kept in the repository: ``docs/reproduction/runs/<group>/<run>/``.

Each finished run that a summary reads keeps its ``config.json``, ``results.json`` and ``metrics.jsonl``, gzipped
(deterministically: no timestamp in the gzip header), so that ``python -m experiments.reproduction --check``
regenerates every summary from them with the current summariser and a referee can recompute any number on the page.
A run enters the archive only from a committed, clean tree: one whose ``config.json`` records local changes (or no
commit) is refused, and the message says to rerun it from a clean checkout.
"""

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from bcjax.files import write_atomic

FILES = ("config.json", "results.json", "metrics.jsonl")


class RunFiles(NamedTuple):
  """One run's files as read back: the folder's name, its config and results, and its metrics log's records."""

  name: str
  config: dict
  results: dict
  metrics: list[dict]


def _read(folder: Path, name: str) -> str | None:
  plain, packed = folder / name, folder / f"{name}.gz"
  if plain.is_file():
    return plain.read_text(encoding="utf-8")
  if packed.is_file():
    return gzip.decompress(packed.read_bytes()).decode("utf-8")
  return None


def read_run(folder: Path) -> RunFiles:
  """A run folder's files, plain (a run's own folder) or gzipped (an archived one).

  Raises:
    FileNotFoundError: ``config.json`` or ``results.json`` is missing (an unfinished run).
  """
  texts = {name: _read(folder, name) for name in FILES}
  for name in ("config.json", "results.json"):
    if texts[name] is None:
      raise FileNotFoundError(f"{folder}: no {name} (nor {name}.gz): not a finished run")
  metrics = [json.loads(line) for line in (texts["metrics.jsonl"] or "").splitlines() if line.strip()]
  return RunFiles(folder.name, json.loads(texts["config.json"]), json.loads(texts["results.json"]), metrics)


def is_run(folder: Path) -> bool:
  """Whether ``folder`` holds a finished run (plain or archived)."""
  return all((folder / n).is_file() or (folder / f"{n}.gz").is_file() for n in ("config.json", "results.json"))


def clean_commit(config: Mapping) -> str | None:
  """Why a run may not enter the archive (None when it may): no recorded commit, or local changes."""
  git = (config.get("provenance") or {}).get("git") or {}
  if not git.get("commit"):
    return "its config.json records no git commit"
  if git.get("dirty") is not False:
    return f"it ran from commit {git['commit'][:7]} with local changes"
  return None


def archive_run(folder: Path, dest: Path) -> Path:
  """Copies run ``folder``'s files, gzipped, to ``dest/<folder name>/``; returns that folder.

  Raises:
    ValueError: the run did not come from a committed, clean tree (:func:`clean_commit`).
  """
  run = read_run(folder)
  why = clean_commit(run.config)
  if why is not None:
    raise ValueError(f"{folder.name}: {why}; rerun it from a clean checkout of a commit to put it on the page")
  target = dest / folder.name
  target.mkdir(parents=True, exist_ok=True)
  for name in FILES:
    text = _read(folder, name)
    if text is not None:
      write_atomic(target / f"{name}.gz", gzip.compress(text.encode("utf-8"), mtime=0), overwrite=True)
  return target


def archived_groups(root: Path) -> dict[str, list[Path]]:
  """``{group: [run folders]}`` of the archive at ``root`` (empty when there is none)."""
  if not root.is_dir():
    return {}
  return {
    g.name: sorted(r for r in g.iterdir() if r.is_dir() and is_run(r))
    for g in sorted(p for p in root.iterdir() if p.is_dir())
  }
