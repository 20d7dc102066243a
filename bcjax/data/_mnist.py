"""MNIST in its public IDX format (LeCun, Cortes & Burges).

Gzipped or not, and the two-digit subsets of the ICL experiments.

IDX: a big-endian header — two zero bytes, a type code (0x08 = uint8), the number of dimensions d — then d
big-endian uint32 sizes, then the data in C order. Images are idx3 [N, 28, 28], labels idx1 [N].
"""

import os
from pathlib import Path

import numpy as np

from bcjax._textfile import DataFormatError, read_bytes
from bcjax.data._download import default_cache_dir, download_hint, fetch

MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/{name}"
# SHA-256 of the canonical gzipped files (TensorFlow Datasets' url_checksums/mnist.txt; the test set's two agree with
# the development copy's).
MNIST_SHA256 = {
  "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
  "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
  "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
  "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
MNIST_FILES = {
  "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
  "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Reads one uint8 IDX file (``.gz`` or raw) into an array of the header's shape.

  Args:
    path: the IDX file (``.gz`` or raw).

  Returns:
    The array, of the header's shape, uint8.

  Raises:
    ValueError: a bad magic number, an unsupported type code, or a payload whose size differs from the header's
      (the message names the file and the sizes).
  """
  path = Path(path)
  raw = read_bytes(path)
  if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
    raise DataFormatError(f"{path}: not an IDX file (magic {raw[:4].hex() or 'missing'}; expected 0000 08 0d)")
  if raw[2] != 0x08:
    raise DataFormatError(f"{path}: IDX type code 0x{raw[2]:02x} is not supported (only 0x08 = unsigned byte)")
  ndim = raw[3]
  header = 4 + 4 * ndim
  if ndim == 0 or len(raw) < header:
    raise DataFormatError(f"{path}: IDX header declares {ndim} dimensions but the file has only {len(raw)} bytes")
  shape = tuple(int(v) for v in np.frombuffer(raw[4:header], ">u4"))
  expected = int(np.prod(shape, dtype=object))  # exact: a flipped header byte can declare 2^32-sized axes
  if len(raw) - header != expected:
    raise DataFormatError(
      f"{path}: IDX header shape {shape} needs {expected} data bytes, the file has {len(raw) - header}"
    )
  return np.frombuffer(raw[header:], np.uint8).reshape(shape)


def mnist_path(
  data_dir: str | os.PathLike | None = None, split: str = "test", *, download: bool = False
) -> tuple[Path, Path]:
  """The (images, labels) IDX files of MNIST's ``split``.

  ``split`` is "train" or "test"; the files are looked up in ``data_dir`` (gzipped or extracted) or the download
  cache, and fetched when ``download``.

  Args:
    data_dir: where to look first.
    split: ``train`` or ``test``.
    download: fetch missing files into the cache.

  Returns:
    ``(images path, labels path)``.

  Raises:
    FileNotFoundError: the files are absent and ``download`` is False.
    ConnectionError: ``download`` is True and the machine is offline.
  """
  if split not in MNIST_FILES:
    raise ValueError(f"mnist_path: `split` must be 'train' or 'test', got {split!r}")
  cache = default_cache_dir() / "mnist"
  roots = ([Path(data_dir)] if data_dir is not None else []) + [cache]
  found = []
  for name in MNIST_FILES[split]:
    for root in roots:
      hit = next((p for p in (root / name, root / name[:-3]) if p.is_file()), None)
      if hit is not None:
        found.append(hit)
        break
    else:
      if not download:
        raise FileNotFoundError(
          f"MNIST file {name} not found in {' or '.join(map(str, roots))}; pass the folder "
          f"with the IDX files, or fetch {MNIST_URL.format(name=name)} "
          f"with {download_hint(cache)}"
        )
      found.append(fetch(MNIST_URL.format(name=name), cache, sha256=MNIST_SHA256[name]))
  return found[0], found[1]


def load_mnist(
  data_dir: str | os.PathLike | None = None,
  split: str = "test",
  *,
  digits: tuple[int, ...] | None = None,
  download: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
  """MNIST ``split`` as (images [N, 28, 28] uint8, labels [N] int64), optionally only the given ``digits``.

  Args:
    data_dir: where the IDX files are.
    split: ``train`` or ``test``.
    digits: keep only these digits (default all).
    download: fetch missing files into the cache.

  Returns:
    ``(images [N, 28, 28] uint8, labels [N] int64)``.

  Raises:
    ValueError: malformed files, or image and label counts that differ.
  """
  images_file, labels_file = mnist_path(data_dir, split, download=download)
  images, labels = read_idx(images_file), read_idx(labels_file)
  if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
    raise ValueError(
      f"MNIST: images {images_file} {images.shape} and labels {labels_file} {labels.shape} do not "
      f"match (expected [N, H, W] and [N])"
    )
  labels = labels.astype(np.int64)
  if digits is not None:
    keep = np.isin(labels, digits)
    images, labels = images[keep], labels[keep]
  return images, labels
