"""An open run directory: resumable stages (pickles or checkpoints, written atomically), the metrics log and the
run's outputs."""

import contextlib
import datetime
import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bcjax._faults import FAULT_ENV, fault, kill_if_asked
from bcjax.files import write_atomic
from experiments import common
from experiments.harness._stages import (
  CHECKPOINT_SUFFIX,
  MISSING,
  PICKLE_SUFFIX,
  Checkpoint,
  StageFailed,
  _read_checkpoint,
  _write_checkpoint,
  as_read_back,
)


class Run:
  """An open run directory: resumable stages, the metrics log and atomic outputs.

  In a multi-process run the processes other than 0 are not ``writer``: they read the stages that process 0 wrote
  (a stage read back is read back by every process, so all of them take the same collective steps), and everything
  they would write goes to a scratch folder that is deleted on :meth:`close`.
  """

  def __init__(self, out: Path, *, resumed: bool, progress: bool, writer: bool = True):
    self.resumed, self.progress, self.writer = resumed, progress, writer
    self.stages = out / "stages"
    if writer:
      self.out = out
      self.stages.mkdir(exist_ok=True)
      self._metrics = open(out / "metrics.jsonl", "a", buffering=1)  # noqa: SIM115 (open for the run; closed by close())
    else:
      self.out = Path(tempfile.mkdtemp(prefix="bcjax-process-"))
      self._metrics = open(os.devnull, "w")  # noqa: SIM115 (as above)
    self._values: dict = {}  # stages of this process, so a shared stage (M_0) is read once
    self.loaded: list[str] = []
    self.computed: list[str] = []

  def log(self, **record) -> None:
    """Appends one JSON object to ``metrics.jsonl`` (a resumed run appends after the killed one's lines)."""
    record.setdefault("time", datetime.datetime.now(datetime.UTC).isoformat())
    self._metrics.write(json.dumps(common.jsonable(record)) + "\n")

  def _path(self, name: str, suffix: str = PICKLE_SUFFIX) -> Path:
    if not name or any(part in ("", ".", "..") for part in name.split("/")):
      raise ValueError(f"stage name {name!r} must be '/'-separated non-empty parts")
    return self.stages / f"{name}{suffix}"

  def stored(self, name: str, checkpoint: "Checkpoint | None" = None):
    """The value of stage ``name`` if this run has it (computed earlier in this process, or finished before a kill in
    the run being resumed, read back through ``checkpoint``), else :data:`MISSING`. A stage pickled by an earlier
    version of the experiment is read back as it was written."""
    if name in self._values:
      return self._values[name]
    pickled, checkpointed = self._path(name), self._path(name, CHECKPOINT_SUFFIX)
    if checkpoint is not None and checkpointed.is_dir():
      value = checkpoint.restore(_read_checkpoint(checkpointed))
    elif pickled.is_file():
      with open(pickled, "rb") as f:
        value = pickle.load(f)
    else:
      return MISSING
    self.loaded.append(name)
    self._values[name] = value
    return value

  @contextlib.contextmanager
  def computing(self, name: str):
    """The context that computes stage ``name``: an exception raised in it becomes :class:`StageFailed` naming the
    stage (and where it was raised); a ``fail`` fault injected for the stage (:data:`FAULT_ENV`) raises on entry."""
    try:
      if fault("fail", name):
        raise RuntimeError(f"fault injected by {FAULT_ENV}")
      yield
    except StageFailed:
      raise
    except Exception as e:
      raise StageFailed(name, e) from e

  def store(self, name: str, value, checkpoint: "Checkpoint | None" = None):
    """Saves stage ``name``'s ``value`` atomically and returns it as a resumed run would read it back, so both runs
    compute the same numbers. With ``checkpoint`` the value is written as an orbax checkpoint of
    ``checkpoint.save(value)`` and read back through ``checkpoint.restore``; without, it (host arrays, dicts,
    NamedTuples) is pickled."""
    pickled, checkpointed = self._path(name), self._path(name, CHECKPOINT_SUFFIX)
    if checkpoint is None:
      data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
      if self.writer:
        pickled.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(pickled, data)
      value = pickle.loads(data)
    elif self.writer:
      _write_checkpoint(checkpointed, checkpoint.save(value))
      value = checkpoint.restore(_read_checkpoint(checkpointed))
    else:
      value = checkpoint.restore(as_read_back(checkpoint.save(value)))
    self._values[name] = value
    self.computed.append(name)
    kill_if_asked(name)
    return value

  def stage(self, name: str, compute: Callable[[], object], checkpoint: "Checkpoint | None" = None):
    """``compute()`` once per run: :meth:`stored`, else :meth:`computing` and :meth:`store`. A method module that
    must not hand the harness its code drives those three itself."""
    value = self.stored(name, checkpoint)
    if value is MISSING:
      with self.computing(name):
        value = compute()
      value = self.store(name, value, checkpoint)
    return value

  def finished_stages(self) -> list[str]:
    if not self.stages.is_dir():
      return []
    pickles = [p for p in self.stages.rglob(f"*{PICKLE_SUFFIX}") if p.is_file()]
    checkpoints = [p for p in self.stages.rglob(f"*{CHECKPOINT_SUFFIX}") if p.is_dir()]
    return sorted(str(p.relative_to(self.stages))[: -len(p.suffix)] for p in pickles + checkpoints)

  def publish_dir(self, name: str, build: Callable[[Path], None]) -> Path:
    """A folder of outputs (e.g. a registry) that appears complete or not at all: ``build`` fills a scratch folder,
    which is renamed into place; a scratch folder left by a killed run is this run's own and is discarded."""
    final = self.out / name
    if final.exists():
      return final
    scratch = final.with_name(f".{final.name}.partial")
    if scratch.exists():
      shutil.rmtree(scratch)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    build(scratch)
    os.rename(scratch, final)
    return final

  def write_json(self, name: str, obj) -> None:
    common.write_json(self.out / name, common.jsonable(obj))

  def write_text(self, name: str, text: str) -> None:
    common.write_text(self.out / name, text)

  def save_figure(self, fig, name: str) -> None:
    common.save_figure(fig, self.out / name)

  def close(self) -> None:
    self._metrics.close()
    if not self.writer:
      shutil.rmtree(self.out, ignore_errors=True)
