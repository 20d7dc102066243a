"""What a catalogued claim is: its kind, the paper's number, the measure that tests it, and its measurements — the
primary one, named before its runs, whose verdict is the claim's standing, and the sensitivity rows shown under it.
"""

import dataclasses

from experiments.reproduction import rules

Value = float | tuple[float, float] | None
QUALITATIVE = "qualitative"


@dataclasses.dataclass(frozen=True)
class Measurement:
  """One way a claim is measured: a group's summary and the measure (or, for an ordering, measures) in it."""

  label: str  # what differs between a claim's measurements: the data, a setting
  group: str  # the summary's group (docs/reproduction/summaries/<group>.json)
  key: str | tuple[str, ...]  # the measure in it (experiments.reproduction.measures); an ordering's differences
  paper: Value = None  # the paper's number for this measurement, when it differs from the claim's
  chosen_on_test: str | None = None  # why a setting counts as chosen on the judging data
  budget: float | None = None  # the budget (steps, pages, epochs) of a budget trend
  series: str | None = None  # the trend this budget point belongs to (default: its measure's key)
  budget_unit: str | None = None  # the unit of ``budget`` when it is not the claim's
  command: str | None = None  # the command that makes the group, and its cost, for a measurement not run yet
  replicate: str | None = None  # rows of one claim with the same tag ran one setting (pooled when they disagree)
  minus: str | None = None  # another group: the row is this group's measure minus that group's, paired by seed
  minus_key: str | None = None  # the measure read in ``minus`` when it is not ``key``
  # why this row holds the claim's standing when the primary did not converge (its loss never trained, so the paper's
  # rule timed noise): a setting chosen on development data by a rule fixed before it ran on the judging data
  stands_in: str | None = None

  @property
  def keys(self) -> tuple[str, ...]:
    return self.key if isinstance(self.key, tuple) else (self.key,)


@dataclasses.dataclass(frozen=True)
class Claim:
  """One headline claim of a paper, typed (:data:`experiments.reproduction.rules.KINDS` or qualitative).

  ``measurements[primary]`` is the setting closest to the paper's protocol that two CPU cores run, named in the
  catalogue before its runs: its verdict is the claim's standing on the page; the others are sensitivity rows. When
  the primary did not converge, a measurement marked ``stands_in`` with a judged verdict holds the standing instead.
  ``verbatim`` is False for a claim stated by table cells rather than words (the page prints it without quotation
  marks, as "Table 3 cells: ...").
  """

  key: str
  paper: str  # a key of PAPERS
  where: str  # table, figure or section
  quote: str  # the paper's words (verbatim), or the table cells it rests on
  kind: str
  value: Value  # the paper's number(s) in the measure's units (None: a direction, ordering or description only)
  measure: str  # what is measured, in which units
  measurements: tuple[Measurement, ...]
  null: float = 0.0  # the measure's "no effect" value
  side: int | None = None  # the paper's direction when it gives no number (+1 above null, -1 below)
  unit: str = ""
  data: str = ""  # how the data and budget differ from the paper's
  needs: str = ""  # what a claim with no measurement would take
  figure: str | None = None  # a copied figure, "<group>-<file>"
  budget_unit: str = ""  # the unit of the measurements' budgets (a budget trend when three or more)
  verbatim: bool = True
  primary: int = 0

  def __post_init__(self):
    if self.kind not in (*rules.KINDS, QUALITATIVE):
      raise ValueError(f"claim {self.key}: unknown kind {self.kind!r}")
    valued = self.value is not None or (self.measurements and all(m.paper is not None for m in self.measurements))
    if self.kind in (rules.FLOOR, rules.CEILING, rules.LEVEL, rules.PARITY) and not valued:
      raise ValueError(f"claim {self.key}: a {self.kind} claim needs the paper's value")
    if self.kind == rules.PARITY and not isinstance(self.value, tuple):
      raise ValueError(f"claim {self.key}: a parity claim's value is a (low, high) band")
    if self.kind == rules.DIRECTION and self.value is None and self.side not in (1, -1):
      raise ValueError(f"claim {self.key}: a direction claim without a value needs `side`")
    if self.kind == rules.ORDERING and any(len(m.keys) < 1 for m in self.measurements):
      raise ValueError(f"claim {self.key}: an ordering's measurements name its differences")
    if self.measurements and not 0 <= self.primary < len(self.measurements):
      raise ValueError(f"claim {self.key}: `primary` {self.primary} is not one of its measurements")

  @property
  def primary_measurement(self) -> Measurement | None:
    return self.measurements[self.primary] if self.measurements else None
