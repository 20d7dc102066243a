"""The report as strict JSON, as markdown and as the lines the command prints."""

import json
import math

import numpy as np

from bcjax.upgrade.report._records import Measure, UpgradeReport


def finite_or_none(value):
  """``value`` with every non-finite float (at any depth of dicts, lists and tuples) replaced by None."""
  if isinstance(value, float) and not math.isfinite(value):
    return None
  if isinstance(value, dict):
    return {k: finite_or_none(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [finite_or_none(v) for v in value]
  if isinstance(value, np.generic):
    return finite_or_none(value.item())
  return value


def report_json(report: UpgradeReport, **context) -> str:
  """The report as strict JSON (RFC 8259).

  An undefined number (a recovery with no relevance pair) is ``null``, never ``NaN``.

  Args:
    report: an :class:`UpgradeReport`.
    **context: more top-level keys, JSON-serialisable (the command line adds the fit's record and the file names);
      they may not replace the report's own.

  Returns:
    The JSON text of :meth:`UpgradeReport.to_dict` with ``context``.

  Raises:
    ValueError: for a ``context`` key the report already has.
  """
  body = report.to_dict()
  clash = sorted(set(body) & set(context))
  if clash:
    raise ValueError(f"report_json: `context` keys {clash} are the report's own")
  return json.dumps(finite_or_none({**body, **context}), indent=2, allow_nan=False)


def _fmt(m: Measure) -> str:
  if not math.isfinite(m.value):
    return "n/a"
  return f"{m.value:.4f} [{m.low:.4f}, {m.high:.4f}]"


def report_markdown(report: UpgradeReport) -> str:
  """The report as a markdown page: the verdict first, then one row per measure with what it means.

  Args:
    report: an :class:`UpgradeReport`.

  Returns:
    The page's text.
  """
  m = report.map
  lines = [
    f"# Upgrade report: **{report.verdict}**",
    "",
    f"Primary measure `{report.primary}` = {_fmt(report.primary_measure)} (95 % interval over "
    f"{report.held_out_rows} held-out pairs) against the threshold {report.threshold:g}. Rule: bridge only "
    f"when the whole interval is at or above the threshold, re-index when it is wholly below, undecided when it "
    f"straddles it, not measurable when the measure cannot carry a verdict (the reasons below).",
    "",
  ]
  lines += [f"- {r.text}" + (" (blocks the verdict)" if r.blocks_verdict else "") for r in report.reasons]
  lines += [
    "",
    f"Map: {m.kind} {dict(m.choices)}, D {m.dims[1]} -> {m.dims[0]}, normalised: {m.normalize}; k = {report.k}, "
    f"metric {report.metric}; hubness correction: "
    + (f"CSLS with k = {m.hubness_k} over {m.hubness_rows} mapped rows" if m.hubness_k is not None else "none")
    + ".",
    "",
    "| measure | value [95 % interval] | rows | chance | what it means |",
    "|---|---|---|---|---|",
  ]
  for name, measure in report.metrics.items():
    chance = f"{measure.chance:.3g}" if measure.chance is not None else ""
    if measure.pool is not None:
      chance += f" (pool {measure.pool})"
    lines.append(f"| {name} | {_fmt(measure)} | {measure.n} | {chance} | {measure.means} |")
  return "\n".join(lines) + "\n"


def report_summary(report: UpgradeReport) -> list[str]:
  """A few printed lines: the verdict and the measures a reader decides on.

  Args:
    report: an :class:`UpgradeReport`.

  Returns:
    The lines, the verdict first.
  """
  lines = [
    f"verdict: {report.verdict} ({report.primary} {_fmt(report.primary_measure)} vs threshold {report.threshold:g})"
  ]
  for name in (
    "recall_recovery",
    "neighbour_agreement",
    "own_vector_hit_rate",
    "alignment_cosine",
    "consumer_accuracy_old",
    "consumer_accuracy_bridged",
    "consumer_negative_flips",
  ):
    if name in report.metrics and name != report.primary:
      lines.append(f"  {name}: {_fmt(report.metrics[name])}")
  lines += [f"  note: {r.text}" for r in report.reasons]
  return lines
