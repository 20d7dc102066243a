"""The ICL experiment's datasets by name: graph sets (GraphData) and image sets (ImageData)."""

from experiments.icl.data import DATASETS as GRAPH_DATASETS, GraphData, load_graphs

DATASETS = GRAPH_DATASETS


def load_dataset(name: str, data_dir: str | None = None, *, download: bool = False, seed: int = 0):
  if name in GRAPH_DATASETS:
    return GraphData(load_graphs(name, data_dir, download=download, seed=seed))
  raise ValueError(f"unknown dataset {name!r}; choose from {DATASETS}")
