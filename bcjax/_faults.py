"""Fault injection for the tests: kill or fail a process at a named point.

``BCJAX_FAULT=kill:STAGE`` SIGKILLs the process right after STAGE is saved, ``BCJAX_FAULT=fail:STAGE`` raises inside
STAGE (STAGE is an ``fnmatch`` pattern).

Shared by the experiments' harness and ``bcjax migrate``, whose kill-and-resume tests stop a process at a named point.
"""

import fnmatch
import os
import signal

FAULT_ENV = "BCJAX_FAULT"
"""The environment variable that injects a fault: ``kill:STAGE`` or ``fail:STAGE``."""


def fault(kind: str, stage: str) -> bool:
  spec = os.environ.get(FAULT_ENV, "")
  what, _, pattern = spec.partition(":")
  return what == kind and bool(pattern) and fnmatch.fnmatchcase(stage, pattern)


def kill_if_asked(stage: str) -> None:
  """SIGKILLs this process when ``BCJAX_FAULT`` is ``kill:`` a pattern matching ``stage`` (a kill-and-resume test)."""
  if fault("kill", stage):
    os.kill(os.getpid(), signal.SIGKILL)
