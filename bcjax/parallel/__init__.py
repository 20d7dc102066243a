"""Data parallelism on JAX's own SPMD machinery: one 1-D device mesh whose axis is :data:`DATA_AXIS`.

Batch rows are sharded over the mesh, parameters are replicated (or, for embedding tables, row-sharded), and the
reductions of bcjax take ``axis_name=DATA_AXIS`` inside ``jax.shard_map`` so a per-device partial sum becomes the
global one. In a multi-process run (:func:`initialize`) every process holds its own devices of the same global mesh
and feeds its slice of each global batch; only the main process writes files.
"""

from bcjax.parallel._mesh import DATA_AXIS
from bcjax.parallel._mesh import collective_threads_needed
from bcjax.parallel._mesh import data_mesh
from bcjax.parallel._mesh import forced_cpu_devices
from bcjax.parallel._mesh import initialize
from bcjax.parallel._mesh import is_main_process
from bcjax.parallel._mesh import replicate
from bcjax.parallel._mesh import reserve_collective_threads
from bcjax.parallel._mesh import shard_blocks
from bcjax.parallel._mesh import shard_padded_rows
from bcjax.parallel._mesh import shard_rows
from bcjax.parallel._mesh import shard_table
from bcjax.parallel._mesh import split_rows

__all__ = (
  "DATA_AXIS",
  "collective_threads_needed",
  "data_mesh",
  "forced_cpu_devices",
  "initialize",
  "is_main_process",
  "replicate",
  "reserve_collective_threads",
  "shard_blocks",
  "shard_padded_rows",
  "shard_rows",
  "shard_table",
  "split_rows",
)
