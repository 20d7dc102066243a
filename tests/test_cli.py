"""Tests of the ``bcjax`` console script (init, append, versions, transform)."""

import contextlib
import io
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
import pytest
from absl.testing import absltest

from bcjax.alignment import affine_transform
from bcjax.cli import main
from bcjax.versioning import Registry
from tests._tolerance import assert_close

ROOT = Path(__file__).resolve().parents[1]


def run(*argv: str) -> tuple[int, str, str]:
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(list(argv))
  return code, out.getvalue(), err.getvalue()


class CliTest(absltest.TestCase):
  def setUp(self):
    super().setUp()
    self.tmp = Path(self.create_tempdir().full_path)
    self.reg = str(self.tmp / "reg")
    rng = np.random.default_rng(0)
    self.w1, self.w2 = rng.normal(size=(3, 5)), rng.normal(size=(5, 4))
    np.save(self.tmp / "w1.npy", self.w1)
    np.save(self.tmp / "w2.npy", self.w2)
    self.z = rng.normal(size=(8, 4)).astype(np.float32)
    np.save(self.tmp / "z.npy", self.z)
    self.assertEqual(run("init", "--registry", self.reg, "--dim", "3", "--notes", "base")[0], 0)
    self.assertEqual(run("append", "--registry", self.reg, str(self.tmp / "w1.npy"))[0], 0)
    self.assertEqual(run("append", "--registry", self.reg, str(self.tmp / "w2.npy"), "--notes", "v2")[0], 0)

  def test_transform_writes_the_composed_embeddings(self):
    out = self.tmp / "z0.npy"
    code, stdout, _ = run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z.npy"), str(out))
    self.assertEqual(code, 0)
    self.assertIn("version 2 (D=4) -> version 0 (D=3)", stdout)
    got = np.load(out)
    assert_close(got, self.z.astype(np.float64) @ (self.w1 @ self.w2).T)
    self.assertEqual(got.dtype, np.float32)

  def test_transform_from_an_older_version(self):
    np.save(self.tmp / "z1.npy", self.z[:, :1] @ np.ones((1, 5)))
    out = self.tmp / "z1to0.npy"
    self.assertEqual(
      run("transform", "--registry", self.reg, "--to", "0", "--from", "1", str(self.tmp / "z1.npy"), str(out))[0], 0
    )
    assert_close(np.load(out), np.load(self.tmp / "z1.npy") @ self.w1.T)

  def test_transform_never_overwrites_without_flag(self):
    out = self.tmp / "keep.npy"
    out.write_bytes(b"user data")
    code, _, err = run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z.npy"), str(out))
    self.assertEqual(code, 2)
    self.assertIn("refusing to overwrite", err)
    self.assertEqual(out.read_bytes(), b"user data")
    self.assertEqual(
      run("transform", "--registry", self.reg, "--to", "1", "--overwrite", str(self.tmp / "z.npy"), str(out))[0], 0
    )
    self.assertEqual(np.load(out).shape, (8, 5))

  def test_versions_table_and_json(self):
    code, stdout, _ = run("versions", "--registry", self.reg)
    self.assertEqual(code, 0)
    self.assertEqual(len(stdout.strip().splitlines()), 4)
    self.assertIn("v2", stdout)
    code, stdout, _ = run("versions", "--registry", self.reg, "--json")
    listed = json.loads(stdout)
    self.assertEqual([(v["version"], v["dim"], v["prev_dim"]) for v in listed], [(0, 3, None), (1, 5, 3), (2, 4, 5)])

  def test_transform_applies_a_mixed_chain_and_versions_names_each_map(self):
    t = affine_transform(rank=2)
    p = {k: np.asarray(v, np.float64) + 0.5 for k, v in t.init(jax.random.key(0), 4, 6).items()}
    Registry(self.reg).append(p, transform=t, notes="adapter")
    z = np.random.default_rng(1).normal(size=(3, 6))
    np.save(self.tmp / "z3.npy", z)
    out = self.tmp / "z3to0.npy"
    self.assertEqual(run("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "z3.npy"), str(out))[0], 0)
    z2 = z @ p["v"] @ p["u"].T + p["b"]
    assert_close(np.load(out), z2 @ (self.w1 @ self.w2).T)
    code, stdout, _ = run("versions", "--registry", self.reg)
    self.assertEqual(code, 0)
    self.assertIn("affine(rank=2)", stdout.splitlines()[-1])
    self.assertIn("linear", stdout.splitlines()[2])

  def test_errors_exit_with_a_message(self):
    """Registry state errors exit 1; bad input files and arguments exit 2; neither writes anything."""
    z = str(self.tmp / "z.npy")
    np.save(self.tmp / "bad.npy", np.ones((2, 7)))
    cases = [
      (("transform", "--registry", self.reg, "--to", "9", z, str(self.tmp / "o1.npy")), "`to`=9", 1),
      (
        ("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "bad.npy"), str(self.tmp / "o2.npy")),
        "D_2=4",
        2,
      ),
      (
        ("transform", "--registry", self.reg, "--to", "0", str(self.tmp / "nope.npy"), str(self.tmp / "o3.npy")),
        "does not exist",
        2,
      ),
      (("versions", "--registry", str(self.tmp / "nowhere")), "no bcjax registry", 1),
      (("append", "--registry", self.reg, str(self.tmp / "bad.npy")), "version 2 has dimension 4", 1),
      (("init", "--registry", self.reg, "--dim", "3"), "version 0 already exists", 1),
    ]
    for argv, fragment, expected in cases:
      code, _, err = run(*argv)
      self.assertEqual(code, expected, argv)
      self.assertIn(fragment, err)
    self.assertFalse(any(self.tmp.glob("o*.npy")))
    self.assertEqual(Registry(self.reg).latest, 2)

  @pytest.mark.heavy
  def test_module_entry_point_runs_in_a_subprocess(self):
    proc = subprocess.run(
      [sys.executable, "-m", "bcjax.cli", "versions", "--registry", self.reg],
      cwd=ROOT,
      capture_output=True,
      text=True,
      timeout=120,
    )
    self.assertEqual(proc.returncode, 0, proc.stderr)
    self.assertIn("base", proc.stdout)

  def test_console_script_is_declared(self):
    try:
      scripts = metadata.entry_points(group="console_scripts")
    except metadata.PackageNotFoundError:  # pragma: no cover
      scripts = []
    declared = [ep.value for ep in scripts if ep.name == "bcjax"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    self.assertIn('bcjax = "bcjax.cli:main"', pyproject)
    if declared:  # installed (as `make test` does): the installed script points at the same function
      self.assertEqual(declared, ["bcjax.cli:main"])


class FitCommandTest(absltest.TestCase):
  """`bcjax fit`: the round trip fit -> append -> transform, the exit status as a gate, and bad input refused with
  exit 2 before anything is written."""

  def setUp(self):
    super().setUp()
    self.tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(0)
    n, n_index = 600, 1600  # the index: the 600 paired items and 1,000 more, enough rows for a hit-rate verdict
    z_new = (rng.standard_normal((n_index, 10)) * np.linspace(0.5, 2.0, 10) + 2.0).astype(np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((10, 10)))
    z_old = ((z_new - 2.0) @ q[:6].T + 1.0 + 0.05 * rng.standard_normal((n_index, 6))).astype(np.float32)
    index, z_new, z_old = z_old, z_new[:n], z_old[:n]
    self.z_new, self.z_old = z_new, z_old
    for name, arr in (
      ("new", z_new),
      ("old", z_old),
      ("index", index),
      ("labels", (z_old[:, 0] > np.median(z_old[:, 0])).astype(np.int64)),
    ):
      np.save(self.tmp / f"{name}.npy", arr)
    self.base = ["fit", "--old", str(self.tmp / "old.npy"), "--new", str(self.tmp / "new.npy"), "--kind", "linear"]

  @pytest.mark.heavy
  def test_fit_append_transform_round_trip(self):
    code, stdout, _ = run(
      *self.base,
      "--out",
      str(self.tmp / "m.bcmap"),
      "--index",
      str(self.tmp / "index.npy"),
      "--labels",
      str(self.tmp / "labels.npy"),
      "--min-recovery",
      "0.5",
      "--old-model",
      "A",
    )
    self.assertEqual(code, 0, stdout)
    self.assertIn("verdict: bridge", stdout)
    report = json.loads((self.tmp / "m.bcmap.report.json").read_text())
    self.assertEqual(report["verdict"], "bridge")
    self.assertEqual(report["old_model"], "A")
    self.assertIn("consumer_negative_flips", report["metrics"])
    self.assertTrue((self.tmp / "m.bcmap.report.md").read_text().startswith("# Upgrade report: **bridge**"))
    reg = str(self.tmp / "reg")
    self.assertEqual(run("init", "--registry", reg, "--dim", "6")[0], 0)
    code, stdout, _ = run("append", "--registry", reg, str(self.tmp / "m.bcmap"))
    self.assertEqual(code, 0)
    self.assertIn("(affine)", stdout)
    self.assertIn('"verdict": "bridge"', Registry(reg).info(1).notes)
    out = self.tmp / "mapped.npy"
    code, stdout, _ = run(
      "transform", "--registry", reg, "--to", "0", "--chunk-rows", "64", str(self.tmp / "new.npy"), str(out)
    )
    self.assertEqual(code, 0, stdout)
    self.assertIn("float32", stdout)
    from bcjax.upgrade import affine_form, load_map

    m, _ = load_map(self.tmp / "m.bcmap")
    w, b = affine_form(m.transform, m.params)  # each output is a sum of terms |w_jk z_ik| and |b_j|
    terms = np.abs(self.z_new.astype(np.float64)) @ np.abs(np.asarray(w, np.float64)).T + np.abs(np.asarray(b))
    assert_close(np.load(out), np.asarray(m(self.z_new.astype(np.float64))).astype(np.float32), scale=terms)
    self.assertLess(np.abs(np.load(out) - self.z_old).mean(), 0.1)

  def test_fit_into_a_registry_appends_only_a_bridge(self):
    reg = str(self.tmp / "reg")
    run("init", "--registry", reg, "--dim", "6")
    noisy = self.z_old + np.random.default_rng(5).standard_normal(self.z_old.shape).astype(np.float32)
    np.save(self.tmp / "noisy.npy", noisy)  # the new model barely predicts these: own vectors are rarely found
    code, stdout, _ = run(
      "fit",
      "--old",
      str(self.tmp / "noisy.npy"),
      "--new",
      str(self.tmp / "new.npy"),
      "--kind",
      "linear",
      "--registry",
      reg,
      "--k",
      "1",
    )
    self.assertEqual(code, 3, stdout)  # k = 1 among 120 held-out own vectors: chance 0.008, a pool large enough
    self.assertIn("verdict: re-index", stdout)
    self.assertIn("not appended", stdout)
    self.assertEqual(Registry(reg).latest, 0)
    index = str(self.tmp / "index.npy")
    code, stdout, _ = run(*self.base, "--registry", reg, "--index", index, "--seed", "1")
    self.assertEqual(code, 0, stdout)
    self.assertEqual(Registry(reg).latest, 1)
    self.assertEqual(len(list(Path(reg).glob("upgrade-*.report.json"))), 2)

  def test_every_verdict_has_its_exit_code(self):
    """0 bridge, 3 re-index, 4 undecided, 5 not measurable; 200 pairs without --index are refused a verdict."""
    index = str(self.tmp / "index.npy")
    np.save(self.tmp / "old200.npy", self.z_old[:200])
    np.save(self.tmp / "new200.npy", self.z_new[:200])
    small = ["fit", "--old", str(self.tmp / "old200.npy"), "--new", str(self.tmp / "new200.npy"), "--kind", "linear"]
    code, stdout, _ = run(*small, "--out", str(self.tmp / "small.bcmap"))
    self.assertEqual(code, 5, stdout)
    report = json.loads((self.tmp / "small.bcmap.report.json").read_text())
    self.assertEqual(report["verdict"], "not measurable")
    self.assertEqual([r["code"] for r in report["reasons"]], ["pool-too-small"])
    self.assertEqual(report["metrics"]["own_vector_hit_rate"]["pool"], 40)
    self.assertIn("chance", (self.tmp / "small.bcmap.report.md").read_text())
    # With the index as distractors the same 200 pairs are judged: the map is near exact, so a bridge.
    code, stdout, _ = run(*small, "--out", str(self.tmp / "small2.bcmap"), "--index", index)
    self.assertEqual(code, 0, stdout)
    # A new model that barely predicts the old vectors: its own vector is first for some rows only (k = 1).
    noisy = self.z_old + 0.6 * np.random.default_rng(5).standard_normal(self.z_old.shape).astype(np.float32)
    np.save(self.tmp / "noisy.npy", noisy)
    noisy_index = np.load(index)
    noisy_index[:600] = noisy
    np.save(self.tmp / "noisy_index.npy", noisy_index)
    weak = ["fit", "--old", str(self.tmp / "noisy.npy"), "--new", str(self.tmp / "new.npy"), "--kind", "linear"]
    weak += ["--index", str(self.tmp / "noisy_index.npy"), "--k", "1"]
    code, stdout, _ = run(*weak, "--out", str(self.tmp / "weak.bcmap"))
    self.assertEqual(code, 3, stdout)
    hit = json.loads((self.tmp / "weak.bcmap.report.json").read_text())["metrics"]["own_vector_hit_rate"]
    self.assertLess(hit["high"], 0.95)
    self.assertLess(hit["low"], hit["value"])
    self.assertLess(hit["value"], hit["high"])
    # The same map against a threshold inside its interval: undecided.
    code, stdout, _ = run(*weak, "--out", str(self.tmp / "weak2.bcmap"), "--min-hit-rate", f"{hit['value']:.6f}")
    self.assertEqual(code, 4, stdout)
    self.assertIn("verdict: undecided", stdout)
    self.assertEqual(run("versions", "--registry", str(self.tmp / "no-registry"))[0], 1)

  def test_reports_are_strict_json(self):
    """A recovery with no relevance pair is null in the report, never NaN."""
    qrels = self.tmp / "qrels.txt"
    qrels.write_text("0 0\n")  # row 0 is a training pair: no held-out row has relevance
    code, _, _ = run(
      *self.base, "--out", str(self.tmp / "q.bcmap"), "--index", str(self.tmp / "index.npy"), "--qrels", str(qrels)
    )
    self.assertEqual(code, 5)
    text = (self.tmp / "q.bcmap.report.json").read_text()
    self.assertNotIn("NaN", text)
    report = json.loads(text, parse_constant=lambda c: self.fail(f"non-standard JSON constant {c}"))
    self.assertIsNone(report["metrics"]["recall_recovery"]["value"])
    self.assertEqual([r["code"] for r in report["reasons"]], ["no-relevance"])

  def test_transform_refuses_a_bad_chunk_size_before_writing(self):
    code, _, err = run(
      "transform",
      "--map",
      str(self.tmp / "nowhere.bcmap"),
      str(self.tmp / "new.npy"),
      str(self.tmp / "x.npy"),
      "--chunk-rows",
      "0",
    )
    self.assertEqual(code, 2)
    self.assertIn("`--chunk-rows` must be >= 1, got 0", err)
    self.assertFalse((self.tmp / "x.npy").exists())

  def test_append_refuses_an_npz_with_a_hint(self):
    np.savez(self.tmp / "m.npz", w=np.ones((6, 10)))
    reg = str(self.tmp / "reg")
    run("init", "--registry", reg, "--dim", "6")
    code, _, err = run("append", "--registry", reg, str(self.tmp / "m.npz"))
    self.assertEqual(code, 2)
    self.assertIn("bcjax fit --out", err)

  def test_bad_input_exits_two_naming_the_argument_before_writing(self):
    bad = self.tmp / "bad"
    bad.mkdir()
    np.save(bad / "short.npy", self.z_new[:500])
    nan = self.z_new.copy()
    nan[123, 4] = np.nan
    np.save(bad / "nan.npy", nan)
    np.save(bad / "pickled.npy", np.array([object()], dtype=object), allow_pickle=True)
    (bad / "text.npy").write_text("1,2,3")
    np.save(bad / "empty.npy", np.zeros((0, 10), np.float32))
    (bad / "taken.bcmap").write_bytes(b"user data")
    reg = str(self.tmp / "reg")
    run("init", "--registry", reg, "--dim", "7")
    old, new = str(self.tmp / "old.npy"), str(self.tmp / "new.npy")
    out = str(self.tmp / "never.bcmap")
    cases = [
      (["--old", old, "--new", str(bad / "short.npy"), "--out", out], "`--old` .* has 600 rows but `--new`"),
      (["--old", old, "--new", str(bad / "nan.npy"), "--out", out], "`--new` holds NaN or inf: first in row 123"),
      (["--old", old, "--new", new, "--registry", reg], "width 6 but the registry's latest version 0 has D_0=7"),
      (["--old", str(bad / "pickled.npy"), "--new", new, "--out", out], "`--old` .* pickled"),
      (["--old", old, "--new", str(bad / "text.npy"), "--out", out], "`--new` .* not a .npy file"),
      (["--old", str(bad / "empty.npy"), "--new", new, "--out", out], "`--old` .* is empty"),
      (["--old", old, "--new", new, "--out", str(bad / "taken.bcmap")], "taken.bcmap exists"),
      (["--old", old, "--new", new, "--out", out, "--min-recovery", "0"], r"`--min-recovery` must lie in \(0, 1\]"),
      (["--old", old, "--new", new, "--out", out, "--min-recovery", "1.5"], "got 1.5"),
      (["--old", old, "--new", new, "--out", out, "--min-hit-rate", "0"], r"`--min-hit-rate` must lie in \(0, 1\]"),
      (["--old", old, "--new", new, "--out", out, "--test-fraction", "1.5"], "`--test-fraction` must lie in"),
      (["--old", old, "--new", new, "--out", out, "--k", "0"], "`--k` must be >= 1, got 0"),
      (["--old", old, "--new", new, "--out", out, "--threads", "0"], "`--threads` must be >= 1, got 0"),
      (["--old", old, "--new", new, "--out", out, "--new-index", new], "`--new-index` needs `--index`"),
      (
        [
          "--old",
          old,
          "--new",
          new,
          "--out",
          out,
          "--index",
          str(self.tmp / "index.npy"),
          "--qrels",
          str(self.tmp / "labels.npy"),
        ],
        "`--qrels` .* must hold integer pairs",
      ),
      (
        ["--old", old, "--new", new, "--out", out, "--labels", str(self.tmp / "index.npy")],
        "`--labels` .* must hold one class",
      ),
    ]
    before = sorted(p.name for p in self.tmp.rglob("*"))
    for argv, pattern in cases:
      code, _, err = run("fit", *argv)
      self.assertEqual(code, 2, (argv, err))
      self.assertRegex(err, pattern)
    self.assertEqual(sorted(p.name for p in self.tmp.rglob("*")), before)
    self.assertEqual((bad / "taken.bcmap").read_bytes(), b"user data")


class WrongInputTest(absltest.TestCase):
  """Inputs that are not what their flag says are refused with exit 2 and the reason, before anything is written: an
  --index of the new model's vectors, old-model vectors given to transform, NaN; a map's hubness correction is
  applied or left out only when asked."""

  def setUp(self):
    super().setUp()
    self.tmp = Path(self.create_tempdir().full_path)
    rng = np.random.default_rng(3)
    items = rng.standard_normal((1600, 10))
    old = np.tanh(items @ rng.standard_normal((10, 16))) + 0.8 * rng.standard_normal(16)
    new = items @ rng.standard_normal((10, 16)) + 1.2 * rng.standard_normal(16) + 0.05 * rng.standard_normal((1600, 16))
    self.old, self.new = old.astype(np.float32), new.astype(np.float32)
    for name, arr in (("old", self.old[:600]), ("new", self.new[:600]), ("index", self.old[600:])):
      np.save(self.tmp / f"{name}.npy", arr)
    np.save(self.tmp / "new_index.npy", self.new[600:])
    self.fit = ["fit", "--old", str(self.tmp / "old.npy"), "--new", str(self.tmp / "new.npy"), "--kind", "linear"]

  def written(self):
    return sorted(p.name for p in self.tmp.iterdir())

  def test_fit_refuses_an_index_of_the_new_models_vectors(self):
    before = self.written()
    argv = [*self.fit, "--normalize", "--new-model", "B", "--out", str(self.tmp / "m.bcmap")]
    code, _, err = run(*argv, "--index", str(self.tmp / "new_index.npy"))
    self.assertEqual(code, 2, err)
    self.assertRegex(err, r"`--index` holds B's embeddings, not the --old model's: \d+ of 1000 rows sampled")
    self.assertEqual(self.written(), before)

  def map_file(self, hubness: str) -> Path:
    from bcjax import upgrade

    m = upgrade.fit_upgrade(self.new[:600], self.old[:600], kind="linear", normalize=True, hubness=hubness).map
    return upgrade.save_map(m, self.tmp / f"m-{hubness}.bcmap")

  def test_transform_refuses_old_model_vectors_and_nan(self):
    path = str(self.map_file("off"))
    nan = self.new[600:].copy()
    nan[77, 3] = np.nan
    np.save(self.tmp / "nan.npy", nan)
    before = self.written()
    for source, pattern in (
      ("index.npy", "looks like the old model's embeddings"),
      ("nan.npy", "NaN or inf: first in row 77"),
    ):
      code, _, err = run("transform", "--map", path, str(self.tmp / source), str(self.tmp / "out.npy"))
      self.assertEqual(code, 2, err)
      self.assertIn(pattern, err)
    self.assertEqual(self.written(), before)
    self.assertEqual(run("transform", "--map", path, str(self.tmp / "new_index.npy"), str(self.tmp / "out.npy"))[0], 0)

  @pytest.mark.heavy
  def test_transform_applies_or_leaves_out_the_hubness_correction_only_when_asked(self):
    from bcjax import upgrade

    path = self.map_file("on")
    m, _ = upgrade.load_map(path)
    source, out = str(self.tmp / "new_index.npy"), self.tmp / "out.npy"
    code, _, err = run("transform", "--map", str(path), source, str(out))
    self.assertEqual(code, 2)
    self.assertIn("--no-hubness", err)
    self.assertIn("--csls queries", err)
    self.assertFalse(out.exists())
    self.assertEqual(run("transform", "--map", str(path), "--csls", "queries", "--no-hubness", source, str(out))[0], 2)
    # The references in float64 NumPy: B(z) = unit(W unit(z) + b), the bias half the mean of the 10 largest cosines.
    w, b = upgrade.affine_form(m.transform, m.params)
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)
    mapped = unit(unit(self.new[600:].astype(np.float64)) @ w.T + b)
    cos = mapped @ unit(m.hubness.reference.astype(np.float64)).T
    bias = 0.5 * np.sort(cos, axis=1)[:, -10:].mean(axis=1)
    expected = {
      "--no-hubness": mapped,
      "queries": np.concatenate([mapped, np.ones((1000, 1))], axis=1),
      "documents": np.concatenate([mapped, (m.scale.bridged_offset - bias)[:, None]], axis=1),
    }
    for choice, want in expected.items():
      flags = ["--no-hubness"] if choice == "--no-hubness" else ["--csls", choice]
      code, _, err = run("transform", "--map", str(path), *flags, "--overwrite", source, str(out))
      self.assertEqual(code, 0, err)
      assert_close(np.load(out), want, "reduction", precision="float32", scale=1.0, err_msg=choice)


if __name__ == "__main__":
  absltest.main()
