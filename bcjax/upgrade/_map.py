r"""A fitted embedding-upgrade map.

A :mod:`bcjax.alignment` backward transform with its parameters, whether it works on L2-normalised embeddings, and what
was chosen when it was fitted; saved to and loaded from a checksummed map file in the registry's own format, so ``bcjax
append`` stores it as the next version unchanged.

Serving: every kind but the MLP is affine, :math:`B(z) = Wz + b`, and a chain of affine maps composes into one
(:func:`affine_form`, :func:`compose_affine`); a map applies at query time through :func:`apply_map` (jitted).
"""

import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bcjax import _atomic
from bcjax._device import device_array
from bcjax._unit import unit_rows_jax
from bcjax.alignment._transforms import BackwardTransform, backward_transform, check_params, semi_orthogonal
from bcjax.upgrade._hubness import Hubness
from bcjax.upgrade._scale import ScoreScale
from bcjax.upgrade._spaces import SpaceStamp, margin
from bcjax.versioning._format import CorruptVersionError, decode, encode

MAP_FORMAT = "bcjax-upgrade-map"
MAP_SCHEMA = 2
"""The map header's own schema version (``map_schema``): 2 added it, with the layout of the unversioned files (1),
which still load; a file of a later schema is refused, never read as this one."""
_HUBNESS_REFERENCE = "hubness.reference"  # not a transform parameter: kept apart on load
_SPACE_PREFIX = "space."  # the models' fingerprints ("space.new", "space.old"): kept apart on load too


class UpgradeMap(NamedTuple):
  r"""A backward map :math:`B: \mathbb R^{D_k} \to \mathbb R^{D_{k-1}}` from a new model's embeddings to an old one's.

  ``transform`` and ``params``: the :mod:`bcjax.alignment` kind and its parameter arrays (float64 NumPy);
  ``normalize``: inputs are L2-normalised before B and outputs after it (a cosine model); ``kind``: the upgrade
  kind it was fitted as (``linear``, ``orthogonal``, ``affine`` or ``mlp``: ``linear`` is stored as a full-rank
  ``affine`` transform); ``choices``: the hyper-parameters chosen on the validation split (JSON-able);
  ``hubness``: the fitted hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`) applied to the old vectors'
  scores wherever bcjax searches with this map, or None; ``spaces``: the two models' fingerprints
  (:mod:`bcjax.upgrade._spaces`), ``{"new": ..., "old": ..., "bridged": ...}`` (the last: the map's images of
  new-model rows), that fix the map's direction, or None; ``scale``: how a bridged search scores rows written
  through the map and re-embedded rows on the old rows' scale (:class:`~bcjax.upgrade.ScoreScale`), or None (their
  scores as they are).
  """

  transform: BackwardTransform
  params: dict
  normalize: bool
  kind: str
  choices: dict
  hubness: Hubness | None = None
  spaces: dict[str, SpaceStamp] | None = None
  scale: ScoreScale | None = None

  @property
  def dims(self) -> tuple[int, int]:
    """(D_(k-1), D_k)."""
    return self.transform.dims(self.params)

  def __call__(self, z) -> jax.Array:
    """:func:`apply_map` of this map."""
    return apply_map(self, z)


def apply_map(upgrade_map: UpgradeMap, z) -> jax.Array:
  """Maps new-model embeddings ``z`` [n, D_k] to the old model's space, [n, D_(k-1)].

  In ``z``'s precision (float32 for narrower inputs): the same compiled program as :func:`query_function`
  (:func:`compiled_map`), its parameters placed on the device once per map, so the query path, the report, ``bcjax
  transform`` and the stores all compute the same numbers.

  Args:
    upgrade_map: the fitted map.
    z: new-model embeddings, [n, D_k].

  Returns:
    The mapped embeddings, [n, D_(k-1)].

  Raises:
    ValueError: embeddings of another width.
  """
  z = device_array(z)
  if z.ndim != 2 or z.shape[1] != upgrade_map.dims[1]:
    raise ValueError(f"apply_map: `z` has shape {tuple(z.shape)} but the map takes D_k={upgrade_map.dims[1]} columns")
  dtype = jnp.float64 if z.dtype == jnp.float64 else jnp.float32
  return compiled_map([upgrade_map], dtype)(z)


# query_function per chain of maps and dtype, so that calling a map never uploads its parameters or compiles again; a
# few dozen entries (each holds its maps' parameters on the device), the oldest dropped first. An entry is found by
# the identity of each map object and of each of its parameter arrays: a map loaded again, or rebuilt with other
# parameters (``m._replace(params=...)``, a replaced array), is another entry, never the stale one. Parameter arrays are
# read as they are when the entry is built; change a map by building a new one, not by writing into its arrays.
_COMPILED: dict[tuple, tuple[tuple, Callable]] = {}
_COMPILED_LIMIT = 32


def _chain_key(chain: tuple) -> tuple:
  return tuple((id(m), tuple((name, id(a)) for name, a in m.params.items())) for m in chain)


def compiled_map(maps: "UpgradeMap | Sequence[UpgradeMap]", dtype=jnp.float32) -> Callable[[jax.Array], jax.Array]:
  """:func:`query_function` of ``maps`` in ``dtype``, built once and then reused.

  :func:`query_function` of ``maps`` in ``dtype``, built once per chain of map objects (and their parameter arrays)
  and dtype, then reused: the one compiled application path of :mod:`bcjax.upgrade`, shared by a map's call, the
  report, ``transform_file`` and every store search. Each input shape compiles once.

  Args:
    maps: a map, or a chain of maps in the order they apply.
    dtype: the compute dtype.

  Returns:
    The jitted function ``f(z [n, D_k]) -> [n, D_j]``.
  """
  chain = (maps,) if isinstance(maps, UpgradeMap) else tuple(maps)
  key = (_chain_key(chain), jnp.dtype(dtype).name)
  hit = _COMPILED.get(key)
  # The entry holds its maps, so none of their ids can be reused by another object while it lives.
  if hit is not None and all(a is b for a, b in zip(hit[0], chain)):
    return hit[1]
  fn = query_function(list(chain), dtype=dtype)
  if len(_COMPILED) >= _COMPILED_LIMIT:
    _COMPILED.pop(next(iter(_COMPILED)))
  _COMPILED[key] = (chain, fn)
  return fn


def query_function(maps: "UpgradeMap | Sequence[UpgradeMap]", *, dtype=jnp.float32) -> Callable[[jax.Array], jax.Array]:
  """A jitted ``f(z [n, D_k]) -> [n, D_j]`` for query-time use.

  With the map's (or chain's) parameters placed on the device once: affine kinds become one :math:`Wz + b` per run of
  maps without normalisation between them (an orthogonal map's QR factor is not recomputed per call), the MLP keeps its
  own apply.

  Args:
    maps: a map, or a chain of maps in the order they apply.
    dtype: the compute dtype.

  Returns:
    The jitted function.
  """
  maps = [maps] if isinstance(maps, UpgradeMap) else list(maps)
  stages: list[tuple[Any, dict[str, jax.Array], bool]] = []
  for m in maps:
    form = affine_form(m.transform, m.params)
    if form is not None:
      stages.append(("affine", {"w_t": device_array(form[0].T, dtype), "b": device_array(form[1], dtype)}, m.normalize))
    else:
      stages.append((m.transform, {n: device_array(np.asarray(a), dtype) for n, a in m.params.items()}, m.normalize))
  params = [p for _, p, _ in stages]
  kinds = tuple((kind, normalize) for kind, _, normalize in stages)

  @jax.jit
  def run(params, z):
    z = z.astype(dtype)
    for (kind, normalize), p in zip(kinds, params):
      if normalize:
        z = unit_rows_jax(z)
      z = z @ p["w_t"] + p["b"] if kind == "affine" else kind.apply(p, z)
      if normalize:
        z = unit_rows_jax(z)
    return z

  return functools.partial(run, params)


def check_direction(upgrade_map: UpgradeMap, z, *, name: str = "z") -> None:
  """Refuses embeddings ``z`` [n, D] that are not the new model's.

  A width other than D_k, or, where both models have the same width and the map carries their fingerprints, rows that
  lean to the old model's direction (the map would be applied the wrong way round).

  Args:
    upgrade_map: the fitted map.
    z: embeddings meant to be the new model's, [n, D].
    name: the argument's name, for the message.

  Returns:
    None; it raises instead of returning when ``z`` is not the new model's.

  Raises:
    ValueError: naming ``name``, the models and the evidence.
  """
  z = np.asarray(z)
  d_prev, d_new = upgrade_map.dims
  if z.ndim != 2 or z.shape[1] != d_new:
    raise ValueError(f"`{name}` has shape {tuple(z.shape)}; the map takes the new model's D_k={d_new} columns")
  spaces = upgrade_map.spaces
  if spaces is None or d_prev != d_new or z.shape[0] == 0:
    return
  lean = margin(z, spaces["new"], spaces["old"])
  if lean < 0:
    new, old = (spaces[s].model or f"the {s} model" for s in ("new", "old"))
    raise ValueError(
      f"`{name}` looks like {old}'s embeddings, not {new}'s: its rows are likelier under {old}'s fingerprint (by "
      f"{-lean:.3g} in mean log-likelihood); the map takes {new}'s embeddings to {old}'s space, not the other way round"
    )


def affine_form(transform: BackwardTransform, params) -> tuple[np.ndarray, np.ndarray] | None:
  """(W [D_(k-1), D_k], b [D_(k-1)]) in float64 of an affine kind, or None for the MLP.

  (W [D_(k-1), D_k], b [D_(k-1)]) in float64 of an affine kind (linear, orthogonal, affine of any rank), or None for the
  MLP.

  Args:
    transform: the map's kind.
    params: its parameter arrays.

  Returns:
    ``(W, b)``, or None for the MLP.
  """
  p = {name: np.asarray(a, np.float64) for name, a in params.items()}
  if transform.kind == "linear":
    w = p["w"]
  elif transform.kind == "orthogonal":
    with jax.enable_x64(True):
      w = np.asarray(semi_orthogonal(jnp.asarray(p["a"], jnp.float64)))
  elif transform.kind == "affine":
    w = p["w"] if "w" in p else p["u"] @ p["v"].T
  else:
    return None
  return w, p.get("b", np.zeros(w.shape[0]))


def compose_affine(forms) -> tuple[np.ndarray, np.ndarray]:
  r"""One affine map equal to applying ``forms`` in order.

  One affine map equal to applying ``forms`` = [(W_k, b_k), (W_(k-1), b_(k-1)), ...] in that order: :math:`W = W_{j+1}
  \cdots W_k`, :math:`b = W_{j+1}\cdots W_{k-1} b_k + \dots + b_{j+1}`.
  """
  w, b = forms[0]
  for w_next, b_next in forms[1:]:
    w, b = w_next @ w, w_next @ b + b_next
  return w, b


def save_map(
  upgrade_map: UpgradeMap, path: str | os.PathLike, *, notes: dict | None = None, overwrite: bool = False
) -> Path:
  """Writes ``upgrade_map`` to ``path`` atomically.

  Never over an existing file unless ``overwrite``; ``notes`` (JSON-able: the report's summary, the models' names) go
  in its header.

  Args:
    upgrade_map: the map.
    path: the file to write.
    notes: JSON-able notes for its header.
    overwrite: replace an existing file.

  Returns:
    The path written.

  Raises:
    FileExistsError: ``path`` exists and ``overwrite`` is off.
  """
  d_prev, d_new = upgrade_map.dims
  header = {
    "format": MAP_FORMAT,
    "map_schema": MAP_SCHEMA,
    "kind": upgrade_map.transform.kind,
    "hparams": [list(h) for h in upgrade_map.transform.hparams],
    "prev_dim": int(d_prev),
    "dim": int(d_new),
    "normalize": bool(upgrade_map.normalize),
    "fitted_as": upgrade_map.kind,
    "choices": upgrade_map.choices,
    "notes": notes or {},
  }
  json.dumps(header)  # fails here, before anything is written, on a value JSON cannot hold
  params = {name: np.asarray(a, np.float64) for name, a in upgrade_map.params.items()}
  if upgrade_map.hubness is not None:
    header["hubness_k"] = int(upgrade_map.hubness.k)
    params[_HUBNESS_REFERENCE] = np.asarray(upgrade_map.hubness.reference, np.float32)
  if upgrade_map.scale is not None:
    header["score_scale"] = {name: float(v) for name, v in upgrade_map.scale._asdict().items()}
  if upgrade_map.spaces is not None:
    header["spaces"] = {side: {"model": st.model, "residual": st.residual} for side, st in upgrade_map.spaces.items()}
    for side, stamp in upgrade_map.spaces.items():
      for field in ("mean", "components", "variances"):
        params[f"{_SPACE_PREFIX}{side}.{field}"] = np.asarray(getattr(stamp, field), np.float64)
  return _atomic.write_atomic(path, encode(header, params), overwrite=overwrite)


def is_map_file(path: str | os.PathLike) -> bool:
  """Whether ``path`` starts like a map file (or a registry version file, the same format)."""
  try:
    with open(path, "rb") as f:
      return f.read(14) == b"bcjax-version "
  except OSError:
    return False


def load_map(
  path: str | os.PathLike, *, old_model: str | None = None, new_model: str | None = None
) -> tuple[UpgradeMap, dict]:
  """Reads and verifies a map file written by :func:`save_map`; returns (the map, the notes stored with it).

  Args:
    path: the map file.
    old_model: the old model the caller serves, when known: a map stamped with another name is refused (a map from
      model A to B applied to C, or the wrong way round).
    new_model: the new model the caller serves, when known, likewise.

  Returns:
    ``(the map, the notes stored with it)``.

  Raises:
    ValueError: for a missing, corrupt or foreign file, or models other than the ones stamped.
  """
  path = Path(path)
  try:
    data = path.read_bytes()
  except FileNotFoundError:
    raise ValueError(f"load_map: map file {path} does not exist") from None
  try:
    header, params, _ = decode(data, str(path))
  except CorruptVersionError as e:
    raise ValueError(f"load_map: {e}") from None
  if header.get("format") != MAP_FORMAT or not isinstance(params, dict):
    raise ValueError(f"load_map: {path} is not a bcjax map file (header format {header.get('format')!r})")
  schema = header.get("map_schema", 1)
  if not isinstance(schema, int) or not 1 <= schema <= MAP_SCHEMA:
    raise ValueError(
      f"load_map: {path} is a map file of schema {schema!r}; this bcjax reads schemas 1 to {MAP_SCHEMA} (a later "
      f"bcjax wrote it: upgrade bcjax to read it)"
    )
  reference = params.pop(_HUBNESS_REFERENCE, None)
  stamp_arrays = {n[len(_SPACE_PREFIX) :]: params.pop(n) for n in list(params) if n.startswith(_SPACE_PREFIX)}
  try:
    transform = backward_transform(header["kind"], **dict(header["hparams"]))
    check_params(f"load_map({path})", transform, params, int(header["prev_dim"]), int(header["dim"]))
    hubness = None if reference is None else Hubness(np.asarray(reference, np.float32), int(header["hubness_k"]))
    spaces = (
      {
        side: SpaceStamp(
          str(header["spaces"][side]["model"]),
          np.asarray(stamp_arrays[f"{side}.mean"], np.float64),
          np.asarray(stamp_arrays[f"{side}.components"], np.float64),
          np.asarray(stamp_arrays[f"{side}.variances"], np.float64),
          float(header["spaces"][side]["residual"]),
        )
        for side in header["spaces"]
      }
      if stamp_arrays
      else None
    )
    # files written before the two-stage re-ranking stopped using it also carry a `new_slope`: read and dropped
    scale = (
      None
      if "score_scale" not in header
      else ScoreScale(**{k: float(header["score_scale"][k]) for k in ScoreScale._fields})
    )
  except (KeyError, TypeError) as e:
    raise ValueError(f"load_map: {path} has a damaged header ({e!r})") from None
  if hubness is not None and (hubness.reference.ndim != 2 or hubness.reference.shape[1] != int(header["prev_dim"])):
    raise ValueError(f"load_map: {path}'s hubness reference has shape {hubness.reference.shape}, not [M, D_(k-1)]")
  upgrade_map = UpgradeMap(
    transform,
    {n: np.asarray(a) for n, a in params.items()},
    bool(header["normalize"]),
    str(header["fitted_as"]),
    dict(header["choices"]),
    hubness,
    spaces,
    scale,
  )
  stamped = {side: stamp.model for side, stamp in (spaces or {}).items()}
  for side, expected in (("old", old_model), ("new", new_model)):
    if expected is not None and stamped.get(side) and stamped[side] != expected:
      raise ValueError(
        f"load_map: {path} maps {stamped['new'] or 'its new model'} to {stamped['old'] or 'its old model'}; "
        f"`{side}_model` is {expected!r}, not {stamped[side]!r}"
      )
  return upgrade_map, dict(header["notes"])
