"""The report's typed records: a measure with its interval, why a verdict is withheld, the map's summary, the report."""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

VERDICTS = ("bridge", "re-index", "undecided", "not measurable")
"""The report's verdicts, in the order of the command's exit codes 0, 3, 4 and 5."""

MAX_CHANCE_SHARE = 0.01
"""The own-vector hit rate carries a verdict only where chance (k / pool) is at most this share of the threshold."""

_REPLICATES = 1000


class Reason(NamedTuple):
  """A finding of the report.

  ``code`` names it (one of :data:`REASON_CODES`), ``blocks_verdict`` says whether it makes the primary measure unable
  to carry a verdict, ``text`` says it for a reader.
  """

  code: str
  blocks_verdict: bool
  text: str


REASON_CODES = ("pool-too-small", "reference-at-chance", "no-relevance", "consumer-at-majority")
"""Every :class:`Reason` code: the first three block a verdict, the last marks the consumer's measures."""


def _reason(code: str, text: str) -> Reason:
  if code not in REASON_CODES:
    raise ValueError(f"unknown reason code {code!r}")
  return Reason(code, code != "consumer-at-majority", text)


class Measure(NamedTuple):
  """One measure of the report.

  ``value`` with its 95 % bootstrap interval [``low``, ``high``] over ``n`` rows (NaN where undefined), what it
  ``means``, and where they apply: the ``chance`` level and the ``pool`` it was scored among, the consumer's
  ``majority``-class share, an independent ``check`` of the value, and whether it is ``measurable`` at all.
  """

  value: float
  low: float
  high: float
  n: int
  means: str
  chance: float | None = None
  pool: int | None = None
  majority: float | None = None
  check: float | None = None
  measurable: bool = True


class MapSummary(NamedTuple):
  """The map a report judged.

  Its ``kind`` (``chain(...)`` for a chain), fitted ``choices``, whether it ``normalize``s, ``dims`` (D_(k-1), D_k), and
  its hubness correction's k and reference rows (None without one).
  """

  kind: str
  choices: Mapping[str, Any]
  normalize: bool
  dims: tuple[int, int]
  hubness_k: int | None = None
  hubness_rows: int | None = None


@dataclasses.dataclass(frozen=True)
class UpgradeReport:
  """The go/no-go report of :func:`evaluate_upgrade` (:mod:`bcjax.upgrade.report` for the rule).

  Attributes:
    verdict: one of :data:`VERDICTS`.
    primary: the name of the measure the verdict reads.
    threshold: that measure's bridge threshold.
    metrics: every measure by name.
    reasons: the findings that can block the verdict or qualify a measure.
    k, metric, min_recovery, min_hit_rate: the settings.
    held_out_rows: the held-out pairs scored.
    map: the map judged.
  """

  verdict: str
  primary: str
  threshold: float
  metrics: Mapping[str, Measure]
  reasons: tuple[Reason, ...]
  k: int
  metric: str
  min_recovery: float
  min_hit_rate: float
  held_out_rows: int
  map: MapSummary

  @property
  def primary_measure(self) -> Measure:
    """The measure the verdict reads."""
    return self.metrics[self.primary]

  def to_dict(self) -> dict:
    """The report as plain dicts and lists, the shape :func:`report_json` writes (undefined numbers still NaN)."""
    m = self.map
    return {
      "metrics": {name: measure._asdict() for name, measure in self.metrics.items()},
      "primary": self.primary,
      "threshold": self.threshold,
      "verdict": self.verdict,
      "reasons": [r._asdict() for r in self.reasons],
      "k": self.k,
      "metric": self.metric,
      "min_recovery": self.min_recovery,
      "min_hit_rate": self.min_hit_rate,
      "held_out_rows": self.held_out_rows,
      "map": {
        "kind": m.kind,
        "choices": dict(m.choices),
        "normalize": m.normalize,
        "dims": list(m.dims),
        "hubness": None if m.hubness_k is None else {"k": m.hubness_k, "reference_rows": m.hubness_rows},
      },
    }


def _verdict(primary: Measure, threshold: float, reasons: Sequence[Reason]) -> str:
  """The verdict (:mod:`bcjax.upgrade.report`) from the primary measure's interval and the reasons' codes."""
  if any(r.blocks_verdict for r in reasons) or not all(map(math.isfinite, (primary.value, primary.low, primary.high))):
    return "not measurable"
  if primary.low >= threshold:
    return "bridge"
  if primary.high < threshold:
    return "re-index"
  return "undecided"
