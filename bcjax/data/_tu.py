"""Readers of the two public text formats of graph-classification benchmarks.

* TU format (TU Dortmund collection): ``{name}_A.txt`` (1-based "i, j" node pairs), ``{name}_graph_indicator.txt``,
  ``{name}_graph_labels.txt`` and optional ``{name}_node_labels.txt`` / ``{name}_node_attributes.txt``; read from a
  folder or straight from the official zip (whose member names may carry a ``//``).
* GIN/DGCNN text format: the number of graphs, then per graph a line ``n_nodes label`` followed by ``n_nodes`` lines
  ``tag n_neighbours neighbour ids... [features...]`` with 0-based ids within the graph.

Malformed lines raise :class:`DataFormatError` (a ``ValueError``) naming the file and the line number.
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bcjax._textfile import DECIMAL, INTEGER, fail, iter_lines, open_zip
from bcjax.data._download import default_cache_dir, download_hint, extract_zip, fetch
from bcjax.data._graph_collection import GraphCollection, from_graphs

TU_URL = "https://www.chrsmrrs.com/graphkerneldatasets/{name}.zip"


class _Source:
  """Text files of one dataset, in a folder or a zip archive."""

  def __init__(self, root: Path):
    self.root = root
    self.zip = open_zip(root) if root.is_file() else None
    self.members: dict[str, str] = {}
    if self.zip is not None:
      for member in self.zip.namelist():
        self.members.setdefault(member.replace("\\", "/").rsplit("/", 1)[-1], member)

  def has(self, filename: str) -> bool:
    return filename in self.members if self.zip is not None else (self.root / filename).is_file()

  def name(self, filename: str) -> str:
    return f"{self.root}:{self.members[filename]}" if self.zip is not None else str(self.root / filename)

  def lines(self, filename: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, stripped line) of the non-empty lines."""
    if not self.has(filename):
      if self.zip is not None:  # the archive is there but incomplete or damaged
        fail(str(self.root), None, f"the archive holds no {filename!r} (members: {sorted(self.members)[:8]})")
      raise FileNotFoundError(f"{self.root}: no file {filename!r}")
    if self.zip is not None:
      lines = iter_lines(self.root, member=self.members[filename], archive=self.zip, name=self.name(filename))
    else:
      lines = iter_lines(self.root / filename)
    for lineno, line in lines:
      line = line.strip()
      if line:
        yield lineno, line


def _fail(source: _Source, filename: str, lineno: int, what: str, line: str):
  fail(source.name(filename), lineno, what, line)


# NaN and inf parse, so that the error can say the value is non-finite rather than not a number.
_FLOAT = re.compile(rf"{DECIMAL.pattern}|[-+]?(?:nan|inf)", re.IGNORECASE)


def _numbers(source: _Source, filename: str, kind, width: int | None = None) -> tuple[np.ndarray, list[int]]:
  """Rows of comma/space-separated numbers, [n, width]; also returns their line numbers."""
  pattern = INTEGER if kind is int else _FLOAT
  rows, linenos = [], []
  for lineno, line in source.lines(filename):
    fields = line.replace(",", " ").split()
    if not all(pattern.fullmatch(f) for f in fields):
      _fail(source, filename, lineno, f"expected {kind.__name__} values", line)
    values = [kind(f) for f in fields]
    if kind is float and not np.all(np.isfinite(values)):
      _fail(source, filename, lineno, "non-finite value", line)
    width = len(values) if width is None else width
    if len(values) != width:
      _fail(source, filename, lineno, f"expected {width} values, got {len(values)}", line)
    rows.append(values)
    linenos.append(lineno)
  return np.array(rows, dtype=np.float64 if kind is float else np.int64).reshape(len(rows), width or 0), linenos


def _one_hot_columns(labels: np.ndarray) -> np.ndarray:
  """One-hot of every label column (values re-indexed by sorted unique value), concatenated."""
  blocks = []
  for column in labels.T:
    values, codes = np.unique(column, return_inverse=True)
    blocks.append(np.eye(len(values), dtype=np.float32)[codes])
  return np.concatenate(blocks, axis=1) if blocks else np.zeros((len(labels), 0), np.float32)


def read_tu(
  path: str | os.PathLike,
  name: str | None = None,
  *,
  use_node_attributes: bool = True,
  keep_duplicates: bool = False,
  keep_self_loops: bool = False,
) -> GraphCollection:
  """Reads a TU-format dataset from a folder or zip archive.

  Node features are ``[node attributes ‖ one-hot node labels]`` (PyTorch Geometric's ``TUDataset`` with
  ``use_node_attr=True``; attributes are left out with ``use_node_attributes=False``); a dataset with neither has
  0-wide features. Graph labels are re-indexed to 0..C−1 in sorted order (e.g. TU's 1/2 or −1/1).

  Edges are cleaned as PyTorch Geometric's ``read_tu_data`` does: self-loops are removed and repeated directed
  pairs coalesced into one (some TU files, e.g. IMDB-BINARY's, list every edge twice per direction, which would
  double degrees, degree profiles and GCN normalisation), leaving each graph's edges sorted by (sender, receiver).
  ``keep_duplicates`` / ``keep_self_loops`` keep the file's edges as they are. What was removed is counted in the
  collection's ``notes``.

  The files are checked against each other, so that one cut short is not read as smaller valid data: the graph
  labels against the graph indicator's graphs, the node labels and attributes and the edges' node ids against its
  nodes; a disagreement raises, naming the file the others outvote and the line where it ends or first goes wrong.
  Graphs without edges among graphs with edges are noted, and a run of them after the graph of the edges file's last
  line that chance would not give is noted as an edges file that looks cut short.

  Args:
    path: the folder holding ``{name}_A.txt`` etc., or the official ``{name}.zip``.
    name: the dataset name; defaults to the folder's or archive's stem.
    use_node_attributes: read ``{name}_node_attributes.txt`` where it exists (PyTorch Geometric's
      ``use_node_attr=True``).
    keep_duplicates: keep repeated edges (default: each directed edge once).
    keep_self_loops: keep edges from a node to itself (default: dropped).

  Returns:
    The :class:`GraphCollection`.

  Raises:
    FileNotFoundError: a required file is missing.
    DataFormatError: (a ValueError) a malformed line (file and line number), a damaged archive, or inconsistent
      files.
  """
  root = Path(path)
  if not root.exists():
    raise FileNotFoundError(f"read_tu: {root} does not exist")
  name = name or root.stem
  source = _Source(root)
  files = _TUFiles(source, name, use_node_attributes)
  indicator, num_graphs, n = files.indicator, files.num_graphs, files.num_nodes
  graph_labels = files.graph_labels
  n_node = np.bincount(indicator - 1, minlength=num_graphs)
  pairs, linenos = files.pairs, files.pair_lines
  pairs = pairs - 1
  graph_of = indicator - 1
  cross = np.flatnonzero(graph_of[pairs[:, 0]] != graph_of[pairs[:, 1]])
  if len(cross):
    _fail(
      source,
      f"{name}_A.txt",
      linenos[cross[0]],
      "edge joins nodes of two different graphs",
      str((pairs[cross[0]] + 1).tolist()),
    )
  notes = []
  if not keep_self_loops:
    loops = pairs[:, 0] == pairs[:, 1]
    if loops.any():
      notes.append(f"{name}: {int(loops.sum())} self-loop(s) removed (as PyTorch Geometric does)")
    pairs = pairs[~loops]
  if not keep_duplicates:
    unique = np.unique(pairs, axis=0)  # sorted by (sender, receiver), hence by graph too
    if len(unique) < len(pairs):
      notes.append(
        f"{name}: {len(pairs) - len(unique)} repeated directed edge(s) coalesced (as PyTorch Geometric does)"
      )
    pairs = unique
  notes += _edgeless_notes(source, name, np.bincount(graph_of[files.pairs[:, 0] - 1], minlength=num_graphs), linenos)
  order = np.argsort(graph_of[pairs[:, 0]], kind="stable")
  pairs = pairs[order]
  offsets = np.concatenate([[0], np.cumsum(n_node)])
  edge_graph = graph_of[pairs[:, 0]]
  blocks = []
  if files.attributes is not None:
    blocks.append(files.attributes.astype(np.float32))
  if files.node_labels is not None:
    blocks.append(_one_hot_columns(files.node_labels))
  features = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0), np.float32)
  if not blocks:
    notes.append(f"{name}: no node attributes or labels (0-wide node features)")
  _, labels = np.unique(graph_labels[:, 0], return_inverse=True)
  return GraphCollection(
    n_node.astype(np.int64),
    np.bincount(edge_graph, minlength=num_graphs).astype(np.int64),
    pairs[:, 0] - offsets[edge_graph],
    pairs[:, 1] - offsets[edge_graph],
    features,
    labels.astype(np.int64),
    tuple(notes),
  )


class _TUFiles:
  """The files of one TU dataset, read and checked against each other before they are combined.

  Each file is valid line by line (:func:`_numbers`); here their counts must agree: the graph indicator's graphs
  with the graph labels' lines, its nodes with the node labels' and attributes' rows and with the largest node id
  of the edges. Where they disagree, the file at fault is the one the others outvote: a graph indicator cut short
  has fewer nodes than two other files imply; a labels or node file cut short has fewer lines than the indicator
  implies; one file alone implying more is wrong itself. The error names that file, with the line where it ends or
  first goes wrong.
  """

  def __init__(self, source: _Source, name: str, use_node_attributes: bool):
    self.source = source
    ind_file, labels_file, edges_file = (f"{name}_graph_indicator.txt", f"{name}_graph_labels.txt", f"{name}_A.txt")
    indicator, ind_lines = _numbers(source, ind_file, int, 1)
    self.indicator = indicator[:, 0]
    self.graph_labels, label_lines = _numbers(source, labels_file, int, 1)
    self.pairs, self.pair_lines = _numbers(source, edges_file, int, 2)
    rows: dict[str, tuple[np.ndarray, list[int]]] = {}
    if use_node_attributes and source.has(f"{name}_node_attributes.txt"):
      rows[f"{name}_node_attributes.txt"] = _numbers(source, f"{name}_node_attributes.txt", float)
    if source.has(f"{name}_node_labels.txt"):
      rows[f"{name}_node_labels.txt"] = _numbers(source, f"{name}_node_labels.txt", int)
    self._check_indicator(ind_file, ind_lines)
    n, graphs = len(self.indicator), int(self.indicator[-1])
    labels = len(self.graph_labels)
    if labels < graphs:
      first = ind_lines[int(np.searchsorted(self.indicator, labels + 1))]
      fail(
        source.name(labels_file),
        label_lines[-1] if label_lines else None,
        f"the file ends after {labels} graph labels, but {ind_file} names {graphs} graphs (graph {labels + 1} "
        f"from its line {first}): a graph-labels file cut short?",
      )
    for f, (values, lines) in rows.items():
      if len(values) < n:
        fail(
          source.name(f),
          lines[-1] if lines else None,
          f"the file ends after {len(values)} rows, but {ind_file} lists {n} nodes: a file cut short?",
        )
    # Files that imply more than the indicator holds, each with the line where it first goes beyond it.
    beyond = {f: (len(v), lines[n]) for f, (v, lines) in rows.items() if len(v) > n}
    out_of_range = np.flatnonzero((self.pairs > n).any(axis=1))
    if len(out_of_range):
      beyond[edges_file] = (int(self.pairs.max()), self.pair_lines[out_of_range[0]])
    if labels > graphs:
      beyond[labels_file] = (labels, label_lines[graphs])
    if len(beyond) >= 2:
      said = "; ".join(
        f"{f} has {k} graph labels"
        if f == labels_file
        else f"{f} names node {k}"
        if f == edges_file
        else f"{f} has {k} rows"
        for f, (k, _) in beyond.items()
      )
      fail(
        source.name(ind_file),
        ind_lines[-1],
        f"the file ends after {n} nodes in {graphs} graphs, but {said}: a graph indicator cut short?",
      )
    if beyond:
      f, (_, lineno) = next(iter(beyond.items()))
      if f == edges_file:
        bad = out_of_range[0]
        _fail(source, f, lineno, f"node id outside 1..{n} (the nodes of {ind_file})", str(self.pairs[bad].tolist()))
      what = f"graph {graphs + 1}" if f == labels_file else f"node {n + 1}"
      fail(source.name(f), lineno, f"a line for {what}, but {ind_file} lists only {graphs} graphs and {n} nodes")
    low = np.flatnonzero((self.pairs < 1).any(axis=1))
    if len(low):
      _fail(source, edges_file, self.pair_lines[low[0]], f"node id outside 1..{n}", str(self.pairs[low[0]].tolist()))
    self.num_graphs, self.num_nodes = graphs, n
    self.attributes = self.node_labels = None
    for f, (values, _) in rows.items():
      if f.endswith("_node_attributes.txt"):
        self.attributes = values
      else:
        self.node_labels = values

  def _check_indicator(self, filename: str, lines: list[int]) -> None:
    """Graph ids from 1, each the previous one or the next: sorted, and no graph without nodes."""
    ind = self.indicator
    if len(ind) == 0:
      fail(self.source.name(filename), None, "no nodes: the file is empty")
    step = np.diff(ind, prepend=0)
    bad = np.flatnonzero((step < 0) | (step > 1))
    if len(bad):
      i = int(bad[0])
      prev = int(ind[i - 1]) if i else 0
      what = (
        f"graph ids must be sorted (graph {ind[i]} after graph {prev})"
        if step[i] < 0
        else f"graph id {ind[i]} after {prev}: graph(s) {list(range(prev + 1, int(ind[i])))[:5]} have no nodes"
      )
      _fail(self.source, filename, lines[i], what, str(ind[i]))


def _edgeless_notes(source: _Source, name: str, edges_per_graph: np.ndarray, linenos: list[int]) -> list[str]:
  """A note when some graphs have no edges while the others have.

  A run of edgeless graphs after the graph of the edges file's last line, too long to be chance at the earlier
  graphs' share of edgeless ones (below 1 in 1000), is what an edges file cut at a line boundary leaves: the note
  says so.
  """
  without = np.flatnonzero(edges_per_graph == 0)
  graphs = len(edges_per_graph)
  if len(without) == 0 or len(without) == graphs:
    return []
  last = int(np.flatnonzero(edges_per_graph)[-1])
  tail = graphs - 1 - last
  share = float(np.mean(edges_per_graph[: last + 1] == 0))
  head = f"{name}: {len(without)} of {graphs} graphs have no edges in {name}_A.txt"
  if tail >= 2 and share**tail < 1e-3:
    return [
      f"{head}, among them graphs {last + 2}..{graphs}, every graph after the one of its last line "
      f"({source.name(f'{name}_A.txt')}, line {linenos[-1]}), where only {100 * share:.0f} % of the earlier graphs "
      f"have none: the file looks cut short; check it against the dataset's own copy"
    ]
  shown = ", ".join(str(g) for g in (without + 1)[:5]) + (", ..." if len(without) > 5 else "")
  return [f"{head} (graph {shown})"]


def read_gin(path: str | os.PathLike, member: str | None = None) -> GraphCollection:
  """Reads the GIN/DGCNN text format from a ``.txt`` file or a zip holding one.

  ``member`` picks the file in a zip; by default the only ``.txt`` that is not a fold index.

  Node features: one-hot node tags when there is more than one distinct tag, followed by any per-node feature
  values; none when all tags are equal and no feature values are given (e.g. REDDIT-BINARY). Graph labels are
  re-indexed to 0..C−1 in sorted order (REDDIT-BINARY's tokens 0/2 become 0/1).

  Args:
    path: a ``.txt`` file or a zip holding one.
    member: the file in a zip (default: the only one that is not a fold index).

  Returns:
    The :class:`GraphCollection`.

  Raises:
    FileNotFoundError: a path that does not exist.
    DataFormatError: a malformed line (file and line).
  """
  root = Path(path)
  if not root.exists():
    raise FileNotFoundError(f"read_gin: {root} does not exist")
  if root.suffix == ".zip":
    source = _Source(root)
    if member is None:
      texts = [m for m in source.members if m.endswith(".txt") and "_idx" not in m]
      if len(texts) != 1:
        fail(str(root), None, f"holds {len(texts)} candidate .txt files {texts[:5]}; pass `member`")
      member = texts[0]
    filename = member.rsplit("/", 1)[-1]
  else:
    source, filename = _Source(root.parent), root.name
  lines = source.lines(filename)

  def take(what: str) -> tuple[int, list[int | float], str]:
    try:
      lineno, line = next(lines)
    except StopIteration:
      fail(source.name(filename), None, f"the file ends early (expected {what})")
    fields = line.split()
    if not all(_FLOAT.fullmatch(f) for f in fields):
      _fail(source, filename, lineno, f"non-numeric field in {what}", line)
    values = [int(f) if INTEGER.fullmatch(f) else float(f) for f in fields]
    if not all(np.isfinite(values)):
      _fail(source, filename, lineno, f"non-finite value in {what}", line)
    return lineno, values, line

  lineno, head, line = take("the number of graphs")
  if len(head) != 1 or not isinstance(head[0], int) or head[0] < 1:
    _fail(source, filename, lineno, "the first line must be the number of graphs", line)
  graphs, tags, raw_labels = [], [], []
  for g in range(int(head[0])):
    lineno, fields, line = take(f"the header of graph {g}")
    if len(fields) != 2 or not all(isinstance(v, int) for v in fields) or fields[0] < 1:
      _fail(source, filename, lineno, f"graph {g}: expected a header 'n_nodes label'", line)
    n, label = int(fields[0]), int(fields[1])
    raw_labels.append(label)
    senders, receivers, node_tags, feats = [], [], [], []
    for v in range(n):
      lineno, fields, line = take(f"node {v} of graph {g}")
      if (
        len(fields) < 2
        or not all(isinstance(x, int) for x in fields[:2])
        or fields[1] < 0
        or len(fields) < 2 + fields[1]
      ):
        _fail(source, filename, lineno, f"graph {g}, node {v}: expected 'tag n_neighbours neighbours...'", line)
      k = int(fields[1])
      nbrs = fields[2 : 2 + k]
      if not all(isinstance(u, int) and 0 <= u < n for u in nbrs):
        _fail(source, filename, lineno, f"graph {g}, node {v}: neighbour id outside 0..{n - 1}", line)
      senders.extend([v] * k)
      receivers.extend(nbrs)
      node_tags.append(fields[0])
      feats.append(fields[2 + k :])
    if len({len(f) for f in feats}) > 1:
      fail(source.name(filename), None, f"graph {g} has nodes with different numbers of feature values")
    graphs.append(
      (np.array(feats, np.float32).reshape(n, -1), np.array(senders, np.int64), np.array(receivers, np.int64))
    )
    tags.append(np.array(node_tags, np.int64))
  extra = next(lines, None)
  if extra is not None:
    _fail(source, filename, extra[0], f"unexpected line after the {head[0]} graphs", extra[1])
  all_tags = np.concatenate(tags)
  if len(np.unique(all_tags)) > 1:
    one_hot = _one_hot_columns(all_tags[:, None])
    offsets = np.cumsum([0] + [len(t) for t in tags])
    graphs = [
      (np.concatenate([one_hot[offsets[i] : offsets[i + 1]], x], axis=1), s, r) for i, (x, s, r) in enumerate(graphs)
    ]
  _, labels = np.unique(np.array(raw_labels), return_inverse=True)
  return from_graphs(graphs, labels)


def tu_dataset_path(name: str, data_dir: str | os.PathLike | None = None, *, download: bool = False) -> Path:
  """Locates a TU dataset.

  ``data_dir`` itself (a folder with ``{name}_A.txt`` or any zip archive), ``data_dir/{name}`` or
  ``data_dir/{name}.zip``, else the download cache (fetching the official zip when ``download``).

  Args:
    name: the dataset, e.g. ``PROTEINS``.
    data_dir: where to look first.
    download: fetch the official zip when missing.

  Returns:
    The folder or archive holding it.

  Raises:
    FileNotFoundError: not found and ``download`` is False (the message says where to put the files).
    ConnectionError: ``download`` is True but the machine is offline.
  """
  roots = [Path(data_dir)] if data_dir is not None else []
  cache = default_cache_dir() / "tu"
  roots.append(cache)
  if data_dir is not None and Path(data_dir).is_file() and Path(data_dir).suffix == ".zip":
    return Path(data_dir)  # the archive itself, whatever its name; read_tu checks its members
  for root in roots:
    for candidate in (root, root / name, root / f"{name}.zip"):
      if candidate.is_dir() and (candidate / f"{name}_A.txt").is_file():
        return candidate
      if candidate.is_file() and candidate.name == f"{name}.zip":
        return candidate
  if not download:
    raise FileNotFoundError(
      f"TU dataset {name} not found in {' or '.join(map(str, roots))}; pass its folder or zip, "
      f"or fetch {TU_URL.format(name=name)} with {download_hint(cache)}"
    )
  return extract_zip(fetch(TU_URL.format(name=name), cache), cache) / name
