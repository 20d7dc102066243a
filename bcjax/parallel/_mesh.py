"""The data mesh and the placement of host values on it (see :mod:`bcjax.parallel`)."""

import os
import re
import socket
import time
import warnings
from typing import cast

import jax
import numpy as np
from jax.sharding import NamedSharding

from bcjax import _checks

DATA_AXIS = "data"  # the one mesh axis; pass it as ``axis_name=`` to bcjax reductions inside jax.shard_map
"""The name of the data mesh's one axis: pass it as ``axis_name=`` to bcjax's reductions inside ``jax.shard_map``."""

_COORDINATOR = re.compile(r"^\[?[A-Za-z0-9_.:-]+\]?:(\d{1,5})$")
_FORCED_CPU_DEVICES = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def collective_threads_needed(num_devices: int) -> int:
  """Threads the XLA:CPU client needs so that N devices in one process cannot deadlock in a collective: 2N + 1.

  Each device's program runs on a thread of the client's pool (``max(cores, N)`` threads by default). In an
  all-reduce, N - 1 devices can wait at the rendezvous while the last device's launch waits for one of its earlier
  programs to finish, which needs a free thread: with N threads that is a deadlock (observed on 2 cores with 4
  forced devices). N waiting programs, N waiting launches and one thread that makes progress never deadlock.

  Args:
    num_devices: N, the devices in this process.

  Returns:
    2N + 1.
  """
  return 2 * num_devices + 1


def _client_threads(environ) -> int:
  # XLA sizes the pool from PJRT_NPROC, then NPROC, then the cores this process may run on.
  for name in ("PJRT_NPROC", "NPROC"):
    value = environ.get(name, "")
    if value.strip().isdigit():
      return int(value)
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def forced_cpu_devices(environ=None) -> int:
  """The CPU devices this environment asks for.

  CPU devices this environment's XLA_FLAGS (the last ``--xla_force_host_platform_device_count``) or the
  ``jax_num_cpu_devices`` option asks for; 1 when neither does.

  Args:
    environ: the environment to read (default ``os.environ``).

  Returns:
    The device count.
  """
  environ = os.environ if environ is None else environ
  counts = _FORCED_CPU_DEVICES.findall(environ.get("XLA_FLAGS", ""))
  n = int(counts[-1]) if counts else 1
  if environ is os.environ:
    n = max(n, int(getattr(jax.config, "jax_num_cpu_devices", -1) or -1))
  return max(n, 1)


def reserve_collective_threads(environ=None) -> int | None:
  """Sizes the XLA:CPU client's thread pool for the forced CPU devices.

  Sets ``PJRT_NPROC`` to :func:`collective_threads_needed` when it would be smaller. Call it before JAX starts its CPU
  backend (the pool is made once); pass a child process's environment dict to prepare that instead.

  Args:
    environ: the environment to set (default ``os.environ``), e.g. a child process's.

  Returns:
    the thread count set, or ``None`` when nothing had to change (one device, or a pool already large enough).
  """
  environ = os.environ if environ is None else environ
  n = forced_cpu_devices(environ)
  if n == 1 or _client_threads(environ) >= collective_threads_needed(n):
    return None
  environ["PJRT_NPROC"] = str(collective_threads_needed(n))
  return collective_threads_needed(n)


def _warn_if_collectives_can_deadlock(local: int) -> None:
  if jax.default_backend() != "cpu" or local == 1 or _client_threads(os.environ) >= collective_threads_needed(local):
    return
  warnings.warn(
    f"data_mesh: {local} CPU devices share an XLA client pool of about {_client_threads(os.environ)} "
    f"threads, and XLA's in-process collectives can deadlock with fewer than "
    f"{collective_threads_needed(local)}: set PJRT_NPROC={collective_threads_needed(local)} before JAX "
    f"starts (bcjax.parallel.reserve_collective_threads() does it)",
    RuntimeWarning,
    stacklevel=3,
  )


def initialize(num_processes: int, process_id: int, coordinator: str, *, timeout_s: int = 120) -> None:
  """Joins a multi-process run through ``jax.distributed.initialize`` (call before any other JAX call).

  Args:
    num_processes: processes in the run, P >= 1.
    process_id: this process, 0 <= I < P; process 0 hosts the coordinator and writes the outputs.
    coordinator: ``HOST:PORT`` of process 0's coordinator.
    timeout_s: how long to wait for every peer to join, and for a silent peer before the others fail (JAX's
      heartbeat), so a run whose peer died ends with an error instead of hanging.

  Returns:
    None, once the process has joined the run.

  Raises:
    ValueError: naming the argument, for a process count or id out of range, or a coordinator that is not HOST:PORT.
  """
  num_processes = _checks.as_int("initialize", "num_processes", num_processes, low=1)
  process_id = _checks.as_int("initialize", "process_id", process_id, low=0, high=num_processes - 1)
  match = _COORDINATOR.match(str(coordinator))
  if match is None or not 0 < int(match.group(1)) < 65536:
    raise ValueError(f"initialize: `coordinator` must be HOST:PORT with a port in 1..65535, got {coordinator!r}")
  timeout_s = _checks.as_int("initialize", "timeout_s", timeout_s, low=1)
  if process_id != 0:
    # JAX aborts the process (no Python exception) when the coordinator never answers; a reachability check first
    # turns that into an error that names the address.
    _wait_for_coordinator(str(coordinator), timeout_s)
  jax.distributed.initialize(
    coordinator_address=str(coordinator),
    num_processes=num_processes,
    process_id=process_id,
    initialization_timeout=timeout_s,
    heartbeat_timeout_seconds=timeout_s,
  )


def _wait_for_coordinator(coordinator: str, timeout_s: float) -> None:
  host, _, port = coordinator.rpartition(":")
  host = host.strip("[]")
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      socket.create_connection((host, int(port)), timeout=1.0).close()
      return
    except OSError as e:
      if time.monotonic() >= deadline:
        raise ConnectionError(
          f"initialize: the coordinator {coordinator} (`coordinator`, --coordinator) is not "
          f"reachable after {timeout_s} s ({e}); is process 0 running there?"
        ) from e
      time.sleep(0.25)


def is_main_process() -> bool:
  """Whether this process writes the run's files (process 0).

  Returns:
    True in process 0.
  """
  return jax.process_index() == 0


def data_mesh(num_devices: int | None = None) -> jax.sharding.Mesh:
  """The 1-D mesh ``(DATA_AXIS,)`` over the first ``num_devices`` local devices of every process.

  Args:
    num_devices: devices per process (the ``--devices`` flag); ``None`` takes every local device. The mesh has
      ``num_devices * jax.process_count()`` devices, ordered by process.

  Returns:
    The mesh.

  Raises:
    ValueError: ``num_devices`` below 1 or above the local devices.
  """
  local = jax.local_device_count()
  if num_devices is None:
    num_devices = local
  if isinstance(num_devices, bool) or not isinstance(num_devices, (int, np.integer)) or not 1 <= num_devices <= local:
    raise ValueError(
      f"data_mesh: `num_devices` (--devices) must be an integer in [1, {local}] (this process has "
      f"{local} {jax.default_backend()} device(s)), got {num_devices!r}"
    )
  _warn_if_collectives_can_deadlock(local)
  by_process: dict[int, list] = {}
  for d in jax.devices():
    by_process.setdefault(d.process_index, []).append(d)
  devices = [d for p in sorted(by_process) for d in sorted(by_process[p], key=lambda d: d.id)[:num_devices]]
  return jax.make_mesh((len(devices),), (DATA_AXIS,), axis_types=(jax.sharding.AxisType.Explicit,), devices=devices)


def _local_devices(mesh: jax.sharding.Mesh) -> int:
  return sum(d.process_index == jax.process_index() for d in mesh.devices.flat)


def shard_rows(mesh: jax.sharding.Mesh, tree, *, name: str = "batch"):
  """Global arrays from this process's rows: every leaf's leading axis is split over the mesh (``P(DATA_AXIS)``).

  Each process passes its own slice (its share of the global batch, in process order); the global leading size is
  the sum over processes. Every leaf must have the same number of rows, divisible by this process's devices on the
  mesh.

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    tree: a pytree of this process's rows.
    name: what the tree is, for the message.

  Returns:
    The tree of global arrays split by rows.

  Raises:
    ValueError: leaves whose row counts differ, or that the process's devices do not divide.
  """
  leaves = jax.tree.leaves(tree)
  if not leaves:
    return tree
  rows = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
  if len(rows) != 1 or None in rows:
    raise ValueError(
      f"shard_rows: every leaf of `{name}` needs the same leading (row) axis, got leading sizes "
      f"{sorted(map(str, rows))}"
    )
  n, local = cast(int, rows.pop()), _local_devices(mesh)
  if n % local:
    raise ValueError(
      f"shard_rows: `{name}` has {n} rows in this process, not divisible by its {local} devices on "
      f"the mesh; pad the batch (and mask the padding) to a multiple of {local}"
    )
  sharding = NamedSharding(mesh, jax.P(DATA_AXIS))
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), tree)


def shard_padded_rows(mesh: jax.sharding.Mesh, x, *, name: str = "rows"):
  """A full array zero-padded and split by rows over the mesh, with the mask of the real rows.

  ``(rows, where)``: a full [n, ...] array (the same in every process) zero-padded to a multiple of the mesh's devices
  and split by rows over the mesh, with the boolean mask of the real rows, for the ``where=`` argument of the bcjax
  reductions (padded rows never count). Each process places only its own block of rows.

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    x: a full array [n, ...], the same in every process.
    name: what it is, for the message.

  Returns:
    ``(rows, where)``: the padded array split by rows, and the mask of the real rows.

  Raises:
    ValueError: a value that is not an array with a leading axis.
  """
  x = np.asarray(x)
  if x.ndim < 1:
    raise ValueError(f"shard_padded_rows: `{name}` needs a leading (row) axis, got shape {x.shape}")
  n, size = x.shape[0], mesh.devices.size
  total = n + (-n % size)
  rows = np.concatenate([x, np.zeros((total - n, *x.shape[1:]), x.dtype)])
  where = np.arange(total) < n
  per_process = total // jax.process_count()
  mine = slice(jax.process_index() * per_process, (jax.process_index() + 1) * per_process)
  return shard_rows(mesh, (rows[mine], where[mine]), name=name)


def split_rows(mesh: jax.sharding.Mesh, tree, *, axis: int = 0):
  """Every leaf of ``tree`` resharded so that its ``axis`` is split over the mesh.

  Every leaf of ``tree`` (global arrays, inside or outside ``jax.jit``) resharded so that its ``axis`` is split over the
  mesh, e.g. a batch drawn replicated, before ``jax.shard_map`` hands each device its block.

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    tree: a pytree of global arrays.
    axis: the axis split over the mesh.

  Returns:
    The tree resharded.
  """
  spec = jax.P(*([None] * axis), DATA_AXIS)
  leaves = jax.tree.leaves(tree)
  if all(isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.is_fully_addressable for x in leaves):
    # outside jit, on this process's devices: a transfer, where an eager reshard compiles a program per shape
    return jax.device_put(tree, NamedSharding(mesh, spec))
  # jax.sharding.reshard: jax 0.8.1 (the floor) has it there only; later releases alias it as jax.reshard.
  return jax.sharding.reshard(tree, NamedSharding(mesh, spec))


def _from_full(mesh, tree, spec):
  def place(x):
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec(x)), lambda index: x[index])

  return jax.tree.map(place, tree)


def shard_blocks(mesh: jax.sharding.Mesh, tree, *, axis: int = 0, name: str = "batch"):
  """Every leaf split along ``axis`` over the mesh.

  Every leaf (the same full value in every process) split along ``axis`` over the mesh (``P(None, ..., DATA_AXIS)``),
  e.g. a batch cut on the host into one block per device on that axis (graph batches whose blocks are padded each on
  their own). Each process places only its devices' blocks.

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    tree: a pytree of arrays, the same full value in every process.
    axis: the axis split over the mesh.
    name: what the tree is, for the message.

  Returns:
    The tree of global arrays split along ``axis``.

  Raises:
    ValueError: an ``axis`` size the mesh's devices do not divide.
  """
  leaves = jax.tree.leaves(tree)
  size = mesh.devices.size
  for x in leaves:
    if np.ndim(x) <= axis or np.shape(x)[axis] % size:
      raise ValueError(
        f"shard_blocks: every leaf of `{name}` needs an axis {axis} divisible by the mesh's {size} "
        f"devices, got shape {np.shape(x)}"
      )
  return _from_full(mesh, tree, lambda x: jax.P(*([None] * axis), DATA_AXIS))


def replicate(mesh: jax.sharding.Mesh, tree):
  """Every leaf replicated on every device of the mesh.

  Every leaf (the same full value in every process) replicated on every device of the mesh (``P(None, ...)``, one
  ``None`` per axis: the spec jitted steps give their replicated outputs, so a step fed its own outputs compiles once).

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    tree: a pytree of arrays, the same full value in every process.

  Returns:
    The tree of replicated global arrays.
  """
  return _from_full(mesh, tree, lambda x: jax.P(*([None] * x.ndim)))


def shard_table(mesh: jax.sharding.Mesh, table, *, name: str = "table"):
  """An embedding table split by rows over the mesh.

  An embedding table (the same full value in every process) split by rows over the mesh (``P(DATA_AXIS, None)``): each
  device stores rows / N of it, as alx shards its iALS tables.

  Args:
    mesh: the data mesh (:func:`data_mesh`).
    table: the full table [V, d], the same in every process.
    name: what it is, for the message.

  Returns:
    The table split by rows.

  Raises:
    ValueError: a row count the mesh's devices do not divide, or a table that is not 2-D.
  """
  table = np.asarray(table)
  if table.ndim != 2:
    raise ValueError(f"shard_table: `{name}` must be a [rows, dim] table, got shape {table.shape}")
  size = mesh.devices.size
  if table.shape[0] % size:
    raise ValueError(
      f"shard_table: `{name}` has {table.shape[0]} rows, not divisible by the mesh's {size} devices; "
      f"pad it to a multiple of {size} rows"
    )
  return _from_full(mesh, table, lambda x: jax.P(DATA_AXIS, None))
