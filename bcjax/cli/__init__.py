"""The ``bcjax`` command.

Fit a backward map between two embedding models and judge it, manage a keep-latest registry, transform stored
embeddings to older versions, and migrate a LanceDB table to the new model while serving it.

  bcjax fit --old OLD.npy --new NEW.npy (--out MAP | --registry DIR) [--kind auto|linear|orthogonal|affine|mlp]
            [--normalize] [--index OLD_INDEX.npy [--new-index NEW_INDEX.npy] [--qrels QRELS]] [--labels LABELS.npy]
            [--min-recovery R] [--min-hit-rate H] [--report-dir DIR] ...
  bcjax init --registry DIR --dim D_0 [--notes TEXT]
  bcjax append --registry DIR (W.npy | MAP) [--notes TEXT]
  bcjax versions --registry DIR [--json]
  bcjax transform (--registry DIR --to J [--from K] | --map MAP [--csls queries|documents | --no-hubness]) IN.npy
                  OUT.npy [--dtype D] [--overwrite]
  bcjax migrate (start --map MAP | add --ids IDS.npy --vectors NEW.npy [--queries Q.npy --relevant R.npy] | status
                | switch | rollback) --db DB --table TABLE

Exit status: 0 on success (for ``fit``: the verdict is "bridge"), 1 on a registry or data error, 2 on bad input (a
usage error, a file that is not a finite floating .npy matrix, embeddings of the other model than the flag says (by
the models' fingerprints), an existing output; nothing is written); for ``fit``
3 when the verdict is "re-index", 4 "undecided", 5 "not measurable" (the map is written to ``--out`` but not
appended to a registry unless ``--force``). Messages go to stderr.
"""

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bcjax import _atomic
from bcjax._compile_cache import use_compilation_cache
from bcjax.cli import _migrate as _migrate_command
from bcjax.cli._common import UsageError, progress_bar
from bcjax.upgrade import _files, _map, _serve, _spaces
from bcjax.upgrade import report as _report
from bcjax.upgrade import fit as _fit
from bcjax.upgrade.stores import MigrationError
from bcjax.versioning import Registry, RegistryError

EXIT_ERROR, EXIT_USAGE = 1, 2
# `bcjax fit`'s exit status per verdict: a script can tell "re-embed" from "fit more pairs" from "measure properly".
EXIT_VERDICT = {"bridge": 0, "re-index": 3, "undecided": 4, "not measurable": 5}


def _load_npy(path: str, what: str) -> np.ndarray:
  try:
    return np.load(path, allow_pickle=False)
  except FileNotFoundError as e:
    raise RegistryError(f"{what} file {path} does not exist") from e
  except ValueError as e:
    raise RegistryError(f"{what} file {path} is not a readable .npy array ({e})") from e


def _cmd_init(args) -> None:
  reg = Registry.create(args.registry, args.dim, notes=args.notes)
  print(f"created registry {reg.path} with version 0 (D_0={args.dim})")


# A registry version holds a backward map only; a hubness correction belongs to one old index and stays in the map file.
_HUBNESS_NOT_IN_REGISTRY = (
  "note: the map's hubness correction (CSLS) is not stored in the registry, which holds backward maps only; serve it "
  "from the map file {path}"
)


def _cmd_append(args) -> None:
  registry = Registry(args.registry)
  if _map.is_map_file(args.weight):
    upgrade_map, stored = _map.load_map(args.weight)
    notes = args.notes or json.dumps(stored, sort_keys=True)
    info = registry.append(
      upgrade_map.params, transform=upgrade_map.transform, normalize=upgrade_map.normalize, notes=notes
    )
    if upgrade_map.hubness is not None:
      print(_HUBNESS_NOT_IN_REGISTRY.format(path=args.weight), file=sys.stderr)
  else:
    if Path(args.weight).suffix == ".npz":
      raise UsageError(
        f"`weight` {args.weight} is an .npz archive; append takes a W_k .npy or a map file written "
        f"by `bcjax fit --out` (or bcjax.upgrade.save_map)"
      )
    info = registry.append(_load_npy(args.weight, "weight"), notes=args.notes)
  print(
    f"appended version {info.version} ({info.kind}): D_{info.version}={info.dim} -> "
    f"D_{info.version - 1}={info.prev_dim}"
  )


def _cmd_versions(args) -> None:
  infos = Registry(args.registry).versions()
  if args.json:
    print(json.dumps([info._asdict() for info in infos], indent=2))
    return
  print(f"{'version':>7}  {'dim':>5}  {'prev_dim':>8}  {'map':<18}  {'created':<32}  notes")
  for info in infos:
    prev = "-" if info.prev_dim is None else str(info.prev_dim)
    kind = (
      "-"
      if info.version == 0
      else info.kind + (f"({', '.join(f'{k}={v}' for k, v in info.hparams)})" if info.hparams else "")
    )
    print(f"{info.version:>7}  {info.dim:>5}  {prev:>8}  {kind:<18}  {info.created:<32}  {info.notes}")


def _hubness_choice(upgrade_map, args) -> str | None:
  """The ``csls`` form transform writes for a map with a hubness correction, or None (refused unless --no-hubness)."""
  if upgrade_map.hubness is None:
    if args.csls is not None:
      raise UsageError(f"`--csls` applies a map's hubness correction; map {args.map} has none")
    if args.no_hubness:
      print(f"note: map {args.map} has no hubness correction; --no-hubness changes nothing", file=sys.stderr)
    return None
  if args.csls is None and not args.no_hubness:
    raise UsageError(
      f"map {args.map} carries a hubness correction (CSLS, k={upgrade_map.hubness.k}) that lowers each stored row's "
      f"score and that a plain B(z) cannot hold: pass --csls queries (rows [unit(B(z)), 1] to query an inner-product "
      f"store of [unit(x), -beta(x)] rows) or --csls documents (the mapped rows as such stored rows) to apply it, or "
      f"--no-hubness to write B(z) without it (bcjax.upgrade.bridged_search applies it when it searches a store)"
    )
  if args.no_hubness:
    print(f"note: B(z) written without map {args.map}'s hubness correction (--no-hubness)", file=sys.stderr)
  return args.csls


def _cmd_transform(args) -> None:
  if args.chunk_rows < 1:
    raise UsageError(f"`--chunk-rows` must be >= 1, got {args.chunk_rows}")
  out = Path(args.output)
  if out.exists() and not args.overwrite:
    raise UsageError(f"output file {out} exists; refusing to overwrite it (pass --overwrite to replace it)")
  if (args.registry is None) == (args.map is None):
    raise UsageError("pass either --registry DIR (with --to) or --map MAP")
  if args.csls is not None and args.no_hubness:
    raise UsageError("pass --csls FORM (apply the hubness correction) or --no-hubness (leave it out), not both")
  z = _files.open_embeddings(args.input, name="input")
  csls = None
  if args.map is not None:
    maps, what = [_map.load_map(args.map)[0]], f"map {args.map}"
    csls = _hubness_choice(maps[0], args)
    what += "" if csls is None else f", CSLS {csls}"
  else:
    if args.csls is not None:
      raise UsageError("`--csls` applies a map file's hubness correction; a registry's versions carry none")
    if args.to is None:
      raise UsageError("--registry needs --to J, the version to map to")
    reg = Registry(args.registry)
    k = reg.latest if args.source is None else args.source
    maps = _serve.registry_maps(reg, to=args.to, source=args.source)
    if z.shape[1] != reg.info(k).dim:
      raise UsageError(
        f"`input` {args.input} has shape {z.shape} but version {k} embeddings have dimension D_{k}={reg.info(k).dim}"
      )
    what = f"version {k} (D={z.shape[1]}) -> version {args.to}"
  n, d, dtype = _serve.transform_file(
    maps,
    args.input,
    out,
    dtype=args.dtype,
    chunk_rows=args.chunk_rows,
    overwrite=args.overwrite,
    progress=progress_bar("transform"),
    csls=csls,
  )
  print(f"wrote {out}: {n} embeddings, {what} (D={d}), {dtype}")


def _read_qrels(path: str) -> tuple[np.ndarray, np.ndarray]:
  """Relevance pairs (pair row, index row): an integer .npy [m, 2], or text with two integers per line."""
  try:
    if Path(path).suffix == ".npy":
      arr = np.load(path, allow_pickle=False)
    else:
      arr = np.loadtxt(path, dtype=np.int64, ndmin=2, delimiter=None if not path.endswith(".csv") else ",")
  except (OSError, ValueError) as e:
    raise UsageError(f"`--qrels` {path} cannot be read as (pair row, index row) integer pairs ({e})") from None
  if arr.ndim != 2 or arr.shape[1] != 2 or not np.issubdtype(arr.dtype, np.integer) or arr.shape[0] == 0:
    raise UsageError(
      f"`--qrels` {path} must hold integer pairs [m >= 1, 2] (pair row, index row); got dtype "
      f"{arr.dtype} and shape {arr.shape}"
    )
  return arr[:, 0], arr[:, 1]


def _check_fit_args(args):
  """Every check of `bcjax fit` that needs no fitting, so bad input exits 2 before anything is written."""
  for flag, value in (("--min-recovery", args.min_recovery), ("--min-hit-rate", args.min_hit_rate)):
    if not 0.0 < value <= 1.0:
      raise UsageError(f"`{flag}` must lie in (0, 1], got {value}")
  if (args.out is None) == (args.registry is None):
    raise UsageError("pass exactly one of --out MAP (write the map to a file) or --registry DIR (append it)")
  if args.k < 1:
    raise UsageError(f"`--k` must be >= 1, got {args.k}")
  if args.chunk_rows < 1:
    raise UsageError(f"`--chunk-rows` must be >= 1, got {args.chunk_rows}")
  if args.threads is not None and args.threads < 1:
    raise UsageError(f"`--threads` must be >= 1, got {args.threads}")
  if args.hubness == "on" and args.metric != "cosine":
    raise UsageError(f"`--hubness on` corrects cosine scores; `--metric` is {args.metric}")
  old = _files.open_embeddings(args.old, name="--old")
  new = _files.open_embeddings(args.new, name="--new")
  if old.shape[0] != new.shape[0]:
    raise UsageError(
      f"`--old` {args.old} has {old.shape[0]} rows but `--new` {args.new} has {new.shape[0]}; row i "
      f"of each must embed the same item"
    )
  outputs = []
  if args.out is not None:
    outputs.append(Path(args.out))
  else:
    reg = Registry(args.registry)
    latest = reg.info(reg.latest)
    if latest.dim != old.shape[1]:
      raise UsageError(
        f"`--old` {args.old} has width {old.shape[1]} but the registry's latest version "
        f"{latest.version} has D_{latest.version}={latest.dim}; the old embeddings must be that "
        f"version's"
      )
  report_dir = (
    Path(args.report_dir) if args.report_dir else (Path(args.out).parent if args.out else Path(args.registry))
  )
  stem = Path(args.out).name if args.out else "upgrade"
  args.report_json, args.report_md = report_dir / f"{stem}.report.json", report_dir / f"{stem}.report.md"
  if args.out is None:  # one report per append: never over an earlier one
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%f")
    args.report_json, args.report_md = (
      report_dir / f"upgrade-{stamp}.report.json",
      report_dir / f"upgrade-{stamp}.report.md",
    )
  outputs += [args.report_json, args.report_md]
  for path in outputs:
    if path.exists():
      raise UsageError(f"output {path} exists; refusing to overwrite it (choose another --out or --report-dir)")
  if not report_dir.is_dir():
    raise UsageError(f"report directory {report_dir} does not exist")
  index = new_index = qrels = labels = None
  if args.index:
    index = _files.open_embeddings(args.index, name="--index")
    if index.shape[1] != old.shape[1]:
      raise UsageError(f"`--index` {args.index} has width {index.shape[1]} but `--old` has {old.shape[1]}")
    if args.k > index.shape[0]:
      raise UsageError(f"`--k`={args.k} exceeds the {index.shape[0]} rows of `--index`")
  if args.new_index:
    if index is None:
      raise UsageError("`--new-index` needs `--index` (the same items embedded by the old model)")
    new_index = _files.open_embeddings(args.new_index, name="--new-index")
    if new_index.shape != (index.shape[0], new.shape[1]):
      raise UsageError(
        f"`--new-index` {args.new_index} has shape {new_index.shape}; expected "
        f"({index.shape[0]}, {new.shape[1]}) (the index's items, the new model's width)"
      )
  if args.qrels:
    if index is None:
      raise UsageError("`--qrels` relevance pairs name rows of `--index`; pass it too")
    qrels = _read_qrels(args.qrels)
    if qrels[0].min() < 0 or qrels[0].max() >= old.shape[0] or qrels[1].min() < 0 or qrels[1].max() >= index.shape[0]:
      raise UsageError(
        f"`--qrels` pairs must lie in [0, {old.shape[0]}) x [0, {index.shape[0]}) (pair rows x index "
        f"rows); got [{qrels[0].min()}, {qrels[0].max()}] x [{qrels[1].min()}, {qrels[1].max()}]"
      )
  if args.labels:
    try:
      labels = np.load(args.labels, allow_pickle=False)
    except (OSError, ValueError) as e:
      raise UsageError(f"`--labels` {args.labels} is not a readable .npy array ({e})") from None
    if labels.shape != (old.shape[0],) or not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
      raise UsageError(
        f"`--labels` {args.labels} must hold one class >= 0 per pair row: integers of shape "
        f"({old.shape[0]},); got dtype {labels.dtype} and shape {labels.shape}"
      )
  for name, arr in (("--old", old), ("--new", new), ("--index", index), ("--new-index", new_index)):
    if arr is not None:
      _files.check_finite_rows(arr, name=name, chunk_rows=args.chunk_rows)
  if index is not None:
    _check_index_space(old, new, index, args)
  try:
    split = _fit.split_pairs(
      old.shape[0],
      test_fraction=args.test_fraction,
      val_fraction=args.val_fraction,
      seed=args.seed,
      names=("--test-fraction", "--val-fraction"),
    )
  except _fit.SplitError as e:
    raise UsageError(e.detail) from None
  return old, new, index, new_index, qrels, labels, split


SPACE_SAMPLE_ROWS = 2000  # rows of --old, --new and --index (uniform) that tell which model embedded --index


def _check_index_space(old, new, index, args) -> None:
  """Refuses an ``--index`` that is not the old model's: its sample attributed to the pairs' two fingerprints."""
  if old.shape[1] != new.shape[1]:
    return  # the width already tells: --index has --old's width (checked), which the new model's vectors lack
  rng = np.random.default_rng(args.seed)
  pairs = np.sort(rng.choice(old.shape[0], min(old.shape[0], SPACE_SAMPLE_ROWS), replace=False))
  if len(pairs) < 2:
    return
  names = (args.old_model or "the --old model", args.new_model or "the --new model")
  stamps = [_spaces.space_stamp(_files.read_rows(z, pairs), name) for z, name in zip((old, new), names)]
  rows = np.sort(rng.choice(index.shape[0], min(index.shape[0], SPACE_SAMPLE_ROWS), replace=False))
  wrong = _spaces.index_space_error(_files.read_rows(index, rows), *stamps, name="--index")
  if wrong is not None:
    raise UsageError(f"{wrong} ({args.index})")


def _cmd_fit(args) -> int:
  old, new, index, new_index, qrels, labels, split = _check_fit_args(args)
  say = lambda line: print(line, file=sys.stderr)
  say(
    f"pairs: {old.shape[0]} ({len(split.train)} train, {len(split.val)} validation, {len(split.test)} held out); "
    f"new D={new.shape[1]} ({new.dtype}) -> old D={old.shape[1]} ({old.dtype})"
  )
  fitted = _fit.fit_upgrade(
    new,
    old,
    kind=args.kind,
    split=split,
    normalize=args.normalize,
    k=args.k,
    metric=args.metric,
    seed=args.seed,
    chunk_rows=args.chunk_rows,
    progress=say,
    hubness=args.hubness,
    old_model=args.old_model,
    new_model=args.new_model,
    threads=args.threads,
  )
  report = _report.evaluate_upgrade(
    fitted.map,
    new,
    old,
    split.test,
    index=index,
    new_index=new_index,
    qrels=qrels,
    labels=labels,
    consumer_rows=split.train,
    k=args.k,
    threads=args.threads,
    metric=args.metric,
    min_recovery=args.min_recovery,
    min_hit_rate=args.min_hit_rate,
    chunk_rows=args.chunk_rows,
    seed=args.seed,
  )
  context = dict(
    reason=fitted.reason,
    candidates=[c._asdict() for c in fitted.candidates],
    hubness=fitted.hubness,
    old=str(args.old),
    new=str(args.new),
    old_model=args.old_model,
    new_model=args.new_model,
  )
  summary = {
    "verdict": report.verdict,
    "primary": report.primary,
    report.primary: _report.finite_or_none(report.primary_measure.value),
    "kind": fitted.map.kind,
    "old_model": args.old_model,
    "new_model": args.new_model,
  }
  written: list[str | Path] = []
  appended = False
  if args.out is not None:
    written.append(_map.save_map(fitted.map, args.out, notes=summary))
  elif report.verdict == "bridge" or args.force:
    info = Registry(args.registry).append(
      fitted.map.params,
      transform=fitted.map.transform,
      normalize=fitted.map.normalize,
      notes=json.dumps(summary, sort_keys=True),
    )
    written.append(f"{args.registry} version {info.version}")
    appended = True
    if fitted.map.hubness is not None:
      say(_HUBNESS_NOT_IN_REGISTRY.format(path="(pass --out to keep one)"))
  _atomic.write_atomic(args.report_json, _report.report_json(report, **context).encode())
  _atomic.write_atomic(args.report_md, _report.report_markdown(report).encode())
  written += [args.report_json, args.report_md]
  print(fitted.reason)
  print("\n".join(_report.report_summary(report)))
  if args.registry is not None and not appended:
    print(f"not appended to {args.registry}: the verdict is {report.verdict} (pass --force to append anyway)")
  print("wrote " + ", ".join(str(w) for w in written))
  return EXIT_VERDICT[report.verdict]


def build_parser() -> argparse.ArgumentParser:
  """The ``bcjax`` command's parser, its subcommands and their flags (docs/cli.md is generated from it).

  Returns:
    The parser.
  """
  parser = argparse.ArgumentParser(
    prog="bcjax",
    description="Keep-latest registry of backward-compatible embedding "
    "versions (BC-Aligner): store B_k per version, map the latest embeddings to any "
    "older version.",
  )
  parser.add_argument(
    "--no-compile-cache",
    action="store_true",
    help="do not read or write the persistent compilation cache (default: every compiled program is kept in "
    "~/.cache/bcjax/xla, or $BCJAX_DATA/xla, so the next command starts warm)",
  )
  sub = parser.add_subparsers(dest="command", required=True)

  p = sub.add_parser(
    "fit",
    help="fit a backward map from a new model's embeddings to an old one's on paired rows, "
    "judge it on held-out pairs (bridge or re-index) and save it or append it to a registry",
    epilog="exit status: 0 bridge (the primary measure's whole 95 % interval clears its threshold), 3 re-index "
    "(wholly below), 4 undecided (straddles it: more held-out pairs would decide), 5 not measurable (chance is not "
    "far below the threshold or the reference carries no signal: pass --index, or relevance the reference "
    "retrieves above chance), 2 bad input, 1 a registry or data error",
  )
  p.add_argument("--old", required=True, help=".npy [n, D_old]: the old model's embeddings of n items")
  p.add_argument("--new", required=True, help=".npy [n, D_new]: the new model's embeddings of the same n items")
  p.add_argument(
    "--kind",
    default="auto",
    choices=_fit.UPGRADE_KINDS,
    help="the map's kind (default: auto, chosen on the validation pairs)",
  )
  p.add_argument("--out", help="map file to write (never over an existing one)")
  p.add_argument("--registry", help="registry to append the map to as the next version (on a bridge verdict)")
  p.add_argument("--force", action="store_true", help="append to --registry whatever the verdict")
  p.add_argument("--normalize", action="store_true", help="L2-normalise both models' embeddings (cosine models)")
  p.add_argument("--index", help=".npy [N, D_old]: the old index, for retrieval measures")
  p.add_argument(
    "--new-index",
    help=".npy [N, D_new]: the index's items embedded by the new model (makes "
    "re-embedding the reference of recall recovery)",
  )
  p.add_argument(
    "--qrels", help="relevance pairs (pair row, index row): an integer .npy [m, 2] or text with two integers per line"
  )
  p.add_argument("--labels", help=".npy [n] of integer classes: a consumer task for accuracy and negative flips")
  p.add_argument(
    "--hubness",
    choices=_fit.HUBNESS_MODES,
    default="auto",
    help="hubness correction (CSLS: each old vector's score lowered by its mean similarity to mapped training rows, "
    "stored with the map and applied wherever bcjax searches): auto keeps it unless the training pairs, each half "
    "served by a map fitted on the other, show it lowering retrieval (cosine only; default auto)",
  )
  p.add_argument("--k", type=int, default=10, help="cut-off of the top-k measures (default 10)")
  p.add_argument("--metric", default="cosine", choices=("cosine", "dot", "l2"), help="retrieval score")
  p.add_argument(
    "--min-recovery",
    type=float,
    default=0.95,
    help="bridge threshold in (0, 1] on recall recovery's 95 %% interval, a share of the reference's recall (the "
    "primary measure with --qrels; default 0.95)",
  )
  p.add_argument(
    "--min-hit-rate",
    type=float,
    default=0.95,
    help="bridge threshold in (0, 1] on the own-vector hit rate's 95 %% interval, an absolute rate (the primary "
    "measure without --qrels; default 0.95)",
  )
  p.add_argument("--test-fraction", type=float, default=0.2, help="pairs held out for the report (default 0.2)")
  p.add_argument("--val-fraction", type=float, default=0.1, help="pairs for the kind's choices (default 0.1)")
  p.add_argument("--seed", type=int, default=0, help="seeds the split, the folds and the MLP")
  p.add_argument("--report-dir", help="where the report's .json and .md go (default: beside --out, or the registry)")
  p.add_argument("--old-model", default="", help="the old model's name, stored with the map")
  p.add_argument("--new-model", default="", help="the new model's name, stored with the map")
  p.add_argument("--chunk-rows", type=int, default=_files.DEFAULT_CHUNK_ROWS, help="rows read at a time")
  p.add_argument(
    "--threads",
    type=int,
    help="NumPy BLAS threads (default: the cores other processes leave idle, at least 1; more threads than idle "
    "cores spin against the other processes)",
  )
  p.set_defaults(run=_cmd_fit)

  p = sub.add_parser("init", help="create a registry with its base version 0")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("--dim", required=True, type=int, help="embedding dimension D_0 of version 0")
  p.add_argument("--notes", default="", help="free-form notes stored with version 0")
  p.set_defaults(run=_cmd_init)

  p = sub.add_parser("append", help="append the next version with its backward map")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument(
    "weight",
    help=".npy file holding W_k of shape [D_(k-1), D_k], or a map file of any kind written by `bcjax fit --out`",
  )
  p.add_argument("--notes", default="", help="free-form notes stored with the version")
  p.set_defaults(run=_cmd_append)

  p = sub.add_parser("versions", help="list the stored versions")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("--json", action="store_true", help="print JSON instead of a table")
  p.set_defaults(run=_cmd_versions)

  p = sub.add_parser("transform", help="map stored embeddings through a registry's chain or a map file, streaming")
  p.add_argument("--registry", help="registry directory")
  p.add_argument("--map", help="a map file (instead of --registry)")
  p.add_argument("--to", type=int, help="target (older) version j (with --registry)")
  p.add_argument("--from", dest="source", type=int, default=None, help="version k of the input (default: latest)")
  p.add_argument(
    "--dtype", choices=tuple(_serve.OUTPUT_DTYPES), default=None, help="output dtype (default: the input's)"
  )
  p.add_argument("--chunk-rows", type=int, default=_files.DEFAULT_CHUNK_ROWS, help="rows per chunk (memory bound)")
  p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
  p.add_argument(
    "--csls",
    choices=_serve.CSLS_FORMS,
    default=None,
    help="apply the map's hubness correction (CSLS) for an inner-product store, one column wider: queries writes "
    "[unit(B(z)), 1] to query stored rows [unit(x), -beta(x)]; documents writes the mapped rows as such stored rows "
    "(a map with a correction needs --csls or --no-hubness)",
  )
  p.add_argument(
    "--no-hubness",
    action="store_true",
    help="write B(z) without the map's hubness correction (a map with a correction needs --csls or --no-hubness)",
  )
  p.add_argument("input", help=".npy of version-k embeddings [n, D_k]")
  p.add_argument("output", help=".npy to write with version-j compatible embeddings [n, D_j]")
  p.set_defaults(run=_cmd_transform)
  _migrate_command.add_parser(sub)
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the ``bcjax`` command.

  Args:
    argv: the arguments after the program name (default ``sys.argv[1:]``).

  Returns:
    The exit status (docs/cli.md's table: 0 success or bridge, 1 registry or data error, 2 bad input, 3-5
    the other verdicts of ``fit``).
  """
  args = build_parser().parse_args(argv)
  use_compilation_cache(not args.no_compile_cache)
  try:
    code = args.run(args)
  except (RegistryError, MigrationError) as e:  # a registry's or a migration's state
    print(f"bcjax {args.command}: error: {e}", file=sys.stderr)
    return EXIT_ERROR
  except (UsageError, _files.EmbeddingFileError, FileExistsError) as e:
    print(f"bcjax {args.command}: error: {e}", file=sys.stderr)
    return EXIT_USAGE
  except (ValueError, TypeError, OSError) as e:
    print(f"bcjax {args.command}: error: {e}", file=sys.stderr)
    return EXIT_ERROR
  return code or 0
