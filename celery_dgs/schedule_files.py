"""Runtime schedules in files: JSON lines and CSV, read by ``celery dgs import``
and written by ``celery dgs export``.

* **JSON lines**: one JSON object per line, with the fields of a declaration
  (``{"name": "tasks.scrape@example.org", "period": 3600, "args": ["https://example.org"]}``).
  Blank lines and lines starting with ``#`` are skipped.
* **CSV**: a header row of field names, then one schedule per row. The cells
  of ``name``, ``task``, ``configuration``, ``kind``, ``tz``, ``pool`` and the
  cron expression are text; any other cell is read as JSON when it parses
  (``3600``, ``true``, ``["a", 1]``, ``{"depth": 2}``) and as text otherwise;
  an empty cell leaves the field out (its default).

Each row keeps its line number in the file, so an error names the line.
:func:`export_row` writes the spec's own field names; a file written by
export imports back to the same schedules. A removed schedule (``export
--include-removed``) has ``"removed": true``: import skips such a row, so
it never brings a removed schedule back (:func:`without_removed`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

from .core.spec import ScheduleSpec
from .runtime_schedules import RowError

FORMATS = ("jsonl", "csv")
#: A row of a file with its line number, or the error that line gave.
NumberedRow = tuple[int, Mapping[str, Any] | RowError]
#: CSV columns kept as text (never decoded as JSON).
TEXT_COLUMNS = frozenset(
    {"name", "task", "configuration", "kind", "tz", "pool", "cron", "schedule", "cron_schedule"}
)


def format_of(path: str, given: str | None = None) -> str:
    """``given``, or the format the file name's extension says (``.csv``:
    CSV, anything else: JSON lines)."""
    if given is not None:
        if given not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {given!r}")
        return given
    return "csv" if path.lower().endswith(".csv") else "jsonl"


def read_rows(stream: Iterable[str], fmt: str) -> Iterator[NumberedRow]:
    """``(line, row)`` for each schedule in ``stream``; a line that is not a
    row (bad JSON, not an object) gives a :class:`RowError` in its place."""
    if fmt == "csv":
        yield from _read_csv(stream)
    else:
        yield from _read_jsonl(stream)


def _read_jsonl(stream: Iterable[str]) -> Iterator[NumberedRow]:
    for line, text in enumerate(stream, start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            row = json.loads(text)
        except ValueError as exc:
            yield line, RowError(line, "?", "json", f"not valid JSON: {exc}")
            continue
        except RecursionError:
            yield line, RowError(line, "?", "json", "not valid JSON: nested too deeply")
            continue
        if not isinstance(row, dict):
            yield line, RowError(line, "?", "json", f"must be a JSON object, got {text[:60]!r}")
            continue
        yield line, row


def _read_csv(stream: Iterable[str]) -> Iterator[NumberedRow]:
    reader = csv.reader(stream)
    header: list[str] | None = None
    for cells in reader:
        line = reader.line_num
        if header is None:
            header = [c.strip() for c in cells]
            continue
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            why = f"{len(cells)} cells, but the header names {len(header)} columns"
            yield line, RowError(line, "?", "csv", why)
            continue
        pairs = zip(header, cells, strict=False)  # missing cells at the end: left out
        yield line, {key: cell_value(key, value) for key, value in pairs if value.strip() != ""}


def cell_value(column: str, value: str) -> Any:
    """A CSV cell (or a ``--set FIELD=VALUE`` value) of ``column``: text for
    :data:`TEXT_COLUMNS`, else JSON when it parses, else text."""
    if column in TEXT_COLUMNS:
        return value.strip()
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


#: The field that marks a removed schedule's row (``export --include-removed``).
REMOVED_FIELD = "removed"


def export_row(spec: ScheduleSpec, *, removed: bool = False) -> dict[str, Any]:
    """The spec as an import row: ``name`` first, then its own fields, and
    ``"removed": true`` for a removed schedule."""
    data = spec.to_dict()
    data.pop("format", None)
    return {"name": spec.name, **data, **({REMOVED_FIELD: True} if removed else {})}


def without_removed(rows: Iterable[NumberedRow], skipped: list[str]) -> Iterator[NumberedRow]:
    """``rows`` less those marked removed (their names appended to
    ``skipped``); a ``removed`` cell that is not true or false is an error of
    its row."""
    for line, row in rows:
        if isinstance(row, RowError) or REMOVED_FIELD not in row:
            yield line, row
            continue
        flag, rest = row[REMOVED_FIELD], {k: v for k, v in row.items() if k != REMOVED_FIELD}
        name = str(rest.get("name") or rest.get("task") or "?")
        if flag is True:
            skipped.append(name)
        elif flag is False:
            yield line, rest
        else:
            yield line, RowError(line, name, REMOVED_FIELD, f"must be true or false, got {flag!r}")


def write_rows(
    stream: IO[str], fmt: str, specs: Iterable[ScheduleSpec], removed: Iterable[str] = ()
) -> int:
    """Write ``specs`` to ``stream`` in ``fmt`` (those named in ``removed``
    marked so); returns how many."""
    gone = set(removed)
    entries = [(s, s.name in gone) for s in specs]
    return write_entries(stream, fmt, lambda: iter(entries))


def write_entries(
    stream: IO[str], fmt: str, entries: Callable[[], Iterable[tuple[ScheduleSpec, bool]]]
) -> int:
    """Write each ``(spec, removed)`` of ``entries()`` to ``stream`` in ``fmt``,
    one at a time; returns how many. CSV's header is every column any row has,
    so for CSV ``entries()`` is read twice (first for the columns): a caller
    that streams them from the store holds one row at a time either way."""
    count = 0
    if fmt == "csv":
        columns = list(
            dict.fromkeys(key for s, gone in entries() for key in export_row(s, removed=gone))
        )
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(columns)
        for spec, gone in entries():
            row = export_row(spec, removed=gone)
            writer.writerow([_csv_cell(c, row.get(c)) for c in columns])
            count += 1
    else:
        for spec, gone in entries():
            stream.write(json.dumps(export_row(spec, removed=gone), sort_keys=False) + "\n")
            count += 1
    return count


def _csv_cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column in TEXT_COLUMNS:
        return str(value)
    return json.dumps(value)
