"""`profiles check` plumbing against stand-in interpreters (the real SGLang is `sglang`-marked)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

FAKE_SERVER_ARGS = """
import argparse, sys

class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        for flag in ("--model-path", "--served-model-name", "--host", "--mem-fraction-static",
                     "--speculative-algorithm", "--speculative-draft-model-path",
                     "--mamba-radix-cache-strategy"):
            parser.add_argument(flag)
        parser.add_argument("--port", type=int)
        parser.add_argument("--tp-size", type=int)
        parser.add_argument("--max-running-requests", type=int)
        parser.add_argument("--numa-node", type=int, nargs="+")
        for flag in ("--bucket-time-to-first-token", "--bucket-inter-token-latency",
                     "--bucket-e2e-request-latency"):
            parser.add_argument(flag, type=float, nargs="+")
        parser.add_argument("--speculative-num-draft-tokens", type=int)
        parser.add_argument("--speculative-num-steps", type=int)
        parser.add_argument("--speculative-eagle-topk", type=int)
        parser.add_argument("--cuda-graph-max-bs-decode", type=int)
        parser.add_argument("--cuda-graph-max-bs-prefill", type=int)
        for flag in ("--enable-metrics", "--trust-remote-code"):
            parser.add_argument(flag, action="store_true")

def prepare_server_args(argv):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)
"""

FAKE_SPEC_INFO = """
class SpeculativeAlgorithm:
    @staticmethod
    def from_string(name):
        if name.upper() not in ("EAGLE", "NEXTN", "DFLASH"):
            raise ValueError(f"Unknown speculative algorithm name: {name}")
"""


@pytest.fixture
def fake_sglang(tmp_path: Path) -> tuple[Path, Path]:
    """An interpreter wrapper whose `sglang` is a tiny stand-in; counts its runs."""
    site = tmp_path / "site"
    for package in ("sglang", "sglang/srt", "sglang/srt/speculative"):
        (site / package).mkdir(parents=True)
        (site / package / "__init__.py").write_text("")
    (site / "sglang/srt/server_args.py").write_text(FAKE_SERVER_ARGS)
    (site / "sglang/srt/speculative/spec_info.py").write_text(FAKE_SPEC_INFO)
    dist = site / "sglang-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
    counter = tmp_path / "runs.log"
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\necho run >> "{counter}"\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, counter


def test_check_reports_flags_and_caches(cli, fake_sglang):
    wrapper, counter = fake_sglang
    first = cli("profiles", "check", "kimi-k2.6", "--python", str(wrapper), "--demo", "--json")
    assert first.code == 1, first.err
    report = json.loads(first.out)
    # The single-node layout's plans (the stand-in's ServerArgs has no --nnodes).
    by_variant = {p["variant"]: p for p in report["plans"] if p["layout"] == "tp8"}
    assert by_variant["off"]["ok"] is True
    assert by_variant["off"]["sglang_version"] == "9.9.9"
    eagle = by_variant["eagle3"]
    assert eagle["ok"] is False
    assert [p["flag"] for p in eagle["problems"]] == ["--speculative-algorithm"]
    assert "unknown speculative algorithm 'EAGLE3'" in eagle["problems"][0]["message"]
    assert by_variant["dflash"]["ok"] is True
    runs_after_first = counter.read_text().count("run")
    second = cli("profiles", "check", "kimi-k2.6", "--python", str(wrapper), "--demo", "--json")
    again = json.loads(second.out)
    assert [p["problems"] for p in again["plans"]] == [p["problems"] for p in report["plans"]]
    # Only the quick version query runs again; the parse comes from the cache.
    assert counter.read_text().count("run") == runs_after_first + 1


def test_unknown_ambiguous_and_invalid_flags_are_named(cli, fake_sglang, user_profiles):
    from tests.conftest import REPO

    wrapper, _ = fake_sglang
    text = (
        (REPO / "profiles" / "kimi-k2.6.toml")
        .read_text()
        .replace(
            'args = [\n    "--trust-remote-code", "--mem-fraction-static", "0.90",',
            'args = ["--cuda-graph-max-bs", "8", "--bogus-flag", "--max-running-requests", "many",',
        )
    )
    (user_profiles / "kimi-k2.6.toml").write_text(text)
    result = cli("profiles", "check", "kimi-k2.6", "--python", str(wrapper), "--demo", "--json")
    off = next(p for p in json.loads(result.out)["plans"] if p["variant"] == "off")
    kinds = {(p["kind"], p["flag"]) for p in off["problems"]}
    assert ("ambiguous", "--cuda-graph-max-bs") in kinds
    assert ("unknown", "--bogus-flag") in kinds
    assert ("invalid", "--max-running-requests") in kinds


def test_missing_interpreter_is_clear(cli):
    result = cli("profiles", "check", "kimi-k2.6", "--python", "/nonexistent/python", "--demo")
    assert result.code == 1
    assert "SGLang interpreter '/nonexistent/python' not found" in result.out
    assert "Traceback" not in result.out + result.err


def test_interpreter_without_sglang_is_clear(cli):
    result = cli("profiles", "check", "kimi-k2.6", "--python", sys.executable, "--demo")
    assert result.code == 1
    assert f"no sglang installed in {os.path.abspath(sys.executable)}" in result.out


def test_timeout_is_clear(cli, tmp_path: Path):
    slow = tmp_path / "slowpython"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    result = cli(
        "profiles", "check", "kimi-k2.6", "--python", str(slow), "--timeout", "1", "--demo"
    )
    assert result.code == 1
    assert "did not answer within 1 s" in result.out
