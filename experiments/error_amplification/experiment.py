"""The error-amplification experiment as a harness :class:`~experiments.harness.Experiment`."""

from experiments import harness
from experiments.bc_methods import LINEAR, check_transform_rank
from experiments.error_amplification.configs import PRESETS, Config
from experiments.error_amplification.train import report, train_and_evaluate


class ErrorAmplification(harness.Experiment):
  name = "error_amplification"
  description = (
    "Chains of embedding versions with drift: backward transforms fitted post hoc and jointly with the "
    "single-step (eq. 7) and the multi-step (eq. 10) loss; prints the alignment error of every version "
    "mapped back to version 0. Writes config.json, metrics.jsonl, stages/, results.json, table.md, "
    "alignment_error.png and one keep-latest registry per method with a transformation (--transform: its "
    "kind; --transform-sweep: every kind listed)."
  )
  config = Config
  presets = PRESETS
  data_parallel = True

  def check(self, args, cfg):
    check_transform_rank((cfg.transform, *cfg.transform_sweep), cfg.transform_rank, cfg.dims)
    if cfg.transform_sweep and not set(cfg.methods) & set(LINEAR):
      raise harness.UsageError(
        "--transform-sweep", f"needs a method with a transformation ({', '.join(LINEAR)}) in --methods"
      )

  def check_mesh(self, args, cfg, devices):
    if cfg.batch_size % devices:
      raise harness.UsageError(
        "--batch-size", f"{cfg.batch_size} is not divisible by the {devices} devices of the data mesh (--devices)"
      )

  def execute(self, run, args, cfg, data):
    return train_and_evaluate(cfg, run, args.mesh)

  def report(self, run, args, cfg, results):
    table = report(run, results)
    return (
      f"\nAlignment error of z̃_0 = B_1∘…∘B_k(z_k) vs z_0 on {cfg.n_test} held-out points "
      f"(preset {args.preset}, seed {cfg.seed}, λ={cfg.lam}, B_k: {results['transform']}):\n\n{table}"
    )


EXPERIMENT = ErrorAmplification()
