"""`run.json` as `RunMeta`: the fixture runs read and write back to the same document, and a
run.json of the wrong shape is a message naming the file and the key, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.bench.results import CellMeta
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.core.errors import ConsoleError

RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"


def without_nulls(value: Any) -> Any:
    """The document as every reader sees it: an absent key reads as null."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("run_id", sorted(p.name for p in RUNS.iterdir() if p.is_dir()))
def test_a_fixture_run_json_reads_and_writes_back_the_same(run_id: str, tmp_path: Path) -> None:
    original = json.loads((RUNS / run_id / "run.json").read_text())
    meta = RunMeta.from_json(original)
    assert meta.kind == "campaign"
    assert meta.cells
    assert meta.attempts
    assert all(isinstance(cell, CellMeta) for cell in meta.cells)
    written = meta.to_json()
    # Only null-valued keys (a cell's `reason`, ...) are dropped; everything else is kept,
    # the server plans and /server_info documents verbatim.
    assert without_nulls(written) == without_nulls(original)
    assert RunMeta.from_json(written) == meta
    # Through the folder: written by RunDir as run.json, read back the same.
    run = RunDir(tmp_path)
    run.write_meta(meta)
    assert run.meta() == meta


def test_unknown_keys_are_kept(tmp_path: Path) -> None:
    data = json.loads((RUNS / sorted(p.name for p in RUNS.iterdir())[0] / "run.json").read_text())
    data["future_key"] = {"a": 1}
    data["cells"][0]["future_cell_key"] = [1, 2]
    written = RunMeta.from_json(data).to_json()
    assert written["future_key"] == {"a": 1}
    assert written["cells"][0]["future_cell_key"] == [1, 2]


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ([1, 2, 3], "not a JSON object but an array"),
        (7, "not a JSON object but a number"),
        ({"schema_version": 1, "status": 3}, "status: int 3 is not a string"),
        ({"schema_version": 1, "cells": {"a": 1}}, "cells: dict"),
        ({"schema_version": 1, "cells": [5]}, "cells[0]: not an object"),
        ({"schema_version": 1, "cells": [{"cell_id": "c", "gpus": "0"}]}, "cells[0].gpus"),
        ({"schema_version": 1, "created_wall": "yesterday"}, "created_wall: str"),
        ({"schema_version": 1, "attempts": [{"pid": "x"}]}, "attempts[0].pid"),
        ({"schema_version": 2}, "run schema 2 is not 1"),
    ],
)
def test_a_run_json_of_the_wrong_shape_names_the_file_and_the_key(
    tmp_path: Path, document: object, says: str
) -> None:
    (tmp_path / "run.json").write_text(json.dumps(document))
    with pytest.raises(ConsoleError) as caught:
        RunDir(tmp_path).meta()
    assert str(tmp_path / "run.json") in caught.value.message
    assert says in caught.value.message
