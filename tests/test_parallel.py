"""The data-mesh layer (``bcjax.parallel``) on 4 forced CPU devices, in a subprocess (the device count is fixed when
JAX starts): the mesh, rows sharded and reduced inside ``jax.shard_map`` against float64 NumPy (the Gramian with
``axis_name``), masked padding, row-sharded tables holding 1/N of the bytes per device, replication, and the errors
that name the argument and the counts."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from absl.testing import absltest

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent("""
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from bcjax.gramian import gramian
    from bcjax.parallel import DATA_AXIS, data_mesh, initialize, is_main_process, replicate, shard_rows, shard_table

    out = {"devices": jax.device_count(), "main": is_main_process()}
    mesh = data_mesh()
    out["mesh"] = [int(mesh.devices.size), list(mesh.axis_names), int(data_mesh(2).devices.size)]

    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 3))
    where = np.arange(12) < 10  # two padded rows, holding huge values that must not leak
    x[~where] = 1e30
    xs, ws = shard_rows(mesh, (x, where))
    out["row_spec"] = str(xs.sharding.spec)
    out["rows_per_device"] = sorted({int(s.data.shape[0]) for s in xs.addressable_shards})
    g = jax.jit(jax.shard_map(lambda a, m: gramian(a, where=m, axis_name=DATA_AXIS), mesh=mesh,
                              in_specs=(jax.P(DATA_AXIS), jax.P(DATA_AXIS)), out_specs=jax.P()))(xs, ws)
    v = x[where]
    out["gramian_err"] = float(np.max(np.abs(np.asarray(g) - v.T @ v / len(v))))

    table = rng.normal(size=(16, 5)).astype(np.float32)
    t = shard_table(mesh, table)
    out["table_bytes"] = [int(table.nbytes), sorted({int(s.data.nbytes) for s in t.addressable_shards})]
    out["table_equal"] = bool(np.array_equal(np.asarray(t), table))
    r = replicate(mesh, {"w": table})["w"]
    out["replicated"] = [bool(np.array_equal(np.asarray(s.data), table)) for s in r.addressable_shards]

    errors = {}
    for name, call in (("devices", lambda: data_mesh(5)), ("devices0", lambda: data_mesh(0)),
                       ("rows", lambda: shard_rows(mesh, np.zeros((10, 2)))),
                       ("ragged", lambda: shard_rows(mesh, (np.zeros((8, 2)), np.zeros(4)))),
                       ("table", lambda: shard_table(mesh, np.zeros((10, 2)), name="item_table")),
                       ("port", lambda: initialize(2, 0, "localhost:99999")),
                       ("process", lambda: initialize(2, 2, "localhost:1234")),
                       ("count", lambda: initialize(0, 0, "localhost:1234"))):
      try:
        call()
        errors[name] = None
      except ValueError as e:
        errors[name] = str(e)
    out["errors"] = errors
    print("RESULT " + json.dumps(out))
""")


def run_probe():
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
         "PYTHONPATH": str(ROOT)}
  proc = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
  if proc.returncode:
    raise AssertionError(f"the 4-device probe failed:\n{proc.stderr[-3000:]}")
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line.removeprefix("RESULT "))


class DataMeshTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.out = run_probe()

  def test_mesh(self):
    self.assertEqual(self.out["devices"], 4)
    self.assertTrue(self.out["main"])
    self.assertEqual(self.out["mesh"], [4, ["data"], 2])

  def test_sharded_rows_reduce_to_the_global_gramian(self):
    self.assertIn("data", self.out["row_spec"])
    self.assertEqual(self.out["rows_per_device"], [3])
    self.assertLess(self.out["gramian_err"], 1e-12)  # float64: the psum of per-device sums, padding masked

  def test_tables_split_by_rows_and_replicas(self):
    total, per_device = self.out["table_bytes"]
    self.assertEqual(per_device, [total // 4])  # 1/N of the table on each device
    self.assertTrue(self.out["table_equal"])
    self.assertEqual(self.out["replicated"], [True] * 4)

  def test_errors_name_the_argument_and_counts(self):
    e = self.out["errors"]
    self.assertIn("`num_devices` (--devices) must be an integer in [1, 4]", e["devices"])
    self.assertIn("got 5", e["devices"])
    self.assertIn("got 0", e["devices0"])
    self.assertIn("`batch` has 10 rows in this process, not divisible by its 4 devices", e["rows"])
    self.assertIn("same leading (row) axis", e["ragged"])
    self.assertIn("`item_table` has 10 rows, not divisible by the mesh's 4 devices", e["table"])
    self.assertIn("`coordinator` must be HOST:PORT", e["port"])
    self.assertIn("`process_id` must be an integer in [0, 1], got 2", e["process"])
    self.assertIn("`num_processes` must be an integer in [1, inf], got 0", e["count"])


if __name__ == "__main__":
  absltest.main()
