"""The public API: every name of every ``__all__`` resolves, the flat namespace is curated, the argument conventions
hold across modules, the Gramian estimators are interchangeable, and functions said to be jittable accept traced
hyper-parameters."""

import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest, parameterized
from flax import nnx

import bcjax
from bcjax import gramian as gram
from bcjax import upgrade
from tests._tolerance import assert_close

PACKAGES = ("bcjax",) + tuple(f"bcjax.{name}" for name in bcjax._SUBPACKAGES)
PLUMBING = (
  "DDPG",
  "DDPGState",
  "ReplayBuffer",
  "Transitions",
  "INNER_RULES",
  "torch_linear_init",
  "write_atomic",
  "BasicBlock",
  "SOGramState",
  "SAGramState",
  "BatchGramianState",
  "default_tol",
)
GRAMIAN_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "gramian.md"


class NamespaceTest(parameterized.TestCase):
  @parameterized.parameters(*PACKAGES)
  def test_star_import_resolves_every_name(self, package):
    module = importlib.import_module(package)
    namespace = {}
    exec(f"from {package} import *", namespace)
    self.assertEqual(len(set(module.__all__)), len(module.__all__), f"{package}.__all__ repeats a name")
    for name in module.__all__:
      self.assertIn(name, namespace, f"{package}.__all__ names {name}, which does not resolve")

  def test_sub_packages_are_attributes(self):
    for name in bcjax._SUBPACKAGES:
      self.assertIs(getattr(bcjax, name), importlib.import_module(f"bcjax.{name}"))
    self.assertTrue(callable(bcjax.sentence.ca_embed))

  def test_flat_namespace_holds_no_plumbing(self):
    for name in PLUMBING:
      self.assertNotIn(name, bcjax.__all__)
      self.assertFalse(hasattr(bcjax, name), f"bcjax.{name} is plumbing; it belongs to its sub-package")
    # ... while each stays reachable where it lives
    self.assertTrue(hasattr(bcjax.contrastive, "DDPG") and hasattr(bcjax.models, "BasicBlock"))
    self.assertTrue(hasattr(bcjax.files, "write_atomic"))

  def test_flat_names_are_the_sub_packages_objects(self):
    for name in bcjax.__all__:
      obj = getattr(bcjax, name)
      if isinstance(obj, type(bcjax)):
        continue
      packages = bcjax._SUBPACKAGES
      homes = [p for p in packages if getattr(getattr(bcjax, p), name, None) is obj]
      self.assertLen(homes, 1, f"bcjax.{name} should come from exactly one sub-package, found {homes}")


class PackagingTest(absltest.TestCase):
  def test_the_version_has_one_source(self):
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    self.assertNotRegex(pyproject, r'(?m)^version\s*=\s*"', "the version is written in pyproject.toml too")
    self.assertIn('version = {attr = "bcjax.__version__"}', pyproject)
    self.assertTrue((Path(__file__).resolve().parents[1] / "LICENSE").is_file())
    try:
      installed = metadata.version("bcjax")
    except metadata.PackageNotFoundError:  # pragma: no cover (running from a bare checkout)
      return
    self.assertEqual(installed, bcjax.__version__)

  @pytest.mark.heavy
  def test_the_wheel_runs_the_experiments_from_any_directory_and_claims_no_top_level_name(self):
    """``pip install`` of the wheel gives ``bcjax`` and the experiments as the namespace package ``experiments``
    (no ``experiments/__init__.py``, so it does not take the name from other distributions); ``python -m
    experiments.bc_aligner --help`` then runs outside the clone."""
    root = Path(__file__).resolve().parents[1]
    tmp = Path(self.create_tempdir().full_path)

    def run(*argv, **kwargs):
      proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, **kwargs)
      self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
      return proc.stdout

    pip = (sys.executable, "-m", "pip")
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "--wheel-dir", str(tmp / "dist"), str(root))
    (wheel,) = (tmp / "dist").glob("bcjax-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    self.assertEqual({n.split("/")[0] for n in names if ".dist-info/" not in n}, {"bcjax", "experiments"})
    self.assertNotIn("experiments/__init__.py", names)
    for main in sorted(root.glob("experiments/*/__main__.py")):
      self.assertIn(main.relative_to(root).as_posix(), names)
    run(*pip, "install", "--no-deps", "--quiet", "--target", str(tmp / "site"), str(wheel))
    env = dict(os.environ, PYTHONPATH=str(tmp / "site"))
    outside = tmp / "elsewhere"
    outside.mkdir()
    usage = run(sys.executable, "-m", "experiments.bc_aligner", "--help", cwd=outside, env=env)
    self.assertIn("usage: python -m experiments.bc_aligner", usage)
    self.assertIn("--preset", usage)
    where = "import bcjax, experiments.bc_aligner as e; print(bcjax.__file__); print(e.__file__)"
    for path in run(sys.executable, "-c", where, cwd=outside, env=env).split():
      self.assertTrue(Path(path).is_relative_to(tmp / "site"), path)


class ConventionTest(absltest.TestCase):
  def test_backward_maps_take_d_prev_then_d_new(self):
    w = bcjax.init_backward(jax.random.key(0), 3, 5)
    module = bcjax.BackwardLinear(3, 5, rngs=nnx.Rngs(0))
    self.assertEqual(w.shape, (3, 5))
    self.assertEqual(module.w[...].shape, (3, 5))
    self.assertEqual(module(jnp.ones((2, 5))).shape, (2, 3))
    self.assertEqual(bcjax.notrans(jnp.ones((2, 5)), 3).shape, (2, 3))

  def test_options_are_keyword_only_in_every_math_package(self):
    """Arrays (and the formulas' own parameters, α of C(R, α) and a of SIF) are positional; every other argument
    with a default is keyword-only, so an option can never be passed by position by mistake."""
    positional_defaults = {"history", "weights", "mu", "nu", "c", "alpha", "a"}
    offenders = []
    for package in ("alignment", "conceptors", "contrastive", "gramian", "metrics", "models", "sentence"):
      module = importlib.import_module(f"bcjax.{package}")
      for name in module.__all__:
        obj = getattr(module, name)
        if not inspect.isfunction(obj) or name.startswith("load_"):  # a loader's file arguments are its inputs
          continue
        for p in inspect.signature(obj).parameters.values():
          if p.default is not p.empty and p.kind == p.POSITIONAL_OR_KEYWORD and p.name not in positional_defaults:
            offenders.append(f"{package}.{name}({p.name}=...)")
    self.assertEqual(offenders, [])

  def test_options_are_keyword_only(self):
    with self.assertRaises(TypeError):
      bcjax.init_backward(jax.random.key(0), 3, 5, jnp.float64)
    with self.assertRaises(TypeError):
      bcjax.least_squares_backward(jnp.ones((4, 2)), jnp.ones((4, 2)), 0.1)


def _guide_gramian_block() -> str:
  blocks = re.findall(r"```python\n(.*?)```", GRAMIAN_GUIDE.read_text(), flags=re.S)
  (block,) = [b for b in blocks if "estimator = sogram(" in b]
  return block


class SizeTest(absltest.TestCase):
  def test_the_upgrade_package_keeps_its_sizes(self):
    """Issue 67's bounds on bcjax/upgrade: no module over 400 lines, no function body over 80 (its docstring apart)."""
    import ast

    root = Path(upgrade.__file__).parent
    for path in sorted(root.rglob("*.py")):
      text = path.read_text()
      self.assertLessEqual(len(text.splitlines()), 400, path)
      for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
          first = node.body[0]
          is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
          start = node.body[1].lineno if is_doc and len(node.body) > 1 else first.lineno
          self.assertLessEqual(node.end_lineno - start + 1, 80, f"{path}: {node.name}")


class EstimatorSwapTest(parameterized.TestCase):
  """The Gramian guide promises that any estimator can replace SOGram in its example: each one runs it unchanged and the
  all-pairs penalty falls."""

  def test_the_guide_names_every_alternative(self):
    line = next(line for line in _guide_gramian_block().splitlines() if line.startswith("estimator = "))
    self.assertEqual(
      re.findall(r"(sagram\([^)]*\)|batch_gramian\([^)]*\))", line),
      ['sagram(10_000, beta="saga")', 'sagram(10_000, beta="sag")', 'batch_gramian(sampling="uniform")'],
    )

  @parameterized.parameters(
    "sogram(alpha=0.1)",
    'sagram(10_000, beta="saga")',
    'sagram(10_000, beta="sag")',
    'batch_gramian(sampling="uniform")',
  )
  @pytest.mark.heavy
  def test_each_estimator_runs_the_guide_example(self, estimator):
    block = _guide_gramian_block()
    block = re.sub(r"(?m)^estimator = .*$", f"estimator = {estimator}", block)
    block = block.replace("range(200)", "range(20)")  # the swap is what is tested, not the length of training
    namespace = {}
    exec(compile(block, "docs/guides/gramian.md", "exec"), namespace)
    before = float(gram.gramian_penalty(gram.gramian(namespace["U"]), gram.gramian(namespace["V"])))
    self.assertLess(namespace["exact"], 0.9 * before)

  @pytest.mark.heavy
  def test_one_update_signature(self):
    x = jnp.asarray(np.random.default_rng(0).normal(size=(6, 3)))
    idx = jnp.array([0, 1, 2, 3, 4, 5])
    where = jnp.array([True, True, True, True, False, False])
    padded = x.at[4:].set(jnp.nan)
    for est in (
      gram.sogram(0.5),
      gram.sagram(6, beta="saga"),
      gram.sagram(6, beta="sag"),
      gram.batch_gramian(sampling="uniform"),
    ):
      state = est.init(x)
      masked, _ = est.update(state, padded, indices=idx, where=where)
      kept, _ = est.update(state, x[:4], indices=idx[:4])
      assert_close(masked.gramian, kept.gramian, "reduction")


class ProtocolTest(absltest.TestCase):
  """Every estimator and every kind of backward map has its protocol's exact signature (names, kinds, defaults), so
  one replaces another; mypy checks the annotations, this checks the objects users get."""

  def assert_signature(self, fn, protocol, what):
    want = inspect.signature(protocol.__call__)
    want = want.replace(parameters=list(want.parameters.values())[1:])  # without self
    got = inspect.signature(fn)
    self.assertEqual(
      [(p.name, p.kind, p.default) for p in got.parameters.values()],
      [(p.name, p.kind, p.default) for p in want.parameters.values()],
      what,
    )

  def test_gramian_estimators(self):
    for name, est in (
      ("sogram", gram.sogram(0.5)),
      ("sagram", gram.sagram(6)),
      ("batch_gramian", gram.batch_gramian()),
    ):
      self.assertIsInstance(est, gram.GramianEstimator)
      self.assert_signature(est.init, gram.GramianInitFn, f"{name}.init")
      self.assert_signature(est.update, gram.GramianUpdateFn, f"{name}.update")

  def test_backward_transforms(self):
    for kind in bcjax.TRANSFORM_KINDS:
      t = bcjax.backward_transform(kind)
      self.assert_signature(t.init, bcjax.TransformInitFn, f"{kind}.init")
      self.assert_signature(t.apply, bcjax.TransformApplyFn, f"{kind}.apply")
      if t.fit is not None:
        self.assert_signature(t.fit, bcjax.TransformFitFn, f"{kind}.fit")
      params = t.init(jax.random.key(0), 3, 5)
      self.assertEqual(t.dims(params), (3, 5), kind)


def _traced_cases():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(12, 4)))
  y = jnp.asarray(rng.normal(size=(12, 4)))
  r = x.T @ x / 12
  c = bcjax.conceptor(x, 1.0)
  return {
    "least_squares_backward": (lambda h: bcjax.least_squares_backward(x, y[:, :3], ridge=h), (0.0, 0.3)),
    "conceptor": (lambda h: bcjax.conceptor(x, h), (0.5, 2.0)),
    "conceptor_from_correlation": (lambda h: bcjax.conceptor_from_correlation(r, h), (0.5, 2.0)),
    "aperture_adaptation": (lambda h: bcjax.aperture_adaptation(c, h), (0.5, 2.0)),
    "info_nce": (lambda h: bcjax.info_nce(x, y, temperature=h), (0.1, 0.5)),
    "nce_ii": (lambda h: bcjax.nce_ii(x, y, y[::-1], h, temperature=0.2), (0.3, 0.7)),
    "mixed_info_nce": (lambda h: bcjax.mixed_info_nce(x, y, y[:5], 6, temperature=h), (0.1, 0.5)),
    "icl_objective": (lambda h: bcjax.icl_objective(1.5, 2.0, h), (0.3, 0.7)),
    "sgd_step": (lambda h: bcjax.sgd_step(x, y, h), (0.01, 0.5)),
    "sogram": (lambda h: bcjax.sogram(h).update(bcjax.sogram(0.5).init(x), x)[0].gramian, (0.1, 1.0)),
    "sampled_softmax_loss": (
      lambda h: bcjax.sampled_softmax_loss(x, y, jnp.arange(12), log_q=h * jnp.ones(12)),
      (0.0, 1.0),
    ),
    "alignment_error": (lambda h: bcjax.alignment_error(h * x, y), (0.5, 2.0)),
    "log_similarity": (lambda h: bcjax.log_similarity(x, y, temperature=h), (0.1, 0.5)),
    "log_change_ratio": (lambda h: bcjax.log_change_ratio(x, y, y[::-1], temperature=h), (0.1, 0.5)),
    "nce_ii_from_log_ratio": (lambda h: bcjax.nce_ii_from_log_ratio(x[:, 0], h), (0.3, 0.7)),
    "ca_update": (lambda h: bcjax.sentence.ca_update(c, y, h), (0.5, 2.0)),
    "ca_initial": (lambda h: bcjax.sentence.ca_initial(x, h), (0.5, 2.0)),
    "relative_aperture": (lambda h: bcjax.relative_aperture(r, ratio=h), (0.5, 2.0)),
    "aperture_norm_gradient": (lambda h: bcjax.aperture_norm_gradient(r, h), (0.5, 2.0)),
  }


class TracedHyperParameterTest(parameterized.TestCase):
  """Each function runs under ``jit`` with its hyper-parameter traced and agrees with the eager call."""

  @parameterized.named_parameters(*((name, name) for name in _traced_cases()))
  @pytest.mark.heavy
  def test_jit_with_traced_hyper_parameter(self, name):
    fn, values = _traced_cases()[name]
    jitted = jax.jit(fn)
    for value in values:
      assert_close(jitted(jnp.asarray(value)), fn(value), "linalg")

  @pytest.mark.heavy
  def test_traced_ridge_sweep_under_vmap_matches_the_closed_form(self):
    rng = np.random.default_rng(1)
    z_new, z_prev = rng.normal(size=(20, 5)), rng.normal(size=(20, 3))
    ridges = np.array([0.0, 0.1, 1.0])
    swept = jax.vmap(lambda h: bcjax.least_squares_backward(z_new, z_prev, ridge=h))(jnp.asarray(ridges))
    for w, rho in zip(swept, ridges):
      expected = np.linalg.solve(z_new.T @ z_new + 20 * rho * np.eye(5), z_new.T @ z_prev).T
      assert_close(w, expected, "linalg")

  def test_negative_traced_ridge_poisons_instead_of_answering(self):
    w = jax.jit(lambda h: bcjax.least_squares_backward(jnp.eye(3), jnp.eye(3), ridge=h))(-1.0)
    self.assertTrue(np.all(np.isnan(np.asarray(w))))
    with self.assertRaisesRegex(ValueError, "ridge"):
      bcjax.least_squares_backward(jnp.eye(3), jnp.eye(3), ridge=-1.0)


if __name__ == "__main__":
  absltest.main()


# bcjax.upgrade's names, pinned: a name joins or leaves the public API by a change of this list, never by accident.
# The flat namespace is the workflow's; each package's own records and tools stay in it.
UPGRADE_API = {
  "bcjax.upgrade": (
    "affine_form apply_map bridge_items bridged_search check_direction check_store_space closed_form csls_documents "
    "csls_queries EmbeddingFileError evaluate_upgrade FaissStore fit_upgrade Hubness hubness_bias LanceDBStore "
    "load_map make_hubness Migration MigrationError MixedSpaceError NewVectors open_embeddings open_migration "
    "own_vector_ranks pair_moments PairSplit QdrantStore query_function registry_maps save_map ScoreScale "
    "SearchResult space_stamp SpaceStamp split_pairs start_migration top_k transform_file UPGRADE_KINDS UpgradeFit "
    "UpgradeMap UpgradeReport VectorStore VERDICTS"
  ),
  "bcjax.upgrade.fit": (
    "Candidate closed_form fit_upgrade HUBNESS_MODES MlpFit moments_mse pair_moments PairMoments PairSplit "
    "split_pairs SplitError train_mlp UPGRADE_KINDS UpgradeFit"
  ),
  "bcjax.upgrade.report": (
    "evaluate_upgrade finite_or_none MapSummary Measure Reason report_json report_markdown report_summary "
    "UpgradeReport VERDICTS"
  ),
  "bcjax.upgrade.stores": (
    "bridge_items bridged_search check_store_space FaissStore LanceDBStore Migration MigrationError MigrationStatus "
    "MixedSpaceError NewVectors open_migration QdrantStore RecallPoint SearchResult SpaceCheck start_migration "
    "VectorStore"
  ),
}


class UpgradeApiTest(parameterized.TestCase):
  @parameterized.parameters(*UPGRADE_API)
  def test_the_names_are_the_pinned_ones_and_resolve(self, package):
    module = importlib.import_module(package)
    self.assertEqual(sorted(module.__all__, key=str.lower), sorted(UPGRADE_API[package].split(), key=str.lower))
    namespace = {}
    exec(f"from {package} import *", namespace)
    for name in module.__all__:
      self.assertIn(name, namespace, f"{package}.__all__ names {name}, which does not resolve")

  def test_a_flat_name_is_its_packages_object(self):
    import bcjax.upgrade as upgrade

    for sub in ("fit", "report", "stores"):
      module = importlib.import_module(f"bcjax.upgrade.{sub}")
      for name in set(module.__all__) & set(upgrade.__all__):
        self.assertIs(getattr(upgrade, name), getattr(module, name), f"bcjax.upgrade.{name}")
