"""Numeric flags refuse NaN, infinities, negatives and absurd values with one line naming
the flag, exit status 2, no traceback; bounded imports (issue 17, F11 and F4)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.units import parse_index_set
from tests.conftest import REPO, CliResult

URL = "http://127.0.0.1:9"  # never contacted: every case fails while parsing
BENCH = ["bench", "--url", URL]

CASES: list[tuple[list[str], str, str]] = [
    # (argv before the flag, flag, bad value)
    *[(BENCH, "--duration", v) for v in ("nan", "inf", "-1", "0", "1e12")],
    *[(BENCH, "--rate", v) for v in ("nan", "inf", "-inf", "1,nan", "0", "1e9")],
    *[(BENCH, "--warmup", v) for v in ("-5", "nan", "100000000")],
    *[(BENCH, "--requests", v) for v in ("0", "-1", "1e3")],
    *[(BENCH, "--input-len", v) for v in ("0", "50000000")],
    (BENCH, "--output-len", "-3"),
    (BENCH, "--range-ratio", "nan"),
    (BENCH, "--vocab-size", "10000000000"),
    *[(["down", "x"], "--grace", v) for v in ("nan", "-5", "inf", "1e9")],
    *[(["restart", "x"], "--grace", v) for v in ("nan", "-5")],
    *[(["up", "p"], "--timeout", v) for v in ("nan", "-1", "0", "inf")],
    *[(["metrics", "--once"], "--interval", v) for v in ("nan", "0", "0.000001", "-1", "1e9")],
    *[(["record"], "--duration", v) for v in ("nan", "-1", "0", "inf")],
    (["record"], "--interval", "0.001"),
    *[(["snapshot"], "--history", v) for v in ("-5", "nan", "inf")],
    (["snapshot"], "--at", "-1"),
    (["replay", "f"], "--speed", "0"),
    (["replay", "f"], "--at", "nan"),
    *[([], "--record-max-mb", v) for v in ("-5", "0", "nan")],
    *[(["plan", "qwen3.6-27b"], "--gpus", v) for v in ("0-99999999999", "5-2", "a,b")],
]


@pytest.mark.parametrize(("before", "flag", "value"), CASES)
def test_a_bad_numeric_flag_is_one_line_naming_it(
    cli, before: list[str], flag: str, value: str
) -> None:
    argv = [before[0], *before[1:], flag, value] if before else [flag, value, "ps"]
    result: CliResult = cli(*argv)
    assert result.code == 2, result
    assert "Traceback" not in result.err
    assert flag in result.err, result.err
    last = result.err.strip().splitlines()[-1]
    assert last.startswith("ddconsole"), last
    assert "error:" in last, last


def test_a_type_function_that_raises_anything_is_a_usage_error(cli, monkeypatch) -> None:
    """Every argparse conversion runs inside the error handler: an exception other than
    ValueError (MemoryError here) is one line, exit status 2."""
    from console.cli import argtypes

    def explode(text: str) -> float:
        raise MemoryError

    monkeypatch.setattr(argtypes, "duration_s", explode)
    result = cli(*BENCH, "--duration", "5")
    assert result.code == 2
    assert "argument --duration" in result.err
    assert "Traceback" not in result.err


def test_gpu_ranges_are_bounded_before_they_are_built() -> None:
    with pytest.raises(ValueError, match="more than 65536"):
        parse_index_set("0-99999999999")
    with pytest.raises(ValueError):
        parse_index_set("-1-3")
    assert parse_index_set("0-3,8") == (0, 1, 2, 3, 8)


def test_good_values_still_parse() -> None:
    from console.cli.parser import build_parser

    args = build_parser().parse_args(
        [*BENCH, "--duration", "2.5", "--rate", "1,2.5", "--warmup", "0"]
    )
    assert (args.duration, args.rate, args.warmup) == (2.5, [1.0, 2.5], 0)
    args = build_parser().parse_args(["down", "x", "--grace", "0"])
    assert args.grace == 0.0


def test_concurrency_beyond_the_open_file_limit_is_refused_up_front(tmp_path: Path) -> None:
    """Under a 256-descriptor hard limit, --concurrency 20000 is one line naming the flag
    and the limit, before any run folder exists."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\n"
        "from console.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-c", code, *BENCH, "--concurrency", "20000", "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc
    assert "--concurrency 20000 needs about" in proc.stderr
    assert "ulimit -n" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() or not any(out.iterdir())


def test_a_campaign_rate_of_nan_is_refused(cli, tmp_path: Path) -> None:
    spec = tmp_path / "c.toml"
    spec.write_text(
        'name = "c"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        "rates = [nan]\nrequests = 2\n"
    )
    result = cli("campaign", "--demo", str(spec), "--out", str(tmp_path / "runs"))
    assert result.code == 2, result
    assert "rates" in result.err
    assert "nan" in result.err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_runs_import_of_an_endless_file_stops_at_its_cap_with_flat_memory(
    tmp_path: Path,
) -> None:
    """`runs import /dev/zero` exhausted the host's memory: now one line, and the process
    stays under a 1 GiB address-space limit (a child, so the limit is its own)."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from console.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "runs", "import", "/dev/zero", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == (
        "ddconsole: error: /dev/zero: line 1 is longer than 64 MiB "
        "(not a bench_serving result file)"
    )
    print(f"runs import /dev/zero: peak RSS of children so far {peak_kib / 1024:.0f} MiB")


def test_prompts_are_generated_in_bounded_batches() -> None:
    """F4: `--warmup N` and long prompts never build everything up front: a batch holds at
    most 256 prompts and about 4 Mi token ids."""
    from console.bench.levels import BATCH_TOKENS, batch_size
    from console.bench.workload import Workload

    assert batch_size(Workload(input_len=512), 100_000) == 256
    assert batch_size(Workload(input_len=512), 3) == 3
    assert batch_size(Workload(input_len=2_000_000), 100_000) * 2_000_000 <= BATCH_TOKENS
    assert batch_size(Workload(input_len=10_000_000), 5) == 1
