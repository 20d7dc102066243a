"""The ICL experiment's datasets by name: graph sets (GraphData) and image sets (ImageData)."""

from experiments.icl.data import DATASETS as GRAPH_DATASETS
from experiments.icl.data import GraphData, is_graph_dataset, load_graphs
from experiments.icl.images import IMAGE_DATASETS, ImageData, load_images

DATASETS = GRAPH_DATASETS + IMAGE_DATASETS


def known_dataset(name: str) -> bool:
  return is_graph_dataset(name) or name in IMAGE_DATASETS


def load_dataset(
  name: str,
  data_dir: str | None = None,
  *,
  download: bool = False,
  seed: int = 0,
  image_size: int | None = None,
  ldp_std: str = "population",
):
  if is_graph_dataset(name):
    return GraphData(load_graphs(name, data_dir, download=download, seed=seed, ldp_std=ldp_std))
  if name in IMAGE_DATASETS:
    return ImageData(*load_images(name, data_dir, download=download), image_size=image_size)
  raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
