"""A query result as terminal text, CSV or JSON (``sofa-gui sql``)."""

from __future__ import annotations

import csv
import json

from ..names import visible
from .db import QueryResult, json_value

#: Widest cell in the text table; longer values end in "…" (CSV and JSON keep them whole).
CELL_WIDTH = 60


def cell_text(v) -> str:
    """A value as the text table and the app's result table show it."""
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e15 else repr(v)
    return visible(str(json_value(v)) if not isinstance(v, str) else v, one_line=True)


def result_text(res: QueryResult) -> list[str]:
    """Aligned columns (numbers right-aligned), then a line saying how many rows."""
    rows = [res.columns] + [[_cut(cell_text(v)) for v in r] for r in res.rows]
    numeric = [any(t in typ.upper() for t in ("INT", "DOUBLE", "FLOAT", "DECIMAL"))
               for typ in res.types]
    widths = [max(len(r[c]) for r in rows) for c in range(len(res.columns))]
    lines = []
    for k, row in enumerate(rows):
        cells = [cell.rjust(w) if numeric[c] and k else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    n = len(res.rows)
    more = " (more rows not shown: raise --max-rows)" if res.truncated else ""
    lines.append(f"({n:,} row{'s' if n != 1 else ''}{more})")
    return lines


def _cut(text: str) -> str:
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def write_csv(res: QueryResult, out) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(res.columns)
    for r in res.rows:
        w.writerow(["" if v is None else json_value(v) for v in r])


def write_json(res: QueryResult, out) -> None:
    json.dump(res.to_dict(), out, indent=1, allow_nan=False)
    out.write("\n")
