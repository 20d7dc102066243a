"""The fit's workflow: each kind fitted, chosen and judged on held-out pairs (:mod:`bcjax.upgrade.fit`)."""

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from bcjax.alignment._transforms import mlp_transform
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
  PairSplit,
  UpgradeFit,
  split_pairs,
)


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

  Returns:
    :class:`UpgradeFit`.

  Raises:
    ValueError: naming the argument, for an unknown kind, metric or hubness mode, pairs of different rows, or a
      split without the training or validation pairs the kind needs.
  """
  fn = "fit_upgrade"
  if kind not in UPGRADE_KINDS:
    raise ValueError(f"{fn}: `kind` must be one of {list(UPGRADE_KINDS)}, got {kind!r}")
  _check_pairs(z_new, z_prev)
  if metric not in _retrieval.METRICS:
    raise ValueError(f"{fn}: `metric` must be one of {list(_retrieval.METRICS)}, got {metric!r}")
  if hubness not in HUBNESS_MODES:
    raise ValueError(f"{fn}: `hubness` must be one of {list(HUBNESS_MODES)}, got {hubness!r}")
  if hubness == "on" and metric != "cosine":
    raise ValueError(f"{fn}: `hubness`='on' corrects cosine scores; `metric` is {metric!r}")
  if hubness_k < 1:
    raise ValueError(f"{fn}: `hubness_k` must be >= 1, got {hubness_k}")
  split = split_pairs(z_new.shape[0], seed=seed) if split is None else split
  if len(split.train) < 2:
    raise ValueError(f"{fn}: the split has {len(split.train)} training pairs; at least 2 are needed")
  if (kind in ("auto", "mlp")) and len(split.val) == 0:
    raise ValueError(f"{fn}: `kind`={kind!r} needs validation pairs (the split has none)")
  say = progress or (lambda _: None)
  kinds = KINDS if kind == "auto" else (kind,)
  d_prev, d_new = z_prev.shape[1], z_new.shape[1]

  folds = max(2, min(int(folds), len(split.train)))
  fold_of = np.random.default_rng(seed).permutation(len(split.train)) % folds
  say(f"streaming {len(split.train)} training pairs into {folds} folds' moments")
  fold_moments = [
    _moments.pair_moments(z_new, z_prev, rows=split.train[fold_of == f], normalize=normalize, chunk_rows=chunk_rows)
    for f in range(folds)
  ]
  picked = np.sort(np.random.default_rng(seed + 2).permutation(len(split.train))[:CV_SAMPLE_ROWS])
  sample = _RetrievalSample(*_read_pairs(z_new, z_prev, split.train[picked], normalize), fold_of[picked])
  spaces = {"new": _spaces.space_stamp(sample.new, new_model), "old": _spaces.space_stamp(sample.old, old_model)}
  train = functools.reduce(_plus, fold_moments)
  val_moments = (
    _moments.pair_moments(z_new, z_prev, rows=split.val, normalize=normalize, chunk_rows=chunk_rows)
    if len(split.val)
    else None
  )

  candidates: list[dict[str, Any]] = []
  maps: dict[str, Any] = {}
  closed_choices: dict[str, dict[str, Any]] = {}
  # The moments the final map is fitted on: the training pairs and, when there are any, the validation pairs.
  train_and_val = train if val_moments is None else _plus(train, val_moments)
  # With few validation pairs their retrieval cannot rank the kinds (a handful of rows, a handful of distractors):
  # auto then ranks the closed-form kinds by their cross-validated retrieval over the training pairs instead.
  few_val = kind == "auto" and len(split.val) < MIN_VALIDATION_ROWS
  for name in [n for n in KINDS if n in kinds or (n == "affine" and "mlp" in kinds)]:
    if name == "mlp":
      continue
    choices, cv_score, cv_error = _choose_closed_form(
      name, fold_moments, train, min(d_prev, d_new), sample, metric, score_orthogonal=few_val
    )
    closed_choices[name] = choices
    w, b = closed_form(name, train, **choices)
    maps[name] = (w, b)
    record = {
      "kind": name,
      "choices": choices,
      "cv_rank_score": None if math.isnan(cv_score) else cv_score,
      "cv_mse": None if math.isnan(cv_error) else cv_error,
    }
    if val_moments is not None:
      record["val_mse"] = moments_mse(w, b, val_moments)
    candidates.append(record)
    say(
      f"{name}: {choices or 'nothing to choose'}"
      + (
        ""
        if math.isnan(cv_score)
        else f"; cross-validated rank score {cv_score:.4f}, mean squared error {cv_error:.4g}"
      )
    )

  mlp_params: dict = {}
  if "mlp" in kinds and not few_val:  # with too few validation pairs to stop it, auto leaves the MLP out
    val_pairs = _read_pairs(z_new, z_prev, split.val, normalize)
    tried = []
    for i, hidden in enumerate(mlp_hidden):
      params, info = train_mlp(
        z_new,
        z_prev,
        split.train,
        val_pairs,
        maps["affine"],
        hidden=int(hidden),
        key=jax.random.fold_in(jax.random.key(seed), i),
        normalize=normalize,
        max_epochs=mlp_epochs,
      )
      tried.append((info["val_mse"], params, info))
      say(f"mlp: hidden {hidden}, best epoch {info['epochs']}, validation mean squared error {info['val_mse']:.4g}")
    _, mlp_params, info = min(tried, key=lambda t: t[0])
    candidates.append(
      {
        "kind": "mlp",
        "choices": {"hidden": info["hidden"], "epochs": info["epochs"], "warm_start": "affine"},
        "val_mse": info["val_mse"],
      }
    )

  def final_map(name: str, data: _moments.PairMoments) -> UpgradeMap:
    if name == "mlp":
      record = next(c for c in candidates if c["kind"] == "mlp")
      return UpgradeMap(
        mlp_transform(hidden=record["choices"]["hidden"]), mlp_params, normalize, "mlp", record["choices"]
      )
    return _as_map(name, *closed_form(name, data, **closed_choices[name]), normalize, closed_choices[name])

  def finish(name: str, reason: str) -> UpgradeFit:
    on_train = final_map(name, train)
    final = on_train if name == "mlp" or val_moments is None else final_map(name, train_and_val)
    proxy = "affine" if name == "mlp" else name  # the MLP's linear branch stands in for it out of fold
    halves = _half_fits(proxy, closed_choices[proxy], fold_moments, sample) if hubness == "auto" else None
    choice = _choose_hubness(halves, hubness, metric, hubness_k, len(split.train) + len(split.val))
    if name == "mlp" and hubness == "auto":
      choice = choice._replace(reason=choice.reason + " (judged on the MLP's affine branch)")
    say(choice.reason)
    if choice.keep:
      rows = np.concatenate([split.train, split.val])
      rows = np.sort(np.random.default_rng(seed + 3).permutation(rows)[:HUBNESS_REFERENCE_ROWS])
      mapped = np.asarray(final(_read_pairs(z_new, z_prev, rows, normalize)[0]))
      final = final._replace(hubness=_hubness.make_hubness(mapped, k=hubness_k))
    # The map's images of new-model rows: what bridge_items writes into an old store, so not a foreign model's.
    bridged = _spaces.space_stamp(np.asarray(final(sample.new)), f"{new_model or 'new'} bridged")
    final = final._replace(
      spaces={**spaces, "bridged": bridged}, scale=_score_scale(final, z_new, z_prev, split, normalize, seed)
    )
    return UpgradeFit(final, candidates, reason + "; " + choice.reason, choice.record)

  if kind != "auto":
    return finish(kind, f"{kind} was asked for")

  if few_val:
    closed = candidates
    best_record = max(closed, key=lambda c: (c["cv_rank_score"], -c["cv_mse"]))
    scores = ", ".join(f"{c['kind']} {c['cv_rank_score']:.4f}" for c in closed)
    reason = (
      f"auto chose {best_record['kind']}: {len(split.val)} validation pairs are too few to rank the kinds "
      f"(fewer than {MIN_VALIDATION_ROWS}), so the closed-form kinds were ranked by their {folds}-fold "
      f"cross-validated rank score over {len(sample.new)} training pairs: {scores}"
    )
    say(reason)
    return finish(best_record["kind"], reason)

  # auto: each kind fitted on the training pairs, scored on the validation pairs' retrieval.
  val_new, val_prev = _read_pairs(z_new, z_prev, split.val, normalize)
  distractor_rows = split.train[np.random.default_rng(seed + 1).permutation(len(split.train))[:10_000]]
  distractors = _read_pairs(z_new, z_prev, np.sort(distractor_rows), normalize)[1]
  ranks = {}
  for record in candidates:
    mapped = np.asarray(final_map(str(record["kind"]), train)(val_new))
    ranks[record["kind"]] = _retrieval.own_vector_ranks(mapped, val_prev, distractors, metric=metric)
    record["val_rank_score"] = float(ranks[record["kind"]].mean())
    record["val_hit_rate"] = float(_retrieval.own_vector_hits(mapped, val_prev, distractors, k=k, metric=metric).mean())
  best = max(KINDS, key=lambda n: ranks[n].mean())
  chosen_name, reason = best, ""
  for simpler in KINDS[: KINDS.index(best)]:
    diff = ranks[best] - ranks[simpler]
    se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else math.inf
    if diff.mean() <= se:
      chosen_name = simpler
      reason = (
        f"; {simpler} is within one paired standard error ({se:.2g}) of {best}'s "
        f"{ranks[best].mean():.4f}, so the simpler kind is kept"
      )
      break
  scores = ", ".join(f"{n} {ranks[n].mean():.4f}" for n in KINDS)
  reason = (
    f"auto chose {chosen_name}: validation rank score (the share of other old vectors each mapped "
    f"validation row ranks below its own) over {len(split.val)} pairs and {len(distractors)} distractors: "
    f"{scores}{reason}"
  )
  say(reason)
  return finish(chosen_name, reason)
