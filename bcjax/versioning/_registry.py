r"""Keep-latest registry of backward transformations (BC-Aligner, section 3.2 "Keep-Latest").

A team keeps only its latest embeddings :math:`z_k` plus the registry of linear backward transformations
:math:`W_1, \dots, W_k`; any historical version j is produced on the fly as
:math:`\tilde z_j = W^j_k z_k` (eq. 6), also for embeddings of data points never seen in training (inductive use).

On disk a registry is a directory with one file per version, ``version-000000.bcv`` (the base version 0: its
dimension and metadata, no weight), ``version-000001.bcv`` (:math:`W_1`), and so on. Every file is written
atomically, is never overwritten, and carries a SHA-256 checksum verified on every load.

Beyond linear maps, a version may store any kind of :mod:`bcjax.alignment` backward transform (orthogonal, affine,
residual MLP) with its hyper-parameters (format 2, see :mod:`bcjax.versioning._format`): :meth:`Registry.transform`
then applies the chain one map at a time, and :meth:`Registry.compose` works while every map is a matrix.
"""

import datetime
import os
import re
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcjax import _atomic, _checks
from bcjax._unit import unit_rows_jax
from bcjax.alignment._transforms import (
  BackwardTransform,
  backward_transform,
  check_params,
  linear_transform,
  semi_orthogonal,
)
from bcjax.versioning._format import CorruptVersionError, decode, encode

_NAME = re.compile(r"^version-(\d{6,})\.bcv$")


class RegistryError(Exception):
  """Base class of registry errors."""


class VersionExistsError(RegistryError, FileExistsError):
  """The version being written already exists; nothing was overwritten."""


class VersionNotFoundError(RegistryError, LookupError):
  """A requested or required version is not in the registry."""


class InconsistentRegistryError(RegistryError, ValueError):
  """Stored versions disagree with each other (dimensions, numbering) or with the data given."""


class CorruptRegistryError(RegistryError, CorruptVersionError):
  """A version file failed its checksum or could not be parsed."""


class VersionInfo(NamedTuple):
  """Metadata of one stored version."""

  version: int  # k
  dim: int  # D_k, the embedding dimension of version k
  prev_dim: int | None  # D_(k-1); None for the base version 0
  created: str  # ISO-8601 UTC time of the append
  notes: str  # free-form text given by the writer
  sha256: str  # checksum of the file body
  path: str  # the version's file
  kind: str = "linear"  # the kind of B_k (bcjax.alignment.TRANSFORM_KINDS); "linear" for version 0
  hparams: tuple[tuple[str, int], ...] = ()  # the kind's hyper-parameters
  normalize: bool = False  # B_k sees L2-normalised z_k and its output is L2-normalised (cosine models)


# Kinds whose map is a matrix: their chains compose into W^j_k (an orthogonal map with a bias is not one).
MATRIX_KINDS = ("linear", "orthogonal")


def is_matrix(info: VersionInfo) -> bool:
  """Whether version ``info``'s B_k is a matrix (so chains through it compose into one)."""
  return (info.kind in MATRIX_KINDS and not dict(info.hparams).get("bias")) and not info.normalize


def _as_map(info: VersionInfo, w) -> tuple[BackwardTransform, dict[str, np.ndarray]]:
  if info.kind == "linear":
    return linear_transform(), {"w": w}
  return backward_transform(info.kind, **dict(info.hparams)), w


def _matrix(info: VersionInfo, w) -> np.ndarray:
  """The float64 matrix of a linear or orthogonal version."""
  if info.kind == "linear":
    return w.astype(np.float64)
  with jax.enable_x64(True):
    return np.asarray(semi_orthogonal(jnp.asarray(w["a"], jnp.float64)))


def apply_version(transform: BackwardTransform, params, z, *, normalize: bool):
  """B_k(z) of one stored version.

  With its L2 normalisation of input and output when it was fitted on a cosine model's normalised embeddings (a zero row
  stays zero).
  """
  if not normalize:
    return transform.apply(params, z)
  out = transform.apply(params, unit_rows_jax(z))
  return unit_rows_jax(out)


def _filename(version: int) -> str:
  return f"version-{version:06d}.bcv"


def _as_weight(w, expected_rows: int, version: int) -> np.ndarray:
  arr = _checks.as_float_array("Registry.append", "w", w, ndim=2, numpy=True)
  if arr.shape[0] != expected_rows:
    raise InconsistentRegistryError(
      f"Registry.append: `w` has shape {arr.shape} but version {version - 1} has dimension {expected_rows}; W_k "
      f"must be [d_(k-1), d_k] = [{expected_rows}, d_k]"
    )
  return arr


class Registry:
  """An on-disk keep-latest registry.

  Open an existing one with ``Registry(path)``; make one with :meth:`Registry.create`.

  Examples:
    >>> import tempfile, numpy as np
    >>> from bcjax.versioning import Registry
    >>> reg = Registry.create(tempfile.mkdtemp() + "/reg", dim=2, notes="M_0")
    >>> _ = reg.append(np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]), notes="M_1 is 3-d")
    >>> reg.latest
    1
    >>> reg.transform(np.array([[1.0, 1.0, 1.0]]), to=0).tolist()
    [[1.0, 2.0]]
  """

  def __init__(self, path: str | os.PathLike):
    self.path = Path(path)
    if not (self.path / _filename(0)).is_file():
      raise VersionNotFoundError(
        f"no bcjax registry at {self.path} (missing {_filename(0)}); create one with "
        f"Registry.create(path, dim=D_0) or `bcjax init --registry {self.path} --dim D_0`"
      )

  @classmethod
  def create(cls, path: str | os.PathLike, dim: int, *, notes: str = "") -> "Registry":
    """Creates a registry whose base version 0 has embedding dimension ``dim``.

    Raises:
      VersionExistsError: when ``path`` already holds a registry (it is left untouched).
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
      raise ValueError(f"Registry.create: `dim` must be a positive integer, got {dim!r}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cls._write(path, 0, {"version": 0, "dim": int(dim), "prev_dim": None, "notes": str(notes)}, None)
    return cls(path)

  @staticmethod
  def _write(path: Path, version: int, header: dict, w: np.ndarray | dict | None) -> None:
    header = dict(
      header, format=2 if isinstance(w, dict) else 1, created=datetime.datetime.now(datetime.UTC).isoformat()
    )
    if isinstance(w, dict):
      header.update(shapes={name: list(a.shape) for name, a in w.items()})
    elif w is not None:
      header.update(dtype=str(w.dtype), shape=list(w.shape))
    try:
      _atomic.write_atomic(path / _filename(version), encode(header, w))
    except FileExistsError as e:
      raise VersionExistsError(
        f"version {version} already exists in registry {path}; nothing was overwritten (another writer may have "
        f"appended it concurrently: reload the registry and append on top of the latest version)"
      ) from e

  # Reading -----------------------------------------------------------------------------------------------------

  def _load(self, version: int) -> tuple[VersionInfo, np.ndarray | dict[str, np.ndarray] | None]:
    file = self.path / _filename(version)
    try:
      data = file.read_bytes()
    except FileNotFoundError as e:
      raise VersionNotFoundError(
        f"version {version} is not in registry {self.path} (no file {file.name}); "
        f"stored versions: {self._stored_numbers()}"
      ) from e
    try:
      header, w, sha = decode(data, str(file))
    except CorruptVersionError as e:
      raise CorruptRegistryError(str(e)) from e
    try:
      info = VersionInfo(
        int(header["version"]),
        int(header["dim"]),
        None if header["prev_dim"] is None else int(header["prev_dim"]),
        str(header["created"]),
        str(header["notes"]),
        sha,
        str(file),
        normalize=bool(header.get("normalize", False)),
      )
    except (KeyError, TypeError, ValueError) as e:
      raise CorruptRegistryError(f"{file}: header lacks or mangles a field ({e!r})") from e
    if info.version != version:
      raise CorruptRegistryError(f"{file}: the file says it is version {info.version}, its name says {version}")
    if isinstance(w, dict):
      try:
        t = backward_transform(str(header["kind"]), **dict(header["hparams"]))
        check_params(str(file), t, w, int(info.prev_dim or 0), info.dim)
      except (KeyError, TypeError, ValueError) as e:
        raise CorruptRegistryError(f"{file}: the stored {header.get('kind')!r} map does not load ({e})") from e
      return info._replace(kind=t.kind, hparams=t.hparams), w
    expected = None if version == 0 else (info.prev_dim, info.dim)
    if (None if w is None else w.shape) != expected:
      raise CorruptRegistryError(
        f"{file}: weight shape {None if w is None else w.shape} does not match the header's dimensions {expected}"
      )
    return info, w

  def _stored_numbers(self) -> list[int]:
    numbers = []
    for entry in os.listdir(self.path):
      match = _NAME.match(entry)
      if match:
        numbers.append(int(match.group(1)))
    return sorted(numbers)

  def _load_all(self, upto: int | None = None) -> list[tuple[VersionInfo, np.ndarray | dict[str, np.ndarray] | None]]:
    """Loads and verifies versions 0..upto (default: all), checking numbering and dimension consistency."""
    numbers = self._stored_numbers()
    missing = sorted(set(range(numbers[-1] + 1)) - set(numbers)) if numbers else [0]
    if missing:
      raise VersionNotFoundError(f"registry {self.path} is missing version(s) {missing}; stored: {numbers}")
    loaded = [self._load(k) for k in numbers[: None if upto is None else upto + 1]]
    for (prev, _), (cur, _) in zip(loaded, loaded[1:]):
      if cur.prev_dim != prev.dim:
        raise InconsistentRegistryError(
          f"registry {self.path}: version {cur.version} maps from D_{cur.version}={cur.dim} to "
          f"{cur.prev_dim} dimensions, but version {prev.version} has D_{prev.version}={prev.dim}"
        )
    return loaded

  def versions(self) -> list[VersionInfo]:
    """Loads, verifies and returns every stored version, 0 to latest.

    Raises:
      VersionNotFoundError: when a version between 0 and the latest is missing.
      InconsistentRegistryError: when :math:`W_k`'s rows do not match :math:`D_{k-1}`.
      CorruptRegistryError: when a file fails its checksum.
    """
    return [info for info, _ in self._load_all()]

  @property
  def latest(self) -> int:
    """The newest version number k."""
    return self._stored_numbers()[-1]

  def info(self, version: int) -> VersionInfo:
    """Metadata of one version (verified)."""
    return self._load(self._check_number("info", "version", version))[0]

  def backward(self, version: int) -> np.ndarray:
    """:math:`W_k` for version k >= 1, [D_(k-1), D_k] (verified), of a linear version (see :meth:`backward_map`)."""
    transform, params = self.backward_map(version)
    if transform.kind != "linear":
      raise ValueError(
        f"Registry.backward: version {version} stores a {transform.kind!r} map, not a weight matrix; "
        f"use Registry.backward_map({version})"
      )
    return params["w"]

  def backward_map(self, version: int) -> tuple[BackwardTransform, dict[str, np.ndarray]]:
    """:math:`B_k` for version k >= 1 as (its kind, its parameter arrays), verified.

    ``transform.apply(params, z)`` maps version-k embeddings to version k - 1. A linear version gives
    ``(linear_transform(), {"w": W_k})``.
    """
    k = self._check_number("backward_map", "version", version)
    if k == 0:
      raise ValueError("Registry.backward_map: `version`=0 is the base version and has no backward transformation")
    info, w = self._load(k)
    return _as_map(info, w)

  def _check_number(self, fn: str, name: str, version) -> int:
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version < 0:
      raise ValueError(f"Registry.{fn}: `{name}` must be a version number >= 0, got {version!r}")
    latest = self.latest
    if version > latest:
      raise VersionNotFoundError(
        f"Registry.{fn}: `{name}`={version} is not in registry {self.path}; the latest version is {latest}"
      )
    return int(version)

  # Composing ---------------------------------------------------------------------------------------------------

  def _chain(self, fn: str, to, source) -> tuple[int, int, list]:
    """(j, k, versions 0..k loaded) for a map from version k = ``source`` (default: the latest) down to j = ``to``."""
    k = self.latest if source is None else self._check_number(fn, "source", source)
    j = self._check_number(fn, "to", to)
    if j > k:
      raise ValueError(
        f"Registry.{fn}: `to`={j} is newer than `source`={k}; backward transformations only map to older versions"
      )
    return j, k, self._load_all(upto=k)

  def compose(self, to: int, *, source: int | None = None) -> np.ndarray:
    r"""The composed weight :math:`W^j_k = W_{j+1} \cdots W_k` (eq. 6), [D_j, D_k], in float64.

    Args:
      to: the historical version j.
      source: the version k of the embeddings; defaults to the latest.
    """
    j, k, loaded = self._chain("compose", to, source)
    product = np.eye(loaded[k][0].dim)
    for info, w in reversed(loaded[j + 1 :]):  # W_{j+1} ... W_k, accumulated from the right
      if not is_matrix(info):
        raise ValueError(
          f"Registry.compose: version {info.version} stores a {info.kind!r} map"
          f"{' with a bias' if info.kind in MATRIX_KINDS else ''}"
          f"{' on normalised embeddings' if info.normalize else ''}, which no matrix represents; use "
          f"Registry.transform to apply the chain"
        )
      product = _matrix(info, w) @ product
    return product

  def transform(self, z, to: int, *, source: int | None = None) -> np.ndarray:
    r"""Maps version-k embeddings to version-j compatible ones, :math:`\tilde z_j = z_k (W^j_k)^\top`.

    Works for any embeddings of version k, including data points never seen when the weights were learned.

    Args:
      z: version-k embeddings, [n, D_k].
      to: the historical version j.
      source: the version k of ``z``; defaults to the latest.

    Returns:
      [n, D_j] in ``z``'s floating dtype (computed in float64).
    """
    z = _checks.as_float_array("Registry.transform", "z", z, ndim=2, numpy=True)
    j, k, loaded = self._chain("transform", to, source)
    if z.shape[1] != loaded[k][0].dim:
      raise InconsistentRegistryError(
        f"Registry.transform: `z` has shape {z.shape} but version {k} embeddings have "
        f"dimension D_{k}={loaded[k][0].dim}"
      )
    if all(is_matrix(info) for info, _ in loaded[j + 1 :]):
      return (z.astype(np.float64) @ self.compose(j, source=k).T).astype(z.dtype)
    with jax.enable_x64(True):  # a mixed chain: one map at a time, in float64 like the matrix path
      out = jnp.asarray(z, jnp.float64)
      for info, w in reversed(loaded[j + 1 :]):
        transform, params = _as_map(info, w)
        out = apply_version(
          transform, {name: jnp.asarray(a, jnp.float64) for name, a in params.items()}, out, normalize=info.normalize
        )
      return np.asarray(out).astype(z.dtype)

  def chain(self, to: int, *, source: int | None = None) -> list[tuple[VersionInfo, BackwardTransform, dict]]:
    """The maps that take version-k embeddings to version j = ``to``, in the order they apply.

    The maps that take version-k embeddings (k = ``source``, default the latest) to version j = ``to``, in the order
    they apply: ``[(info_k, B_k, params_k), ..., (info_(j+1), B_(j+1), params_(j+1))]`` (verified).
    """
    j, k, loaded = self._chain("chain", to, source)
    return [(info, *_as_map(info, w)) for info, w in reversed(loaded[j + 1 :])]

  # Writing -----------------------------------------------------------------------------------------------------

  def append(
    self,
    w,
    *,
    notes: str = "",
    version: int | None = None,
    transform: BackwardTransform | None = None,
    normalize: bool = False,
  ) -> VersionInfo:
    """Appends version k = latest + 1 with its backward map.

    The weight :math:`W_k`, [D_(k-1), D_k], or any kind's parameters with ``transform`` (a linear one is stored as its
    weight, exactly as without ``transform``).

    Args:
      w: :math:`W_k` (its rows must equal the latest version's dimension), or ``transform``'s parameters.
      transform: the kind of :math:`B_k` (:mod:`bcjax.alignment` ``orthogonal_transform()``, ``affine_transform``,
        ``mlp_transform``); ``None`` for a weight matrix.
      notes: free-form metadata stored with the version.
      version: the number the caller expects to write; when given it must be latest + 1 (use it to detect that
        another writer got there first).
      normalize: the map was fitted on L2-normalised embeddings of a cosine model: :meth:`transform` normalises
        :math:`z_k` before :math:`B_k` and the result after it (stored in the version's header).

    Raises:
      VersionExistsError: when ``version`` (or latest + 1, if a concurrent writer won) already exists.
    """
    latest = self.latest
    if version is not None:
      if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or version < 1:
        raise ValueError(f"Registry.append: `version` must be an integer >= 1, got {version!r}")
      if version <= latest:
        raise VersionExistsError(
          f"Registry.append: `version`={version} already exists in registry {self.path} "
          f"(latest is {latest}); stored versions are never overwritten"
        )
      if version > latest + 1:
        raise VersionNotFoundError(
          f"Registry.append: `version`={version} would leave a gap; the next version of "
          f"registry {self.path} is {latest + 1}"
        )
    k = latest + 1
    prev = self._load(latest)[0]
    if transform is not None and transform.kind == "linear":
      transform, w = None, w["w"] if isinstance(w, dict) else w
    extra = {"normalize": True} if normalize else {}
    if transform is None:
      arr = _as_weight(w, prev.dim, k)
      self._write(
        self.path,
        k,
        {"version": k, "dim": int(arr.shape[1]), "prev_dim": int(arr.shape[0]), "notes": str(notes), **extra},
        arr,
      )
      return self._load(k)[0]
    if not isinstance(w, dict):
      raise ValueError(
        f"Registry.append: with `transform` ({transform.kind}) `w` must be its parameter dict, got {type(w).__name__}"
      )
    params = {name: _checks.as_float_array("Registry.append", f"w['{name}']", a, numpy=True) for name, a in w.items()}
    d_prev, d_new = transform.dims(params)
    if d_prev != prev.dim:
      raise InconsistentRegistryError(
        f"Registry.append: the {transform.kind} map goes to {d_prev} dimensions but "
        f"version {k - 1} has dimension {prev.dim}"
      )
    check_params("Registry.append", transform, params, d_prev, d_new)
    self._write(
      self.path,
      k,
      {
        "version": k,
        "dim": int(d_new),
        "prev_dim": int(d_prev),
        "notes": str(notes),
        "kind": transform.kind,
        "hparams": [list(h) for h in transform.hparams],
        **extra,
      },
      params,
    )
    return self._load(k)[0]
