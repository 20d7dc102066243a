"""A LanceDB table (embedded, on disk) as a bridge's old store: an integer id column and a fixed-size vector column.

LanceDB writes are versioned and atomic; rows added through the bridge are appended, never written over. The ids of
rows written through the map (``add(..., bridged=True)``) are listed in a table of their own beside it,
``<table>__bcjax_bridged``, written before the rows themselves (an id listed there that the table lacks is ignored).
"""

import contextlib
import os

import numpy as np

from bcjax._extras import require

_IN_CHUNK = 1000  # ids per `IN (...)` filter
BRIDGED_SUFFIX = "__bcjax_bridged"


class LanceDBStore:
  """The table ``table`` of the LanceDB database at ``uri`` as a :class:`VectorStore`.

  Args:
    uri: the database directory (``lancedb.connect``'s); a local one must exist (opening never creates one), a
      URI with a scheme (``s3://...``) is passed to LanceDB as it is.
    table: the table's name.
    vector_column: the fixed-size float vector column.
    id_column: the integer id column.
  """

  def __init__(self, uri: str | os.PathLike, table: str, *, vector_column: str = "vector", id_column: str = "id"):
    self._lancedb = require("lancedb", "stores", "LanceDBStore")
    self._pa = require("pyarrow", "stores", "LanceDBStore")
    if "://" not in str(uri) and not os.path.isdir(uri):
      raise ValueError(f"LanceDBStore: `uri` {str(uri)!r} is not a directory (a LanceDB database)")
    self.db = self._lancedb.connect(str(uri))
    try:
      self.table = self.db.open_table(table)
    except (FileNotFoundError, ValueError) as e:
      raise ValueError(f"LanceDBStore: no table {table!r} in {uri} ({e})") from None
    schema = self.table.schema
    for name in (vector_column, id_column):
      if name not in schema.names:
        raise ValueError(f"LanceDBStore: table {table!r} has no column {name!r} (columns: {schema.names})")
    vtype = schema.field(vector_column).type
    if not self._pa.types.is_fixed_size_list(vtype):
      raise ValueError(f"LanceDBStore: column {vector_column!r} is {vtype}, not a fixed-size list of floats")
    if not self._pa.types.is_integer(schema.field(id_column).type):
      raise ValueError(f"LanceDBStore: column {id_column!r} is {schema.field(id_column).type}, not integers")
    self.vector_column, self.id_column, self.name = vector_column, id_column, table
    self._dim = int(vtype.list_size)
    self.bridged_table = f"{table}{BRIDGED_SUFFIX}"
    self._bridged: np.ndarray | None = None  # read at the first need

  @classmethod
  def create(
    cls, uri: str | os.PathLike, table: str, dim: int, *, vector_column: str = "vector", id_column: str = "id"
  ) -> "LanceDBStore":
    """Creates the empty table ``table`` (int64 ids, ``dim`` float32 columns) in the database at ``uri``; opens it.

    Args:
      uri: the database directory; a local one must exist.
      table: the new table's name; a table of that name already there raises ValueError (nothing is overwritten).
      dim: the vectors' width.
      vector_column: the vector column's name.
      id_column: the id column's name.

    Returns:
      The new table as a :class:`LanceDBStore`.
    """
    lancedb, pa = require("lancedb", "stores", "LanceDBStore"), require("pyarrow", "stores", "LanceDBStore")
    if "://" not in str(uri) and not os.path.isdir(uri):
      raise ValueError(f"LanceDBStore.create: `uri` {str(uri)!r} is not a directory (a LanceDB database)")
    if dim < 1:
      raise ValueError(f"LanceDBStore.create: `dim` must be >= 1, got {dim}")
    schema = pa.schema([(id_column, pa.int64()), (vector_column, pa.list_(pa.float32(), dim))])
    try:
      lancedb.connect(str(uri)).create_table(table, schema=schema, mode="create")
    except (ValueError, OSError) as e:
      raise ValueError(f"LanceDBStore.create: cannot create table {table!r} in {uri} ({e})") from None
    return cls(uri, table, vector_column=vector_column, id_column=id_column)

  @property
  def dim(self) -> int:
    return self._dim

  @property
  def version(self) -> int:
    """The table's LanceDB version: every write makes a new one."""
    return int(self.table.version)

  def refresh(self) -> None:
    """Reads the table's latest version: rows another process added since it was opened (or last refreshed)."""
    self.table.checkout_latest()
    self._bridged = None

  def contains(self, ids) -> np.ndarray:
    """Whether each of ``ids`` is stored: bools of ``ids``' shape."""
    ids = np.asarray(ids, np.int64)
    return np.isin(ids, self._existing(ids.reshape(-1)))

  def drop(self) -> None:
    """Deletes the table and the list of its bridged rows from the database."""
    for name in (self.bridged_table, self.name):
      with contextlib.suppress(FileNotFoundError, ValueError):  # a bridged list that was never written
        self.db.drop_table(name)

  def count(self) -> int:
    return int(self.table.count_rows())

  def _vectors(self, arrow) -> np.ndarray:
    column = arrow[self.vector_column].combine_chunks()
    return np.asarray(column.values.to_numpy(zero_copy_only=False), np.float32).reshape(len(arrow), self._dim)

  def read(self, ids) -> np.ndarray:
    ids = np.asarray(ids, np.int64)
    found: dict[int, np.ndarray] = {}
    for start in range(0, len(ids), _IN_CHUNK):
      chunk = ids[start : start + _IN_CHUNK]
      where = f"{self.id_column} IN ({', '.join(str(int(i)) for i in chunk)})"
      columns = [self.id_column, self.vector_column]
      rows = self.table.search().where(where).select(columns).limit(len(chunk)).to_arrow()
      for item, vector in zip(rows[self.id_column].to_numpy(), self._vectors(rows)):
        found[int(item)] = vector
    missing = [int(i) for i in ids if int(i) not in found]
    if missing:
      raise KeyError(f"LanceDBStore: ids not in the table: {missing[:10]}")
    return np.stack([found[int(i)] for i in ids]) if len(ids) else np.zeros((0, self._dim), np.float32)

  def candidates(self, queries, k: int):
    queries = np.asarray(queries, np.float32)
    ids = np.full((len(queries), k), -1, np.int64)
    vectors = np.zeros((len(queries), k, self._dim), np.float32)
    if len(queries) == 0:
      return ids, vectors
    result = (
      self.table.search(list(queries))
      .metric("cosine")
      .select([self.id_column, self.vector_column, "_distance"])  # bcjax rescores; naming it keeps lance quiet
      .limit(k)
      .to_arrow()
    )
    which = result["query_index"].to_numpy() if len(queries) > 1 else np.zeros(len(result), np.int64)
    found, found_vectors = result[self.id_column].to_numpy(), self._vectors(result)
    filled = np.zeros(len(queries), np.int64)
    for q, item, vector in zip(which, found, found_vectors):
      j = filled[q]
      if j < k:
        ids[q, j], vectors[q, j] = item, vector
        filled[q] += 1
    return ids, vectors

  def add(self, ids, vectors, *, bridged: bool = False) -> None:
    """Adds rows; ``bridged``: they were written through the map (:func:`~bcjax.upgrade.bridge_items`)."""
    ids = np.asarray(ids, np.int64)
    vectors = np.asarray(vectors, np.float32)
    taken = self._existing(ids)
    if len(taken):
      raise ValueError(f"LanceDBStore.add: ids already stored: {taken[:10].tolist()}")
    if bridged:
      self._mark_bridged(ids)
    pa = self._pa
    values = pa.array(vectors.ravel(), pa.float32())
    table = pa.table(
      {
        self.id_column: pa.array(ids, self.table.schema.field(self.id_column).type),
        self.vector_column: pa.FixedSizeListArray.from_arrays(values, self._dim),
      }
    )
    self.table.add(table)

  def _bridged_ids(self) -> np.ndarray:
    if self._bridged is None:
      try:
        listed = self.db.open_table(self.bridged_table).to_arrow()["id"].to_numpy()
      except (FileNotFoundError, ValueError):  # no row was ever written through the map
        listed = np.zeros(0, np.int64)
      self._bridged = np.unique(np.asarray(listed, np.int64))
    return self._bridged

  def _mark_bridged(self, ids: np.ndarray) -> None:
    pa = self._pa
    rows = pa.table({"id": pa.array(ids, pa.int64())})
    if len(self._bridged_ids()) or self._has_bridged_table():
      self.db.open_table(self.bridged_table).add(rows)
    else:
      self.db.create_table(self.bridged_table, rows)
    self._bridged = np.union1d(self._bridged_ids(), ids)

  def _has_bridged_table(self) -> bool:
    try:
      self.db.open_table(self.bridged_table)
    except (FileNotFoundError, ValueError):
      return False
    return True

  def bridged_rows(self, ids) -> np.ndarray:
    """Whether each of ``ids`` was written through the map: bools of ``ids``' shape."""
    ids = np.asarray(ids, np.int64)
    listed = self._bridged_ids()
    if len(listed) == 0:
      return np.zeros(ids.shape, bool)
    pos = np.clip(np.searchsorted(listed, ids), 0, len(listed) - 1)
    return listed[pos] == ids

  def _existing(self, ids: np.ndarray) -> np.ndarray:
    out = []
    for start in range(0, len(ids), _IN_CHUNK):
      chunk = ids[start : start + _IN_CHUNK]
      where = f"{self.id_column} IN ({', '.join(str(int(i)) for i in chunk)})"
      rows = self.table.search().where(where).select([self.id_column]).limit(len(chunk)).to_arrow()
      out.append(rows[self.id_column].to_numpy())
    return np.concatenate(out) if out else np.zeros(0, np.int64)

  def sample(self, n: int, seed: int = 0) -> np.ndarray:
    """Up to n stored rows drawn uniformly at random without replacement (``seed`` fixes which)."""
    total = self.count()
    if total == 0 or n <= 0:
      return np.zeros((0, self._dim), np.float32)
    if n >= total:  # the whole table, each row once
      return self._vectors(self.table.search().select([self.vector_column]).limit(total).to_arrow())
    offsets = np.sort(np.random.default_rng(seed).choice(total, n, replace=False))
    parts = [
      self._vectors(
        self.table.take_offsets(offsets[s : s + _IN_CHUNK].tolist()).select([self.vector_column]).to_arrow()
      )
      for s in range(0, len(offsets), _IN_CHUNK)
    ]
    return np.concatenate(parts)
