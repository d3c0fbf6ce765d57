"""Rendering: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def to_json(data: Any, indent: int | None = 2) -> str:
    return json.dumps(data, indent=indent, default=_default, sort_keys=False)


def print_json(data: Any, stream: TextIO | None = None) -> None:
    print(to_json(data), file=stream or sys.stdout)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], header: bool = True) -> str:
    """A plain, aligned text table (no colours, safe to pipe into grep); `header=False` leaves the titles out."""
    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], len(value))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()] if header else []
    for row in body:
        lines.append("  ".join(v.ljust(widths[i]) for i, v in enumerate(row)).rstrip())
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], stream: TextIO | None = None) -> None:
    print(table(headers, rows), file=stream or sys.stdout)


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """Key/value lines: `Status    InService`."""
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k.ljust(width)}  {cell(v)}" for k, v in pairs)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
