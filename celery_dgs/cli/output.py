"""Text and JSON formatting for ``celery dgs``: aligned tables, optional colour
(times and durations as text: :mod:`celery_dgs.ops.timetext`).

JSON output is stable: fixed keys (always present, ``null`` when unknown),
times as ISO-8601 UTC strings (``2026-01-02T03:04:05.123+00:00``), durations and
ages as seconds (``*_s`` keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import click

from ..ops.timetext import NONE

#: Colour of each condition and run outcome (when colour is on).
STYLES: dict[str, dict[str, Any]] = {
    "ERROR": {"fg": "red", "bold": True},
    "WARNING": {"fg": "yellow", "bold": True},
    "OK": {"fg": "green"},
    "success": {"fg": "green"},
    "running": {"fg": "cyan"},
    "failure": {"fg": "red"},
    "partial_failure": {"fg": "red"},
    "terminated": {"fg": "red"},
    "lost": {"fg": "red"},
    "cancelled": {"fg": "yellow"},
    "stolen": {"fg": "yellow"},
    "yielded": {"fg": "yellow"},
    "self_fenced": {"fg": "yellow"},
    "skipped": {"dim": True},
    "pending": {"fg": "yellow"},
    "stale": {"fg": "yellow"},
    "takeable": {"fg": "red"},
}


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, and the style applied when colour is on."""

    text: str
    style: str | None = None


def seconds(delta: timedelta | None) -> float | None:
    return None if delta is None else round(delta.total_seconds(), 3)


def percent(progress: float | None) -> str:
    return NONE if progress is None else f"{progress * 100:.0f}%"


def first_line(text: str | None, width: int = 60) -> str:
    if not text:
        return NONE
    line = text.strip().splitlines()[0] if text.strip() else NONE
    return line if len(line) <= width else line[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell | str]], *, color: bool) -> str:
    """Columns left-aligned to the widest cell, two spaces apart; styles only
    when ``color`` (padding is computed on the plain text, so colour never
    breaks the alignment)."""
    cells = [[c if isinstance(c, Cell) else Cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell.text))

    def line(row: Sequence[Cell], bold: bool = False) -> str:
        parts = []
        for i, cell in enumerate(row):
            padded = cell.text if i == len(row) - 1 else cell.text.ljust(widths[i])
            style = STYLES.get(cell.style or "") if color else None
            if color and bold:
                padded = click.style(padded, bold=True)
            elif style:
                padded = click.style(padded, **style)
            parts.append(padded)
        return "  ".join(parts).rstrip()

    out = [line([Cell(h) for h in headers], bold=True)]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def styled(text: str, style: str, *, color: bool) -> str:
    spec = STYLES.get(style)
    return click.style(text, **spec) if color and spec else text


def dump_json(data: Any) -> str:
    """Indented JSON, keys in the order built (each command builds them in a
    fixed order), non-ASCII kept."""
    return json.dumps(data, indent=2, ensure_ascii=False)
