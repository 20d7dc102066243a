"""Configs become flags: a frozen dataclass's fields declared with :func:`option` become validated command-line
flags, presets are instances of the dataclass, and a flag overrides its field only when given."""

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence

from experiments.harness._errors import UsageError


def option(
  default=dataclasses.MISSING,
  *,
  help: str,
  flag: str | None = None,
  low: float | None = None,
  high: float | None = None,
  low_open: bool = False,
  high_open: bool = False,
  choices: Sequence | None = None,
  nonempty: bool = True,
):
  """A config field exposed as a flag. ``low``/``high`` bound numbers (closed unless ``*_open``), ``choices`` the
  allowed values; for tuple fields both apply to every element and ``nonempty`` refuses an empty list."""
  meta = {
    "help": help,
    "flag": flag,
    "low": low,
    "high": high,
    "low_open": low_open,
    "high_open": high_open,
    "choices": None if choices is None else tuple(choices),
    "nonempty": nonempty,
  }
  if isinstance(default, (list, dict, set)):
    raise TypeError("option: use a tuple default (configs are frozen)")
  return dataclasses.field(default=default, metadata={"option": meta})


def _options(config_cls) -> list[tuple[dataclasses.Field, dict]]:
  return [(f, f.metadata["option"]) for f in dataclasses.fields(config_cls) if "option" in f.metadata]


def flag_name(field: dataclasses.Field) -> str:
  return field.metadata["option"]["flag"] or "--" + field.name.replace("_", "-")


def _element_type(annotation):
  """(element type, is_tuple, optional) of a field annotation such as ``int``, ``tuple[float, ...]``, ``str | None``."""
  optional = False
  origin = typing.get_origin(annotation)
  if origin in (typing.Union, types.UnionType):
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional, annotation = True, args[0]
    origin = typing.get_origin(annotation)
  if origin is tuple:
    return typing.get_args(annotation)[0], True, optional
  return annotation, False, optional


def _range_text(meta: dict) -> str:
  if meta["choices"] is not None:
    return "one of " + ", ".join(map(str, meta["choices"]))
  parts = []
  if meta["low"] is not None:
    parts.append(f"{'>' if meta['low_open'] else '>='} {meta['low']:g}")
  if meta["high"] is not None:
    parts.append(f"{'<' if meta['high_open'] else '<='} {meta['high']:g}")
  return " and ".join(parts)


def add_config_flags(parser: argparse.ArgumentParser, config_cls) -> None:
  """One flag per :func:`option` field; its default is the preset's, so a flag left out changes nothing."""
  group = parser.add_argument_group("settings (override the preset)")
  for field, meta in _options(config_cls):
    kind, is_tuple, _ = _element_type(field.type)
    allowed = _range_text(meta)
    text = meta["help"] + (
      f" ({'comma-separated, each ' if is_tuple else ''}{allowed})"
      if allowed
      else " (comma-separated)"
      if is_tuple
      else ""
    )
    if kind is bool and not is_tuple:
      group.add_argument(
        flag_name(field), dest=field.name, action=argparse.BooleanOptionalAction, default=None, help=text
      )
    else:
      group.add_argument(flag_name(field), dest=field.name, default=None, metavar=field.name.upper(), help=text)


def _parse_value(field: dataclasses.Field, text: str):
  kind, is_tuple, optional = _element_type(field.type)
  meta = field.metadata["option"]
  name = flag_name(field)

  def one(item: str):
    item = item.strip()
    if optional and item.lower() == "none":
      return None
    try:
      if kind is bool:
        if item.lower() not in ("true", "false", "1", "0"):
          raise ValueError(item)
        return item.lower() in ("true", "1")
      return kind(item)
    except ValueError:
      raise UsageError(
        name,
        f"must be {'comma-separated ' if is_tuple else 'a '}{kind.__name__}"
        f"{' values' if is_tuple else ''}, got {text!r}",
      ) from None

  if not is_tuple:
    return one(text)
  values = tuple(one(item) for item in text.split(",") if item.strip())
  if not values and meta["nonempty"]:
    raise UsageError(name, f"needs at least one value, got {text!r}")
  return values


def check_field(field: dataclasses.Field, value) -> None:
  """Raises :class:`UsageError` when ``value`` is outside the field's declared range or choices."""
  meta = field.metadata["option"]
  _, is_tuple, _ = _element_type(field.type)
  name = flag_name(field)
  values = value if is_tuple else (value,)
  if is_tuple and not values and meta["nonempty"]:
    raise UsageError(name, "needs at least one value")
  for v in values:
    if v is None:
      continue
    if meta["choices"] is not None and v not in meta["choices"]:
      raise UsageError(name, f"must be {_range_text(meta)}; got {v!r}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
      if v != v:  # NaN
        raise UsageError(name, f"must be a number ({_range_text(meta) or 'finite'}), got {v}")
      low, high = meta["low"], meta["high"]
      if (low is not None and (v < low or (meta["low_open"] and v == low))) or (
        high is not None and (v > high or (meta["high_open"] and v == high))
      ):
        raise UsageError(name, f"must be {_range_text(meta)}, got {v:g}")


def apply_flags(args: argparse.Namespace, cfg):
  """The preset ``cfg`` with every given flag applied, every option field validated."""
  changes = {}
  for field, _ in _options(type(cfg)):
    given = getattr(args, field.name, None)
    if given is not None:
      changes[field.name] = given if isinstance(given, bool) else _parse_value(field, given)
  cfg = dataclasses.replace(cfg, **changes)
  for field, _ in _options(type(cfg)):
    check_field(field, getattr(cfg, field.name))
  return cfg


def given_positive_int(args: argparse.Namespace, name: str) -> int | None:
  """The value of flag ``name`` when it was given as a positive integer, else None: for presets whose other fields
  follow a flag (a schedule that scales with ``--epochs``). An invalid value is left to the range check."""
  text = getattr(args, name, None)
  return int(text) if text is not None and text.strip().isdigit() and int(text) >= 1 else None


def parse_config(
  parser: argparse.ArgumentParser,
  argv,
  config_cls,
  preset: Callable[[argparse.Namespace], object],
  check: Callable | None = None,
):
  """Parses ``argv`` into ``(args, cfg)``: the preset, the flags over it, the ranges and ``check(args, cfg)``; any
  :class:`UsageError` exits with status 2 before anything is written. For commands without a run directory
  (the benchmarks)."""
  add_config_flags(parser, config_cls)
  args = parser.parse_args(argv)
  try:
    cfg = apply_flags(args, preset(args))
    if check is not None:
      check(args, cfg)
  except UsageError as e:
    parser.error(str(e))
  return args, cfg
