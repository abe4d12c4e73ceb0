"""A campaign file's numbers are finite and bounded, checked in one place (the spec,
console/bench/spec.py): `campaign FILE`, `--resume` of a stored spec and the TUI's chosen
cells all refuse NaN, infinities and absurd values with one line naming the key (issue 17,
F11). Real files on disk, the CLI in-process."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from console.bench.launch import create_run
from console.bench.request import CampaignRequest
from console.bench.spec import CampaignSpec, load_campaign
from console.core.errors import ConsoleError, ProfileError, UsageError
from tests.conftest import CliResult

BASE = 'name = "c"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\nvariants = ["off"]\n'


def campaign_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(BASE + extra + ("\n" if "requests" in extra else "\nrequests = 2\n"))
    return path


@pytest.mark.parametrize(
    ("extra", "key", "said"),
    [
        ("rates = [nan]", "rates[0]", "nan is not a finite number"),
        ("rates = [1, inf]", "rates[1]", "inf is not a finite number"),
        ("rates = [-inf]", "rates[0]", "-inf is not a finite number"),
        ("rates = [0]", "rates[0]", "greater than 0"),
        ("rates = [1e9]", "rates[0]", "less than or equal to 1000000"),
        ("duration_s = nan", "duration_s", "nan is not a finite number"),
        ("duration_s = inf", "duration_s", "inf is not a finite number"),
        ("duration_s = 1e12", "duration_s", "less than or equal to 2592000"),
        ("range_ratio = nan", "range_ratio", "nan is not a finite number"),
        ("requests = 1000000000000000000", "requests", "less than or equal to"),
        ("warmup = 100000000", "warmup", "less than or equal to 100000"),
        ("input_len = 50000000", "input_len", "less than or equal to 2000000"),
    ],
)
def test_a_campaign_file_refuses_a_bad_number_with_one_line_naming_the_key(
    cli: Callable[..., CliResult], tmp_path: Path, extra: str, key: str, said: str
) -> None:
    path = campaign_file(tmp_path, extra)
    with pytest.raises(ProfileError) as caught:
        load_campaign(path)
    assert f"{key}: " in caught.value.message, caught.value.message
    assert said in caught.value.message, caught.value.message
    out = tmp_path / "runs"
    result = cli("campaign", "--demo", str(path), "--out", str(out))
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ddconsole: error: {path}: {key}: "), lines[0]
    assert "internal error" not in result.err
    assert not out.exists() or not any(out.iterdir())  # refused before a run folder


def test_good_numbers_still_load(tmp_path: Path) -> None:
    spec = load_campaign(campaign_file(tmp_path, "rates = [0.5, 1000000]\nduration_s = 30"))
    assert spec.rates == [0.5, 1e6]
    assert spec.duration_s == 30.0


def test_a_stored_spec_with_nan_is_refused_on_resume(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """A run written by an older ddconsole (which let `rates = [nan]` through) is refused by
    `--resume` through the same spec check, before anything is launched."""
    path = campaign_file(tmp_path, "rates = [2]")
    root = tmp_path / "runs"
    run = create_run(CampaignRequest.from_file(path), runs_root=root, name="c", demo=True)
    data = json.loads((run.path / "run.json").read_text())
    assert data["request"]["spec"]["rates"] == [2.0]
    data["request"]["spec"]["rates"] = [math.nan]
    (run.path / "run.json").write_text(json.dumps(data))
    with pytest.raises(ConsoleError):
        CampaignRequest.from_json(data["request"])
    result = cli("campaign", "--demo", str(path), "--resume", run.run_id, "--out", str(root))
    assert result.code != 0
    assert "internal error" not in result.err
    assert "rates" in result.err
    assert "finite number" in result.err


def test_changes_and_chosen_cells_go_through_the_same_check() -> None:
    spec = CampaignSpec(name="c", profile="p", layouts=["tp1"], variants=["off"])
    with pytest.raises(UsageError, match=r"^rates\[0\]: nan is not a finite number$"):
        spec.with_changes(rates=[math.nan])
    with pytest.raises(UsageError, match="less than or equal to 1000000000000"):
        CampaignRequest.from_cells((("p", "tp1", "off"),), concurrency=(1,), requests=10**13)


def test_a_stored_spec_is_checked_in_one_line() -> None:
    stored = CampaignSpec(name="c", profile="p", layouts=["tp1"], variants=["off"]).model_dump(
        mode="json"
    )
    assert CampaignSpec.from_stored(stored).name == "c"
    with pytest.raises(UsageError) as caught:
        CampaignSpec.from_stored({**stored, "rates": [math.inf]}, "run x")
    assert caught.value.message == "run x: rates[0]: inf is not a finite number"


def test_the_cli_and_campaign_files_bound_rates_alike() -> None:
    from console.bench.spec import RATE_MAX
    from console.cli.argtypes import rate_max

    assert rate_max == RATE_MAX
