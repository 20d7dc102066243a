"""Fault injection for the tests: ``BCJAX_FAULT=kill:STAGE`` SIGKILLs the process right after STAGE is saved,
``BCJAX_FAULT=fail:STAGE`` raises inside STAGE (STAGE is an ``fnmatch`` pattern)."""

import fnmatch
import os

FAULT_ENV = "BCJAX_FAULT"
"""The environment variable that injects a fault: ``kill:STAGE`` or ``fail:STAGE``."""


def fault(kind: str, stage: str) -> bool:
  spec = os.environ.get(FAULT_ENV, "")
  what, _, pattern = spec.partition(":")
  return what == kind and bool(pattern) and fnmatch.fnmatchcase(stage, pattern)
