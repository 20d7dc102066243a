"""The ``bcjax`` command: manage a keep-latest registry and transform stored embeddings to older versions.

  bcjax init --registry DIR --dim D_0 [--notes TEXT]
  bcjax append --registry DIR W.npy [--notes TEXT]
  bcjax versions --registry DIR [--json]
  bcjax transform --registry DIR --to J [--from K] IN.npy OUT.npy [--overwrite]

Exit status: 0 on success, 1 on a registry or data error (message on stderr), 2 on a usage error.
"""

import argparse
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bcjax import _atomic
from bcjax.versioning import Registry, RegistryError


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


def _cmd_append(args) -> None:
  info = Registry(args.registry).append(_load_npy(args.weight, "weight"), notes=args.notes)
  print(f"appended version {info.version}: D_{info.version}={info.dim} -> D_{info.version - 1}={info.prev_dim}")


def _cmd_versions(args) -> None:
  infos = Registry(args.registry).versions()
  if args.json:
    print(json.dumps([info._asdict() for info in infos], indent=2))
    return
  print(f"{'version':>7}  {'dim':>5}  {'prev_dim':>8}  {'map':<18}  {'created':<32}  notes")
  for info in infos:
    prev = "-" if info.prev_dim is None else str(info.prev_dim)
    kind = "-" if info.version == 0 else info.kind + (
        f"({', '.join(f'{k}={v}' for k, v in info.hparams)})" if info.hparams else "")
    print(f"{info.version:>7}  {info.dim:>5}  {prev:>8}  {kind:<18}  {info.created:<32}  {info.notes}")


def _cmd_transform(args) -> None:
  out = Path(args.output)
  if out.exists() and not args.overwrite:
    raise RegistryError(f"output file {out} exists; refusing to overwrite it (pass --overwrite to replace it)")
  reg = Registry(args.registry)
  z = _load_npy(args.input, "input")
  z_j = reg.transform(z, to=args.to, source=args.source)
  buf = io.BytesIO()
  np.save(buf, z_j, allow_pickle=False)
  _atomic.write_atomic(out, buf.getvalue(), overwrite=args.overwrite)
  k = reg.latest if args.source is None else args.source
  print(f"wrote {out}: {z.shape[0]} embeddings, version {k} (D={z.shape[1]}) -> version {args.to} "
        f"(D={z_j.shape[1]})")


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="bcjax", description="Keep-latest registry of backward-compatible embedding "
                                   "versions (BC-Aligner): store B_k per version, map the latest embeddings to any "
                                   "older version.")
  sub = parser.add_subparsers(dest="command", required=True)

  p = sub.add_parser("init", help="create a registry with its base version 0")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("--dim", required=True, type=int, help="embedding dimension D_0 of version 0")
  p.add_argument("--notes", default="", help="free-form notes stored with version 0")
  p.set_defaults(run=_cmd_init)

  p = sub.add_parser("append", help="append the next version with its backward weight W_k")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("weight", help=".npy file holding W_k of shape [D_(k-1), D_k]")
  p.add_argument("--notes", default="", help="free-form notes stored with the version")
  p.set_defaults(run=_cmd_append)

  p = sub.add_parser("versions", help="list the stored versions")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("--json", action="store_true", help="print JSON instead of a table")
  p.set_defaults(run=_cmd_versions)

  p = sub.add_parser("transform", help="map stored version-k embeddings to version j")
  p.add_argument("--registry", required=True, help="registry directory")
  p.add_argument("--to", required=True, type=int, help="target (older) version j")
  p.add_argument("--from", dest="source", type=int, default=None, help="version k of the input (default: latest)")
  p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
  p.add_argument("input", help=".npy of version-k embeddings [n, D_k]")
  p.add_argument("output", help=".npy to write with version-j compatible embeddings [n, D_j]")
  p.set_defaults(run=_cmd_transform)
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  try:
    args.run(args)
  except (RegistryError, ValueError, TypeError, FileExistsError, OSError) as e:
    print(f"bcjax {args.command}: error: {e}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
