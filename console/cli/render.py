"""Plain-text output for the command line: aligned tables and JSON (no Textual here)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO


def print_json(data: Any, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append(indent + "  ".join(padded).rstrip())
    return "\n".join(lines)


def wrap_argv(argv: Sequence[str], indent: str = "    ", width: int = 96) -> str:
    """An argv as a shell command, one flag (with its value) per line when long."""
    import shlex

    tokens = [shlex.quote(token) for token in argv]
    groups: list[str] = []
    for token in tokens:
        if (
            groups
            and not token.startswith("-")
            and groups[-1].startswith("-")
            and " " not in groups[-1]
        ):
            groups[-1] += " " + token
        else:
            groups.append(token)
    if sum(len(g) + 1 for g in groups) <= width:
        return " ".join(groups)
    head = []
    rest = list(groups)
    while rest and not rest[0].startswith("--"):
        head.append(rest.pop(0))
    lines = [" ".join(head)] + [indent + group for group in rest]
    return " \\\n".join(lines)
