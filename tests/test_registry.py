"""Tests of the keep-latest registry: round trip, inductive transforms, crash safety, corruption, concurrency, and
every kind of backward map (format 2) next to the format-1 files of linear maps."""

import datetime
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from absl.testing import absltest

from bcjax.alignment import affine_transform, apply_chain, mlp_transform, orthogonal_transform
from bcjax.files import write_atomic
from bcjax.versioning import (
  CorruptRegistryError,
  InconsistentRegistryError,
  Registry,
  VersionExistsError,
  VersionNotFoundError,
  _format,
)
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]


def _snapshot(path: Path) -> dict[str, bytes]:
  return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if not p.name.startswith(".")}


class RegistryTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.dir = Path(self.create_tempdir().full_path) / "reg"
    rng = np.random.default_rng(0)
    self.ws = [rng.normal(size=(4, 6)), rng.normal(size=(6, 5)).astype(np.float32), rng.normal(size=(5, 7))]
    self.reg = Registry.create(self.dir, dim=4, notes="base model")
    for k, w in enumerate(self.ws, start=1):
      self.reg.append(w, notes=f"M_{k}")

  def test_round_trip_through_a_fresh_handle(self):
    reg = Registry(self.dir)
    infos = reg.versions()
    self.assertEqual([i.version for i in infos], [0, 1, 2, 3])
    self.assertEqual([i.dim for i in infos], [4, 6, 5, 7])
    self.assertEqual([i.prev_dim for i in infos], [None, 4, 6, 5])
    self.assertEqual([i.notes for i in infos], ["base model", "M_1", "M_2", "M_3"])
    for info in infos:
      created = datetime.datetime.fromisoformat(info.created)
      self.assertIsNotNone(created.tzinfo)
      self.assertLess(abs((datetime.datetime.now(datetime.UTC) - created).total_seconds()), 600)
    for k, w in enumerate(self.ws, start=1):
      np.testing.assert_array_equal(reg.backward(k), w)
      self.assertEqual(reg.backward(k).dtype, w.dtype)
    self.assertEqual(reg.latest, 3)

  def test_compose_to_every_version(self):
    w1, w2, w3 = (w.astype(np.float64) for w in self.ws)
    assert_close(self.reg.compose(0), w1 @ w2 @ w3)
    assert_close(self.reg.compose(1), w2 @ w3)
    assert_close(self.reg.compose(2), w3)
    np.testing.assert_array_equal(self.reg.compose(3), np.eye(7))
    assert_close(self.reg.compose(0, source=2), w1 @ w2)

  def test_transform_of_unseen_embeddings_matches_apply_chain(self):
    z_new = np.random.default_rng(1).normal(size=(9, 7))  # embeddings never seen when the weights were learned
    for j in range(3):
      assert_close(self.reg.transform(z_new, to=j), apply_chain(z_new, self.ws[j:]))
    z_f32 = z_new.astype(np.float32)
    self.assertEqual(self.reg.transform(z_f32, to=0).dtype, np.float32)
    z_v2 = z_new[:, :5]
    assert_close(self.reg.transform(z_v2, to=0, source=2), apply_chain(z_v2, self.ws[:2]))

  def test_existing_version_is_never_overwritten(self):
    before = _snapshot(self.dir)
    with self.assertRaisesRegex(VersionExistsError, "`version`=2 already exists"):
      self.reg.append(np.ones((7, 2)), version=2)
    with self.assertRaisesRegex(VersionExistsError, "version 0 already exists"):
      Registry.create(self.dir, dim=4)
    self.assertEqual(_snapshot(self.dir), before)

  def test_append_with_a_gap_is_refused(self):
    with self.assertRaisesRegex(VersionNotFoundError, "`version`=6 would leave a gap"):
      self.reg.append(np.ones((7, 2)), version=6)

  def test_append_with_wrong_rows_names_dimensions(self):
    with self.assertRaisesRegex(InconsistentRegistryError, r"`w` has shape \(6, 2\).*version 3 has dimension 7"):
      self.reg.append(np.ones((6, 2)))

  def test_append_rejects_nan_and_non_matrix(self):
    with self.assertRaisesRegex(ValueError, "`w` contains 14 NaN"):
      self.reg.append(np.full((7, 2), np.nan))
    with self.assertRaisesRegex(ValueError, "`w` must have rank 2"):
      self.reg.append(np.ones(7))
    with self.assertRaisesRegex(TypeError, "`w` must have a real floating dtype"):
      self.reg.append(np.ones((7, 2), int))

  def test_unknown_version_is_a_clear_error(self):
    with self.assertRaisesRegex(VersionNotFoundError, "`to`=5 is not in registry.*latest version is 3"):
      self.reg.transform(np.ones((2, 7)), to=5)
    with self.assertRaisesRegex(VersionNotFoundError, "`source`=4"):
      self.reg.compose(0, source=4)
    with self.assertRaisesRegex(ValueError, "`to`=3 is newer than `source`=1"):
      self.reg.compose(3, source=1)
    with self.assertRaisesRegex(ValueError, "`version` must be a version number"):
      self.reg.info(-1)

  def test_transform_checks_embeddings(self):
    with self.assertRaisesRegex(InconsistentRegistryError, r"`z` has shape \(2, 6\).*D_3=7"):
      self.reg.transform(np.ones((2, 6)), to=0)
    with self.assertRaisesRegex(ValueError, "`z` contains 1 NaN"):
      self.reg.transform(np.array([[np.nan] + [0.0] * 6]), to=0)
    with self.assertRaisesRegex(ValueError, "`z` must have rank 2"):
      self.reg.transform(np.ones(7), to=0)

  def test_opening_a_directory_without_registry_fails_clearly(self):
    with self.assertRaisesRegex(VersionNotFoundError, "no bcjax registry at"):
      Registry(self.create_tempdir().full_path)

  def test_corrupted_byte_is_detected(self):
    for offset in (5, 40, 100, -3):  # magic, checksum line, header, payload
      path = self.dir / "version-000002.bcv"
      original = path.read_bytes()
      data = bytearray(original)
      data[offset] ^= 0x01
      path.write_bytes(bytes(data))
      with self.assertRaisesRegex(CorruptRegistryError, "version-000002.bcv"):
        Registry(self.dir).versions()
      path.write_bytes(original)
    path.write_bytes(original[:-10])  # truncation
    with self.assertRaisesRegex(CorruptRegistryError, "checksum mismatch"):
      self.reg.backward(2)

  def test_missing_middle_version_is_reported(self):
    (self.dir / "version-000002.bcv").unlink()
    with self.assertRaisesRegex(VersionNotFoundError, r"missing version\(s\) \[2\]"):
      self.reg.versions()
    with self.assertRaisesRegex(VersionNotFoundError, "missing"):
      self.reg.transform(np.ones((1, 7)), to=0)

  def test_dimension_inconsistent_version_is_reported(self):
    # A well-formed, checksummed file whose W maps to the wrong number of dimensions.
    bad = _format.encode(
      {"version": 4, "dim": 3, "prev_dim": 2, "notes": "", "created": "x", "format": 1}, np.ones((2, 3))
    )
    (self.dir / "version-000004.bcv").write_bytes(bad)
    with self.assertRaisesRegex(
      InconsistentRegistryError, "version 4 maps from D_4=3 to 2 dimensions, but version 3 has D_3=7"
    ):
      self.reg.versions()

  def test_renamed_file_is_detected(self):
    os.rename(self.dir / "version-000003.bcv", self.dir / "version-000004.bcv")
    with self.assertRaisesRegex(VersionNotFoundError, r"missing version\(s\) \[3\]"):
      self.reg.versions()
    with self.assertRaisesRegex(CorruptRegistryError, "says it is version 3, its name says 4"):
      self.reg.info(4)

  def test_exception_between_write_and_rename_loses_nothing(self):
    from bcjax import _atomic

    before = _snapshot(self.dir)
    original = _atomic._publish

    def fail(*args):
      raise RuntimeError("injected failure before publishing")

    _atomic._publish = fail
    try:
      with self.assertRaisesRegex(RuntimeError, "injected"):
        self.reg.append(np.ones((7, 2)))
    finally:
      _atomic._publish = original
    self.assertEqual(_snapshot(self.dir), before)
    self.assertEqual(sorted(p.name for p in self.dir.iterdir()), sorted(before))  # no temporary debris either
    self.assertEqual(self.reg.append(np.ones((7, 2))).version, 4)

  def test_a_streamed_output_appears_whole_or_not_at_all(self):
    from bcjax import _atomic

    out = self.dir.parent / "streamed.bin"
    with self.assertRaisesRegex(RuntimeError, "half way"), _atomic.atomic_writer(out) as f:
      f.write(b"first chunk")
      raise RuntimeError("stopped half way")
    self.assertFalse(out.exists())
    self.assertEqual([p.name for p in self.dir.parent.iterdir() if p.name.endswith(_atomic.TMP_SUFFIX)], [])
    with _atomic.atomic_writer(out) as f:
      f.write(b"a")
      f.write(b"b")
    self.assertEqual(out.read_bytes(), b"ab")
    with self.assertRaises(FileExistsError), _atomic.atomic_writer(out) as f:
      f.write(b"never")
    self.assertEqual(out.read_bytes(), b"ab")  # nothing a user saved is overwritten
    with _atomic.atomic_writer(out, overwrite=True) as f:
      f.write(b"c")
    self.assertEqual(out.read_bytes(), b"c")

  @pytest.mark.heavy
  def test_process_killed_in_the_middle_of_a_write_loses_nothing(self):
    before = _snapshot(self.dir)
    script = textwrap.dedent(f"""
        import os, signal, numpy as np
        from bcjax import _atomic
        from bcjax.versioning import Registry
        def die(tmp, path, overwrite):
          assert os.path.getsize(tmp) > 0   # the temporary file is complete; the final name not yet given
          os.kill(os.getpid(), signal.SIGKILL)
        _atomic._publish = die
        Registry({str(self.dir)!r}).append(np.ones((7, 2)))
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stderr.decode())
    self.assertEqual(_snapshot(self.dir), before)  # every version intact, no partial version 4
    reg = Registry(self.dir)
    self.assertEqual([i.version for i in reg.versions()], [0, 1, 2, 3])
    self.assertEqual(reg.append(np.ones((7, 2))).version, 4)  # the stray temporary file is ignored

  @pytest.mark.heavy
  def test_concurrent_appends_of_the_same_version_have_one_winner(self):
    go = self.dir.parent / "go"
    script = textwrap.dedent(f"""
        import sys, time, os, numpy as np
        from bcjax.versioning import Registry, VersionExistsError
        reg = Registry({str(self.dir)!r})
        write = Registry._write
        def write_after_start_signal(*args):
          # Every child has passed its checks (latest is 3 for all); now they race to publish version 4.
          open({str(self.dir.parent)!r} + "/ready-" + sys.argv[1], "w").close()
          while not os.path.exists({str(go)!r}):
            time.sleep(0.001)
          return write(*args)
        Registry._write = staticmethod(write_after_start_signal)
        try:
          reg.append(np.full((7, 3), float(sys.argv[1])), version=4)
          print("won")
        except VersionExistsError as e:
          print("lost:", e)
        """)
    procs = [
      subprocess.Popen([sys.executable, "-c", script, str(i)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
      for i in range(6)
    ]
    deadline = time.monotonic() + 120
    while len(list(self.dir.parent.glob("ready-*"))) < len(procs) and time.monotonic() < deadline:
      time.sleep(0.01)  # wait until every child waits at the start line, past its version checks
    go.touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    stdout = [o[0].decode().strip() for o in outputs]
    self.assertTrue(all(p.returncode == 0 for p in procs), [o[1].decode() for o in outputs])
    self.assertEqual(sum(s == "won" for s in stdout), 1, stdout)
    for s in stdout:
      if s != "won":
        self.assertIn("version 4 already exists in registry", s)
        self.assertIn("another writer", s)
    winner = float(Registry(self.dir).backward(4)[0, 0])
    self.assertIn(winner, range(6))
    self.assertEqual(Registry(self.dir).latest, 4)


class WriteAtomicTest(absltest.TestCase):
  def test_refuses_to_overwrite_unless_asked(self):
    path = Path(self.create_tempdir().full_path) / "out.bin"
    write_atomic(path, b"first")
    with self.assertRaisesRegex(FileExistsError, "refusing to overwrite"):
      write_atomic(path, b"second")
    self.assertEqual(path.read_bytes(), b"first")
    write_atomic(path, b"second", overwrite=True)
    self.assertEqual(path.read_bytes(), b"second")
    self.assertEqual([p.name for p in path.parent.iterdir()], ["out.bin"])


if __name__ == "__main__":
  absltest.main()


def _np_semi_orthogonal(a):
  """float64 NumPy reference of the orthogonal kind's map: the QR factor with R's diagonal made non-negative."""
  tall = a if a.shape[0] >= a.shape[1] else a.T
  q, r = np.linalg.qr(tall)
  q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
  return q if a.shape[0] >= a.shape[1] else q.T


class AnyKindTest(absltest.TestCase):
  """Registries that store orthogonal, affine and MLP maps next to linear ones (format 2), and the format-1 files
  written before the transform family."""

  def setUp(self):
    super().setUp()
    self.dir = Path(self.create_tempdir().full_path) / "reg"
    rng = np.random.default_rng(1)
    self.kinds = [None, orthogonal_transform(), affine_transform(rank=2), mlp_transform(hidden=3)]
    dims = [(3, 4), (4, 5), (5, 6), (6, 6)]  # (D_(k-1), D_k) of versions 1..4
    self.params = [rng.normal(size=dims[0])]
    for i, (t, (dp, dn)) in enumerate(zip(self.kinds[1:], dims[1:])):
      p = t.init(jax.random.key(i), dp, dn)
      self.params.append({k: np.asarray(v, np.float64) + 0.1 * rng.normal(size=v.shape) for k, v in p.items()})
    self.reg = Registry.create(self.dir, dim=3)
    for t, p in zip(self.kinds, self.params):
      self.reg.append(p, transform=t, notes="x")

  def test_every_kind_round_trips_with_its_hyper_parameters(self):
    fresh = Registry(self.dir)
    self.assertEqual(
      [(v.kind, v.hparams) for v in fresh.versions()],
      [("linear", ()), ("linear", ()), ("orthogonal", ()), ("affine", (("rank", 2),)), ("mlp", (("hidden", 3),))],
    )
    np.testing.assert_array_equal(fresh.backward(1), self.params[0])
    for k in (2, 3, 4):
      t, p = fresh.backward_map(k)
      self.assertIs(t, self.kinds[k - 1])
      self.assertEqual(set(p), set(self.params[k - 1]))
      for name in p:
        np.testing.assert_array_equal(p[name], self.params[k - 1][name])
    self.assertTrue((self.dir / "version-000001.bcv").read_bytes().startswith(b"bcjax-version 1\n"))
    self.assertTrue((self.dir / "version-000004.bcv").read_bytes().startswith(b"bcjax-version 2\n"))

  @pytest.mark.heavy
  def test_a_mixed_chain_transforms_as_the_hand_composed_maps(self):
    z = np.random.default_rng(2).normal(size=(5, 6))
    q2 = _np_semi_orthogonal(self.params[1]["a"])
    aff, mlp = self.params[2], self.params[3]
    z3 = z @ mlp["s"].T + np.maximum(z @ mlp["w1"].T + mlp["b1"], 0.0) @ mlp["w2"].T + mlp["b2"]
    z2 = z3 @ aff["v"] @ aff["u"].T + aff["b"]
    z1 = z2 @ q2.T
    z0 = z1 @ self.params[0].T
    for to, expected in ((3, z3), (2, z2), (1, z1), (0, z0)):
      assert_close(self.reg.transform(z, to=to), expected, "linalg")
    assert_close(self.reg.transform(z1, to=0, source=1), z0, "linalg")
    assert_close(self.reg.compose(0, source=2), self.params[0] @ q2, "linalg")
    self.assertEqual(self.reg.transform(z.astype(np.float32), to=0).dtype, np.float32)
    with self.assertRaisesRegex(ValueError, r"version 4 stores a 'mlp' map, which no matrix represents"):
      self.reg.compose(0)
    with self.assertRaisesRegex(ValueError, r"version 3 stores a 'affine' map, not a weight matrix"):
      self.reg.backward(3)

  def test_format_1_files_written_before_the_transform_family_still_load(self):
    """A version file built byte by byte the way bcjax wrote them before format 2 (no kind in the header)."""
    old = Path(self.create_tempdir().full_path)
    w = np.arange(6.0).reshape(2, 3)

    def write(version, header, weight):
      payload = b""
      if weight is not None:
        buf = io.BytesIO()
        np.save(buf, weight, allow_pickle=False)
        payload = buf.getvalue()
      body = json.dumps(header, sort_keys=True).encode() + b"\n" + payload
      (old / f"version-{version:06d}.bcv").write_bytes(
        b"bcjax-version 1\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
      )

    base = {"created": "2026-01-01T00:00:00+00:00", "format": 1, "notes": ""}
    write(0, {**base, "version": 0, "dim": 2, "prev_dim": None}, None)
    write(1, {**base, "version": 1, "dim": 3, "prev_dim": 2, "dtype": "float64", "shape": [2, 3]}, w)
    reg = Registry(old)
    self.assertEqual([(v.kind, v.dim) for v in reg.versions()], [("linear", 2), ("linear", 3)])
    np.testing.assert_array_equal(reg.backward(1), w)
    assert_close(reg.transform(np.ones((1, 3)), to=0), [[3.0, 12.0]])

  def test_damaged_or_unknown_format_2_files_are_refused(self):
    path = self.dir / "version-000004.bcv"
    good = path.read_bytes()
    bad = bytearray(good)
    bad[-40] ^= 0xFF
    path.write_bytes(bytes(bad))
    with self.assertRaisesRegex(CorruptRegistryError, "checksum mismatch"):
      Registry(self.dir).backward_map(4)
    header = {
      "version": 4,
      "dim": 6,
      "prev_dim": 6,
      "notes": "",
      "created": "x",
      "format": 2,
      "kind": "spline",
      "hparams": [],
    }
    path.write_bytes(_format.encode(header, {"w": np.ones((6, 6))}))
    with self.assertRaisesRegex(CorruptRegistryError, r"the stored 'spline' map does not load"):
      Registry(self.dir).versions()
    header.update(kind="mlp", hparams=[["hidden", 3]])
    path.write_bytes(_format.encode(header, {"s": np.ones((6, 6))}))
    with self.assertRaisesRegex(CorruptRegistryError, r"the stored 'mlp' map does not load .*keys"):
      Registry(self.dir).versions()

  def test_append_checks_the_map_against_the_latest_version(self):
    t = orthogonal_transform()
    with self.assertRaisesRegex(InconsistentRegistryError, r"goes to 5 dimensions but version 4 has dimension 6"):
      self.reg.append(t.init(jax.random.key(0), 5, 6), transform=t)
    with self.assertRaisesRegex(ValueError, r"`w` must be its parameter dict"):
      self.reg.append(np.ones((6, 6)), transform=t)
    self.assertEqual(self.reg.latest, 4)
