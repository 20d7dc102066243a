"""Run folders -> small committed summaries: the numbers the claims read, with where they came from.

A *group* is one run folder, or several that differ only in their seed, named ``NAME-s<seed>``: ``bc-quick-s1``,
``bc-quick-s2``, ... form the group ``bc-quick``. A group's summary holds, per measure of
:mod:`experiments.reproduction.measures`, the estimate and interval (for three or more runs: the mean over them and
its t-interval over the seeds, with each run's value; two runs give the mean and no interval), the command, the
data files (by name and SHA-256), the packages, the machine, the devices, the load beside each run and the git
commit of every run, and the figures copied beside it. Summaries are generated files: ``--check`` regenerates every
one whose runs are archived (:mod:`experiments.reproduction.archive`) and fails on any difference.
"""

import hashlib
import json
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from bcjax.files import write_atomic
from experiments.reproduction.archive import is_run, read_run
from experiments.reproduction.measures import EXTRACTORS, READS_RUN, Measured, t_interval

SEEDED = re.compile(r"^(?P<group>.+)-s(?P<seed>\d+)$")
FIGURES = ("figure2.png", "figure3.png", "figure4.png", "figure5.png", "figure2a.png", "figure2b.png", "scaling.png")
SUMMARY_VERSION = 2
# Version 1: summaries written before the runs were archived (no packages, data hashes or load recorded); read, and
# marked on the page as without run files, until their runs are redone.
READABLE_VERSIONS = (1, 2)


def group_name(run: Path) -> str:
  """The group a run folder belongs to: its name without a trailing ``-s<seed>``."""
  match = SEEDED.match(run.name)
  return match["group"] if match else run.name


def find_groups(runs: Path) -> dict[str, list[Path]]:
  """Every finished run folder under ``runs`` (one holding ``results.json``), grouped by :func:`group_name`."""
  if not runs.is_dir():
    raise FileNotFoundError(f"--runs {runs}: not a folder")
  groups: dict[str, list[Path]] = {}
  for path in sorted(runs.iterdir()):
    if path.is_dir() and is_run(path):
      groups.setdefault(group_name(path), []).append(path)
  if not groups:
    raise FileNotFoundError(f"--runs {runs}: no finished run folder (one holding config.json and results.json)")
  return groups


def _short(arg: str) -> str:
  """An absolute path as its last two parts, so a command reads the same on any machine."""
  if arg.startswith("/"):
    parts = Path(arg).parts
    return ".../" + "/".join(parts[-2:]) if len(parts) > 3 else arg
  return arg


def command(config: Mapping) -> str:
  """The run's command line without ``--out``, ``--no-progress`` and machine-specific path prefixes."""
  argv, shown, skip = list(config["argv"]), [], False
  for arg in argv:
    if skip:
      skip = False
      continue
    if arg in ("--out", "--resume"):
      skip = True
      continue
    if arg.startswith("--out=") or arg == "--no-progress":
      continue
    shown.append(_short(arg))
  return f"python -m experiments.{config['experiment']} " + " ".join(shown)


def _data_digest(data: list) -> str | None:
  """One SHA-256 over every input file's name and digest (None for a run that read no file)."""
  files = [f"{d['input']}/{f['path']}:{f['sha256']}" for d in data for f in d["files"]]
  return hashlib.sha256("\n".join(files).encode()).hexdigest()[:16] if files else None


def _provenance(config: Mapping, metrics: list[dict]) -> dict:
  p = config.get("provenance")
  if p is None:  # a run written before config.json recorded where it came from
    return {"commit": None, "dirty": None, "cpu": None, "devices": None, "started": None}
  out = {
    "commit": p["git"]["commit"],
    "dirty": p["git"]["dirty"],
    "cpu": f"{p['cpu']['model']} ({p['cpu']['cores']} cores)",
    "devices": f"{p['devices']['count']} × {p['devices']['kind']}",
    "started": p["started"],
  }
  if "packages" in p:  # recorded since the ledger kept its runs (issue 64)
    finished = [m for m in metrics if m.get("event") == "finished"]
    load = finished[-1].get("load", {}) if finished else {}
    out.update(
      packages=p["packages"],
      data=[{"input": d["input"], "package": d["package"], "files": len(d["files"])} for d in p["data"]],
      data_sha256=_data_digest(p["data"]),
      wall_seconds=load.get("wall_seconds"),
      other_cpu_share=load.get("other_cpu_share"),
      concurrent_runs=len(finished[-1].get("concurrent_runs", [])) if finished else None,
    )
  return out


def measure_json(m: Measured, per_run: list | None = None) -> dict:
  out = {"estimate": m.estimate, "low": m.low, "high": m.high, "over": m.over, "units": m.units}
  if m.note:
    out["note"] = m.note
  if m.censored is not None:
    out["censored"] = m.censored
  if m.status is not None:
    out["status"] = m.status
  if per_run is None and m.values is not None and m.units and m.units > 1:
    per_run = list(m.values)
  if m.pairs is not None:
    out["pairs"] = [list(p) for p in m.pairs]
  if m.bound is not None:
    out["bound"] = list(m.bound)
  if per_run is not None:
    out["per_run"] = per_run
  return out


def summarise_group(name: str, runs: Iterable[Path], figures: Path | None = None) -> dict:
  """The summary of one group (see the module docstring).

  Args:
    name: the group's name.
    runs: its run folders, plain or archived.
    figures: the page's figures folder: an archived run keeps no figures, so its summary names those copied there
      (``<group>-<figure>``) when the run folder has none.
  """
  runs = list(runs)
  files = [read_run(r) for r in runs]
  configs = [f.config for f in files]
  results = [f.results for f in files]
  experiments = {c["experiment"] for c in configs}
  if len(experiments) != 1:
    raise ValueError(f"group {name}: its runs are of different experiments {sorted(experiments)}")
  experiment = experiments.pop()
  if experiment not in EXTRACTORS:
    raise ValueError(f"group {name}: no measures are defined for experiment {experiment!r}")
  settings = [{k: v for k, v in c["config"].items() if k != "seed"} for c in configs]
  for run, s in zip(runs[1:], settings[1:]):
    if s != settings[0]:
      key = next(k for k in sorted(set(s) | set(settings[0])) if s.get(k) != settings[0].get(k))
      raise ValueError(
        f"group {name}: {run.name} differs from {runs[0].name} in {key} ({s.get(key)!r} vs {settings[0].get(key)!r}); "
        "the runs of a group may differ only in their seed"
      )
  extract = EXTRACTORS[experiment]
  if experiment in READS_RUN:
    extracted = [extract(f.results, f.metrics, f.config) for f in files]
  else:
    extracted = [extract(r) for r in results]
  measures = {}
  for key in sorted(set().union(*extracted)):
    values = [e[key].estimate if key in e else None for e in extracted]
    if len(runs) == 1:
      measures[key] = measure_json(extracted[0][key])
    elif None in values:  # a mean over the runs that have one would hide the others: none, and why
      notes = sorted({e[key].note or "not measured" for e in extracted if key in e and e[key].estimate is None})
      missing = sum(v is None for v in values)
      measures[key] = measure_json(
        Measured(None, note=f"{missing} of {len(values)} runs have none ({'; '.join(notes)})"), per_run=values
      )
    else:
      pooled = t_interval(values)
      censored = [e[key].censored for e in extracted if e[key].censored is not None]
      statuses = sorted({e[key].status for e in extracted if e[key].status})
      pooled = pooled._replace(
        censored=sum(censored) if censored else None,
        status="; ".join(statuses) if statuses else None,
      )
      measures[key] = measure_json(pooled, per_run=values)
  return {
    "version": SUMMARY_VERSION,
    "group": name,
    "experiment": experiment,
    "preset": configs[0].get("preset"),
    "seeds": [_seed(c["config"]) for c in configs],
    "commands": [command(c) for c in configs],
    "runs": [{"folder": f.name, **_provenance(f.config, f.metrics)} for f in files],
    "measures": measures,
    "figures": [
      f for f in FIGURES if (runs[0] / f).is_file() or (figures is not None and (figures / f"{name}-{f}").is_file())
    ],
  }


def write_summary(summary: dict, runs: list[Path], out: Path) -> Path:
  """Writes ``out/<group>.json`` and copies the first run's figures to ``out/../figures/<group>-<figure>``;
  replaces an earlier summary of the same group (the summaries are generated files)."""
  out.mkdir(parents=True, exist_ok=True)
  figures = out.parent / "figures"
  figures.mkdir(exist_ok=True)
  for figure in summary["figures"]:
    if (runs[0] / figure).is_file():
      shutil.copyfile(runs[0] / figure, figures / f"{summary['group']}-{figure}")
  path = out / f"{summary['group']}.json"
  write_atomic(path, (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode(), overwrite=True)
  return path


def load_summaries(folder: Path) -> dict[str, dict]:
  """Every ``<group>.json`` summary in ``folder``, by group."""
  out = {}
  for path in sorted(folder.glob("*.json")):
    summary = json.loads(path.read_text())
    if summary.get("version") not in READABLE_VERSIONS:
      raise ValueError(f"{path}: summary version {summary.get('version')!r}, expected one of {READABLE_VERSIONS}")
    out[summary["group"]] = summary
  return out


def _seed(config: Mapping) -> int | str | None:
  """A run's seed, or, for a run that loops over its own seeds (``seeds``: how many, from 0), their range."""
  seed = config.get("seed")
  count = config.get("seeds")
  if seed is None and isinstance(count, int) and count >= 1:
    return "0" if count == 1 else f"0–{count - 1} (in one run)"
  return seed
