"""Draws docs/architecture.svg from the code itself: bcjax's tiers (``bcjax._extras.TIERS``) as bands, each public
package as a box, and an arrow for every import between two packages, read from the source by ``ast``.

Run ``python docs/architecture.py`` after a change of the imports or the tiers; ``--check`` fails when the committed
picture differs from the one the code gives (tests/test_docs.py runs it).
"""

import ast
import sys
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "architecture.svg"

# What each tier installs with (the band's second line).
INSTALL = {
  "core": "pip install bcjax: jax, numpy, optax",
  "support": "data, models: pip install 'bcjax[models]' (flax, jraph, dm-pix); files, parallel, sentence: the core",
  "product": "the core install; the vector stores: pip install 'bcjax[stores]'",
}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
  """Each bcjax package or private helper module -> the other ones it imports (module-level or not)."""
  edges: dict[str, set[str]] = {}
  for path in sorted((root / "bcjax").rglob("*.py")):
    parts = path.relative_to(root / "bcjax").with_suffix("").parts
    source = parts[0]
    if source == "__init__":
      continue  # the flat namespace re-exports every package
    edges.setdefault(source, set())
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      targets = []
      if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("bcjax"):
        targets = [f"bcjax.{a.name}" for a in node.names] if node.module == "bcjax" else [node.module]
      elif isinstance(node, ast.Import):
        targets = [a.name for a in node.names if a.name.startswith("bcjax.")]
      for target in targets:
        name = target.split(".")[1]
        if name != source:
          edges[source].add(name)
  return edges


def _box(x: float, y: float, w: float, h: float, text: str, fill: str) -> str:
  return (
    f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="6" fill="{fill}" stroke="#333"/>'
    f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 5:.0f}" text-anchor="middle" font-size="15">{escape(text)}</text>'
  )


def draw(tiers: Mapping[str, tuple[str, ...]], edges: Mapping[str, set[str]]) -> str:
  """The SVG text: the tiers as bands bottom up, package boxes, import arrows between packages."""
  width, band_h, box_w, box_h, gap = 980, 150, 140, 40, 30
  order = list(tiers)  # bottom up
  helpers = sorted(name for name in edges if name.startswith("_"))
  height = band_h * (len(order) + 1) + 20
  centre: dict[str, tuple[float, float]] = {}
  parts = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">',
    '<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
    'orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#555"/></marker></defs>',
  ]
  fills = {"core": "#dcecff", "support": "#e6f5e1", "product": "#fdebd3"}
  for level, tier in enumerate(order):
    top = height - band_h * (level + 2) - 10
    parts.append(f'<rect x="5" y="{top}" width="{width - 10}" height="{band_h - 10}" fill="#fafafa" stroke="#bbb"/>')
    parts.append(f'<text x="15" y="{top + 22}" font-size="16" font-weight="bold">{tier}</text>')
    parts.append(f'<text x="15" y="{top + 42}" font-size="12" fill="#444">{escape(INSTALL.get(tier, ""))}</text>')
    names = tiers[tier]
    row_w = len(names) * box_w + (len(names) - 1) * gap
    for i, name in enumerate(names):
      x = (width - row_w) / 2 + i * (box_w + gap)
      y = top + 75
      parts.append(_box(x, y, box_w, box_h, f"bcjax.{name}", fills.get(tier, "#eee")))
      centre[name] = (x + box_w / 2, y + box_h / 2)
  top = height - band_h - 10
  parts.append(f'<rect x="5" y="{top}" width="{width - 10}" height="{band_h - 10}" fill="#fafafa" stroke="#bbb"/>')
  parts.append(f'<text x="15" y="{top + 22}" font-size="16" font-weight="bold">private helpers</text>')
  parts.append(
    f'<text x="15" y="{top + 42}" font-size="12" fill="#444">used by every tier (arrows to them left out)</text>'
  )
  parts.append(_box(width / 2 - 400, top + 75, 800, box_h, "bcjax." + "  ".join(helpers), "#eee"))
  for source in sorted(edges):
    for target in sorted(edges[source]):
      if source in centre and target in centre:
        (x1, y1), (x2, y2) = centre[source], centre[target]
        same_row = abs(y1 - y2) < 1
        start_y = y1 - box_h / 2 if same_row else (y1 + box_h / 2 if y2 > y1 else y1 - box_h / 2)
        end_y = y2 - box_h / 2 if same_row else (y2 - box_h / 2 if y2 > y1 else y2 + box_h / 2)
        bend = f" Q{(x1 + x2) / 2:.0f} {min(start_y, end_y) - 30:.0f}" if same_row else ""
        path = (
          f"M{x1:.0f} {start_y:.0f}{bend} {x2:.0f} {end_y:.0f}"
          if bend
          else f"M{x1:.0f} {start_y:.0f}L{x2:.0f} {end_y:.0f}"
        )
        parts.append(f'<path d="{path}" fill="none" stroke="#555" stroke-width="1.4" marker-end="url(#a)"/>')
  parts.append("</svg>")
  return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
  sys.path[:0] = [str(ROOT), str(ROOT / "docs")]
  from _generated_page import write_or_check

  from bcjax import _extras

  return write_or_check(argv, OUT, draw(_extras.TIERS, import_graph()), "the import graph")


if __name__ == "__main__":
  sys.exit(main(sys.argv))
