r"""A migration that serves while it re-embeds: an old-model store moved to a new-model store, one batch at a time.

The user re-embeds their documents with the new model and hands bcjax the new vectors in batches; bcjax writes them
to a second store of the new model's width (the *new store*) and never writes to the old one. While the share of
re-embedded documents grows, a query (embedded by the new model) is served from both stores on one score scale:

* the old store answers through the map (:func:`~bcjax.upgrade.bridged_search`: :math:`\cos(B(q), x) - \beta(x)`,
  bridged rows on the old rows' scale);
* the new store answers natively, :math:`\cos(q, y)`;
* every candidate either store returns that has a new-model vector is scored :math:`a_y \cos(q, y) + c_q`, the
  two-stage score of :mod:`bcjax.upgrade._scale`: :math:`c_q` anchors the query's re-embedded candidates where the
  best of them by bridged score stands, so re-embedded documents are ordered by the new model and sit on the level
  of the bridged ones. Candidates found by one store only are read from the other by id.

A document re-embedded is then ranked by the new model among the query's candidates, and a document not yet
re-embedded by the bridge, as before the migration started. Once every document of the old store is in the new
store, :meth:`Migration.switch` serves the new store alone (its cosines); :meth:`Migration.rollback` drops the new
store and serves the old one through the map, as if the migration had never started.

The migration's state lives in a folder of its own: ``migration.json`` (written atomically after every change) and
a copy of the map (``map.bcmap``), so a resumed migration serves with the map it started with. How far it has come
is read from the new store itself (its row count): a batch written before a kill is not written again, and a batch
interrupted mid-write is written whole when it is handed over again (stores add a batch atomically; ids already in
the new store are skipped).
"""

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bcjax import _atomic
from bcjax.upgrade import _map
from bcjax.upgrade.stores import _migration_search
from bcjax.upgrade.stores._bridged import bridged_search
from bcjax.upgrade.stores._protocol import SearchResult

MANIFEST = "migration.json"
MAP_FILE = "map.bcmap"
SCHEMA = 1
"""The manifest's schema version: a manifest of another version is refused, never read as this one."""
MIGRATING, SWITCHED, ROLLED_BACK = "migrating", "switched", "rolled back"
STATES = (MIGRATING, SWITCHED, ROLLED_BACK)


class MigrationError(RuntimeError):
  """A migration's state forbids the step asked for (a switch before every document is re-embedded, ...)."""


class RecallPoint(NamedTuple):
  """Recall of the served search at one share of the migration.

  ``migrated`` of ``total`` documents re-embedded; over ``queries`` queries with one relevant document each, the
  share whose document is first (``recall_at_1``) and in the top ``k`` (``recall_at_k``).
  """

  migrated: int
  total: int
  queries: int
  k: int
  recall_at_1: float
  recall_at_k: float

  @property
  def share(self) -> float:
    """The share of the old store's documents re-embedded."""
    return self.migrated / self.total if self.total else 0.0


class MigrationStatus(NamedTuple):
  """Where a migration stands: its state, ``migrated`` of the old store's ``total`` documents, recall so far."""

  state: str
  migrated: int
  total: int
  history: tuple[RecallPoint, ...]

  @property
  def share(self) -> float:
    """The share of the old store's documents re-embedded."""
    return self.migrated / self.total if self.total else 0.0


class Migration:
  """An old store being moved to a new-model store (:mod:`bcjax.upgrade.stores._migration`).

  Made by :func:`start_migration` or :func:`open_migration`, never directly. ``old_store`` and ``new_store`` are
  :class:`~bcjax.upgrade.VectorStore` objects; the new store also has ``contains(ids) -> bools`` and ``drop()``
  (:class:`~bcjax.upgrade.LanceDBStore` has both). ``upgrade_map`` is the map the migration started with.
  """

  def __init__(self, path: Path, old_store, new_store, upgrade_map: _map.UpgradeMap, manifest: dict):
    self.path, self.old_store, self.new_store, self.upgrade_map = path, old_store, new_store, upgrade_map
    self._manifest = manifest
    self._seen = _stamp(path)

  @property
  def state(self) -> str:
    """``migrating``, ``switched`` or ``rolled back``: as the manifest says now (another process may have moved it)."""
    self._reload()
    return self._manifest["state"]

  def _reload(self) -> None:
    """The manifest and both stores as another process left them (a writer adding batches, switching, rolling back)."""
    stamp = _stamp(self.path)
    if stamp != self._seen:
      self._manifest, self._seen = _read_manifest(self.path), stamp
    for store in (self.old_store, self.new_store) if self._manifest["state"] != ROLLED_BACK else (self.old_store,):
      refresh = getattr(store, "refresh", None)
      if callable(refresh):
        refresh()

  def status(self) -> MigrationStatus:
    """The state, the documents re-embedded (the new store's rows) of the old store's, and the recall history."""
    state = self.state
    migrated = 0 if state == ROLLED_BACK else self.new_store.count()
    history = tuple(RecallPoint(**p) for p in self._manifest["history"])
    return MigrationStatus(state, migrated, self.old_store.count(), history)

  @property
  def notes(self) -> dict:
    """What the caller stored with the migration when it started (the CLI: its stores' names)."""
    return dict(self._manifest.get("notes", {}))

  def add(self, ids, new_vectors) -> int:
    """Writes re-embedded documents' new-model vectors to the new store; returns how many rows it wrote.

    Ids already in the new store are skipped (a batch handed over again after a kill is not written twice).

    Args:
      ids: the documents' ids in the old store, [n] distinct integers.
      new_vectors: their new-model vectors, [n, D_k], finite.

    Returns:
      The rows written (n less those already in the new store).

    Raises:
      ValueError: naming the argument, for ids that are not distinct integers one per row, ids the old store lacks,
        vectors that are not finite or not the new model's (:func:`~bcjax.upgrade.check_direction`).
      MigrationError: when the migration has switched or rolled back.
    """
    self._require(MIGRATING, "add documents")
    ids, new_vectors = _checked_batch(ids, new_vectors, self.upgrade_map)
    try:
      self.old_store.read(ids)
    except KeyError as e:
      raise ValueError(f"Migration.add: `ids` names documents the old store lacks ({e.args[0]})") from None
    fresh = ~np.asarray(self.new_store.contains(ids), bool)
    if fresh.any():
      self.new_store.add(ids[fresh], np.asarray(new_vectors[fresh], np.float32))
    return int(fresh.sum())

  def search(self, queries, k: int, *, overfetch: int = 4) -> SearchResult:
    """Each new-model query's top k over both stores on one scale (:mod:`bcjax.upgrade.stores._migration`).

    Args:
      queries: new-model query embeddings, [Q, D_k].
      k: results per query.
      overfetch: candidates asked of each store per result.

    Returns:
      A :class:`~bcjax.upgrade.SearchResult`: ids and scores, best first. Switched: the new store's cosines;
      rolled back or before any document is re-embedded: the bridged search of the old store.

    Raises:
      ValueError: for queries that are not the new model's, k < 1 or overfetch < 1.
    """
    queries = np.asarray(queries)
    if k < 1 or overfetch < 1:
      raise ValueError(f"Migration.search: `k` and `overfetch` must be >= 1, got {k} and {overfetch}")
    _map.check_direction(self.upgrade_map, queries, name="queries")
    state = self.state
    if state == SWITCHED:
      return _migration_search.native(self.new_store, queries, k)
    if state == ROLLED_BACK or self.new_store.count() == 0:
      return bridged_search(self.old_store, self.upgrade_map, queries, k)
    return _migration_search.served_search(self.old_store, self.new_store, self.upgrade_map, queries, k, overfetch)

  def measure(self, queries, relevant, *, k: int = 10) -> RecallPoint:
    """Recall of :meth:`search` at the current share, recorded in the migration's history.

    Args:
      queries: new-model query embeddings, [Q, D_k].
      relevant: each query's relevant document id, [Q].
      k: the cut-off of the second recall.

    Returns:
      The :class:`RecallPoint`.

    Raises:
      ValueError: for a ``relevant`` that is not one integer per query, or the errors of :meth:`search`.
    """
    relevant = np.asarray(relevant)
    queries = np.asarray(queries)
    if relevant.ndim != 1 or len(relevant) != len(queries) or not np.issubdtype(relevant.dtype, np.integer):
      raise ValueError(
        f"Migration.measure: `relevant` must be one integer id per query ({len(queries)}), got {relevant.shape} "
        f"{relevant.dtype}"
      )
    if len(queries) == 0:
      raise ValueError("Migration.measure: `queries` is empty")
    found = self.search(queries, k).ids
    status = self.status()
    point = RecallPoint(
      status.migrated,
      status.total,
      len(queries),
      k,
      float(np.mean(found[:, 0] == relevant)),
      float(np.mean((found == relevant[:, None]).any(axis=1))),
    )
    self._manifest["history"].append(point._asdict())
    self._save()
    return point

  def switch(self) -> MigrationStatus:
    """Serves the new store alone from now on; every document of the old store must be in it.

    Returns:
      The :class:`MigrationStatus` after the switch.

    Raises:
      MigrationError: when documents of the old store are not re-embedded yet, or the migration is not migrating.
    """
    self._require(MIGRATING, "switch")
    status = self.status()
    if status.migrated < status.total:
      raise MigrationError(
        f"cannot switch: {status.total - status.migrated} of the old store's {status.total} documents have no "
        f"new-model vector yet (add them, or roll back)"
      )
    self._manifest["state"] = SWITCHED
    self._save()
    return self.status()

  def rollback(self) -> MigrationStatus:
    """Drops the new store and serves the old one through the map; the old store was never written to.

    Returns:
      The :class:`MigrationStatus` after the rollback.

    Raises:
      MigrationError: when the migration has already rolled back.
    """
    if self.state == ROLLED_BACK:
      raise MigrationError("the migration has already rolled back")
    self._manifest["state"] = ROLLED_BACK  # first: a kill after it leaves a rolled-back migration, never a half one
    self._save()
    self.new_store.drop()
    return self.status()

  def _require(self, state: str, what: str) -> None:
    now = self.state
    if now != state:
      raise MigrationError(f"cannot {what}: the migration has {now} ({self.path / MANIFEST})")

  def _save(self) -> None:
    data = json.dumps(self._manifest, indent=1, sort_keys=True).encode()
    _atomic.write_atomic(self.path / MANIFEST, data, overwrite=True)
    self._seen = _stamp(self.path)


def _stamp(path: Path) -> tuple[int, int]:
  """The manifest's (inode, modification time): an atomic rewrite changes the inode."""
  info = (path / MANIFEST).stat()
  return info.st_ino, info.st_mtime_ns


def _read_manifest(path: Path) -> dict:
  try:
    manifest = json.loads((path / MANIFEST).read_text())
  except FileNotFoundError:
    raise MigrationError(f"no migration in {path} (no {MANIFEST}; start one with start_migration)") from None
  except json.JSONDecodeError as e:
    raise MigrationError(f"{path / MANIFEST} is not JSON ({e})") from None
  if manifest.get("schema") != SCHEMA or manifest.get("state") not in STATES:
    raise MigrationError(
      f"{path / MANIFEST} has schema {manifest.get('schema')!r} and state {manifest.get('state')!r}; this bcjax reads "
      f"schema {SCHEMA} with a state in {STATES}"
    )
  return manifest


def _checked_batch(ids, new_vectors, upgrade_map: _map.UpgradeMap) -> tuple[np.ndarray, np.ndarray]:
  ids, new_vectors = np.asarray(ids), np.asarray(new_vectors)
  if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or len(np.unique(ids)) != len(ids):
    raise ValueError(f"Migration.add: `ids` must be distinct integers, [n]; got {ids.shape} {ids.dtype}")
  if new_vectors.ndim != 2 or len(new_vectors) != len(ids):
    raise ValueError(f"Migration.add: `new_vectors` must be [{len(ids)}, D_k], one row per id; got {new_vectors.shape}")
  if not np.issubdtype(new_vectors.dtype, np.floating) or not np.all(np.isfinite(new_vectors)):
    bad = np.flatnonzero(~np.isfinite(new_vectors).all(axis=1))[:5].tolist() if new_vectors.dtype.kind == "f" else []
    raise ValueError(f"Migration.add: `new_vectors` must be finite floats; rows {bad} are not ({new_vectors.dtype})")
  _map.check_direction(upgrade_map, new_vectors, name="new_vectors")
  return ids.astype(np.int64), new_vectors


def start_migration(
  path: str | os.PathLike, old_store, new_store, upgrade_map: _map.UpgradeMap, *, notes: dict | None = None
) -> Migration:
  """Starts migrating ``old_store`` to the empty ``new_store``; its state goes in the new folder ``path``.

  Args:
    path: a folder that does not exist yet (its parent must): the manifest and a copy of the map go there.
    old_store: the old-model store (:class:`~bcjax.upgrade.VectorStore`); never written to.
    new_store: an empty store of the new model's width D_k, with ``contains(ids)`` and ``drop()``.
    upgrade_map: the fitted map, new -> old, that serves the old store meanwhile.
    notes: JSON-able notes kept in the manifest (:attr:`Migration.notes`).

  Returns:
    The :class:`Migration`.

  Raises:
    ValueError: when ``path`` exists, a store's width is not the map's, or ``new_store`` is not empty.
  """
  path = Path(path)
  if path.exists():
    raise ValueError(
      f"start_migration: `path` {path} exists; a migration starts in a new folder (open_migration resumes)"
    )
  d_prev, d_new = upgrade_map.dims
  if old_store.dim != d_prev or new_store.dim != d_new:
    raise ValueError(
      f"start_migration: the stores hold {old_store.dim}-d and {new_store.dim}-d vectors; the map takes the new "
      f"model's D_k={d_new} to the old model's D_(k-1)={d_prev}"
    )
  if new_store.count():
    raise ValueError(f"start_migration: `new_store` holds {new_store.count()} rows; a migration starts empty")
  for name in ("contains", "drop"):
    if not callable(getattr(new_store, name, None)):
      raise ValueError(f"start_migration: `new_store` has no {name}() (LanceDBStore has both)")
  tmp = path.with_name(f".{path.name}.starting")
  tmp.mkdir()
  _map.save_map(upgrade_map, tmp / MAP_FILE)
  manifest = {"schema": SCHEMA, "state": MIGRATING, "history": [], "dims": list(upgrade_map.dims), "notes": notes or {}}
  _atomic.write_atomic(tmp / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
  os.rename(tmp, path)  # the folder appears complete or not at all
  return Migration(path, old_store, new_store, upgrade_map, manifest)


def open_migration(path: str | os.PathLike, old_store, new_store) -> Migration:
  """Opens the migration in ``path`` (after a kill, in another process, ...) with the map it started with.

  Args:
    path: the migration's folder (:func:`start_migration`).
    old_store: its old store.
    new_store: its new store, or a function of the notes given at the start (:attr:`Migration.notes`) that opens
      it; after a rollback it is not read (nor the function called).

  Returns:
    The :class:`Migration`.

  Raises:
    MigrationError: when ``path`` holds no migration or one of another schema.
  """
  path = Path(path)
  manifest = _read_manifest(path)
  upgrade_map, _ = _map.load_map(path / MAP_FILE)
  if callable(new_store):
    new_store = None if manifest["state"] == ROLLED_BACK else new_store(dict(manifest.get("notes", {})))
  return Migration(path, old_store, new_store, upgrade_map, manifest)
