"""`run.json` as a type: what a run was asked to do, where it ran, its cells and its attempts.

Written when the run is created (`RunDir.create`: id, name, creation time; `launch.create_run`
or `sglang_import`: the request, workload, levels or imported levels), and updated as it runs
(`campaign`: attempts, status, cells; `runner`: the fingerprint, a start failure). Every
reader (`summary`, `listing`, `launch`, `runner`, `campaign`) gets a `RunMeta`, never the dict.

The file keeps its shape: `to_json` writes the keys older versions wrote (sorted, as
`atomic_write_json` does), keys this type does not model are kept in `extra` and written
back, and optional keys are written only when set (every reader takes an absent key as
null, so `{"error": null}` reads and rewrites as no `error`). A `run.json` that is not an
object, or has a field of the wrong type, is a `ValueError` naming the key; `RunDir.meta`
turns it into a ConsoleError naming the file.

`request`, `spec`, `workload`, `levels` and `fingerprint` are JSON documents kept verbatim:
the typed request's own JSON (read back by `request.request_from_json`), the campaign spec
older runs resume from, what summaries show unread, and the host's fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from console.bench.results import (
    NUMBER,
    CellMeta,
    JsonDict,
    JsonObject,
    LevelSummary,
    json_field,
)

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One start of the run's runner (a `--resume` adds one)."""

    attempt: int
    pid: int | None = None
    started_wall: float | None = None

    def to_json(self) -> JsonDict:
        return {"attempt": self.attempt, "pid": self.pid, "started_wall": self.started_wall}

    @classmethod
    def from_json(cls, data: object, where: str) -> Attempt:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: not an object")
        started = json_field(data, "started_wall", NUMBER, f"{where}.")
        return cls(
            attempt=json_field(data, "attempt", (int,), f"{where}.") or 1,
            pid=json_field(data, "pid", (int,), f"{where}."),
            started_wall=None if started is None else float(started),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMeta:
    """A run's `run.json`."""

    run_id: str = ""
    name: str | None = None
    created_wall: float | None = None
    kind: str | None = None
    status: str = "created"
    cells: tuple[CellMeta, ...] = ()
    demo: bool | None = None
    """Whether the run belongs to demo mode (older runs: their fingerprint says)."""
    request: JsonObject | None = None
    workload: JsonObject | None = None
    levels: tuple[JsonObject, ...] | None = None
    """A bench run's levels as planned (`LevelSpec` fields)."""
    spec: JsonObject | None = None
    campaign_file: str | None = None
    fingerprint: JsonObject | None = None
    argv: tuple[str, ...] | None = None
    """The command line that made the run (`bench` from the CLI)."""
    attempts: tuple[Attempt, ...] = ()
    pid: int | None = None
    ended_wall: float | None = None
    time_scale: float | None = None
    """Server seconds per real second, when a simulator ran faster than life."""
    error: str | None = None
    """Why the run never started."""
    source_file: str | None = None
    """The bench_serving JSONL an imported run came from."""
    imported_levels: tuple[LevelSummary, ...] = ()
    extra: JsonObject = field(default_factory=dict)
    """Keys this version does not model, kept as they were."""

    KEYS: ClassVar[tuple[str, ...]] = (
        "schema_version", "run_id", "name", "created_wall", "kind", "status", "cells", "demo",
        "request", "workload", "levels", "spec", "campaign_file", "fingerprint", "argv",
        "attempts", "pid", "ended_wall", "time_scale", "error", "source_file",
        "imported_levels",
    )  # fmt: skip

    @property
    def is_demo(self) -> bool:
        """Its own `demo` key, else its fingerprint's."""
        if self.demo is not None:
            return self.demo
        return bool((self.fingerprint or {}).get("demo"))

    def cell(self, cell_id: str) -> CellMeta | None:
        return next((c for c in self.cells if c.cell_id == cell_id), None)

    def with_cell(self, cell: CellMeta) -> RunMeta:
        """This run with `cell` replacing the cell of its id (or added last)."""
        from dataclasses import replace

        cells = list(self.cells)
        index = next((i for i, c in enumerate(cells) if c.cell_id == cell.cell_id), None)
        if index is None:
            cells.append(cell)
        else:
            cells[index] = cell
        return replace(self, cells=tuple(cells))

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "name": self.name,
            "created_wall": self.created_wall,
            "kind": self.kind,
            "status": self.status,
            "cells": [cell.to_json() for cell in self.cells],
        }
        optional: dict[str, object] = {
            "demo": self.demo,
            "request": self.request,
            "workload": self.workload,
            "levels": None if self.levels is None else list(self.levels),
            "spec": self.spec,
            "campaign_file": self.campaign_file,
            "fingerprint": self.fingerprint,
            "argv": None if self.argv is None else list(self.argv),
            "attempts": [a.to_json() for a in self.attempts] or None,
            "pid": self.pid,
            "ended_wall": self.ended_wall,
            "time_scale": self.time_scale,
            "error": self.error,
            "source_file": self.source_file,
            "imported_levels": [level.to_json() for level in self.imported_levels] or None,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_json(cls, data: object) -> RunMeta:
        """ValueError naming what is wrong: not an object, another schema version, or the
        key of a field of the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"not a JSON object but {_json_kind(data)}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"run schema {version!r} is not {SCHEMA_VERSION}; "
                "written by another ddconsole version"
            )

        def number(key: str) -> float | None:
            value = json_field(data, key, NUMBER, "")
            return None if value is None else float(value)

        def objects(key: str) -> list[Any]:
            return list(json_field(data, key, (list,), "") or [])

        levels = json_field(data, "levels", (list,), "")
        argv = json_field(data, "argv", (list,), "")
        imported = []
        for index, level in enumerate(objects("imported_levels")):
            if not isinstance(level, Mapping):
                raise ValueError(f"imported_levels[{index}]: not an object")
            imported.append(LevelSummary.from_json(level))
        return cls(
            run_id=json_field(data, "run_id", (str,), "") or "",
            name=json_field(data, "name", (str,), ""),
            created_wall=number("created_wall"),
            kind=json_field(data, "kind", (str,), ""),
            status=json_field(data, "status", (str,), "") or "unknown",
            cells=tuple(
                CellMeta.from_json(cell, f"cells[{i}].") for i, cell in enumerate(objects("cells"))
            ),
            demo=json_field(data, "demo", (bool,), ""),
            request=json_field(data, "request", (dict,), ""),
            workload=json_field(data, "workload", (dict,), ""),
            levels=None if levels is None else tuple(_objects(levels, "levels")),
            spec=json_field(data, "spec", (dict,), ""),
            campaign_file=json_field(data, "campaign_file", (str,), ""),
            fingerprint=json_field(data, "fingerprint", (dict,), ""),
            argv=None if argv is None else tuple(str(a) for a in argv),
            attempts=tuple(
                Attempt.from_json(a, f"attempts[{i}]") for i, a in enumerate(objects("attempts"))
            ),
            pid=json_field(data, "pid", (int,), ""),
            ended_wall=number("ended_wall"),
            time_scale=number("time_scale"),
            error=json_field(data, "error", (str,), ""),
            source_file=json_field(data, "source_file", (str,), ""),
            imported_levels=tuple(imported),
            extra={k: v for k, v in data.items() if k not in cls.KEYS},
        )


def _objects(items: Sequence[object], key: str) -> list[JsonObject]:
    out = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"{key}[{index}]: not an object")
        out.append(item)
    return out


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else type(value).__name__
