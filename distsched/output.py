"""Rendering for the CLI: plain tables laid out as kubectl lays them out (no box
drawing, no truncation, no wrapping, no colour), JSON/YAML for scripts, and progress bars
on stderr.

:func:`tabwrite` is Go's ``text/tabwriter`` (the writer behind ``kubectl get`` and
``kubectl describe``): cells end with a tab, a column is a run of consecutive lines that
have a cell in it, each cell of a column is padded to the column's widest cell plus
``padding`` (at least ``minwidth``); the last cell of a line belongs to no column and is
never padded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console()
err_console = Console(stderr=True)

GET_MINWIDTH = 6
GET_PADDING = 3
"""kubectl get's tabwriter (k8s.io/cli-runtime printers.GetNewTabWriter): minwidth 6,
padding 3, pad character ' '."""
DESCRIBE_MINWIDTH = 0
DESCRIBE_PADDING = 2
"""kubectl describe's tabwriter (tabbedString in describe.go): minwidth 0, padding 2."""


def tabwrite(text: str, *, minwidth: int = GET_MINWIDTH, padding: int = GET_PADDING) -> str:
    """``text`` aligned as Go's ``tabwriter.Writer`` with pad character ' ' and no flags
    aligns it (one flush: call it once per flushed segment)."""
    lines = [line.split("\t") for line in text.split("\n")]
    out: list[str] = []
    widths: list[int] = []

    def write_lines(line0: int, line1: int) -> None:
        for cells in lines[line0:line1]:
            parts = []
            for j, cell in enumerate(cells):
                if j < len(widths):
                    parts.append(cell + " " * (widths[j] - len(cell)))
                else:
                    parts.append(cell)
            out.append("".join(parts))

    def format_block(line0: int, line1: int) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write_lines(line0, this)
            line0 = this
            width = minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + padding)
                this += 1
            widths.append(width)
            format_block(line0, this)
            widths.pop()
            line0 = this
        write_lines(line0, line1)

    format_block(0, len(lines))
    return "\n".join(out)


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A header line and one line per row, as ``kubectl get`` prints them (no newline at
    the end)."""
    lines = ["\t".join(columns)]
    lines += ["\t".join("" if cell is None else str(cell) for cell in row) for row in rows]
    return tabwrite("\n".join(lines))


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """:func:`format_table` on stdout, after ``title`` on a line of its own if given."""
    if title:
        print(f"{title}:")
    print(format_table(columns, rows))


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def print_yaml(data: Any) -> None:
    print(yaml.safe_dump(data, sort_keys=False), end="")


def progress_bar(label: str, *, on: Console = err_console) -> Progress:
    """A bar with done/total and elapsed time (stderr by default, so stdout stays data)."""
    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=on
    )
