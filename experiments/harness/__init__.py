"""The one harness behind every experiment and benchmark command line.

**Configs become flags.** An experiment's settings are one frozen dataclass; a field declared with :func:`option`
becomes a flag (``--field-name``, or the ``flag`` given), with its allowed range or choices declared next to it.
Presets are instances of that dataclass; a flag overrides its field only when given. Tuples are comma lists.

**Validation comes first.** Every range, every cross-field check (``Experiment.check``) and the data itself
(``Experiment.load``) are checked before anything is written; a bad value exits with status 2 and a message naming
the flag and the allowed range, and no run directory is created.

**Scaling out.** ``--devices``, ``--num-processes``, ``--process-id``, ``--coordinator`` and ``--peer-timeout`` are
launch flags (how this process runs, not what the run computes): a data-parallel experiment (``data_parallel``)
gets ``args.mesh``; every process of a multi-process run joins ``jax.distributed`` first, and only process 0 writes.

**One run-directory lifecycle.** ``config.json`` (with the command line, input paths made absolute, so a run can be
resumed exactly from anywhere), ``metrics.jsonl``, ``stages/`` where every finished stage is written atomically, and at
the end ``results.json``, ``table.md`` and the figures. A stage that holds model state is an orbax-checkpoint folder
(``<stage>.orbax``) of its arrays and numbers only, read back through the stage's :class:`Checkpoint`, which rebuilds
graph definitions from the run's config: a resumed run does not depend on how flax or the experiment laid out their
classes when it was written. Other stages are pickles of host values (resume only run folders you made).
``--resume DIR`` re-reads DIR's command line and skips every finished stage; when a stage fails,
``results.partial.json`` lists the finished stages and names the failed one, and the command exits with status 1.

**Compiled programs are cached.** Unless ``JAX_COMPILATION_CACHE_DIR`` (or ``jax_compilation_cache_dir``) names
another folder, every compiled program is kept in ``<download cache>/xla`` (``~/.cache/bcjax/xla``, see
:func:`bcjax.data.default_cache_dir`): the seeds of a sweep, a resumed run and the next run of a preset read them back
instead of compiling again. ``--no-compile-cache`` turns it off for one run.

Exit status: 0 done; 1 a stage failed (``results.partial.json`` written, and removed when a resumed run finishes); 2 a
usage or data error (nothing written).

One concern per module: ``_flags`` (configs as flags), ``_experiment`` (what an experiment declares, and joining
the processes), ``_run`` (the run directory and its stages), ``_stages`` (checkpoints and a stage's failure),
``_launch`` (:func:`main`, the lifecycle above); fault injection is :mod:`bcjax._faults`.

Fault injection for tests: ``BCJAX_FAULT=kill:STAGE`` SIGKILLs the process right after STAGE is saved and
``BCJAX_FAULT=fail:STAGE`` raises inside STAGE (STAGE is an ``fnmatch`` pattern).
"""

from bcjax import parallel
from bcjax._faults import FAULT_ENV
from experiments.harness._errors import InputError, UsageError
from experiments.harness._experiment import Experiment
from experiments.harness._flags import (
  add_config_flags,
  apply_flags,
  check_field,
  flag_name,
  given_positive_int,
  option,
  parse_config,
)
from experiments.harness._launch import LAUNCH_FLAGS, main
from experiments.harness._run import Run
from experiments.harness._stages import MISSING, REPEATED_ON_RESUME, Checkpoint, StageFailed, as_read_back

# Before any JAX backend starts (importing jax starts none): forced CPU devices (XLA_FLAGS) get a client pool their
# collectives cannot exhaust.
parallel.reserve_collective_threads()

__all__ = (
  "FAULT_ENV",
  "LAUNCH_FLAGS",
  "MISSING",
  "REPEATED_ON_RESUME",
  "Checkpoint",
  "Experiment",
  "InputError",
  "Run",
  "StageFailed",
  "UsageError",
  "add_config_flags",
  "apply_flags",
  "as_read_back",
  "check_field",
  "flag_name",
  "given_positive_int",
  "main",
  "option",
  "parse_config",
)
