"""The fit's workflow: each kind fitted, chosen and judged on held-out pairs (:mod:`bcjax.upgrade.fit`)."""

import functools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import numpy as np

from bcjax._threads import blas_threads
from bcjax.alignment import mlp_transform
from bcjax.upgrade import _files, _hubness, _retrieval, _spaces
from bcjax.upgrade._map import UpgradeMap
from bcjax.upgrade.fit import _moments
from bcjax.upgrade.fit._closed_form import _as_map, closed_form, moments_mse
from bcjax.upgrade.fit._cross_validation import CV_SAMPLE_ROWS, _choose_closed_form, _plus, _RetrievalSample
from bcjax.upgrade.fit._hubness_choice import _choose_hubness, _half_fits, _score_scale
from bcjax.upgrade.fit._mlp import _read_pairs, train_mlp
from bcjax.upgrade.fit._records import (
  HUBNESS_MODES,
  HUBNESS_REFERENCE_ROWS,
  KINDS,
  MIN_VALIDATION_ROWS,
  UPGRADE_KINDS,
  Candidate,
  PairSplit,
  UpgradeFit,
  split_pairs,
)


class _Settings(NamedTuple):
  """:func:`fit_upgrade`'s arguments other than the pairs and the split."""

  kind: str
  normalize: bool
  folds: int
  mlp_hidden: tuple[int, ...]
  mlp_epochs: int
  k: int
  metric: str
  seed: int
  chunk_rows: int
  say: Callable[[str], None]
  hubness: str
  hubness_k: int
  old_model: str
  new_model: str


class _Prepared(NamedTuple):
  """What every kind is fitted from: the split, the training folds' and validation moments, a retrieval sample."""

  split: PairSplit
  folds: int
  fold_moments: list
  train: _moments.PairMoments
  val_moments: _moments.PairMoments | None
  sample: _RetrievalSample
  spaces: dict


class _Kinds(NamedTuple):
  """The kinds fitted on the training pairs: their records, the closed forms' choices and maps, the MLP's weights."""

  candidates: list[Candidate]
  closed_choices: dict[str, dict]
  maps: dict[str, tuple[np.ndarray, np.ndarray]]
  mlp_params: dict


def _check_pairs(z_new, z_prev):
  if z_new.ndim != 2 or z_prev.ndim != 2 or z_new.shape[0] != z_prev.shape[0]:
    raise ValueError(
      f"fit_upgrade: `z_new` has shape {tuple(z_new.shape)} and `z_prev` has shape "
      f"{tuple(z_prev.shape)}; both must be matrices with the same rows (row i of each is one item)"
    )


def fit_upgrade(
  z_new,
  z_prev,
  *,
  kind: str = "auto",
  split: PairSplit | None = None,
  normalize: bool = False,
  folds: int = 5,
  mlp_hidden: Sequence[int] = (128, 512),
  mlp_epochs: int = 40,
  k: int = 10,
  metric: str = "cosine",
  seed: int = 0,
  chunk_rows: int = _files.DEFAULT_CHUNK_ROWS,
  progress: Callable[[str], None] | None = None,
  hubness: str = "auto",
  hubness_k: int = _hubness.DEFAULT_K,
  old_model: str = "",
  new_model: str = "",
  threads: int | None = None,
) -> UpgradeFit:
  r"""Fits a backward map from new-model embeddings to old-model ones of the same items.

  Fits a backward map from new-model embeddings ``z_new`` [n, D_k] to old-model ones ``z_prev`` [n, D_(k-1)] of the same
  items (:mod:`bcjax.upgrade.fit` for the kinds and how each choice is made).

  Args:
    z_new: the new model's embeddings (an array or a read-only memory map, e.g. :func:`open_embeddings`).
    z_prev: the old model's embeddings of the same rows.
    kind: ``auto``, ``linear``, ``orthogonal``, ``affine`` or ``mlp``.
    split: which rows fit, validate and are held out (default :func:`split_pairs` with ``seed``); test rows are
      never read here.
    normalize: fit on L2-normalised rows and normalise the map's output (models compared by cosine).
    folds: cross-validation folds over the training rows for the closed-form choices.
    mlp_hidden: the MLP widths tried; the one with the lowest validation error is kept.
    mlp_epochs: the MLP's epoch limit (it stops earlier when the validation error stops falling).
    k: the cut-off of ``auto``'s own-vector hit rate.
    metric: how ``auto`` scores retrieval: ``cosine``, ``dot`` or ``l2``.
    seed: seeds the default split, the folds and the MLP.
    chunk_rows: rows read at a time when streaming the pairs.
    progress: called with a line of text at each stage.
    hubness: the hubness correction (CSLS, :mod:`bcjax.upgrade._hubness`): ``auto`` (kept when it helps on the
      validation pairs), ``on`` or ``off``; only for cosine retrieval.
    hubness_k: neighbours averaged in the correction's per-document bias.
    old_model: the old model's name, stamped in the map with its fingerprint (:mod:`bcjax.upgrade._spaces`) so that
      the map is never applied the wrong way round.
    new_model: the new model's name, stamped likewise.
    threads: NumPy BLAS threads while fitting; ``None`` (default) takes the cores other processes leave idle, at
      least one (BLAS threads that outnumber the idle cores spin against the other processes:
      16× slower beside two busy ones on two cores).

  Returns:
    :class:`UpgradeFit`.

  Raises:
    ValueError: naming the argument, for an unknown kind, metric or hubness mode, pairs of different rows, a
      split without the training or validation pairs the kind needs, or ``threads`` not a positive integer.
  """
  settings = _Settings(
    kind, normalize, folds, tuple(mlp_hidden), mlp_epochs, k, metric, seed, chunk_rows,
    progress or (lambda _: None), hubness, hubness_k, old_model, new_model,
  )  # fmt: skip
  split = _checked_split(settings, z_new, z_prev, split)
  with blas_threads(threads, name="fit_upgrade: `threads`"):
    prepared = _prepare(settings, z_new, z_prev, split)
    few_val = kind == "auto" and len(prepared.split.val) < MIN_VALIDATION_ROWS
    kinds = _fit_kinds(settings, z_new, z_prev, prepared, few_val)
    if kind != "auto":
      name, reason = kind, f"{kind} was asked for"
    elif few_val:
      name, reason = _auto_by_cross_validation(settings, prepared, kinds)
    else:
      name, reason = _auto_by_validation(settings, z_new, z_prev, prepared, kinds)
    return _finish(settings, z_new, z_prev, prepared, kinds, name, reason)


def _checked_split(s: _Settings, z_new, z_prev, split: PairSplit | None) -> PairSplit:
  """The split to fit on, after every argument is checked (nothing is read before)."""
  fn = "fit_upgrade"
  if s.kind not in UPGRADE_KINDS:
    raise ValueError(f"{fn}: `kind` must be one of {list(UPGRADE_KINDS)}, got {s.kind!r}")
  _check_pairs(z_new, z_prev)
  if s.metric not in _retrieval.METRICS:
    raise ValueError(f"{fn}: `metric` must be one of {list(_retrieval.METRICS)}, got {s.metric!r}")
  if s.hubness not in HUBNESS_MODES:
    raise ValueError(f"{fn}: `hubness` must be one of {list(HUBNESS_MODES)}, got {s.hubness!r}")
  if s.hubness == "on" and s.metric != "cosine":
    raise ValueError(f"{fn}: `hubness`='on' corrects cosine scores; `metric` is {s.metric!r}")
  if s.hubness_k < 1:
    raise ValueError(f"{fn}: `hubness_k` must be >= 1, got {s.hubness_k}")
  split = split_pairs(z_new.shape[0], seed=s.seed) if split is None else split
  if len(split.train) < 2:
    raise ValueError(f"{fn}: the split has {len(split.train)} training pairs; at least 2 are needed")
  if (s.kind in ("auto", "mlp")) and len(split.val) == 0:
    raise ValueError(f"{fn}: `kind`={s.kind!r} needs validation pairs (the split has none)")
  return split


def _prepare(s: _Settings, z_new, z_prev, split: PairSplit) -> _Prepared:
  """The training folds' moments (streamed), the validation moments, the cross-validation's retrieval sample."""
  folds = max(2, min(int(s.folds), len(split.train)))
  fold_of = np.random.default_rng(s.seed).permutation(len(split.train)) % folds
  s.say(f"streaming {len(split.train)} training pairs into {folds} folds' moments")
  fold_moments = [
    _moments.pair_moments(z_new, z_prev, rows=split.train[fold_of == f], normalize=s.normalize, chunk_rows=s.chunk_rows)
    for f in range(folds)
  ]
  picked = np.sort(np.random.default_rng(s.seed + 2).permutation(len(split.train))[:CV_SAMPLE_ROWS])
  sample = _RetrievalSample(*_read_pairs(z_new, z_prev, split.train[picked], s.normalize), fold_of[picked])
  spaces = {"new": _spaces.space_stamp(sample.new, s.new_model), "old": _spaces.space_stamp(sample.old, s.old_model)}
  val_moments = (
    _moments.pair_moments(z_new, z_prev, rows=split.val, normalize=s.normalize, chunk_rows=s.chunk_rows)
    if len(split.val)
    else None
  )
  return _Prepared(split, folds, fold_moments, functools.reduce(_plus, fold_moments), val_moments, sample, spaces)


def _fit_kinds(s: _Settings, z_new, z_prev, p: _Prepared, few_val: bool) -> _Kinds:
  """Each kind asked for (auto: all) fitted on the training pairs, the closed forms' settings cross-validated.

  With few validation pairs their retrieval cannot rank the kinds (a handful of rows, a handful of distractors):
  auto then ranks the closed-form kinds by their cross-validated retrieval over the training pairs instead, and
  leaves the MLP out (too few validation pairs to stop it).
  """
  kinds = KINDS if s.kind == "auto" else (s.kind,)
  d = min(z_prev.shape[1], z_new.shape[1])
  fitted = _Kinds([], {}, {}, {})
  for name in [n for n in KINDS if n != "mlp" and (n in kinds or (n == "affine" and "mlp" in kinds))]:
    choices, cv_score, cv_error = _choose_closed_form(
      name, p.fold_moments, p.train, d, p.sample, s.metric, score_orthogonal=few_val
    )
    fitted.closed_choices[name] = choices
    w, b = fitted.maps[name] = closed_form(name, p.train, **choices)
    fitted.candidates.append(
      Candidate(
        name,
        choices,
        cv_rank_score=None if math.isnan(cv_score) else cv_score,
        cv_mse=None if math.isnan(cv_error) else cv_error,
        val_mse=None if p.val_moments is None else moments_mse(w, b, p.val_moments),
      )
    )
    cv = (
      "" if math.isnan(cv_score) else f"; cross-validated rank score {cv_score:.4f}, mean squared error {cv_error:.4g}"
    )
    s.say(f"{name}: {choices or 'nothing to choose'}{'' if math.isnan(cv_score) else cv}")
  if "mlp" in kinds and not few_val:
    fitted = _fit_mlp(s, z_new, z_prev, p, fitted)
  return fitted


def _fit_mlp(s: _Settings, z_new, z_prev, p: _Prepared, fitted: _Kinds) -> _Kinds:
  """The MLP at each width tried, warm-started from the affine map; the width with the lowest validation error."""
  val_pairs = _read_pairs(z_new, z_prev, p.split.val, s.normalize)
  tried = []
  for i, hidden in enumerate(s.mlp_hidden):
    key = jax.random.fold_in(jax.random.key(s.seed), i)
    mlp = train_mlp(
      z_new, z_prev, p.split.train, val_pairs, fitted.maps["affine"], hidden=int(hidden), key=key,
      normalize=s.normalize, max_epochs=s.mlp_epochs,
    )  # fmt: skip
    tried.append(mlp)
    s.say(f"mlp: hidden {hidden}, best epoch {mlp.epochs}, validation mean squared error {mlp.val_mse:.4g}")
  best = min(tried, key=lambda m: m.val_mse)
  choices = {"hidden": best.hidden, "epochs": best.epochs, "warm_start": "affine"}
  candidates = [*fitted.candidates, Candidate("mlp", choices, val_mse=best.val_mse)]
  return fitted._replace(candidates=candidates, mlp_params=best.params)


def _final_map(s: _Settings, kinds: _Kinds, name: str, data: _moments.PairMoments) -> UpgradeMap:
  """Kind ``name`` with its chosen settings, a closed form fitted on the moments ``data``."""
  if name == "mlp":
    choices = next(c for c in kinds.candidates if c.kind == "mlp").choices
    return UpgradeMap(mlp_transform(hidden=choices["hidden"]), kinds.mlp_params, s.normalize, "mlp", choices)
  choices = kinds.closed_choices[name]
  return _as_map(name, *closed_form(name, data, **choices), s.normalize, choices)


def _auto_by_cross_validation(s: _Settings, p: _Prepared, kinds: _Kinds) -> tuple[str, str]:
  """``auto`` with too few validation pairs: the closed-form kinds ranked by their cross-validated rank score."""
  best = max(kinds.candidates, key=lambda c: (c.cv_rank_score, -(c.cv_mse or 0.0)))
  scores = ", ".join(f"{c.kind} {c.cv_rank_score:.4f}" for c in kinds.candidates)
  reason = (
    f"auto chose {best.kind}: {len(p.split.val)} validation pairs are too few to rank the kinds "
    f"(fewer than {MIN_VALIDATION_ROWS}), so the closed-form kinds were ranked by their {p.folds}-fold "
    f"cross-validated rank score over {len(p.sample.new)} training pairs: {scores}"
  )
  s.say(reason)
  return best.kind, reason


def _auto_by_validation(s: _Settings, z_new, z_prev, p: _Prepared, kinds: _Kinds) -> tuple[str, str]:
  """``auto``: each kind fitted on the training pairs, scored on the validation pairs' retrieval.

  The best mean own-vector rank score wins, unless a simpler kind is within one paired standard error of it.
  """
  val_new, val_prev = _read_pairs(z_new, z_prev, p.split.val, s.normalize)
  distractor_rows = p.split.train[np.random.default_rng(s.seed + 1).permutation(len(p.split.train))[:10_000]]
  distractors = _read_pairs(z_new, z_prev, np.sort(distractor_rows), s.normalize)[1]
  ranks = {}
  for i, record in enumerate(kinds.candidates):
    mapped = np.asarray(_final_map(s, kinds, record.kind, p.train)(val_new))
    ranks[record.kind] = _retrieval.own_vector_ranks(mapped, val_prev, distractors, metric=s.metric)
    hits = _retrieval.own_vector_hits(mapped, val_prev, distractors, k=s.k, metric=s.metric)
    kinds.candidates[i] = record._replace(
      val_rank_score=float(ranks[record.kind].mean()), val_hit_rate=float(hits.mean())
    )
  best = max(KINDS, key=lambda n: ranks[n].mean())
  chosen, why = best, ""
  for simpler in KINDS[: KINDS.index(best)]:
    diff = ranks[best] - ranks[simpler]
    se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else math.inf
    if diff.mean() <= se:
      chosen = simpler
      why = (
        f"; {simpler} is within one paired standard error ({se:.2g}) of {best}'s "
        f"{ranks[best].mean():.4f}, so the simpler kind is kept"
      )
      break
  scores = ", ".join(f"{n} {ranks[n].mean():.4f}" for n in KINDS)
  reason = (
    f"auto chose {chosen}: validation rank score (the share of other old vectors each mapped "
    f"validation row ranks below its own) over {len(p.split.val)} pairs and {len(distractors)} distractors: "
    f"{scores}{why}"
  )
  s.say(reason)
  return chosen, reason


def _finish(s: _Settings, z_new, z_prev, p: _Prepared, kinds: _Kinds, name: str, reason: str) -> UpgradeFit:
  """The chosen kind refitted on the training and validation pairs, with its hubness choice, stamps and scale."""
  on_train = _final_map(s, kinds, name, p.train)
  both = p.train if p.val_moments is None else _plus(p.train, p.val_moments)
  final = on_train if name == "mlp" or p.val_moments is None else _final_map(s, kinds, name, both)
  proxy = "affine" if name == "mlp" else name  # the MLP's linear branch stands in for it out of fold
  halves = _half_fits(proxy, kinds.closed_choices[proxy], p.fold_moments, p.sample)  # the pairs each map never saw
  choice = _choose_hubness(halves, s.hubness, s.metric, s.hubness_k, len(p.split.train) + len(p.split.val))
  if name == "mlp" and s.hubness == "auto":
    choice = choice._replace(reason=choice.reason + " (judged on the MLP's affine branch)")
  s.say(choice.reason)
  if choice.keep:
    rows = np.concatenate([p.split.train, p.split.val])
    rows = np.sort(np.random.default_rng(s.seed + 3).permutation(rows)[:HUBNESS_REFERENCE_ROWS])
    mapped = np.asarray(final(_read_pairs(z_new, z_prev, rows, s.normalize)[0]))
    final = final._replace(hubness=_hubness.make_hubness(mapped, k=s.hubness_k))
  # The map's images of new-model rows: what bridge_items writes into an old store, so not a foreign model's.
  bridged = _spaces.space_stamp(np.asarray(final(p.sample.new)), f"{s.new_model or 'new'} bridged")
  final = final._replace(spaces={**p.spaces, "bridged": bridged}, scale=_score_scale(final, halves))
  return UpgradeFit(final, kinds.candidates, reason + "; " + choice.reason, choice.record)
