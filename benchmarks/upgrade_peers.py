r"""bcjax's backward maps beside the tools practitioners install for the same job, on the same pairs and the same
measure: isotrieve's ridge (``RidgeMapping(alpha="auto")``, generalised cross-validation; optional: ``pip install
isotrieve``, Python >= 3.10) and, always, the map with no fit at all where the widths agree.

For each number of pairs: the pairs' rows are drawn from the items outside ``queries`` held-out items; each tool fits
new -> old on them; each held-out item's new embedding, mapped, searches the whole old index (exact cosine), and the
measure is whether it finds that item's own old vector in the top 10 and first (R@10, R@1). bcjax's kinds are
``orthogonal``, ``linear``, ``affine`` and ``auto``; ``auto + hubness`` serves auto's map with its hubness
correction (CSLS) switched on. Fit seconds are medians of ``repeats`` fits after one untimed warm-up fit (compiles
apart); isotrieve's are its ``fit`` call alone.

Pairs come from ``--old``/``--new`` .npy files of real embeddings of the same items (row i of each), or, without
them, from two synthetic models (a different linear view of shared items each, plus noise and a common direction).

  python -m benchmarks.upgrade_peers --out runs/peers.json [--old OLD.npy --new NEW.npy] [--quick]
"""

import dataclasses
import importlib.util
import statistics
import sys
import time

import numpy as np

from bcjax import upgrade
from benchmarks._embeddings import check_paired, paired_embeddings
from benchmarks.timing import benchmark_main
from experiments import harness
from experiments.harness import option

KINDS = ("orthogonal", "linear", "affine", "auto")


@dataclasses.dataclass(frozen=True)
class Config:
  old: str = option("", help=".npy [n, D_old] of real old-model embeddings (default: synthetic)")
  new: str = option("", help=".npy [n, D_new] of the same items' new-model embeddings")
  items: int = option(20_000, help="synthetic items (without --old/--new)", low=100)
  dim: int = option(384, help="synthetic width", low=2)
  pairs: tuple[int, ...] = option((200, 1000, 4000), help="paired items per fit", low=20)
  queries: int = option(4000, help="held-out items whose own old vector is searched for", low=10)
  repeats: int = option(3, help="timed fits per tool (median reported)", low=1)
  seed: int = option(0, help="seeds the synthetic models and the draws", low=0)


PRESETS = {
  "full": Config(),
  "quick": Config(items=1500, dim=16, pairs=(100, 400), queries=200, repeats=1),
}


def _synthetic(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(cfg.seed)
  latent = rng.standard_normal((cfg.items, max(2, cfg.dim // 2)))
  old = np.tanh(latent @ rng.standard_normal((latent.shape[1], cfg.dim)) / 3) + 0.5 * rng.standard_normal(cfg.dim)
  new = latent @ rng.standard_normal((latent.shape[1], cfg.dim)) + rng.standard_normal(cfg.dim)
  new += 0.5 * rng.standard_normal(new.shape)
  return old.astype(np.float32), new.astype(np.float32)


def _recall(mapped: np.ndarray, index: np.ndarray, own: np.ndarray, item_bias=None) -> dict:
  found = upgrade.top_k(mapped, index, 10, item_bias=item_bias)
  return {"r@10": float(np.mean((found == own[:, None]).any(axis=1))), "r@1": float(np.mean(found[:, 0] == own))}


def _timed(fit, repeats: int):
  fit()  # warm-up: compiles, caches
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = fit()
    seconds.append(time.perf_counter() - start)
  return result, statistics.median(seconds)


def run(cfg: Config) -> dict:
  old, new = paired_embeddings(cfg.old, cfg.new) or _synthetic(cfg)
  n = len(old)
  rng = np.random.default_rng(cfg.seed + 1)
  order = rng.permutation(n)
  queries, pool = np.sort(order[: cfg.queries]), order[cfg.queries :]
  has_isotrieve = importlib.util.find_spec("isotrieve") is not None
  out = {"items": n, "old_dim": old.shape[1], "new_dim": new.shape[1], "queries": len(queries), "rows": []}
  out["source"] = f"{cfg.old} / {cfg.new}" if cfg.old else "synthetic"
  out["isotrieve"] = has_isotrieve
  for count in cfg.pairs:
    rows = np.sort(pool[:count])
    row: dict = {"pairs": count, "tools": {}}
    if old.shape[1] == new.shape[1]:
      row["tools"]["no map"] = _recall(new[queries], old, queries)
    for kind in KINDS:
      fit, seconds = _timed(
        lambda kind=kind, rows=rows: upgrade.fit_upgrade(
          new[rows], old[rows], kind=kind, normalize=True, hubness="off"
        ),
        cfg.repeats,
      )
      mapped = np.asarray(fit.map(new[queries]))
      row["tools"][f"bcjax {kind}"] = dict(_recall(mapped, old, queries), fit_s=seconds, chosen=fit.map.kind)
      if kind == "auto":
        with_csls = upgrade.fit_upgrade(new[rows], old[rows], kind="auto", normalize=True, hubness="on").map
        if with_csls.hubness is not None:
          bias = upgrade.hubness_bias(old, with_csls.hubness)
          row["tools"]["bcjax auto + hubness"] = _recall(np.asarray(with_csls(new[queries])), old, queries, bias)
    if has_isotrieve:
      from isotrieve import RidgeMapping

      ridge, seconds = _timed(lambda rows=rows: RidgeMapping(alpha="auto").fit(new[rows], old[rows]), cfg.repeats)
      row["tools"]["isotrieve ridge"] = dict(_recall(ridge.transform(new[queries]), old, queries), fit_s=seconds)
    for name, r in row["tools"].items():
      extra = f", fit {r['fit_s']:.2f} s" if "fit_s" in r else ""
      print(f"{count} pairs, {name}: R@10 {r['r@10']:.3f}, R@1 {r['r@1']:.3f}{extra}", file=sys.stderr)
    out["rows"].append(row)
  return out


def main(argv=None) -> int:
  def check(cfg: Config) -> None:
    check_paired(cfg.old, cfg.new, cfg.queries + max(cfg.pairs))
    if not cfg.old and cfg.queries + max(cfg.pairs) > cfg.items:
      raise harness.UsageError("--items", f"{cfg.items}: {cfg.queries} queries and {max(cfg.pairs)} pairs need more")

  return benchmark_main("upgrade_peers", __doc__, Config, PRESETS, run, argv, check_config=check)


if __name__ == "__main__":
  sys.exit(main())
