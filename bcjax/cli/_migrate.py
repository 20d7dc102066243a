"""``bcjax migrate``: move a LanceDB table to the new model while serving it (:func:`bcjax.upgrade.start_migration`).

  bcjax migrate start --db DB --table T --map MAP [--new-table T2]
  bcjax migrate add --db DB --table T --ids IDS.npy --vectors NEW.npy [--queries Q.npy --relevant R.npy [--k 10]]
                    [--batch-rows N]
  bcjax migrate status --db DB --table T [--json]
  bcjax migrate switch --db DB --table T
  bcjax migrate rollback --db DB --table T

The migration's folder is ``DB/T.bcjax-migration`` unless ``--state`` names another. ``add`` writes the new-model
vectors in batches, records progress in the new table itself (a killed ``add`` run again skips the rows already
written) and, with ``--queries``/``--relevant``, prints the served search's recall before the first batch and after
each one.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bcjax._faults import kill_if_asked
from bcjax.cli._common import UsageError, progress_bar
from bcjax.upgrade import _files, _map
from bcjax.upgrade.stores import LanceDBStore, Migration, RecallPoint, open_migration, start_migration

STATE_SUFFIX = ".bcjax-migration"


def add_parser(sub) -> None:
  """Adds ``migrate`` and its actions to the ``bcjax`` command's subparsers."""
  common = argparse.ArgumentParser(add_help=False)
  common.add_argument("--db", required=True, help="the LanceDB database directory")
  common.add_argument("--table", required=True, help="the old model's table (never written to)")
  common.add_argument("--state", help=f"the migration's folder (default: DB/TABLE{STATE_SUFFIX})")
  common.add_argument("--vector-column", default="vector", help="the tables' vector column (default vector)")
  common.add_argument("--id-column", default="id", help="the tables' integer id column (default id)")
  p = sub.add_parser(
    "migrate",
    help="move a LanceDB table to the new model while serving it: start, add re-embedded batches (resumable, recall "
    "as the share grows), status, switch, or roll back",
    epilog="exit status: 0 done, 2 bad input (nothing written), 1 the migration's state forbids the step (a switch "
    "before every document is re-embedded, an add after a switch or a rollback)",
  )
  actions = p.add_subparsers(dest="action", required=True)
  a = actions.add_parser("start", parents=[common], help="create the new-model table and the migration's folder")
  a.add_argument("--map", required=True, help="the map file (bcjax fit --out) that serves the old table meanwhile")
  a.add_argument("--new-table", help="the new model's table to create (default: TABLE_new)")
  a = actions.add_parser("add", parents=[common], help="write re-embedded documents' new-model vectors, in batches")
  a.add_argument("--ids", required=True, help="integer .npy [n]: the documents' ids in the old table")
  a.add_argument("--vectors", required=True, help=".npy [n, D_k]: their new-model vectors, row for row")
  a.add_argument("--queries", help=".npy [Q, D_k]: new-model queries whose relevant documents are known")
  a.add_argument("--relevant", help="integer .npy [Q]: each query's relevant document id (with --queries)")
  a.add_argument("--k", type=int, default=10, help="recall cut-off (default 10)")
  a.add_argument("--batch-rows", type=int, default=10_000, help="rows written per batch (default 10,000)")
  a.add_argument("--no-progress", action="store_true", help="no progress bar")
  a = actions.add_parser("status", parents=[common], help="the state, the share re-embedded and recall so far")
  a.add_argument("--json", action="store_true", help="print JSON")
  actions.add_parser("switch", parents=[common], help="serve the new table alone (every document re-embedded)")
  actions.add_parser("rollback", parents=[common], help="drop the new table; the old one serves through the map")
  p.set_defaults(run=run)


def _state_dir(args) -> Path:
  return Path(args.state) if args.state else Path(args.db) / f"{args.table}{STATE_SUFFIX}"


def _store(args, table: str) -> LanceDBStore:
  return LanceDBStore(args.db, table, vector_column=args.vector_column, id_column=args.id_column)


def _open(args) -> Migration:
  path = _state_dir(args)
  if not path.is_dir():
    raise _usage(f"`--state` {path}: no migration there (start one with `bcjax migrate start`)")
  try:
    old = _store(args, args.table)
  except ValueError as e:
    raise _usage(str(e)) from None
  return open_migration(path, old, lambda notes: _store(args, notes["new_table"]))


def _usage(message: str) -> Exception:
  return UsageError(message)


def _start(args) -> None:
  path = _state_dir(args)
  if path.exists():
    raise _usage(f"`--state` {path} exists: a migration is under way there (`bcjax migrate status`)")
  try:  # a missing or foreign map, a missing database or table: bad input, before anything is written
    upgrade_map, _ = _map.load_map(args.map)
    old = _store(args, args.table)
  except ValueError as e:
    raise _usage(str(e)) from None
  new_table = args.new_table or f"{args.table}_new"
  try:
    new = LanceDBStore.create(
      args.db, new_table, upgrade_map.dims[1], vector_column=args.vector_column, id_column=args.id_column
    )
  except ValueError as e:
    raise _usage(str(e)) from None
  try:
    start_migration(path, old, new, upgrade_map, notes={"new_table": new_table, "map": str(args.map)})
  except ValueError:
    new.drop()  # the table this command created, before anything was written to it
    raise
  print(f"started {path.name}: {old.count()} documents of {args.table!r} to re-embed into {new_table!r}")


def _read_ids(path: str, flag: str) -> np.ndarray:
  try:
    ids = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise _usage(f"`{flag}` {path} cannot be read as an integer .npy ({e})") from None
  if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
    raise _usage(f"`{flag}` {path} must be integers [n], got {ids.shape} {ids.dtype}")
  return ids.astype(np.int64)


def _add(args) -> None:
  if args.batch_rows < 1 or args.k < 1:
    raise _usage(f"`--batch-rows` and `--k` must be >= 1, got {args.batch_rows} and {args.k}")
  if (args.queries is None) != (args.relevant is None):
    raise _usage("pass --queries and --relevant together (new-model queries and each one's relevant document id)")
  ids = _read_ids(args.ids, "--ids")
  vectors = _files.open_embeddings(args.vectors, name="--vectors")
  if len(vectors) != len(ids):
    raise _usage(f"`--vectors` has {len(vectors)} rows but `--ids` {len(ids)}: one id per row")
  _files.check_finite_rows(vectors, name="--vectors")
  probe = None
  if args.queries is not None:
    probe = (np.asarray(_files.open_embeddings(args.queries, name="--queries")), _read_ids(args.relevant, "--relevant"))
  if len(np.unique(ids)) != len(ids):
    raise _usage(f"`--ids` {args.ids} repeats ids: one row per document")
  migration = _open(args)
  missing = ids[~np.asarray(migration.old_store.contains(ids), bool)]
  if len(missing):
    raise _usage(f"`--ids` names {len(missing)} documents the old table lacks, e.g. {missing[:5].tolist()}")
  try:
    _map.check_direction(migration.upgrade_map, vectors[: min(len(vectors), 2000)], name="--vectors")
    if probe is not None:
      migration.search(probe[0][:1], 1)  # the queries' width and model, before anything is written
  except ValueError as e:
    raise _usage(str(e)) from None
  if probe is not None and not _measured_now(migration):
    _report(migration.measure(*probe, k=args.k))
  progress = None if args.no_progress else progress_bar("migrate")
  written = 0
  for b, start in enumerate(range(0, len(ids), args.batch_rows)):
    stop = min(start + args.batch_rows, len(ids))
    try:
      written += migration.add(ids[start:stop], np.asarray(vectors[start:stop]))
    except ValueError as e:
      raise _usage(f"rows {start}..{stop - 1}: {e}") from None
    if probe is not None and not _measured_now(migration):  # a batch written before a kill was measured then
      _report(migration.measure(*probe, k=args.k))
    if progress is not None:
      progress(stop, len(ids))
    kill_if_asked(f"migrate-batch-{b}")
  status = migration.status()
  print(f"wrote {written} rows ({len(ids) - written} already there); {status.migrated} of {status.total} re-embedded")


def _measured_now(migration: Migration) -> bool:
  status = migration.status()
  return any(p.migrated == status.migrated for p in status.history)


def _report(point: RecallPoint) -> None:
  print(
    f"{point.share:.1%} re-embedded ({point.migrated} of {point.total}): R@1 {point.recall_at_1:.3f}, "
    f"R@{point.k} {point.recall_at_k:.3f} over {point.queries} queries"
  )


def _status(args) -> None:
  status = _open(args).status()
  if args.json:
    record = status._asdict() | {"share": status.share, "history": [p._asdict() for p in status.history]}
    print(json.dumps(record, indent=1))
    return
  print(f"{status.state}: {status.migrated} of {status.total} documents re-embedded ({status.share:.1%})")
  for point in status.history:
    _report(point)


def run(args) -> None:
  """Runs ``bcjax migrate ACTION``."""
  if args.action == "start":
    _start(args)
  elif args.action == "add":
    _add(args)
  elif args.action == "status":
    _status(args)
  elif args.action == "switch":
    status = _open(args).switch()
    print(f"switched: the new table serves alone ({status.migrated} documents)")
  else:
    status = _open(args).rollback()
    print(f"rolled back: the new table is dropped; {args.table!r} ({status.total} documents) serves through the map")
  sys.stdout.flush()
